package tui

import (
	"encoding/json"
	"strings"

	"github.com/getorrery/orrery/termtext"
	"github.com/getorrery/orrery/ui"
)

// Layout rules of the seed on placements.
const (
	// PanePercent is a pane's share of the width.
	PanePercent = 25
	// MinPaneWidth is the narrowest a pane may be; a narrower one folds
	// into one band row.
	MinPaneWidth = 18
	// MinThreadWidth is the narrowest the thread may be; a pane that would
	// make it narrower folds into one band row.
	MinThreadWidth = 40
	// MaxBandRows is the most rows the band shows, the last one ending
	// with "+N more" when more wait.
	MaxBandRows = 3
	// MaxFooterRows is the most rows the footer shows.
	MaxFooterRows = 2
)

// Layout is where each part of the screen goes for a width and the panes
// that hold something: the widths of the left pane, the thread and the right
// pane (0 for a pane that is empty or folded), and which panes folded.
type Layout struct {
	Left, Thread, Right int
	FoldLeft, FoldRight bool
}

// ComputeLayout applies the pane rules to a screen w cells wide: each pane
// that holds something is PanePercent of the width; a pane folds into the
// band when it would be under MinPaneWidth, or when the thread would be
// under MinThreadWidth (the right pane folds first).
func ComputeLayout(w int, haveLeft, haveRight bool) Layout {
	pw := w * PanePercent / 100
	l := Layout{}
	left, right := haveLeft, haveRight
	if pw < MinPaneWidth {
		l.FoldLeft, l.FoldRight = left, right
		left, right = false, false
	}
	thread := func() int {
		t := w
		if left {
			t -= pw
		}
		if right {
			t -= pw
		}
		return t
	}
	if right && thread() < MinThreadWidth {
		right, l.FoldRight = false, true
	}
	if left && thread() < MinThreadWidth {
		left, l.FoldLeft = false, true
	}
	if left {
		l.Left = pw
	}
	if right {
		l.Right = pw
	}
	l.Thread = thread()
	return l
}

// box draws lines inside a frame w cells wide and h rows high (h ≥ 2): the
// title and the owner label on the top edge, content (w-4 cells wide, one
// space in from each side) clipped inside. A
// focused box has a heavy frame; a dimmed one is faint. Content never
// reaches the frame's column, so nothing a surface draws can pass for the
// host's own prompts, which are not framed this way.
func box(title, owner string, content []string, w, h int, focused, dim bool) []string {
	if w < 4 || h < 2 {
		return blank(w, h)
	}
	tl, tr, bl, br, hz, vt := "┌", "┐", "└", "┘", "─", "│"
	if focused {
		tl, tr, bl, br, hz, vt = "┏", "┓", "┗", "┛", "━", "┃"
	}
	label := " " + owner + " "
	t := " " + title + " "
	inner := w - 2
	// The owner label always shows: it gives way only to a minimal title.
	if width(label) > inner-6 {
		label = clip(label, max(1, inner-6))
	}
	t = clip(t, max(0, inner-width(label)-1))
	top := tl + t + strings.Repeat(hz, max(0, inner-width(t)-width(label))) + label + tr
	out := []string{top}
	for i := 0; i < h-2; i++ {
		c := ""
		if i < len(content) {
			c = content[i]
		}
		if dim {
			c = styleDim.Render(termtext.Strip(c))
		}
		out = append(out, vt+" "+fit(c, inner-2)+" "+vt)
	}
	return append(out, bl+strings.Repeat(hz, inner)+br)
}

func blank(w, h int) []string {
	out := make([]string, max(0, h))
	for i := range out {
		out[i] = strings.Repeat(" ", max(0, w))
	}
	return out
}

// columns joins blocks of lines side by side; each block's lines must
// already be exactly its width.
func columns(h int, blocks ...[]string) []string {
	out := make([]string, h)
	for r := range h {
		var sb strings.Builder
		for _, b := range blocks {
			if r < len(b) {
				sb.WriteString(b[r])
			}
		}
		out[r] = sb.String()
	}
	return out
}

// ownerLabel is how an owner is named on screen.
func ownerLabel(n *node) string {
	if n.Owner == string(ui.OwnerHost) {
		return "host"
	}
	return termtext.StripLine(n.Owner)
}

// oneLineOf is a node's first meaningful line of text in w cells, for a
// band or footer row. A row keeps a surface's numbers: a progress bar's
// value comes first and its bar takes what is left, and a chart is its
// values in words (its text form), never bars cut at the edge.
func oneLineOf(n *node, w int, md *markdown) string {
	if n.Err != "" && len(n.Surface) == 0 {
		return "(" + termtext.StripLine(n.Err) + ")"
	}
	var s surface
	if json.Unmarshal(n.Surface, &s) == nil {
		switch s.Kind.T {
		case ui.KindProgress:
			return progressRow(&s.Kind, max(1, w))
		case ui.KindChart:
			return clip(chartRow(&s.Kind), max(1, w))
		}
	}
	lines := renderSurface(n.Surface, renderOpts{width: max(1, w), cursor: -1, md: nil})
	parts := make([]string, 0, 3)
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" {
			parts = append(parts, t)
		}
		if len(parts) == 3 {
			break
		}
	}
	return strings.Join(parts, " · ")
}
