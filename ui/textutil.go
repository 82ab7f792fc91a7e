package ui

import (
	"math"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/width"
)

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
