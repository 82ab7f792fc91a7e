package ext_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/ext"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/ui"
)

// bin holds the extension programs TestMain builds.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "orrery-ext-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	for name, pkg := range map[string]string{"rogue": "./testdata/rogue", "chart": "../examples/chart", "button": "../examples/button"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// manifest writes an extension directory with the manifest text, whose
// command is replaced by command (absolute), and loads it.
func manifest(t testing.TB, text string, command ...string) *ext.Manifest {
	dir, err := os.MkdirTemp(bin, "ext")
	if err != nil {
		panic(err)
	}
	if len(command) > 0 {
		q, _ := json.Marshal(command)
		lines := strings.Split(text, "\n")
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), "command") {
				lines[i] = "command = " + string(q)
			}
		}
		text = strings.Join(lines, "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, ext.ManifestFile), []byte(text), 0o600); err != nil {
		panic(err)
	}
	m, err := ext.LoadManifest(dir)
	if err != nil {
		panic(err)
	}
	return m
}

// example loads an example's manifest with its built program.
func example(t *testing.T, name string) *ext.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", name, ext.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	return manifest(t, string(data), filepath.Join(bin, name))
}

func rogue(t testing.TB, mode string, extra string) *ext.Manifest {
	return manifest(t, `[extension]
api = "orrery-ext/1"
name = "rogue"
version = "0.1.0"
runtime = "binary"
command = "x"
resident = true

[[provides.placements]]
id = "main"
placement = "pane.left"
title = "Rogue"
`+extra, filepath.Join(bin, "rogue"), mode)
}

// world is a real kernel on a SQLite file with an extension host.
type world struct {
	k *kernel.Kernel
	h *ext.Host
	s *kernel.Session
	w *watcher
}

