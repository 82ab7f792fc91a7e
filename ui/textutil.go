package ui

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"
)

// sanitize makes text safe and stable to print in a terminal. It drops ANSI
// escape sequences (CSI, OSC, DCS and two-byte escapes) whole, every other
// C0 control but newline and tab, DEL, the C1 controls and the bidirectional
// embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069). A
// carriage return before a newline is dropped; any other carriage return
// discards what came before it on its line, as a terminal overwrites it.
func sanitize(s string) string {
	if isPlain(s) {
		return s
	}
	out := make([]byte, 0, len(s))
	lineStart := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			out = append(out, c)
			lineStart = len(out)
			i++
		case c == '\t':
			out = append(out, c)
			i++
		case c == '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
				continue
			}
			out = out[:lineStart]
			i++
		case c == 0x1b:
			i = skipEscape(s, i)
		case c < 0x20 || c == 0x7f:
			i++
		case c < 0x80:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
				i += size
				continue
			}
			out = append(out, s[i:i+size]...)
			i += size
		}
	}
	return string(out)
}

// isPlain reports whether s has nothing sanitize would change.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 {
			return false
		}
	}
	return true
}

// skipEscape returns the index just past the escape sequence at s[i].
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
				return i // not a CSI byte: the sequence was cut short
			}
		}
		return i
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: to BEL or ST
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

// oneLine sanitizes s and puts it on one line: newlines and tabs become
// spaces.
func oneLine(s string) string {
	s = sanitize(s)
	if !strings.ContainsAny(s, "\n\t") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return ' '
		}
		return r
	}, s)
}

// textWidth is the number of terminal cells s takes: wide and fullwidth
// characters take two, combining marks and format characters none.
func textWidth(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

func runeWidth(r rune) int {
	if r < 0x300 {
		return 1
	}
	if unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf) {
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// padRight pads s with spaces to w cells.
func padRight(s string, w int) string {
	if n := textWidth(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

// padLeft pads s with spaces on the left to w cells.
func padLeft(s string, w int) string {
	if n := textWidth(s); n < w {
		return strings.Repeat(" ", w-n) + s
	}
	return s
}

// padCenter centres s in w cells, an odd space going to the right.
func padCenter(s string, w int) string {
	n := textWidth(s)
	if n >= w {
		return s
	}
	left := (w - n) / 2
	return strings.Repeat(" ", left) + s + strings.Repeat(" ", w-n-left)
}

// finish makes a text form stable: every line loses its trailing spaces and
// tabs, and trailing empty lines go.
func finish(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

// indent prefixes every line of s with p.
func indent(s, p string) string {
	return p + strings.ReplaceAll(s, "\n", "\n"+p)
}

// formatNumber writes f as the shortest decimal that reads back as f:
// integers without a point, and exponents only below 0.0001 or from 1e15.
func formatNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	a := math.Abs(f)
	if a >= 1e-4 && a < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// withUnit writes a number with its unit: "%" follows it directly, any
// other unit after a space.
func withUnit(n, unit string) string {
	switch unit {
	case "":
		return n
	case "%":
		return n + "%"
	}
	return n + " " + unit
}

// percent is the whole percent part/whole rounds down to, so an almost
// finished 99.9% never reads 100%.
func percent(part, whole float64) int {
	if whole <= 0 {
		return 0
	}
	p := math.Floor(part/whole*100 + 1e-9)
	return int(math.Max(-1e9, math.Min(1e9, p)))
}
