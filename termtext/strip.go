package termtext

import (
	"strings"
	"unicode/utf8"
)

// Strip is the form a screen draws with: it removes from s what a terminal
// would act on. It removes ANSI escape sequences whole (CSI, OSC such as
// OSC 52 clipboard writes and OSC 8 links, DCS, SOS, PM, APC and two-byte
// escapes), every C0 control but newline and tab, DEL, the C1 controls
// (U+0080–U+009F, whose 8-bit CSI and OSC a terminal may honour) and the
// bidirectional embeddings, overrides and isolates (U+202A–U+202E,
// U+2066–U+2069) that make text read differently from what it is. A
// carriage return before a newline is dropped; any other carriage return
// discards what came before it on its line, as a terminal would overwrite
// it. Invalid UTF-8 becomes U+FFFD. Strip is idempotent.
//
// The TUI passes every piece of text it draws from outside through Strip,
// so a surface can never clear the screen, write the clipboard or draw a
// link. Output a person reads to learn what is there uses Visible instead.
func Strip(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	lineStart := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			b.WriteByte(c)
			lineStart = b.Len()
			i++
		case c == '\t':
			b.WriteByte(c)
			i++
		case c == '\r':
			i++
			if i < len(s) && s[i] == '\n' {
				continue
			}
			// A bare CR overwrites the line: keep what follows it.
			kept := b.String()[:lineStart]
			b.Reset()
			b.WriteString(kept)
		case c == 0x1b:
			i = SequenceEnd(s, i)
		case c < 0x20 || c == 0x7f:
			i++
		case c < 0x80:
			b.WriteByte(c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size <= 1:
				b.WriteRune(utf8.RuneError)
			case r >= 0x80 && r <= 0x9f, isBidiControl(r):
				// dropped
			default:
				b.WriteString(s[i : i+size])
			}
			i += size
		}
	}
	return b.String()
}

// StripLine is Strip for one line: newlines and tabs become spaces.
func StripLine(s string) string {
	s = Strip(s)
	if strings.ContainsAny(s, "\n\t") {
		s = strings.NewReplacer("\n", " ", "\t", " ").Replace(s)
	}
	return s
}

// isBidiControl reports whether r is a bidirectional embedding, override
// or isolate, or the pop that ends one.
func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// isPlain reports whether s is printable ASCII, newlines and tabs: nothing
// Strip would change.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\n' && c != '\t' || c >= 0x7f {
			return false
		}
	}
	return true
}

// SequenceEnd returns the index just past the escape sequence that starts
// with the ESC at s[i]: a CSI to its final byte; an OSC, DCS, SOS, PM or
// APC to its BEL or ST (ESC \); any other ESC with the printable byte after
// it, if one is. A sequence cut short ends before the first byte that cannot
// belong to it, or at the end of s.
func SequenceEnd(s string, i int) int {
	i++ // ESC
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[': // CSI: parameters and intermediates, then one final byte
		for i++; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
			if s[i] < 0x20 || s[i] > 0x7e {
				return i
			}
		}
		return i
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: up to BEL or ST
		for i++; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return i
	}
	if s[i] >= 0x20 && s[i] < 0x7f {
		return i + 1
	}
	return i
}