func newWorld(t *testing.T, model string, hc ext.Config, kc func(*kernel.Config)) *world {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	if hc.Heartbeat == 0 {
		hc.Heartbeat = 100 * time.Millisecond
	}
	hc.LogDir = filepath.Join(dir, "logs")
	if !testing.Verbose() {
		hc.Logger = slog.New(slog.DiscardHandler)
	}
	h := ext.New(hc)
	cfg := kernel.Config{Store: st, Models: models.Resolve, DefaultModel: model, Tools: tool.Builtins(), DebugActor: true}
	h.Wire(&cfg)
	if kc != nil {
		kc(&cfg)
	}
	k := kernel.New(cfg)
	if err := h.Attach(k); err != nil {
		t.Fatalf("Attach() = %v", err)
	}
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("Host.Close() = %v", err)
		}
		if err := k.Close(ctx); err != nil {
			t.Errorf("Kernel.Close() = %v", err)
		}
		st.Close()
	})
	s, err := k.CreateSession(context.Background(), kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscribe(context.Background(), new(uint64))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	wt := &watcher{t: t, sub: sub, state: client.NewState()}
	// Frames logged before the subscription attached come as its backlog.
	if err := sub.Backlog(context.Background(), func(f kernel.Frame) error {
		ev, err := protocol.DecodeEvent(f.Data)
		wt.buf = append(wt.buf, ev)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return &world{k: k, h: h, s: s, w: wt}
}

// watcher reads a session's frames in order, and keeps the shared state
// they make as a client would.
type watcher struct {
	t     *testing.T
	sub   *kernel.Subscription
	buf   []protocol.Event
	all   []protocol.Event
	state *client.State
}

// data returns the data of owner's component id in the shared state, as
// far as the watcher read, or nil.
func (w *watcher) data(owner, id string) map[string]any {
	var doc struct {
		Data map[string]map[string]map[string]any `json:"data"`
	}
	_ = json.Unmarshal(w.state.Shared(), &doc)
	return doc.Data[owner][id]
}

// untilData reads until the data of owner's component id satisfies ok.
func (w *watcher) untilData(owner, id string, ok func(map[string]any) bool) map[string]any {
	w.t.Helper()
	for {
		if d := w.data(owner, id); d != nil && ok(d) {
			return d
		}
		w.next()
	}
}

func (w *watcher) next() protocol.Event {
	w.t.Helper()
	deadline := time.After(30 * time.Second)
	for len(w.buf) == 0 {
		select {
		case <-w.sub.Ready():
		case <-w.sub.Done():
			w.t.Fatalf("subscription ended: %v", w.sub.Err())
		case <-deadline:
			w.t.Fatalf("no event came; saw %s", describe(w.all))
		}
		for _, f := range w.sub.Take(nil) {
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				w.t.Fatal(err)
			}
			w.buf = append(w.buf, ev)
		}
	}
	ev := w.buf[0]
	w.buf = w.buf[1:]
	w.all = append(w.all, ev)
	if err := w.state.ApplyEvent(ev); err != nil {
		w.t.Fatalf("apply %s: %v", ev.EventType(), err)
	}
	return ev
}

// until returns the first event for which ok is true.
func (w *watcher) until(ok func(protocol.Event) bool) protocol.Event {
	w.t.Helper()
	for {
		if ev := w.next(); ok(ev) {
			return ev
		}
	}
}

func describe(evs []protocol.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(string(ev.EventType()))
		if c, ok := ev.(*protocol.Custom); ok {
			fmt.Fprintf(&b, ":%s %s", c.Name, c.Value)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func custom(name string, test func(v map[string]any) bool) func(protocol.Event) bool {
	return func(ev protocol.Event) bool {
		c, ok := ev.(*protocol.Custom)
		if !ok || c.Name != name {
			return false
		}
		var v map[string]any
		_ = json.Unmarshal(c.Value, &v)
		return test == nil || test(v)
	}
}

// placed matches orrery.placed of id whose text contains text.
func placed(id, text string) func(protocol.Event) bool {
	return custom(kernel.PlacedEvent, func(v map[string]any) bool {
		return v["id"] == id && strings.Contains(fmt.Sprint(v["text"]), text)
	})
}

func notice(text string) func(protocol.Event) bool {
	return custom(kernel.NoticeEvent, func(v map[string]any) bool { return strings.Contains(fmt.Sprint(v["text"]), text) })
}

func stateKey(key string) func(protocol.Event) bool {
	return custom(kernel.StateChangedEvent, func(v map[string]any) bool { return v["key"] == key })
}

func stateValue(t *testing.T, ev protocol.Event) any {
	t.Helper()
	var sc kernel.StateChanged
	if err := json.Unmarshal(ev.(*protocol.Custom).Value, &sc); err != nil {
		t.Fatal(err)
	}
	var v any
	_ = json.Unmarshal(sc.Value, &v)
	return v
}

// script writes a script model and returns its spec.
func script(t *testing.T, turns ...map[string]any) string {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"turns": turns})
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return "script:" + path
}

func toolResult(w *watcher) *protocol.ToolCallResult {
	return w.until(func(ev protocol.Event) bool { return ev.EventType() == protocol.TypeToolCallResult }).(*protocol.ToolCallResult)
}

func TestChartExampleLiveAndToolThroughConsent(t *testing.T) {
	model := script(t,
		map[string]any{"tool_calls": []map[string]any{{"name": "chart_add", "args": map[string]any{"value": 42}}}},
		map[string]any{"text": []string{"added"}},
	)
	w := newWorld(t, model, ext.Config{Extensions: []*ext.Manifest{example(t, "chart")}}, func(c *kernel.Config) {
		c.Consent = consent.Rules{Allow: []string{"chart_add"}}
	})
	// Drawn at once in its loading state, then filled after ext/load, then
	// changed again by the live ticker.
	w.w.until(placed("latency", "loading"))
	w.w.until(placed("latency", "latency"))
	w.w.until(placed("latency", "latency"))
	if _, err := w.s.Send(context.Background(), kernel.SendInput{Text: "add a point"}); err != nil {
		t.Fatal(err)
	}
	res := toolResult(w.w)
	if got := res.Content.String(); got != "added 42 to the latency chart" {
		t.Errorf("tool result = %q, want the extension's answer", got)
	}
	var outcome map[string]string
	_ = json.Unmarshal(res.Orrery().Outcome, &outcome)
	if outcome["status"] != "ok" || !strings.Contains(outcome["rule"], "chart_add") {
		t.Errorf("outcome = %v, want ok by the allow rule on chart_add", outcome)
	}
	w.w.until(placed("latency", "42"))
}

func TestToolDeniedNeverReachesExtension(t *testing.T) {
	model := script(t,
		map[string]any{"tool_calls": []map[string]any{{"name": "rogue_echo", "args": map[string]any{}}}},
		map[string]any{"text": []string{"ok"}},
	)
	m := rogue(t, "plain", "[[provides.tools]]\nname = \"rogue_echo\"\ndescription = \"echoes\"\n")
	w := newWorld(t, model, ext.Config{Extensions: []*ext.Manifest{m}}, func(c *kernel.Config) {
		c.Consent = consent.Rules{Deny: []string{"rogue_echo"}}
	})
	if _, err := w.s.Send(context.Background(), kernel.SendInput{Text: "echo"}); err != nil {
		t.Fatal(err)
	}
	res := toolResult(w.w)
	var outcome map[string]string
	_ = json.Unmarshal(res.Orrery().Outcome, &outcome)
	if outcome["status"] != "denied" || strings.Contains(res.Content.String(), "rogue got") {
		t.Errorf("outcome = %v, content %q; want denied without reaching the extension", outcome, res.Content.String())
	}
}

func TestPythonExample(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	model := script(t,
		map[string]any{"tool_calls": []map[string]any{{"name": "shout", "args": map[string]any{"text": "hi there"}}}},
		map[string]any{"text": []string{"done"}},
	)
	m, err := ext.LoadManifest(filepath.Join("..", "examples", "python"))
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, model, ext.Config{Extensions: []*ext.Manifest{m}}, nil)
	w.w.until(placed("hello", "hello from Python"))
	if _, err := w.s.Send(context.Background(), kernel.SendInput{Text: "shout"}); err != nil {
		t.Fatal(err)
	}
	if got := toolResult(w.w).Content.String(); got != "HI THERE" {
		t.Errorf("shout result = %q, want HI THERE", got)
	}
	// The script shows its count before it answers, so the surface may
	// come before the result.
	for _, ev := range w.w.all {
		if placed("hello", "shouted 1 time")(ev) {
			return
		}
	}
	w.w.until(placed("hello", "shouted 1 time"))
}

