package tui

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// width returns the cells s takes on screen, escape sequences excluded.
func width(s string) int { return ansi.StringWidth(s) }

// fit truncates s to w cells (with an ellipsis when cut) and pads it with
// spaces to exactly w.
// fitAligned is fit with the padding placed as align (left, right or
// center; anything else is left) says.
func fitAligned(s string, w int, align string) string {
	if w <= 0 {
		return ""
	}
	if width(s) > w {
		return fit(s, w)
	}
	pad := w - width(s)
	switch align {
	case "right":
		return strings.Repeat(" ", pad) + s
	case "center":
		return strings.Repeat(" ", pad/2) + s + strings.Repeat(" ", pad-pad/2)
	}
	return s + strings.Repeat(" ", pad)
}

func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	n := width(s)
	if n > w {
		s = ansi.Truncate(s, w, "…")
		n = width(s)
	}
	if n < w {
		s += strings.Repeat(" ", w-n)
	}
	return s
}

// clip truncates s to w cells without padding.
func clip(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if width(s) > w {
		return ansi.Truncate(s, w, "…")
	}
	return s
}

// wrap breaks text (already sanitized; it may carry SGR) into lines of at
// most w cells, at spaces where it can and inside words where it must.
// Tabs become spaces.
func wrap(text string, w int) []string { return wrapAt(text, w, " -") }

// wrapCommand is wrap for a command line: it breaks at spaces only, never
// after a hyphen, so that "rm -rf" is not drawn as "rm -" and "rf". (The
// wrapper always breaks after a hyphen: each one stands in for a private
// character of the same width while the lines are cut.)
func wrapCommand(text string, w int) []string {
	const hyphen = "\uE000"
	if strings.Contains(text, hyphen) {
		return wrapAt(text, w, "")
	}
	lines := wrapAt(strings.ReplaceAll(text, "-", hyphen), w, "")
	for i, l := range lines {
		lines[i] = strings.ReplaceAll(l, hyphen, "-")
	}
	return lines
}

// wrapAt is wrap with the characters besides spaces after which a line may
// break.
func wrapAt(text string, w int, breakpoints string) []string {
	if w < 1 {
		w = 1
	}
	text = strings.ReplaceAll(text, "\t", "    ")
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if width(line) <= w {
			out = append(out, line)
			continue
		}
		wrapped := ansi.Wrap(line, w, breakpoints)
		out = append(out, strings.Split(wrapped, "\n")...)
	}
	return out
}

// tail returns the last n lines.
func tail(lines []string, n int) []string {
	if n < 0 {
		n = 0
	}
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}
