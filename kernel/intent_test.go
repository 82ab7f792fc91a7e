package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui"
)

// host stands where the extension host will: it records what reaches the
// extensions, and says whether they run.
type host struct {
	mu      sync.Mutex
	intents []kernel.Intent
	actions []kernel.Intent
	down    bool
}

func (h *host) Intent(_ context.Context, in kernel.Intent) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		return fmt.Errorf("deliver ui/event: %w", kernel.ErrOwnerNotRunning)
	}
	h.intents = append(h.intents, in)
	return nil
}

func (h *host) RunAction(_ context.Context, in kernel.Intent) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.actions = append(h.actions, in)
	return nil
}

func TestIntentToExtension(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		h := &host{}
		e := mode.newEnv(t, "offline", func(c *kernel.Config) { c.Intents = h })
		registerCI(t, e.k, "")
		ctx := context.Background()
		s := e.session(t)
		ci := ciOwner(t)
		if err := s.Show(ctx, ci, kernel.ShowInput{ID: "build", Placement: "pane.right", Component: "runs",
			Data: json.RawMessage(`{"failed": 1, "runs": [], "url": "https://ci.example.com/b/1"}`)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Intent(ctx, "placed:ext:ci:build", "retry", nil); err != nil {
			t.Fatalf("Intent(retry) = %v", err)
		}
		// An open whose href the component does not show is not a link: it
		// goes to the owner like any other action.
		if err := s.Intent(ctx, "placed:ext:ci:build", "open", json.RawMessage(`"https://evil.example.com"`)); err != nil {
			t.Fatalf("Intent(open, not shown) = %v", err)
		}
		want := []kernel.Intent{
			{Session: s.ID(), Owner: ci, ID: "build", Action: "retry"},
			{Session: s.ID(), Owner: ci, ID: "build", Action: "open", Value: json.RawMessage(`"https://evil.example.com"`)},
		}
		if got := mustJSON(h.intents); got != mustJSON(want) {
			t.Errorf("the extension got %s, want %s", got, mustJSON(want))
		}
		// An open of the link the component shows is the host's: the
		// extension never sees it, and a client not on the host's screen gets
		// a notice naming the target.
		head := durableHead(t, s)
		if err := s.Intent(ctx, "placed:ext:ci:build", "open", json.RawMessage(`"https://ci.example.com/b/1"`)); err != nil {
			t.Fatalf("Intent(open link) = %v", err)
		}
		if len(h.intents) != 2 {
			t.Errorf("the extension got the link's open: %+v", h.intents[2:])
		}
		waitDurable(t, s)
		evs := logged(t, s, head)
		if len(evs) != 1 || !strings.Contains(mustJSON(evs[0]), `"name":"orrery.notice","value":{"ext":"ci","level":"info","text":"link: https://ci.example.com/b/1 (this client is not on the host's screen`) {
			t.Errorf("link open logged %s, want one notice naming the target", mustJSON(evs))
		}

		h.down = true
		err := s.Intent(ctx, "placed:ext:ci:build", "retry", nil)
		if err == nil || !strings.Contains(err.Error(), "extension ci is not running") || !strings.Contains(err.Error(), "/ext restart ci") {
			t.Errorf("Intent() with the extension down = %v, want refused naming /ext restart ci", err)
		}
		var re *kernel.RequestError
		if !errors.As(err, &re) {
			t.Errorf("Intent() with the extension down = %T, want a *kernel.RequestError", err)
		}
	})
}

func TestIntentWithoutHost(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, "offline")
		registerCI(t, e.k, "")
		ctx := context.Background()
		s := e.session(t)
		if err := s.Show(ctx, ciOwner(t), kernel.ShowInput{ID: "build", Placement: "band", Component: "runs", Data: json.RawMessage(`{"failed": 1, "runs": []}`)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Intent(ctx, "placed:ext:ci:build", "retry", nil); err == nil || !strings.Contains(err.Error(), "extension ci is not running") {
			t.Errorf("Intent() with no extension host = %v, want refused: not running", err)
		}
	})
}