func TestButtonPressReachesExtension(t *testing.T) {
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{example(t, "button")}}, nil)
	w.w.until(placed("counter", "pressed 0 times"))
	// The declared component sits in the kernel's state: its structure
	// under /ui/components and its data under /data.
	if !strings.Contains(string(w.w.state.Shared()), `"ext:button:counter"`) {
		t.Errorf("state has no /ui/components/ext:button:counter: %s", w.w.state.Shared())
	}
	for i := 1; i <= 2; i++ {
		// The person's press goes through the kernel, which checks the
		// action against the structure and hands it to the host.
		if err := w.s.Intent(context.Background(), "placed:ext:button:counter", "press", nil); err != nil {
			t.Fatalf("Intent() = %v", err)
		}
		w.w.untilData("ext:button", "counter", func(d map[string]any) bool { return d["presses"] == float64(i) })
		// The state key is set after the data; the data's delta may be
		// paced past it.
		var last any
		for _, ev := range w.w.all {
			if stateKey("ext:button/presses")(ev) {
				last = stateValue(t, ev)
			}
		}
		if last != float64(i) {
			last = stateValue(t, w.w.until(stateKey("ext:button/presses")))
		}
		if last != float64(i) {
			t.Errorf("state presses = %v, want %d", last, i)
		}
	}
	if err := w.s.Intent(context.Background(), "placed:ext:button:counter", "explode", nil); err == nil {
		t.Error("Intent() of an action the structure does not declare = nil, want a refusal")
	}
	// Another session's instance is not this one; an unknown extension is
	// not running.
	owner, _ := ui.ExtOwner("nobody")
	err := w.h.Intent(context.Background(), kernel.Intent{Session: w.s.ID(), Owner: owner, ID: "counter", Action: "press"})
	if !errors.Is(err, kernel.ErrOwnerNotRunning) {
		t.Errorf("Intent() for an extension not loaded = %v, want ErrOwnerNotRunning", err)
	}
}

