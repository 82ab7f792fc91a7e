package tui

import (
	"strings"
	"unicode/utf8"
)

// Sanitize makes text from an agent, an extension or a tool inert in a
// terminal. It removes ANSI escape sequences whole (CSI, OSC such as OSC 52
// clipboard writes and OSC 8 links, DCS, SOS, PM, APC and two-byte escapes),
// every C0 control but newline and tab, DEL, the C1 controls (U+0080–U+009F,
// whose 8-bit CSI and OSC a terminal may honour) and the bidirectional
// embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) that make
// text read differently from what it is. A carriage return before a newline
// is dropped; any other carriage return discards what came before it on its
// line, as a terminal would overwrite it. Invalid UTF-8 becomes U+FFFD.
//
// Nothing the TUI draws from outside reaches the screen without passing
// through Sanitize, so a surface can never clear the screen, write the
// clipboard or draw a link.
func Sanitize(s string) string {
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
			i = skipEscape(s, i)
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

// SanitizeLine is Sanitize on one line: newlines and tabs become spaces.
func SanitizeLine(s string) string {
	s = Sanitize(s)
	if strings.ContainsAny(s, "\n\t") {
		s = strings.NewReplacer("\n", " ", "\t", " ").Replace(s)
	}
	return s
}

func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// isPlain reports whether s is printable ASCII, newlines and tabs: nothing
// Sanitize would change.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\n' && c != '\t' || c >= 0x7f {
			return false
		}
	}
	return true
}

// skipEscape returns the index just past the escape sequence that starts
// with the ESC at s[i]. A sequence cut short is dropped to the end of what
// it could still be.
func skipEscape(s string, i int) int {
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

// keepSGR removes every escape sequence from s except SGR (CSI … m), the
// colours and attributes the TUI itself styles with. Renderers that produce
// styled text from sanitized input (markdown) pass through it, so that not
// even a library's output can carry a link, a title or a clipboard write.
func keepSGR(s string) string {
	if !strings.Contains(s, "\x1b") && !strings.ContainsAny(s, "\a") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0x07 {
			i++
			continue
		}
		if c != 0x1b {
			b.WriteByte(c)
			i++
			continue
		}
		end := skipEscape(s, i)
		if i+1 < len(s) && s[i+1] == '[' && end > i+2 && s[end-1] == 'm' && isSGRParams(s[i+2:end-1]) {
			b.WriteString(s[i:end])
		}
		i = end
	}
	return b.String()
}

func isSGRParams(p string) bool {
	for i := 0; i < len(p); i++ {
		if (p[i] < '0' || p[i] > '9') && p[i] != ';' && p[i] != ':' {
			return false
		}
	}
	return true
}