func TestIntentRunsDeclaredAction(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		h := &host{down: true}
		e := mode.newEnv(t, "offline", func(c *kernel.Config) { c.Intents = h })
		registerCI(t, e.k, kernel.RuntimeNone, "retry")
		ctx := context.Background()
		s := e.session(t)
		if err := s.Show(ctx, ciOwner(t), kernel.ShowInput{ID: "build", Placement: "band", Component: "runs", Data: json.RawMessage(`{"failed": 1, "runs": []}`)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Intent(ctx, "placed:ext:ci:build", "retry", nil); err != nil {
			t.Fatalf("Intent(retry) = %v", err)
		}
		if len(h.actions) != 1 || h.actions[0].Action != "retry" || len(h.intents) != 0 {
			t.Errorf("actions %+v, intents %+v; want the declared action retry run", h.actions, h.intents)
		}
		// open is declared by the link, but the extension has no
		// [provides.actions.open].
		err := s.Intent(ctx, "placed:ext:ci:build", "open", json.RawMessage(`"https://elsewhere.example.com"`))
		if err == nil || !strings.Contains(err.Error(), "declare it as [provides.actions.open]") {
			t.Errorf("Intent(open) = %v, want refused naming [provides.actions.open]", err)
		}
	})
}

// recorder is a model that records what each call was sent and answers
// "ok".
type recorder struct {
	mu    sync.Mutex
	calls [][]protocol.Message
}

func (r *recorder) Name() string  { return "recorder" }
func (r *recorder) Model() string { return "test" }
func (r *recorder) Stream(_ context.Context, req agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	r.mu.Lock()
	r.calls = append(r.calls, req.Messages)
	r.mu.Unlock()
	return agent.Usage{}, emit(agent.Delta{Kind: agent.DeltaText, Text: "ok"})
}

func TestIntentOnAgentComponentIsAHostNote(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		rec := &recorder{}
		e := mode.newEnv(t, "rec", func(c *kernel.Config) {
			c.Models = func(string) (agent.Provider, error) { return rec, nil }
		})
		ctx := context.Background()
		s := e.session(t)
		if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "todo", Placement: "pane.right",
			Structure: json.RawMessage(`{"type":"table","columns":["task"],"rows":"${/rows}","on":{"select":"pick"}}`),
			Data:      json.RawMessage(`{"rows":[["write tests"]]}`)}); err != nil {
			t.Fatal(err)
		}
		head := durableHead(t, s)
		if err := s.Intent(ctx, "placed:agent:todo", "pick", json.RawMessage(` "row-3" `)); err != nil {
			t.Fatalf("Intent() = %v", err)
		}
		waitDurable(t, s)
		evs := logged(t, s, head)
		if len(evs) != 1 {
			t.Fatalf("intent logged %d events, want 1 (a note starts no turn): %s", len(evs), mustJSON(evs))
		}
		c, ok := evs[0].(*protocol.Custom)
		var hm kernel.HostMessage
		if ok {
			json.Unmarshal(c.Value, &hm)
		}
		if !ok || c.Name != kernel.HostMessageEvent || hm.From != "ui" || hm.Text != `[ext:ui] todo: pick "row-3"` || !hm.Hidden {
			t.Errorf("intent logged %s, want a hidden host message from ui: [ext:ui] todo: pick \"row-3\"", mustJSON(evs[0]))
		}
		if s.Running() {
			t.Error("the note started a run")
		}
		// The thread clients draw leaves it out.
		sub, err := s.Subscribe(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-sub.Ready()
		frames := sub.Take(nil)
		sub.Close()
		if strings.Contains(string(frames[1].Data), "[ext:ui]") {
			t.Errorf("MESSAGES_SNAPSHOT = %s, want the note hidden from the thread", frames[1].Data)
		}
		// The model reads it on its next turn, as the host's word (developer),
		// never as the person's.
		send(t, s, kernel.SendInput{Text: "what did I pick?"})
		if len(rec.calls) != 1 {
			t.Fatalf("%d model calls, want 1", len(rec.calls))
		}
		var roles []string
		for _, m := range rec.calls[0] {
			roles = append(roles, m.Role+":"+m.Content.String())
		}
		if got, want := strings.Join(roles, "|"), `developer:[ext:ui] todo: pick "row-3"|user:what did I pick?`; got != want {
			t.Errorf("the model read %s, want %s", got, want)
		}
	})
}