func TestOrderUnderLoad(t *testing.T) {
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{rogue(t, "order", "")}}, nil)
	if v := stateValue(t, w.w.until(stateKey("ext:rogue/failed"))); v != float64(0) {
		t.Fatalf("%v calls failed, want none: ui/data never overtakes its ui/show", v)
	}
	// Each ui/data came after its ui/show, so every component ends with
	// its own n (updates are paced, so the last may come a moment later).
	for i := range 100 {
		w.w.untilData("ext:rogue", fmt.Sprintf("o%d", i), func(d map[string]any) bool { return d["n"] == float64(i) })
	}
}

func TestHeldCallsDuringLoad(t *testing.T) {
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{rogue(t, "held", "")}}, nil)
	ev := w.w.until(stateKey("ext:rogue/held"))
	v := stateValue(t, ev).(map[string]any)
	ok, refused := int(v["ok"].(float64)), int(v["refused"].(float64))
	if ok < ext.MaxHeld || ok+refused != 301 {
		t.Errorf("held: %d answered, %d refused; want at least %d of 301 answered {}", ok, refused, ext.MaxHeld)
	}
	placedCount := 0
	warned := false
	for _, e := range w.w.all {
		if placed("", "")(e) {
			continue
		}
		if c, isC := e.(*protocol.Custom); isC && c.Name == kernel.PlacedEvent && strings.HasPrefix(string(c.Value), `{"id":"h`) {
			placedCount++
		}
		if notice("made during ext/load was refused")(e) && notice("nowhere")(e) {
			warned = true
		}
	}
	// The bad call was answered {} at once; its refusal came as a notice.
	if !warned {
		t.Errorf("no warning notice for the refused held call; saw %s", describe(w.w.all))
	}
	if placedCount != ok-1 {
		t.Errorf("%d held surfaces were drawn, want the %d answered {} (less the bad one)", placedCount, ok-1)
	}
}

func TestCrashAndRestart(t *testing.T) {
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{rogue(t, "crash-once", "")}, BackoffMin: 10 * time.Millisecond}, nil)
	w.w.until(placed("main", "up"))
	w.w.until(notice("stopped"))
	// The surface is drawn stopped, marked so that every client dims it,
	// and the mark goes once the extension draws it again.
	stopped := w.w.until(placed("main", "stopped"))
	up := w.w.until(placed("main", "up"))
	for _, c := range []struct {
		ev   protocol.Event
		want bool
	}{{stopped, true}, {up, false}} {
		var p kernel.Placed
		_ = json.Unmarshal(c.ev.(*protocol.Custom).Value, &p)
		if p.Stopped != c.want {
			t.Errorf("orrery.placed %q has stopped %v, want %v", p.Text, p.Stopped, c.want)
		}
	}
	st := waitState(t, w, ext.StateRunning)
	if st.Restarts != 1 || !strings.Contains(st.Error, "exit status 2") {
		t.Errorf("List() = %+v, want rogue running after 1 restart, naming why it stopped", st)
	}
	if got := w.h.Counts(); got["rogue"] != (ext.ProcessCounts{Starts: 2, Crashes: 1}) {
		t.Errorf("Counts() = %+v, want rogue started twice, crashed once", got)
	}
}

