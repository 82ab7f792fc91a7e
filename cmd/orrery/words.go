package main

import (
	"errors"
	"strings"
)

// The ways splitWords refuses a command line.
var (
	errOpenSingle        = errors.New("an unterminated ' quote")
	errOpenDouble        = errors.New(`an unterminated " quote`)
	errTrailingBackslash = errors.New("a backslash at its end with nothing to escape")
)

// isBlank reports whether c separates words: ASCII space, tab, newline,
// carriage return, vertical tab or form feed.
func isBlank(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

// splitWords splits a command line into words the way a POSIX shell does,
// without any expansion: blanks separate words; inside '…' every byte is
// literal; inside "…" a backslash escapes only $ ` " \ and newline (a
// backslash-newline is removed) and is literal before anything else;
// outside quotes a backslash makes the next byte literal (a
// backslash-newline is removed). Quoted and unquoted parts next to each
// other form one word, and ” or "" is an empty word. $, `, ~, * and the
// like are plain characters. An unterminated quote or a trailing
// backslash is an error (errOpenSingle, errOpenDouble,
// errTrailingBackslash).
func splitWords(s string) ([]string, error) {
	var (
		words []string
		word  strings.Builder
		in    bool // a word is open, even if it is empty so far
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isBlank(c):
			if in {
				words = append(words, word.String())
				word.Reset()
				in = false
			}
		case c == '\\':
			if i+1 == len(s) {
				return nil, errTrailingBackslash
			}
			i++
			if s[i] != '\n' {
				word.WriteByte(s[i])
				in = true
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errOpenSingle
			}
			word.WriteString(s[i+1 : i+1+end])
			i += 1 + end
			in = true
		case c == '"':
			in = true
			closed := false
			for i++; i < len(s); i++ {
				c := s[i]
				if c == '"' {
					closed = true
					break
				}
				if c == '\\' && i+1 < len(s) {
					switch s[i+1] {
					case '$', '`', '"', '\\':
						i++
						word.WriteByte(s[i])
						continue
					case '\n':
						i++
						continue
					}
				}
				word.WriteByte(c)
			}
			if !closed {
				return nil, errOpenDouble
			}
		default:
			word.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, word.String())
	}
	return words, nil
}

// quoteWord returns w as splitWords reads it back as the one word w: w
// itself when it needs no quoting, else w in single quotes (a ' inside
// written as '\”).
func quoteWord(w string) string {
	if w != "" && !strings.ContainsFunc(w, func(r rune) bool {
		return r < 0x80 && (isBlank(byte(r)) || r == '\'' || r == '"' || r == '\\')
	}) {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// joinWords is words quoted with quoteWord and joined by spaces: a command
// line splitWords reads back as words, and as readable as the words allow.
func joinWords(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = quoteWord(w)
	}
	return strings.Join(quoted, " ")
}
