package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui"
)

const a2uiTodo = `{"type":"stack","children":[{"type":"text","value":"${/left} left"},{"type":"button","label":"Done","on":{"press":"done"}},{"type":"button","label":"Docs","href":"https://example.com/docs"}]}`

const a2uiCIForm = `[{"version":"v0.9","createSurface":{"surfaceId":"mine","catalogId":"https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}},
{"version":"v0.9","updateComponents":{"surfaceId":"mine","components":[
  {"id":"root","component":"Column","children":["t","go"]},
  {"id":"t","component":"Text","text":{"path":"/status"}},
  {"id":"go","component":"Button","child":"go-t","action":{"event":{"name":"retry"}}},
  {"id":"go-t","component":"Text","text":"Retry"}]}},
{"version":"v0.9","updateDataModel":{"surfaceId":"mine","value":{"status":"build failed"}}}]`

// a2uiRig is a rig with two sessions: "ui" shows the agent's component
// todo, a plain surface plain and the a2ui form ci; "other" shows its own
// component mine.
func a2uiRig(t *testing.T) (*txRig, *kernel.Session) {
	t.Helper()
	r := newTxRig(t, txRigOptions{logs: true})
	ctx := context.Background()
	s, err := r.k.CreateSession(ctx, kernel.SessionOptions{ID: "ui"})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []kernel.ShowInput{
		{ID: "todo", Placement: "pane.left", Structure: json.RawMessage(a2uiTodo), Data: json.RawMessage(`{"left":3}`)},
		{ID: "plain", Placement: "band", Surface: json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)},
		{ID: "ci", Placement: "pane.right", A2UI: json.RawMessage(a2uiCIForm)},
	} {
		if err := s.Show(ctx, ui.OwnerAgent, in); err != nil {
			t.Fatalf("Show(%s) = %v", in.ID, err)
		}
	}
	other, err := r.k.CreateSession(ctx, kernel.SessionOptions{ID: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "mine", Placement: "band", Structure: json.RawMessage(a2uiTodo), Data: json.RawMessage(`{"left":1}`)}); err != nil {
		t.Fatal(err)
	}
	return r, s
}

// hostNotes returns the text of every orrery.host.message logged in the
// session after seq since.
func hostNotes(t *testing.T, r *txRig, session string, since uint64) []string {
	t.Helper()
	var read protocol.SessionReadReply
	if err := json.Unmarshal(r.control(t, fmt.Sprintf(`{"t":"session.read","id":"r","session":%q,"since":%d}`, session, since)), &read); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, raw := range read.Frames {
		ev, err := protocol.DecodeEvent(raw)
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := ev.(*protocol.Custom); ok && c.Name == kernel.HostMessageEvent {
			var m kernel.HostMessage
			if err := json.Unmarshal(c.Value, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m.Text)
		}
	}
	return out
}

func actionMsg(name, surface string, context string) string {
	if context == "" {
		context = `{"orrery.event":"press"}`
	}
	return fmt.Sprintf(`{"version":"v0.9","action":{"name":%q,"surfaceId":%q,"sourceComponentId":"root-1","timestamp":"2026-05-01T10:00:00Z","context":%s}}`, name, surface, context)
}

