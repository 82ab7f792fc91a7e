package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
)

// TestNoticeLevels: notices differ by level in glyph as well as colour
// (· info, ! warning, ✗ error); an info line goes once its time is up and
// schedules its own expiry, while warnings and errors stay until the next
// prompt or another session.
func TestNoticeLevels(t *testing.T) {
	m := New(Options{})
	m.scr.width, m.scr.height = 80, 20
	m.info("answered allow once")
	if !m.expiring {
		t.Error("an info notice scheduled no expiry")
	}
	if _, cmd := m.Update(tea.WindowSizeMsg{Width: 80, Height: 20}); cmd == nil {
		t.Error("Update after an info notice returned no command, want its expiry tick")
	}
	m.notice("unknown command /bogus: /help lists the commands")
	m.fail("could not send: the kernel cannot be reached")
	screen := termtext.Strip(m.View().Content)
	for _, want := range []string{"· answered allow once", "! unknown command /bogus", "✗ could not send"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the screen has no %q:\n%s", want, screen)
		}
	}
	if left := m.expireNotices(time.Now()); !left {
		t.Error("expireNotices before the info line's time = nothing left to expire, want it kept")
	}
	if left := m.expireNotices(time.Now().Add(infoFor + time.Second)); left {
		t.Error("expireNotices after the info line's time left something to expire")
	}
	screen = termtext.Strip(m.View().Content)
	if strings.Contains(screen, "answered allow once") || !strings.Contains(screen, "! unknown command") || !strings.Contains(screen, "✗ could not send") {
		t.Errorf("after the info line's time, want it gone and the warning and the error kept:\n%s", screen)
	}
	m.session = "ses_a"
	m.resetSession("ses_b")
	if len(m.scr.notices) != 0 {
		t.Errorf("notices after opening another session = %v, want none", m.scr.notices)
	}
}

// TestOneLineRowsKeepNumbers: a band or footer row keeps a surface's
// numbers at any width: a progress bar's value comes first with the bar
// in what is left, and a chart is its values in words.
func TestOneLineRowsKeepNumbers(t *testing.T) {
	tests := []struct {
		name, surface string
		want          []string
	}{
		{"progress", `{"kind":{"t":"progress","label":"deploy","value":40}}`, []string{"deploy 40%"}},
		{"progress of a max", `{"kind":{"t":"progress","label":"files","value":3,"max":4}}`, []string{"files 75%"}},
		{"bars", `{"kind":{"t":"chart","kind":"bars","labels":["apples","pears"],"series":[{"label":"letters","values":[6,5]}]}}`, []string{"letters: apples 6, pears 5"}},
		{"gauge", `{"kind":{"t":"chart","kind":"gauge","series":[{"label":"cpu","values":[42]}],"max":100,"unit":"%"}}`, []string{"cpu 42"}},
	}
	for _, tt := range tests {
		for _, w := range []int{16, 30, 80} {
			n := &node{Node: "placed:agent:x", ID: "x", Surface: []byte(tt.surface)}
			row := termtext.Strip(oneLineOf(n, w, nil))
			if width(row) > w {
				t.Errorf("%s at %d cells: row %q is %d cells wide", tt.name, w, row, width(row))
			}
			if w < 30 {
				continue // too narrow for more than the first number
			}
			for _, want := range tt.want {
				if !strings.Contains(row, want) {
					t.Errorf("%s at %d cells: row %q, want %q in it", tt.name, w, row, want)
				}
			}
		}
	}
}

// TestTableAlign: a table's align places each column's cells left, right
// or centred in their width, headers too.
func TestTableAlign(t *testing.T) {
	surface := `{"kind":{"t":"table","columns":["name","count","mid"],"align":["left","right","center"],"rows":[["apples","6","x"],["figs","1234","y"]]}}`
	lines := renderSurface([]byte(surface), renderOpts{width: 40, cursor: -1})
	var got []string
	for _, l := range lines {
		got = append(got, termtext.Strip(l))
	}
	want := []string{
		"name    count  mid",
		"──────  ─────  ───",
		"apples      6   x",
		"figs     1234   y",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("table:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPickerKeepsTheChoiceOnScreen: with more sessions than rows, the
// chosen one is drawn wherever it is in the list, with how many more
// there are above and below, in the rows there are.
func TestPickerKeepsTheChoiceOnScreen(t *testing.T) {
	p := &picker{}
	for i := range 40 {
		p.sessions = append(p.sessions, protocol.SessionSummary{ID: fmt.Sprintf("ses_%02d", i)})
	}
	for _, at := range []int{0, 1, 20, 38, 39} {
		p.at = at
		lines := p.draw(80, 12)
		screen := termtext.Strip(strings.Join(lines, "\n"))
		if len(lines) > 12 {
			t.Errorf("at %d: %d rows, want at most 12", at, len(lines))
		}
		if !strings.Contains(screen, fmt.Sprintf("❯ ses_%02d", at)) {
			t.Errorf("at %d: the chosen session is not drawn:\n%s", at, screen)
		}
		if at > 5 && !strings.Contains(screen, "↑ ") {
			t.Errorf("at %d: no count of the sessions above:\n%s", at, screen)
		}
		if at < 34 && !strings.Contains(screen, "↓ ") {
			t.Errorf("at %d: no count of the sessions below:\n%s", at, screen)
		}
	}
}

// TestRowOpensWhole: Enter on a surface drawn as a one-line row (here a
// chart in the band) opens it whole over the thread, and Esc closes it;
// keys meanwhile go to it alone.
func TestRowOpensWhole(t *testing.T) {
	m := New(Options{})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	n := &node{Node: "placed:agent:fruit", ID: "fruit", Placement: "band", Title: "Fruit", Owner: "agent",
		Surface: []byte(`{"kind":{"t":"chart","kind":"bars","labels":["apples","pears"],"series":[{"label":"letters","values":[6,5]}]}}`)}
	m.scr.nodes = []*node{n}
	if screen := termtext.Strip(m.View().Content); !strings.Contains(screen, "▸ Fruit [agent] letters: apples 6, pears 5") {
		t.Fatalf("the band row is not drawn:\n%s", screen)
	}
	m.scr.focus = n.Node
	m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	screen := termtext.Strip(m.View().Content)
	if m.scr.overlay != n.Node || !strings.Contains(screen, "┃ apples") && !strings.Contains(screen, "apples  ") || !strings.Contains(screen, "Esc or Enter closes it") {
		t.Fatalf("Enter on the row did not open the chart whole:\n%s", screen)
	}
	m.Update(tea.KeyPressMsg{Code: 'x', Text: "x"})
	if m.scr.overlay == "" || m.input.String() != "" {
		t.Errorf("a key while the chart is open reached the composer (%q) or closed it", m.input.String())
	}
	m.Update(tea.KeyPressMsg{Code: tea.KeyEscape})
	if m.scr.overlay != "" {
		t.Error("Esc did not close the opened chart")
	}
}