func TestLinkOpensWithOpener(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		ws := t.TempDir()
		os.MkdirAll(filepath.Join(ws, "docs"), 0o755)
		os.WriteFile(filepath.Join(ws, "docs", "report.md"), []byte("# r"), 0o600)
		out := filepath.Join(t.TempDir(), "opened")
		script := filepath.Join(t.TempDir(), "opener")
		// The opener records its arguments, one a line: the target must come
		// as exactly one argument, untouched by any shell.
		if err := os.WriteFile(script, []byte("#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > "+out+".tmp && mv "+out+".tmp "+out+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		e := mode.newEnv(t, "offline", func(c *kernel.Config) {
			c.Workspace.Root = ws
			c.Opener = kernel.SystemOpener{Command: script}
		})
		ctx := context.Background()
		s := e.session(t)
		tests := []struct{ href, want string }{
			{"https://example.com/a b?q=$(touch /tmp/x);", "https://example.com/a%20b?q=$(touch /tmp/x);"},
			{"./docs//report.md", filepath.Join(ws, "docs", "report.md")},
		}
		for _, tt := range tests {
			os.Remove(out)
			if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "l", Placement: "band",
				Structure: json.RawMessage(`{"type":"button","label":"Open","href":"${/href}"}`), Data: json.RawMessage(`{"href":` + mustJSON(tt.href) + `}`)}); err != nil {
				t.Fatalf("show %q: %v", tt.href, err)
			}
			head := durableHead(t, s)
			if err := s.Intent(ctx, "placed:agent:l", "open", json.RawMessage(mustJSON(tt.href))); err != nil {
				t.Fatalf("open %q = %v", tt.href, err)
			}
			var got []byte
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if got, _ = os.ReadFile(out); got != nil {
					break
				}
			}
			if string(got) != tt.want+"\n" {
				t.Errorf("opener got %q, want the one argument %q", got, tt.want)
			}
			waitDurable(t, s)
			if evs := logged(t, s, head); len(evs) != 1 || !strings.Contains(mustJSON(evs[0]), `"text":"opened `) {
				t.Errorf("open logged %s, want a notice of what was opened", mustJSON(evs))
			}
		}
	})
}

// randomValue returns a random JSON value, nested at most depth deep.
func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(7); {
	case k == 0 && depth > 0:
		n := r.IntN(4)
		a := make([]any, n)
		for i := range a {
			a[i] = randomValue(r, depth-1)
		}
		return a
	case k == 1 && depth > 0:
		return randomObject(r, depth-1)
	case k == 2:
		return fmt.Sprintf("s%d", r.IntN(5))
	case k == 3:
		return r.IntN(2) == 0
	case k == 4:
		return nil
	default:
		return r.IntN(100)
	}
}

var keys = []string{"a", "b", "c", "x/y", "m~n"}

func randomObject(r *rand.Rand, depth int) map[string]any {
	obj := map[string]any{}
	for range r.IntN(4) {
		obj[keys[r.IntN(len(keys))]] = randomValue(r, depth)
	}
	return obj
}

// randomPointer picks an existing path in v (maybe "" for v itself), and
// its value.
func randomPointer(r *rand.Rand, v any, path string) (string, any) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 || r.IntN(3) == 0 {
			return path, v
		}
		ks := make([]string, 0, len(x))
		for k := range x {
			ks = append(ks, k)
		}
		slicesSort(ks)
		k := ks[r.IntN(len(ks))]
		return randomPointer(r, x[k], path+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k))
	case []any:
		if len(x) == 0 || r.IntN(3) == 0 {
			return path, v
		}
		i := r.IntN(len(x))
		return randomPointer(r, x[i], fmt.Sprintf("%s/%d", path, i))
	}
	return path, v
}