// TestA2UIActionRequest: a2ui.action, over POST /control and a WebSocket,
// turns the renderer's action into the intent of the surface's owner (for
// the agent's component, the hidden note the model reads next), and
// refuses, naming the fix, an action on a surface the session does not
// show, an action the surface never declared, a plain surface, and a
// message that is not an A2UI action.
func TestA2UIActionRequest(t *testing.T) {
	r, s := a2uiRig(t)
	tests := []struct {
		name       string
		session    string
		message    string // the message field, raw
		wantStatus int
		wantBody   string
		wantNote   string // the host note it leaves, if any
	}{
		{"press", "ui", actionMsg("done", "placed:agent:todo", ""), 200, "{}", "[ext:ui] todo: done"},
		{"bare userAction with a value", "ui", `{"name":"done","surfaceId":"placed:agent:todo","sourceComponentId":"root-1","context":{"orrery.value":{"row":2}}}`, 200, "{}", `[ext:ui] todo: done {"row":2}`},
		{"a2ui form's button", "ui", actionMsg("retry", "placed:agent:ci", `{}`), 200, "{}", "[ext:ui] ci: retry"},
		{"link", "ui", actionMsg("open", "placed:agent:todo", `{"orrery.event":"open","orrery.value":"https://example.com/docs"}`), 200, "{}", ""},
		{"undeclared", "ui", actionMsg("scroll", "placed:agent:todo", ""), 400, `declares no action \"scroll\": send one of its buttons' actions`, ""},
		{"button without action", "ui", actionMsg("orrery.none", "placed:agent:todo", ""), 400, `declares no action \"orrery.none\"`, ""},
		{"undeclared on the form", "ui", actionMsg("deploy", "placed:agent:ci", `{}`), 400, `declares no action \"deploy\"`, ""},
		{"another session's surface", "ui", actionMsg("done", "placed:agent:mine", ""), 400, `is not one you can act on in this session: act on a surface the session shows you (nothing is placed as placed:agent:mine`, ""},
		{"not a placed node", "ui", actionMsg("done", "todo", ""), 400, "not one you can act on", ""},
		{"plain surface", "ui", actionMsg("done", "placed:agent:plain", ""), 400, "shows a surface, not a component", ""},
		{"not an action", "ui", `{"version":"v0.9","action":{"surfaceId":"placed:agent:todo"}}`, 400, "a2ui", ""},
		{"no message", "ui", ``, 400, "a2ui.action needs message", ""},
		{"unknown session", "nope", actionMsg("done", "placed:agent:todo", ""), 404, "unknown session", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			head := settle(t, s)
			body := fmt.Sprintf(`{"t":"a2ui.action","id":"a","session":%q`, tt.session)
			if tt.message != "" {
				body += `,"message":` + tt.message
			}
			body += "}"
			status, _, got := r.post(t, r.local, http.MethodPost, "/control", nil, body)
			if status != tt.wantStatus || !strings.Contains(string(got), tt.wantBody) {
				t.Fatalf("POST /control %s = %d %s, want %d containing %s", body, status, got, tt.wantStatus, tt.wantBody)
			}
			if status != 200 {
				if now := settle(t, s); now != head {
					t.Errorf("a refused action moved the head from %d to %d", head, now)
				}
				return
			}
			settle(t, s)
			notes := hostNotes(t, r, "ui", head)
			if tt.wantNote == "" {
				if len(notes) != 0 {
					t.Errorf("notes = %q, want none", notes)
				}
				return
			}
			if len(notes) != 1 || notes[0] != tt.wantNote {
				t.Errorf("notes = %q, want [%q]", notes, tt.wantNote)
			}
		})
	}

	// The same request on a WebSocket gets one reply, ok or refused.
	p := r.dial(t, "ws", "")
	p.send(t, `{"t":"hello","id":"h"}`)
	p.replyTo(t, "h")
	head := settle(t, s)
	p.send(t, `{"t":"a2ui.action","id":"w1","session":"ui","message":`+actionMsg("done", "placed:agent:todo", "")+`}`)
	if rep := p.replyTo(t, "w1"); rep["ok"] != true {
		t.Errorf("a2ui.action on /ws = %v, want ok", rep)
	}
	p.send(t, `{"t":"a2ui.action","id":"w2","session":"ui","message":`+actionMsg("scroll", "placed:agent:todo", "")+`}`)
	if rep := p.replyTo(t, "w2"); rep["ok"] != false || !strings.Contains(fmt.Sprint(rep["error"]), `declares no action "scroll"`) {
		t.Errorf("undeclared a2ui.action on /ws = %v, want refused naming the action", rep)
	}
	settle(t, s)
	if notes := hostNotes(t, r, "ui", head); len(notes) != 1 || notes[0] != "[ext:ui] todo: done" {
		t.Errorf("notes after /ws = %q, want one press", notes)
	}
}

