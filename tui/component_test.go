package tui_test

import (
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/tui"
)

// frame builds a logged frame: an AG-UI event with its seq.
func frame(seq uint64, event string) client.Frame {
	data := strings.TrimSuffix(event, "}") + fmt.Sprintf(`,"metadata":{"orrery":{"seq":%d}}}`, seq)
	return client.Frame{Seq: seq, Data: []byte(data)}
}

// The state a kernel holds for a component (DESIGN §3): its structure at
// /ui/components/<name>, its data at /data/<owner>/<id>, the node naming both.
const componentSnapshot = `{"type":"STATE_SNAPSHOT","snapshot":{"ui":{"nodes":{
 "placed:ext:ci:runs":{"placement":"pane.left","title":"CI","owner":"ext:ci","component":"runs","data":"/data/ext:ci/runs"},
 "placed:ext:dead:d":{"placement":"pane.right","title":"Dead","owner":"ext:dead","surface":{"kind":{"t":"text","value":"stopped: it crashed. Restart it with /ext restart dead"}}}},
 "components":{"runs":{"type":"stack","children":[
   {"type":"text","value":"${/failed} failed"},
   {"type":"progress","label":"done","value":"${/done}"},
   {"type":"button","label":"Retry","on":{"press":"retry"}}]}}},
 "surfaces":{},"data":{"ext:ci":{"runs":{"failed":2,"done":40}}}}}`

// TestComponentBoundAndRedrawn draws a component bound to its data, redraws
// it on each data update, keeps the last good tree when an update cannot be
// bound, and dims a stopped extension's surface with the fix.
func TestComponentBoundAndRedrawn(t *testing.T) {
	m := tui.New(tui.Options{})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	step := func(fs ...client.Frame) string {
		if msg := m.Push(fs...); msg != nil {
			m.Update(msg)
		}
		return m.Screen()
	}
	s := step(frame(1, componentSnapshot))
	for _, want := range []string{"┌ CI", "ext:ci ┐", "2 failed", "done ", "40%", "[ Retry ]", "┌ Dead", "ext:dead stopped ┐", "stopped: it crashed.", "restart dead"} {
		if !strings.Contains(s, want) {
			t.Errorf("Screen() lacks %q:\n%s", want, s)
		}
	}
	// The stopped surface is drawn faint, besides its label.
	for _, line := range strings.Split(m.View().Content, "\n") {
		if strings.Contains(line, "it crashed") && !strings.Contains(line, "\x1b[2m") {
			t.Errorf("the stopped extension's surface is not dimmed: %q", line)
		}
	}
	s = step(frame(2, `{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/data/ext:ci/runs/failed","value":3}]}`))
	if !strings.Contains(s, "3 failed") || strings.Contains(s, "2 failed") {
		t.Errorf("after the update Screen() does not read 3 failed:\n%s", s)
	}
	// A value the progress cannot take: the last good tree stays, with why.
	s = step(frame(3, `{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/data/ext:ci/runs/done","value":"lots"},{"op":"replace","path":"/data/ext:ci/runs/failed","value":4}]}`))
	if !strings.Contains(s, "3 failed") || !strings.Contains(s, "! ") {
		t.Errorf("a bad update did not keep the last good tree with a notice:\n%s", s)
	}
	s = step(frame(4, `{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/data/ext:ci/runs/done","value":50}]}`))
	if !strings.Contains(s, "4 failed") || !strings.Contains(s, "50%") {
		t.Errorf("the next good update is not drawn in full:\n%s", s)
	}
	list := strings.Join(m.UIList(), "\n")
	for _, want := range []string{"runs  pane.left   ext:ci    shown", "d     pane.right  ext:dead  stopped (/ext restart dead)"} {
		if !strings.Contains(list, want) {
			t.Errorf("UIList() lacks %q:\n%s", want, list)
		}
	}
}