func slicesSort(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// randomPatch returns RFC 6902 operations on data, mostly ones that apply.
func randomPatch(r *rand.Rand, data map[string]any) []map[string]any {
	var ops []map[string]any
	for range 1 + r.IntN(3) {
		p, v := randomPointer(r, data, "")
		switch r.IntN(6) {
		case 0:
			if p != "" {
				ops = append(ops, map[string]any{"op": "remove", "path": p})
			}
		case 1:
			if p != "" {
				ops = append(ops, map[string]any{"op": "replace", "path": p, "value": randomValue(r, 2)})
			}
		case 2:
			switch x := v.(type) {
			case map[string]any:
				ops = append(ops, map[string]any{"op": "add", "path": p + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(keys[r.IntN(len(keys))]), "value": randomValue(r, 2)})
			case []any:
				ops = append(ops, map[string]any{"op": "add", "path": fmt.Sprintf("%s/%d", p, r.IntN(len(x)+1)), "value": randomValue(r, 2)})
			}
		case 3:
			ops = append(ops, map[string]any{"op": "test", "path": p, "value": v})
		case 4:
			if p != "" {
				ops = append(ops, map[string]any{"op": "copy", "from": p, "path": "/a"})
			}
		case 5:
			// One that fails: nothing of the patch may apply.
			ops = append(ops, map[string]any{"op": "remove", "path": "/nowhere/9"})
		}
	}
	return ops
}

// TestDataPropertyFrames sends random sequences of set and patch on random
// data; a client applying the logged frames with a stock JSON Patch library
// always holds the kernel's data, and the kernel's data is what applying
// the accepted updates gives.
func TestDataPropertyFrames(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		clock := newFakeClock()
		e := mode.newEnv(t, "offline", withClock(clock))
		ctx := context.Background()
		s := e.session(t)
		owner := mustOwner(t, "prop")
		r := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
		model := randomObject(r, 3)
		first, _ := json.Marshal(model)
		if err := s.Show(ctx, owner, kernel.ShowInput{ID: "p", Placement: "band", Structure: json.RawMessage(`{"type":"text","value":"a: ${/a}"}`), Data: first}); err != nil {
			t.Fatal(err)
		}
		c := &client{t: t}
		accepted, refused := 0, 0
		for i := range 300 {
			// Every other update comes at once; the rest after the pace allows
			// one. Held ones go out at the next allowed moment.
			if i%2 == 0 {
				clock.Advance(150 * time.Millisecond)
			}
			var up kernel.DataUpdate
			var next map[string]any
			if r.IntN(3) == 0 {
				next = randomObject(r, 3)
				up.Set, _ = json.Marshal(next)
			} else {
				ops := randomPatch(r, model)
				up.Patch, _ = json.Marshal(ops)
				cur, _ := json.Marshal(model)
				patch, err := jsonpatch.DecodePatch(up.Patch)
				if err != nil {
					t.Fatal(err)
				}
				if out, err := applySafely(patch, cur); err == nil {
					json.Unmarshal(out, &next)
				}
			}
			err := s.Data(ctx, owner, "p", up)
			if (err == nil) != (next != nil) {
				t.Fatalf("update %d %s: kernel said %v, stock library applies it: %v", i, up.Patch, err, next != nil)
			}
			if err != nil {
				refused++
				continue
			}
			accepted++
			model = next
			if i%10 == 9 {
				clock.Advance(time.Second)
				c.follow(s)
				if got, want := c.at("/data/ext:prop/p"), mustJSON(model); got != want {
					t.Fatalf("after update %d the client holds %s, want %s", i, got, want)
				}
			}
		}
		clock.Advance(time.Second)
		c.follow(s)
		if got, want := c.at("/data/ext:prop/p"), mustJSON(model); got != want {
			t.Errorf("the client holds %s, want %s", got, want)
		}
		if got, want := compact(t, string(c.doc)), compact(t, string(stateOf(t, s))); got != want {
			t.Errorf("client state = %s, want the kernel's %s", got, want)
		}
		if accepted < 100 || refused < 10 {
			t.Errorf("%d accepted, %d refused: the generator should exercise both", accepted, refused)
		}
	})
}

