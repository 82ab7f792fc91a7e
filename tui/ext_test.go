package tui_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
	"github.com/getorrery/orrery/ui"
)

// TestExtCommands lists, with /ext, the extensions that placed something
// (one of them stopped, with its fix) and whatever the kernel answers to
// ext.list, and sends /ext restart ID as ext.restart. Whether this kernel
// knows the two requests or refuses them, the screen says what it said:
// the test asks the kernel the same and compares.
func TestExtCommands(t *testing.T) {
	l := startLive(t, "offline")
	s := l.until("an idle session", contains("orrery · ses_", "idle"))
	id := sessionOf(t, s)
	sess, err := l.k.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ owner, id, text string }{
		{"ext:ci", "runs", "3 of 5 green"},
		{"ext:dead", "d", "stopped: it crashed. Restart it with /ext restart dead"},
	} {
		if err := sess.Show(context.Background(), ui.Owner(p.owner), kernel.ShowInput{ID: p.id, Placement: "band", Title: p.id,
			Surface: json.RawMessage(`{"kind":{"t":"text","value":` + jsonString(p.text) + `}}`)}); err != nil {
			t.Fatal(err)
		}
	}
	l.until("both surfaces", contains("3 of 5 green", "ext:dead stopped: /ext restart dead"))

	type extList struct {
		protocol.Envelope
		Session string `json:"session"`
	}
	_, listErr := l.cl.Do(context.Background(), &extList{Envelope: protocol.Envelope{T: "ext.list"}, Session: id})
	l.typeText("/ext")
	l.press(keyEnter)
	want := []string{"extensions:", "ext:ci  placed something here", "ext:dead  stopped (/ext restart dead)"}
	if listErr != nil {
		want = append(want, "(the kernel did not list its extensions: "+termtext.StripLine(listErr.Error())[:40])
	}
	l.until("the /ext list", contains(want...))

	type extRestart struct {
		protocol.Envelope
		Session string `json:"session"`
		Name    string `json:"name"`
	}
	_, restartErr := l.cl.Do(context.Background(), &extRestart{Envelope: protocol.Envelope{T: "ext.restart"}, Session: id, Name: "dead"})
	l.typeText("/ext restart dead")
	l.press(keyEnter)
	if restartErr != nil {
		l.until("the kernel's refusal", contains("could not restart ext:dead: "+termtext.StripLine(restartErr.Error())[:40]))
	} else {
		l.until("the restart", contains("restarting ext:dead"))
	}
	l.typeText("/ext restart")
	l.press(keyEnter)
	l.until("the usage", contains("usage: /ext, or /ext restart ID"))
}
