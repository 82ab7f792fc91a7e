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

func (p *picker) draw(w int) []string {
	out := []string{styleBold.Render("Resume a session (↑/↓, Enter; Esc starts a new one)"), ""}
	if len(p.sessions) == 0 {
		return append(out, "No sessions yet: type a prompt to start one.")
	}
	for i, s := range p.sessions {
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
	return out
}