// applySafely applies patch, turning the stock library's panic on a test
// of a value that holds null into a failure, as the kernel does.
func applySafely(patch jsonpatch.Patch, doc []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return patch.Apply(doc)
}

// TestDataCoalescing shows that updates above limits.dataUpdatesPerSec are
// held and the last value goes out at the next allowed moment.
func TestDataCoalescing(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		clock := newFakeClock()
		dir := t.TempDir()
		e := mode.openEnv(t, dir, "offline", withClock(clock))
		ctx := context.Background()
		s, err := e.k.CreateSession(ctx, kernel.SessionOptions{ID: "pace"})
		if err != nil {
			t.Fatal(err)
		}
		owner := mustOwner(t, "ci")
		if err := s.Show(ctx, owner, kernel.ShowInput{ID: "n", Placement: "band", Structure: json.RawMessage(`{"type":"text","value":"n=${/n}"}`), Data: json.RawMessage(`{"n":0}`)}); err != nil {
			t.Fatal(err)
		}
		set := func(n int) {
			t.Helper()
			if err := s.Data(ctx, owner, "n", kernel.DataUpdate{Set: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}); err != nil {
				t.Fatal(err)
			}
		}
		deltas := func(since uint64) []string {
			waitDurable(t, s)
			var out []string
			for _, ev := range logged(t, s, since) {
				if d, ok := ev.(*protocol.StateDelta); ok {
					out = append(out, string(d.Delta[0].Value))
				}
			}
			return out
		}
		head := durableHead(t, s)
		set(1) // the first goes out at once
		for n := 2; n <= 5; n++ {
			clock.Advance(10 * time.Millisecond)
			set(n) // held: 10 a second allows one each 100 ms
		}
		if got := strings.Join(deltas(head), ","); got != "1" {
			t.Fatalf("published %s before the next allowed moment, want only 1", got)
		}
		if clock.Pending() != 1 {
			t.Errorf("%d timers pending, want 1 for the held updates", clock.Pending())
		}
		clock.Advance(59 * time.Millisecond) // 99 ms after the first
		if got := strings.Join(deltas(head), ","); got != "1" {
			t.Fatalf("published %s before 100 ms, want only 1", got)
		}
		clock.Advance(time.Millisecond)
		if got := strings.Join(deltas(head), ","); got != "1,5" {
			t.Fatalf("published %s at the next allowed moment, want 1,5: the last value wins", got)
		}
		// A held update is not lost when the session stops before its moment.
		clock.Advance(time.Second)
		set(6)
		set(7)
		if err := e.k.Close(ctx); err != nil {
			t.Fatal(err)
		}
		e.store.Close()
		e2 := mode.openEnv(t, dir, "offline", withClock(clock))
		s2, err := e2.k.Session(ctx, "pace")
		if err != nil {
			t.Fatal(err)
		}
		if got := valueAt(t, stateOf(t, s2), "/data/ext:ci/n"); got != `{"n":7}` {
			t.Errorf("data after a restart = %s, want the last accepted {\"n\":7}", got)
		}
		// After the restart the owner still changes its component.
		clock.Advance(time.Second)
		if err := s2.Data(ctx, owner, "n", kernel.DataUpdate{Patch: json.RawMessage(`[{"op":"replace","path":"/n","value":8}]`)}); err != nil {
			t.Fatalf("Data() after a restart = %v", err)
		}
		if got := valueAt(t, stateOf(t, s2), "/data/ext:ci/n"); got != `{"n":8}` {
			t.Errorf("data = %s, want {\"n\":8}", got)
		}
	})
}