// settle waits until every frame the session has sequenced is published,
// and returns its head.
func settle(t *testing.T, s *kernel.Session) uint64 {
	t.Helper()
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(streamTimeout)
	for s.Head() < info.Head {
		if time.Now().After(deadline) {
			t.Fatalf("head stayed at %d, want %d", s.Head(), info.Head)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return info.Head
}

// TestRunForwardedA2UIAction: POST /run whose forwardedProps carry
// a2uiAction.userAction delivers the action to its owner before the run it
// starts, so the run's model reads it; a refused action starts nothing.
func TestRunForwardedA2UIAction(t *testing.T) {
	r, s := a2uiRig(t)
	run := func(props string) (int, []byte) {
		t.Helper()
		body := `{"threadId":"ui","runId":"run-` + fmt.Sprint(time.Now().UnixNano()) + `","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":` + props + `}`
		ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.local.URL+"/run?a2ui=1", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := r.local.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// The whole answer: a stream ends after the run's terminal event.
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, got
	}
	head := settle(t, s)
	status, body := run(`{"a2uiAction":{"userAction":{"name":"scroll","surfaceId":"placed:agent:todo","sourceComponentId":"root-1","context":{}}}}`)
	if status != 400 || !strings.Contains(string(body), `declares no action \"scroll\"`) {
		t.Errorf("POST /run with an undeclared action = %d %s, want 400 naming it", status, body)
	}
	status, body = run(`{"a2uiAction":{"name":"done"}}`)
	if status != 400 || !strings.Contains(string(body), "forwardedProps.a2uiAction needs userAction") {
		t.Errorf("POST /run with a2uiAction but no userAction = %d %s, want 400 naming userAction", status, body)
	}
	if now := settle(t, s); now != head {
		t.Fatalf("refused actions moved the head from %d to %d", head, now)
	}

	status, body = run(`{"a2uiAction":{"userAction":{"name":"done","surfaceId":"placed:agent:todo","sourceComponentId":"root-1","context":{"orrery.event":"press"}}}}`)
	if status != 200 {
		t.Fatalf("POST /run with an action = %d %s, want 200", status, body)
	}
	// The run's stream (a2ui=1) draws the screen from its STATE_SNAPSHOT,
	// the component among it, and ends in success.
	for _, want := range []string{`"messageId":"a2ui-surface-placed:agent:todo"`, `"text":"3 left"`, `"type":"RUN_FINISHED"`, `"outcome":{"type":"success"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the run's stream lacks %s:\n%s", want, body)
		}
	}
	var read protocol.SessionReadReply
	if err := json.Unmarshal(r.control(t, fmt.Sprintf(`{"t":"session.read","id":"r","session":"ui","since":%d}`, head)), &read); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, raw := range read.Frames {
		ev, err := protocol.DecodeEvent(raw)
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *protocol.Custom:
			if e.Name == kernel.HostMessageEvent {
				var m kernel.HostMessage
				json.Unmarshal(e.Value, &m)
				order = append(order, "note "+m.Text)
			}
		case *protocol.RunStarted, *protocol.RunFinished, *protocol.RunError:
			order = append(order, string(ev.EventType()))
		}
	}
	want := []string{"note [ext:ui] todo: done", "RUN_STARTED", "RUN_FINISHED"}
	if strings.Join(order, ", ") != strings.Join(want, ", ") {
		t.Errorf("logged %q, want %q: the note before the run it asked for", order, want)
	}
}

// a2uiScene changes what a session shows while a run streams: a component
// placed, its data changed, moved; a stream surface taking chunks; an a2ui
// form; then, once the run is over, the component hidden, which is the
// session's last frame (an orrery.unplaced).
func a2uiScene(ctx context.Context, s *kernel.Session) error {
	agent := ui.OwnerAgent
	steps := []func() error{
		func() error {
			return s.Show(ctx, agent, kernel.ShowInput{ID: "todo", Placement: "pane.left", Structure: json.RawMessage(a2uiTodo), Data: json.RawMessage(`{"left":9}`)})
		},
		func() error {
			return s.Show(ctx, agent, kernel.ShowInput{ID: "log", Placement: "footer", Surface: json.RawMessage(`{"kind":{"t":"stream","value":"$ make\n"}}`)})
		},
		func() error { _, err := s.Send(ctx, kernel.SendInput{Text: "hi"}); return err },
	}
	for i := 8; i > 0; i-- {
		steps = append(steps,
			func() error { return s.AppendChunk(ctx, agent, "log", fmt.Sprintf("step %d\n", i)) },
			func() error {
				return s.Data(ctx, agent, "todo", kernel.DataUpdate{Set: json.RawMessage(fmt.Sprintf(`{"left":%d}`, i))})
			})
	}
	steps = append(steps,
		func() error { return s.Move(ctx, agent, "placed:agent:todo", "band") },
		func() error {
			return s.Show(ctx, agent, kernel.ShowInput{ID: "ci", Placement: "pane.right", A2UI: json.RawMessage(a2uiCIForm)})
		})
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	for s.Running() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	// Let a held data update go out before the component goes.
	time.Sleep(200 * time.Millisecond)
	return s.Hide(ctx, agent, "todo")
}

// TestA2UIResume, in every stream mode with the A2UI face on: a client that
// reads part of a live session over SSE, drops, and resumes with
// Last-Event-ID gets, byte for byte, what a replay from since=0 gives; so
// does a resume from every seq of the session, over SSE and over a
// WebSocket's session.attach. No gap, no duplicate, and each A2UI snapshot
// comes with the frame it stands for.
func TestA2UIResume(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true})
	h := &harness{url: r.local.URL, client: r.local.Client()}
	ctx := context.Background()
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			s, err := r.k.CreateSession(ctx, kernel.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			q := "session=" + s.ID() + "&stream_mode=" + string(mode) + "&a2ui=1"
			first := h.openEvents(t, q+"&since=0", nil)
			sceneCtx, cancel := context.WithTimeout(ctx, streamTimeout)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- a2uiScene(sceneCtx, s) }()
			var got [][]byte
			lastID := ""
			for {
				ev, err := first.nextMode()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.data)
				if ev.hasID {
					lastID = ev.id
					if ev.seq >= 12 {
						break
					}
				}
			}
			first.close()
			// Events after the last id line are not yet received.
			for len(got) > 0 {
				if seq, _ := modeSeq(t, got[len(got)-1]); strconv.FormatUint(seq, 10) == lastID {
					break
				}
				got = got[:len(got)-1]
			}
			if err := <-done; err != nil {
				t.Fatalf("scene: %v", err)
			}
			head := settle(t, s)
			readTo := func(st *sse) (evs []modeEvent) {
				t.Helper()
				for {
					ev, err := st.nextMode()
					if err != nil {
						t.Fatal(err)
					}
					evs = append(evs, ev)
					if ev.hasID && ev.seq == head {
						return evs
					}
				}
			}
			for _, ev := range readTo(h.openEvents(t, q, http.Header{"Last-Event-Id": {lastID}})) {
				got = append(got, ev.data)
			}
			whole := readTo(h.openEvents(t, q+"&since=0", nil))
			activities := 0
			for _, ev := range whole {
				if ev.typ == "ACTIVITY_SNAPSHOT" {
					activities++
				}
			}
			if activities < 10 {
				t.Fatalf("the session's stream has %d A2UI snapshots, want at least 10 for this test to mean anything", activities)
			}
			sameEvents(t, "live, dropped at seq "+lastID+", resumed", got, whole, 0)

			// A resume from every seq, over SSE.
			for i, ev := range whole {
				if !ev.hasID || ev.seq == head {
					continue
				}
				resumed := readTo(h.openEvents(t, q, http.Header{"Last-Event-Id": {ev.id}}))
				var data [][]byte
				for _, e := range resumed {
					data = append(data, e.data)
				}
				sameEvents(t, "SSE resumed after seq "+ev.id, data, whole, i+1)
			}

			// And over a WebSocket: session.attach with since, a2ui and
			// the mode; the frames of the session are tagged with it.
			attach := func(since uint64) [][]byte {
				t.Helper()
				p := r.dial(t, "ws", "")
				defer p.ws.CloseNow()
				p.send(t, `{"t":"hello","id":"h"}`)
				p.replyTo(t, "h")
				p.send(t, fmt.Sprintf(`{"t":"session.attach","id":"a","session":%q,"since":%d,"a2ui":true,"stream_mode":%q}`, s.ID(), since, mode))
				var out [][]byte
				for {
					m, raw, err := p.next(streamTimeout)
					if err != nil {
						t.Fatalf("attach since %d: %v", since, err)
					}
					if m["t"] == "reply" {
						if m["ok"] != true {
							t.Fatalf("session.attach = %s", raw)
						}
						continue
					}
					out = append(out, bytes.Clone(raw))
					if seq, typ := modeSeq(t, raw); seq == head && typ == "CUSTOM" {
						return out
					}
				}
			}
			wsWhole := attach(0)
			if len(wsWhole) != len(whole) {
				t.Fatalf("WebSocket replay has %d events, SSE %d", len(wsWhole), len(whole))
			}
			for i := range whole {
				if seq, _ := modeSeq(t, wsWhole[i]); seq != whole[i].seq {
					t.Fatalf("WebSocket event %d has seq %d, SSE %d", i, seq, whole[i].seq)
				}
			}
			for i, ev := range whole {
				if !ev.hasID || ev.seq == head {
					continue
				}
				sameBytes(t, fmt.Sprintf("WebSocket attached since %d", ev.seq), attach(ev.seq), wsWhole, i+1)
			}
		})
	}
}

// sameEvents checks that got is want[from:], event by event.
func sameEvents(t *testing.T, what string, got [][]byte, want []modeEvent, from int) {
	t.Helper()
	data := make([][]byte, 0, len(want))
	for _, ev := range want {
		data = append(data, ev.data)
	}
	sameBytes(t, what, got, data, from)
}

func sameBytes(t *testing.T, what string, got, want [][]byte, from int) {
	t.Helper()
	want = want[from:]
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: event %d = %s, want %s", what, i, got[i], want[i])
		}
	}
}

// FuzzA2UIAction sends arbitrary a2ui.action messages to POST /control on a
// session that shows a component, an a2ui form and a plain surface. The
// server never fails (no 5xx); it accepts an action (200 {}) or refuses it
// with a 4xx sentence, and a refused action logs nothing.
func FuzzA2UIAction(f *testing.F) {
	for _, seed := range []string{
		actionMsg("done", "placed:agent:todo", ""),
		actionMsg("retry", "placed:agent:ci", `{}`),
		actionMsg("open", "placed:agent:todo", `{"orrery.event":"open","orrery.value":"https://example.com/docs"}`),
		actionMsg("done", "placed:agent:plain", ""),
		`{"name":"done","surfaceId":"placed:agent:todo","sourceComponentId":"x","context":{"choices":["a"],"text":"b"}}`,
		`{"version":"v0.9","action":{}}`,
		`{"version":"v0.8","userAction":{"name":"done"}}`,
		`[]`, `null`, `"x"`, `{`,
	} {
		f.Add([]byte(seed))
	}
	r := newTxRig(f, txRigOptions{})
	ctx := context.Background()
	s, err := r.k.CreateSession(ctx, kernel.SessionOptions{ID: "ui"})
	if err != nil {
		f.Fatal(err)
	}
	for _, in := range []kernel.ShowInput{
		{ID: "todo", Placement: "pane.left", Structure: json.RawMessage(a2uiTodo), Data: json.RawMessage(`{"left":3}`)},
		{ID: "plain", Placement: "band", Surface: json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)},
		{ID: "ci", Placement: "pane.right", A2UI: json.RawMessage(a2uiCIForm)},
	} {
		if err := s.Show(ctx, ui.OwnerAgent, in); err != nil {
			f.Fatalf("Show(%s) = %v", in.ID, err)
		}
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		body, err := json.Marshal(map[string]any{"t": "a2ui.action", "id": "f", "session": "ui", "message": json.RawMessage(msg)})
		if err != nil {
			// Not JSON: send it raw in the field, which the server refuses.
			body = []byte(`{"t":"a2ui.action","id":"f","session":"ui","message":` + string(msg) + `}`)
		}
		head := settle(t, s)
		status, _, got := r.post(t, r.local, http.MethodPost, "/control", nil, string(body))
		switch {
		case status == 200:
			if string(got) != "{}\n" {
				t.Fatalf("accepted %s with %s, want {}", msg, got)
			}
		case status >= 400 && status < 500:
			var e protocol.ErrorBody
			if json.Unmarshal(got, &e) != nil || !txSentence(e.Error) {
				t.Fatalf("refused %s with %s, want {\"error\": a sentence}", msg, got)
			}
			if now := settle(t, s); now != head {
				t.Fatalf("refused %s (%s) but the head moved from %d to %d", msg, e.Error, head, now)
			}
		default:
			t.Fatalf("a2ui.action %s = %d %s, want 200 or a 4xx refusal", msg, status, got)
		}
	})
}
