package dialect_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/dialect"
	"github.com/getorrery/orrery/dialect/a2ui"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/ui"
)

// waitFor bounds how long a test waits for frames it expects.
const waitFor = 20 * time.Second

// openKernel starts a kernel with the offline model on a fresh SQLite file.
func openKernel(t *testing.T) *kernel.Kernel {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "offline", DebugActor: true})
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		k.Close(ctx)
		st.Close()
	})
	return k
}

// collect takes sub's backlog, then its live frames, until it has the last
// frame of seq upto (the one with a type).
func collect(t *testing.T, sub *kernel.Subscription, upto uint64) []kernel.Frame {
	t.Helper()
	var out []kernel.Frame
	done := func() bool {
		return len(out) > 0 && out[len(out)-1].Seq >= upto && out[len(out)-1].Type != ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := sub.Backlog(ctx, func(f kernel.Frame) error {
		f.Data = slices.Clone(f.Data)
		out = append(out, f)
		return nil
	}); err != nil {
		t.Fatalf("Backlog() = %v", err)
	}
	for !done() {
		select {
		case <-sub.Ready():
			out = sub.Take(out)
		case <-sub.Done():
			out = sub.Take(out)
			if !done() {
				t.Fatalf("the subscription ended (%v) at seq %d, before seq %d", sub.Err(), lastSeq(out), upto)
			}
		case <-ctx.Done():
			t.Fatalf("waited for seq %d; got up to %d", upto, lastSeq(out))
		}
	}
	return out
}

func lastSeq(frames []kernel.Frame) uint64 {
	if len(frames) == 0 {
		return 0
	}
	return frames[len(frames)-1].Seq
}

// activity is one A2UI snapshot of the face: its surface, what it draws
// in short (the text of its Text components, or "delete"), and its
// operations.
type activity struct {
	seq     uint64
	surface string
	drawn   string
	ops     []json.RawMessage
}

// activities reads the ACTIVITY_SNAPSHOT a2ui-surface frames of an
// agui_spec stream, checking each operation against the official v0.9
// schema and each list with a2ui.Validate.
func activities(t *testing.T, frames []kernel.Frame) []activity {
	t.Helper()
	var out []activity
	for i, f := range frames {
		ev, err := protocol.DecodeEvent(f.Data)
		if err != nil {
			t.Fatalf("frame %s: %v", f.Data, err)
		}
		act, ok := ev.(*protocol.ActivitySnapshot)
		if !ok {
			continue
		}
		if f.Type != "" {
			t.Errorf("activity %s has type %q, want none: it continues seq %d", f.Data, f.Type, f.Seq)
		}
		if i+1 == len(frames) || frames[i+1].Seq != f.Seq {
			t.Errorf("activity of seq %d is the last event of its seq, want the frame it stands for after it", f.Seq)
		}
		if act.ActivityType != a2ui.ActivityType {
			t.Errorf("activityType = %q, want %q", act.ActivityType, a2ui.ActivityType)
		}
		var content struct {
			Ops []json.RawMessage `json:"a2ui_operations"`
		}
		if err := json.Unmarshal(act.Content, &content); err != nil {
			t.Fatal(err)
		}
		for _, op := range content.Ops {
			if err := a2ui.CheckSchema(op); err != nil {
				t.Errorf("operation %s fails the official schema: %v", op, err)
			}
		}
		list, _ := json.Marshal(content.Ops)
		if _, err := a2ui.Validate(list); err != nil {
			t.Errorf("operations %s: Validate() = %v", list, err)
		}
		out = append(out, activity{seq: f.Seq, surface: strings.TrimPrefix(act.MessageID, "a2ui-surface-"), drawn: drawn(t, content.Ops), ops: content.Ops})
	}
	return out
}

// drawn summarises operations: "delete", or the text of their Text
// components joined with "|".
func drawn(t *testing.T, ops []json.RawMessage) string {
	t.Helper()
	var texts []string
	for _, raw := range ops {
		var m a2ui.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m.DeleteSurface != nil {
			return "delete"
		}
		if m.UpdateComponents == nil {
			continue
		}
		for _, c := range m.UpdateComponents.Components {
			if c["component"] != "Text" {
				continue
			}
			switch v := c["text"].(type) {
			case string:
				texts = append(texts, v)
			case map[string]any:
				texts = append(texts, "${"+v["path"].(string)+"}")
			}
		}
	}
	return strings.Join(texts, "|")
}

const todoStructure = `{"type":"stack","children":[{"type":"text","value":"${/left} left"},{"type":"button","label":"Done","on":{"press":"done"}}]}`

const a2uiForm = `[{"version":"v0.9","createSurface":{"surfaceId":"mine","catalogId":"https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}},
{"version":"v0.9","updateComponents":{"surfaceId":"mine","components":[
  {"id":"root","component":"Column","children":["t","go"]},
  {"id":"t","component":"Text","text":{"path":"/status"}},
  {"id":"go","component":"Button","child":"go-t","action":{"event":{"name":"retry"}}},
  {"id":"go-t","component":"Text","text":"Retry"}]}},
{"version":"v0.9","updateDataModel":{"surfaceId":"mine","value":{"status":"build failed"}}}]`

// TestA2UIFaceFollowsTheKernel: on the A2UI face, a component placed by the
// kernel is drawn, and drawn again, whole, each time its data changes, it
// moves or it is shown anew (once per change, never twice); a stream
// surface is drawn again with each chunk; a surface shown as an a2ui form
// keeps its form when moved; a hidden component is deleted; and a run's
// STATE_SNAPSHOT draws everything on the screen. Every operation passes the
// official schemas, and the frames a live subscriber got are byte for byte
// those a replay from since=0 gives.
func TestA2UIFaceFollowsTheKernel(t *testing.T) {
	k := openKernel(t)
	ctx := context.Background()
	s, err := k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	enc := dialect.WithA2UI(nil)
	live, err := s.SubscribeWith(ctx, kernel.SubscribeOptions{Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()

	agent := ui.OwnerAgent
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// waitData waits until the held data update has gone out, so that each
	// change below is its own frame.
	waitData := func(want string) {
		t.Helper()
		deadline := time.Now().Add(waitFor)
		for !strings.Contains(stateOf(t, s), want) {
			if time.Now().After(deadline) {
				t.Fatalf("the state never held %s: %s", want, stateOf(t, s))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	must("show todo", s.Show(ctx, agent, kernel.ShowInput{ID: "todo", Placement: "pane.left", Structure: json.RawMessage(todoStructure), Data: json.RawMessage(`{"left":3}`)}))
	must("set data", s.Data(ctx, agent, "todo", kernel.DataUpdate{Set: json.RawMessage(`{"left":2}`)}))
	waitData(`"left":2`)
	must("patch data", s.Data(ctx, agent, "todo", kernel.DataUpdate{Patch: json.RawMessage(`[{"op":"replace","path":"/left","value":1}]`)}))
	waitData(`"left":1`)
	must("move todo", s.Move(ctx, agent, "placed:agent:todo", "band"))
	must("show todo anew", s.Show(ctx, agent, kernel.ShowInput{ID: "todo", Placement: "band", Structure: json.RawMessage(todoStructure), Data: json.RawMessage(`{"left":0}`)}))
	must("show log", s.Show(ctx, agent, kernel.ShowInput{ID: "log", Placement: "footer", Surface: json.RawMessage(`{"kind":{"t":"stream","value":"$ make\n"}}`)}))
	must("chunk", s.AppendChunk(ctx, agent, "log", "ok\n"))
	must("chunk", s.AppendChunk(ctx, agent, "log", "done\n"))
	must("show ci", s.Show(ctx, agent, kernel.ShowInput{ID: "ci", Placement: "pane.right", A2UI: json.RawMessage(a2uiForm)}))
	must("move ci", s.Move(ctx, agent, "placed:agent:ci", "band"))
	must("hide todo", s.Hide(ctx, agent, "todo"))
	res, err := s.Send(ctx, kernel.SendInput{Text: "hi"})
	must("send", err)
	for s.Running() {
		time.Sleep(10 * time.Millisecond)
	}
	info, err := s.Info(ctx)
	must("info", err)
	head := info.Head // sequenced; collect waits until it is published
	t.Logf("run %s; head %d", res.RunID, head)

	got := collect(t, live, head)
	var acts []string
	for _, a := range activities(t, got) {
		acts = append(acts, a.surface+" "+a.drawn)
	}
	want := []string{
		"placed:agent:todo 3 left|Done",
		"placed:agent:todo 2 left|Done",
		"placed:agent:todo 1 left|Done",
		"placed:agent:todo 1 left|Done", // moved
		"placed:agent:todo 0 left|Done", // shown anew: once
		// A stream's text form drops the last newline.
		"placed:agent:log $ make",
		"placed:agent:log $ make\nok",
		"placed:agent:log $ make\nok\ndone",
		"placed:agent:ci ${/status}|Retry",
		"placed:agent:ci ${/status}|Retry", // moved: still the form
		"placed:agent:todo delete",
		// The run's STATE_SNAPSHOT: everything on the screen.
		"placed:agent:ci ${/status}|Retry",
		"placed:agent:log $ make\nok\ndone",
	}
	if !slices.Equal(acts, want) {
		t.Errorf("A2UI activities = %q, want %q", acts, want)
	}

	// A replay from since=0 rebuilds the state as it goes and gives the
	// same bytes as the live subscriber got (the live one also began with
	// seq-0 snapshots, which the replay has not).
	var zero uint64
	replay, err := s.SubscribeWith(ctx, kernel.SubscribeOptions{Since: &zero, Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	again := collect(t, replay, head)
	var liveLogged []kernel.Frame
	for _, f := range got {
		if f.Seq > 0 {
			liveLogged = append(liveLogged, f)
		}
	}
	if len(again) != len(liveLogged) {
		t.Fatalf("replay has %d frames, live %d", len(again), len(liveLogged))
	}
	for i := range again {
		if again[i].Seq != liveLogged[i].Seq || again[i].Type != liveLogged[i].Type || string(again[i].Data) != string(liveLogged[i].Data) {
			t.Fatalf("frame %d: replay %d %q %s, live %d %q %s", i, again[i].Seq, again[i].Type, again[i].Data, liveLogged[i].Seq, liveLogged[i].Type, liveLogged[i].Data)
		}
	}

	// A subscriber that starts from a seq-0 snapshot gets the screen as it
	// stands first.
	late, err := s.SubscribeWith(ctx, kernel.SubscribeOptions{Encoder: enc})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	var first []kernel.Frame
	select {
	case <-late.Ready():
		first = late.Take(nil)
	case <-time.After(waitFor):
		t.Fatal("no seq-0 snapshot")
	}
	acts = acts[:0]
	for _, a := range activities(t, first) {
		acts = append(acts, a.surface+" "+a.drawn)
	}
	if want := []string{"placed:agent:ci ${/status}|Retry", "placed:agent:log $ make\nok\ndone"}; !slices.Equal(acts, want) {
		t.Errorf("seq-0 activities = %q, want %q", acts, want)
	}
}

// stateOf returns the session's state as a new subscriber's seq-0
// STATE_SNAPSHOT holds it.
func stateOf(t *testing.T, s *kernel.Session) string {
	t.Helper()
	sub, err := s.Subscribe(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	select {
	case <-sub.Ready():
	case <-time.After(waitFor):
		t.Fatal("no snapshot")
	}
	for _, f := range sub.Take(nil) {
		if f.Type == string(protocol.TypeStateSnapshot) {
			return string(f.Data)
		}
	}
	t.Fatal("no STATE_SNAPSHOT")
	return ""
}
