package tui

import (
	"fmt"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
)

// picker chooses a session to resume.
type picker struct {
	sessions []protocol.SessionSummary
	at       int
}

func (p *picker) up() {
	if p.at > 0 {
		p.at--
	}
}

func (p *picker) down() {
	if p.at < len(p.sessions)-1 {
		p.at++
	}
}

func (p *picker) chosen() (protocol.SessionSummary, bool) {
	if p.at < len(p.sessions) {
		return p.sessions[p.at], true
	}
	return protocol.SessionSummary{}, false
}

// draw draws the picker in w cells and at most h rows: the rows of the
// sessions around the chosen one, which is always on screen, with how
// many more are above and below.
func (p *picker) draw(w, h int) []string {
	out := []string{styleBold.Render("Resume a session (↑/↓, Enter; Esc starts a new one)"), ""}
	if len(p.sessions) == 0 {
		return append(out, "No sessions yet: type a prompt to start one.")
	}
	rows := max(1, h-len(out))
	first, last := 0, len(p.sessions)
	if last > rows {
		// Room for the two "more" lines, and the chosen row in the middle.
		rows = max(1, rows-2)
		first = max(0, min(p.at-rows/2, len(p.sessions)-rows))
		last = first + rows
	}
	if first > 0 {
		out = append(out, styleDim.Render(fmt.Sprintf("  ↑ %d more", first)))
	}
	for i := first; i < last; i++ {
		s := p.sessions[i]
		state := "idle"
		if s.Running {
			state = "running"
		}
		line := fmt.Sprintf("%s  %s  %s  %d frames  $%.4f  %s", termtext.StripLine(s.ID), termtext.StripLine(s.Created), state, s.Head, float64(s.MicroUSD)/1e6, termtext.StripLine(s.Title))
		if i == p.at {
			line = styleCursor.Render("❯ " + clip(line, w-2))
		} else {
			line = "  " + line
		}
		out = append(out, clip(line, w))
	}
	if last < len(p.sessions) {
		out = append(out, styleDim.Render(fmt.Sprintf("  ↓ %d more", len(p.sessions)-last)))
	}
	return out
}