// waitState waits until the session's one extension is in state.
func waitState(t *testing.T, w *world, state string) ext.Status {
	t.Helper()
	for range 3000 {
		if st := w.h.List(w.s.ID()); len(st) == 1 && st[0].State == state {
			return st[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("List() = %+v, never %s", w.h.List(w.s.ID()), state)
	return ext.Status{}
}

func TestHangDetected(t *testing.T) {
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{rogue(t, "hang", "")},
		Heartbeat: 50 * time.Millisecond, HeartbeatTimeout: 300 * time.Millisecond, BackoffMin: time.Hour}, nil)
	w.w.until(placed("main", "up"))
	w.w.until(notice("hung"))
	w.w.until(placed("main", "/ext restart rogue"))
}

func TestUnloadRemovesSurfacesAndTools(t *testing.T) {
	m := rogue(t, "plain", "[[provides.tools]]\nname = \"rogue_echo\"\ndescription = \"echoes\"\n")
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{m}}, nil)
	w.w.until(placed("main", "Rogue"))
	if got := w.s.ExtToolNames(); len(got) != 1 || got[0] != "rogue_echo" {
		t.Fatalf("ExtToolNames() = %v, want rogue_echo", got)
	}
	if err := w.h.Unload(context.Background(), w.s.ID(), "rogue"); err != nil {
		t.Fatal(err)
	}
	w.w.until(custom(kernel.UnplacedEvent, func(v map[string]any) bool { return v["id"] == "main" && v["owner"] == "ext:rogue" }))
	if got := w.s.ExtToolNames(); len(got) != 0 {
		t.Errorf("ExtToolNames() after unload = %v, want none", got)
	}
	if got := w.h.List(w.s.ID()); len(got) != 0 {
		t.Errorf("List() after unload = %v, want none", got)
	}
}

func TestBadInput(t *testing.T) {
	tests := []struct {
		mode string
		want func(protocol.Event) bool
	}{
		{"badheader", notice("broke the protocol")},
		{"lie", notice("broke the protocol")},
		{"big", notice("over the limit")},
		{"badjson", placed("after", "still here")},
		{"flood", notice("flooded")},
		{"unknown", custom(kernel.StateChangedEvent, func(v map[string]any) bool {
			return strings.Contains(fmt.Sprint(v["value"]), `"ui/explode" is unknown: use one of`)
		})},
		{"other", custom(kernel.StateChangedEvent, func(v map[string]any) bool {
			return strings.Contains(fmt.Sprint(v["value"]), "has placed nothing")
		})},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{rogue(t, tt.mode, "")},
				MaxQueued: 64, BackoffMin: time.Hour, MaxBody: 1 << 20}, nil)
			if tt.mode == "other" {
				// Another extension's surface; rogue's ui/hide of the same
				// id is refused, whichever comes first.
				owner, _ := ui.ExtOwner("someone")
				if err := w.s.Show(context.Background(), owner, kernel.ShowInput{ID: "foreign", Placement: "band", Surface: json.RawMessage(`{"kind":{"t":"text","value":"theirs"}}`)}); err != nil {
					t.Fatal(err)
				}
			}
			w.w.until(tt.want)
			// The session goes on.
			if _, err := w.s.Send(context.Background(), kernel.SendInput{Text: "hello"}); err != nil {
				t.Fatalf("Send() after bad input = %v", err)
			}
			w.w.until(func(ev protocol.Event) bool { return ev.EventType() == protocol.TypeRunFinished })
			for _, ev := range w.w.all {
				if custom(kernel.UnplacedEvent, func(v map[string]any) bool { return v["owner"] == "ext:someone" })(ev) {
					t.Error("another extension's surface was removed")
				}
			}
		})
	}
}
