package kernel_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/getorrery/orrery/internal/fakeclock"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

func newFakeClock() *fakeclock.Clock { return fakeclock.New(time.Unix(1_700_000_000, 0)) }

func withClock(c *fakeclock.Clock) option {
	return func(cfg *kernel.Config) {
		cfg.Now = c.Now
		cfg.AfterFunc = c.AfterFunc
	}
}

// client is a client's copy of a session's state, rebuilt from the frames
// with a stock JSON Patch library.
type client struct {
	t    *testing.T
	doc  json.RawMessage
	seen uint64
}

// follow applies every logged frame after the client's last one.
func (c *client) follow(s *kernel.Session) {
	c.t.Helper()
	waitDurable(c.t, s)
	for _, ev := range logged(c.t, s, c.seen) {
		c.apply(ev)
		c.seen = ev.Header().Orrery().Seq
	}
}

func (c *client) apply(ev protocol.Event) {
	c.t.Helper()
	switch e := ev.(type) {
	case *protocol.StateSnapshot:
		c.doc = e.Snapshot
	case *protocol.StateDelta:
		ops, _ := json.Marshal(e.Delta)
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			c.t.Fatal(err)
		}
		if c.doc, err = patch.Apply(c.doc); err != nil {
			c.t.Fatalf("apply %s to the client's state: %v", ops, err)
		}
	}
}

// at returns the value at pointer in the client's state, or "" when none.
func (c *client) at(pointer string) string { return valueAt(c.t, c.doc, pointer) }

func valueAt(t *testing.T, doc json.RawMessage, pointer string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	for _, tok := range strings.Split(pointer, "/")[1:] {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		if v, ok = m[tok]; !ok {
			return ""
		}
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// waitDurable waits until every frame the session sequenced is published.
func waitDurable(t *testing.T, s *kernel.Session) {
	t.Helper()
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitHead(t, s, info.Head)
}

// durableHead waits until everything sequenced is published and returns
// the head.
func durableHead(t *testing.T, s *kernel.Session) uint64 {
	t.Helper()
	waitDurable(t, s)
	return s.Head()
}

func compact(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

const runsStructure = `{"type": "stack", "children": [
	{"type": "text", "value": "${/failed} failed"},
	{"type": "button", "label": "Retry", "on": {"press": "retry"}, "when": "${/failed > 0}"},
	{"type": "button", "label": "Dashboard", "href": "${/url}", "when": "${/url}"}
]}`

const runsSchema = `{"type": "object", "required": ["runs"], "properties": {
	"failed": {"type": "integer", "default": 0},
	"url": {"type": "string"},
	"runs": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}
}}`

func ciOwner(t *testing.T) ui.Owner {
	t.Helper()
	o, err := ui.ExtOwner("ci")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func registerCI(t *testing.T, k *kernel.Kernel, runtime string, actions ...string) {
	t.Helper()
	err := k.RegisterComponents(ciOwner(t), kernel.ExtensionUI{Runtime: runtime, Actions: actions, Components: []kernel.DeclaredComponent{
		{Name: "runs", Structure: json.RawMessage(runsStructure), Schema: json.RawMessage(runsSchema)},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestComponentShowDataHide(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		clock := newFakeClock()
		e := mode.newEnv(t, "offline", withClock(clock))
		registerCI(t, e.k, "")
		ctx := context.Background()
		s := e.session(t)
		owner := ciOwner(t)
		c := &client{t: t}

		if err := s.Show(ctx, owner, kernel.ShowInput{ID: "build", Placement: "pane.right", Title: "CI", Component: "runs", Data: json.RawMessage(`{"runs": [{"name": "lint"}]}`)}); err != nil {
			t.Fatalf("Show() = %v", err)
		}
		c.follow(s)
		checks := []struct{ pointer, want string }{
			{"/ui/components/ext:ci:runs", compact(t, runsStructure)},
			{"/ui/nodes/placed:ext:ci:build", `{"component":"ext:ci:runs","data":"/data/ext:ci/build","owner":"ext:ci","placement":"pane.right","title":"CI"}`},
			// The schema's default (failed: 0) is filled.
			{"/data/ext:ci/build", `{"failed":0,"runs":[{"name":"lint"}]}`},
		}
		for _, ck := range checks {
			if got := c.at(ck.pointer); got != ck.want {
				t.Errorf("state %s = %s, want %s", ck.pointer, got, ck.want)
			}
		}
		var placed kernel.Placed
		for _, ev := range logged(t, s, 0) {
			if cu, ok := ev.(*protocol.Custom); ok && cu.Name == kernel.PlacedEvent {
				json.Unmarshal(cu.Value, &placed)
			}
		}
		if placed.Component != "ext:ci:runs" || string(placed.Data) != `{"failed":0,"runs":[{"name":"lint"}]}` || placed.Text != "0 failed" || placed.Surface != nil {
			t.Errorf("orrery.placed = %+v, want component ext:ci:runs, the data and the text form", placed)
		}

		// set: the smallest change; patch: in order.
		clock.Advance(time.Second)
		head := durableHead(t, s)
		if err := s.Data(ctx, owner, "build", kernel.DataUpdate{Set: json.RawMessage(`{"failed": 1, "runs": [{"name": "lint"}]}`)}); err != nil {
			t.Fatalf("Data(set) = %v", err)
		}
		waitDurable(t, s)
		evs := logged(t, s, head)
		if len(evs) != 1 {
			t.Fatalf("set logged %d events, want 1", len(evs))
		}
		if d, ok := evs[0].(*protocol.StateDelta); !ok || len(d.Delta) != 1 || d.Delta[0].Op != "replace" || d.Delta[0].Path != "/data/ext:ci/build/failed" {
			t.Errorf("set logged %s, want one replace of /data/ext:ci/build/failed", mustJSON(evs[0]))
		}
		clock.Advance(time.Second)
		if err := s.Data(ctx, owner, "build", kernel.DataUpdate{Patch: json.RawMessage(`[{"op":"add","path":"/runs/-","value":{"name":"test"}},{"op":"replace","path":"/failed","value":2}]`)}); err != nil {
			t.Fatalf("Data(patch) = %v", err)
		}
		c.follow(s)
		if got, want := c.at("/data/ext:ci/build"), `{"failed":2,"runs":[{"name":"lint"},{"name":"test"}]}`; got != want {
			t.Errorf("data after patch = %s, want %s", got, want)
		}

		// A second instance of the same declared component: the structure is
		// not sent again.
		head = durableHead(t, s)
		if err := s.Show(ctx, owner, kernel.ShowInput{ID: "deploy", Placement: "band", Component: "runs", Data: json.RawMessage(`{"runs": []}`)}); err != nil {
			t.Fatal(err)
		}
		c.follow(s)
		for _, ev := range logged(t, s, head) {
			if d, ok := ev.(*protocol.StateDelta); ok {
				for _, op := range d.Delta {
					if strings.HasPrefix(op.Path, "/ui/components") {
						t.Errorf("second show sent %s %s, want the structure sent once", op.Op, op.Path)
					}
				}
			}
		}

		// Hiding one keeps the structure; hiding the last removes /data and
		// the structure.
		if err := s.Hide(ctx, owner, "build"); err != nil {
			t.Fatal(err)
		}
		c.follow(s)
		if c.at("/data/ext:ci/build") != "" || c.at("/data/ext:ci/deploy") == "" || c.at("/ui/components/ext:ci:runs") == "" {
			t.Errorf("after hiding build: data %s, structure %s; want deploy's data and the structure kept", c.at("/data"), c.at("/ui/components"))
		}
		if err := s.Hide(ctx, owner, "deploy"); err != nil {
			t.Fatal(err)
		}
		c.follow(s)
		if got := c.at("/data"); got != "" {
			t.Errorf("/data after hiding the last component = %s, want no /data", got)
		}
		if got := c.at("/ui/components"); got != "{}" {
			t.Errorf("/ui/components after hiding the last component = %s, want {}", got)
		}
		if got, want := compact(t, string(c.doc)), compact(t, string(stateOf(t, s))); got != want {
			t.Errorf("client state = %s, want the kernel's %s", got, want)
		}
		if err := s.Data(ctx, owner, "build", kernel.DataUpdate{Set: json.RawMessage(`{"runs": []}`)}); err == nil || !strings.Contains(err.Error(), "has shown no component") {
			t.Errorf("Data() after hide = %v, want refused: nothing is shown", err)
		}
	})
}

func mustJSON(v any) string {
	out, _ := json.Marshal(v)
	return string(out)
}

func TestComponentReplacesSurfaceAndBack(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, "offline")
		ctx := context.Background()
		s := e.session(t)
		c := &client{t: t}
		show := func(in kernel.ShowInput) {
			t.Helper()
			in.ID, in.Placement = "todo", "pane.left"
			if err := s.Show(ctx, ui.OwnerAgent, in); err != nil {
				t.Fatalf("Show(%+v) = %v", in, err)
			}
			c.follow(s)
		}
		show(kernel.ShowInput{Surface: json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)})
		show(kernel.ShowInput{Structure: json.RawMessage(`{"type":"text","value":"${/left} left"}`), Data: json.RawMessage(`{"left":3}`)})
		if c.at("/ui/nodes/placed:agent:todo/surface") != "" || c.at("/ui/components/agent#todo") == "" || c.at("/data/agent/todo") != `{"left":3}` {
			t.Fatalf("after a structure replaced a surface: %s", c.doc)
		}
		// The person moves it: the node moves, and orrery.placed carries the
		// component, its data and its text form again.
		head := durableHead(t, s)
		if err := s.Move(ctx, ui.OwnerConfig, "placed:agent:todo", "band"); err != nil {
			t.Fatalf("Move() = %v", err)
		}
		c.follow(s)
		if got := c.at("/ui/nodes/placed:agent:todo/placement"); got != `"band"` {
			t.Errorf("placement after Move = %s, want band", got)
		}
		moved := logged(t, s, head)
		if len(moved) != 2 || !strings.Contains(mustJSON(moved[1]), `"component":"agent#todo","data":{"left":3},"text":"3 left"`) {
			t.Errorf("Move logged %s, want a delta and orrery.placed with component, data and text", mustJSON(moved))
		}
		// The agent's way to update: show again with the whole data.
		show(kernel.ShowInput{Structure: json.RawMessage(`{"type":"text","value":"${/left} left"}`), Data: json.RawMessage(`{"left":2}`)})
		if got := c.at("/data/agent/todo"); got != `{"left":2}` {
			t.Errorf("data after a second show = %s, want {\"left\":2}", got)
		}
		show(kernel.ShowInput{Surface: json.RawMessage(`{"kind":{"t":"text","value":"done"}}`)})
		if c.at("/data") != "" || c.at("/ui/components") != "{}" || c.at("/ui/nodes/placed:agent:todo/surface") == "" {
			t.Errorf("after a surface replaced the structure: %s, want no data and no structure", c.doc)
		}
		if got, want := compact(t, string(c.doc)), compact(t, string(stateOf(t, s))); got != want {
			t.Errorf("client state = %s, want the kernel's %s", got, want)
		}
	})
}

// bigString returns a JSON string literal of n bytes of x.
func bigString(n int) string { return `"` + strings.Repeat("x", n) + `"` }

func TestComponentRefusals(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		clock := newFakeClock()
		e := mode.newEnv(t, "offline", withClock(clock))
		registerCI(t, e.k, "")
		if err := e.k.RegisterComponents(mustOwner(t, "bad"), kernel.ExtensionUI{Components: []kernel.DeclaredComponent{
			{Name: "broken", Structure: json.RawMessage(`{"type":"text","value":"${/a}"}`), Schema: json.RawMessage(`{"type": "objekt"}`)},
		}}); err == nil || !strings.Contains(err.Error(), "not valid JSON Schema") {
			t.Errorf("RegisterComponents(invalid schema) = %v, want the schema's problem named", err)
		}
		ctx := context.Background()
		s := e.session(t)
		ci := ciOwner(t)
		other := mustOwner(t, "other")
		if err := s.Show(ctx, ci, kernel.ShowInput{ID: "build", Placement: "pane.right", Component: "runs", Data: json.RawMessage(`{"runs": [{"name": "lint"}]}`)}); err != nil {
			t.Fatal(err)
		}
		good := `{"failed":0,"runs":[{"name":"lint"}]}`
		inline := func(structure, data string) kernel.ShowInput {
			return kernel.ShowInput{ID: "x", Placement: "band", Structure: json.RawMessage(structure), Data: json.RawMessage(data)}
		}
		bigStructure := `{"type":"text","value":` + bigString(component.DefaultComponentBytes) + `}`
		bigData := `{"runs":[],"pad":` + bigString(component.DefaultDataBytes) + `}`
		tests := []struct {
			name string
			do   func() error
			want string
		}{
			{"unknown type", func() error {
				return s.Show(ctx, ui.OwnerAgent, inline(`{"type":"stack","children":[{"type":"text","value":"a"},{"type":"link","label":"x"}]}`, `{}`))
			}, `structure /children/1/type: unknown type "link"`},
			{"over-size structure", func() error { return s.Show(ctx, ui.OwnerAgent, inline(bigStructure, `{}`)) }, "over limits.componentBytes"},
			{"over-size data on show", func() error {
				return s.Show(ctx, ci, kernel.ShowInput{ID: "big", Placement: "band", Component: "runs", Data: json.RawMessage(bigData)})
			}, "over limits.dataBytes"},
			{"over-size data on set", func() error {
				return s.Data(ctx, ci, "build", kernel.DataUpdate{Set: json.RawMessage(bigData)})
			}, "over limits.dataBytes"},
			{"array as data", func() error { return s.Show(ctx, ui.OwnerAgent, inline(`{"type":"text","value":"${/0}"}`, `[1,2]`)) }, "the data is an array, not an object"},
			{"array as set", func() error { return s.Data(ctx, ci, "build", kernel.DataUpdate{Set: json.RawMessage(`[]`)}) }, "the data is an array, not an object"},
			{"data with a surface", func() error {
				return s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "x", Placement: "band", Surface: json.RawMessage(`{"kind":{"t":"text","value":"a"}}`), Data: json.RawMessage(`{}`)})
			}, "data goes with a component or a structure, not with a surface"},
			{"two forms", func() error {
				return s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "x", Placement: "band", Surface: json.RawMessage(`{"kind":{"t":"text","value":"a"}}`), Structure: json.RawMessage(`{"type":"text","value":"a"}`)})
			}, "exactly one of surface"},
			{"schema-invalid data", func() error {
				return s.Data(ctx, ci, "build", kernel.DataUpdate{Set: json.RawMessage(`{"runs": [{"name": 7}]}`)})
			}, "the data at /runs/0/name does not match the schema"},
			{"invalid schema", func() error {
				return s.Show(ctx, mustOwner(t, "bad"), kernel.ShowInput{ID: "b", Placement: "band", Component: "broken", Data: json.RawMessage(`{}`)})
			}, "not valid JSON Schema"},
			{"failing patch", func() error {
				return s.Data(ctx, ci, "build", kernel.DataUpdate{Patch: json.RawMessage(`[{"op":"replace","path":"/failed","value":5},{"op":"remove","path":"/runs/9"}]`)})
			}, "the patch at /1 (remove /runs/9) does not apply"},
			{"a patch the JSON Patch library panics on", func() error {
				return s.Data(ctx, ci, "build", kernel.DataUpdate{Patch: json.RawMessage(`[{"op":"add","path":"/extra","value":[null,{"b":null}]},{"op":"test","path":"/extra","value":[null,{"b":null}]}]`)})
			}, "its test operation compares a value holding null"},
			{"set and patch", func() error {
				return s.Data(ctx, ci, "build", kernel.DataUpdate{Set: json.RawMessage(`{}`), Patch: json.RawMessage(`[]`)})
			}, "exactly one of set"},
			{"foreign id", func() error {
				return s.Data(ctx, other, "build", kernel.DataUpdate{Set: json.RawMessage(`{"runs": []}`)})
			}, `ext:other has shown no component under "build"`},
			{"undeclared component", func() error {
				return s.Show(ctx, ci, kernel.ShowInput{ID: "y", Placement: "band", Component: "nope"})
			}, `extension ci declares no component "nope" (it declares runs)`},
			{"agent names a declared component", func() error {
				return s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "y", Placement: "band", Component: "runs", Data: json.RawMessage(`{"runs": []}`)})
			}, `component "runs" belongs to ext:ci: agent cannot show an extension's declared component; compose your own structure`},
			{"undeclared action", func() error {
				return s.Intent(ctx, "placed:ext:ci:build", "delete", nil)
			}, `the component declares no action "delete"; send one it declares: "open" or "retry"`},
			{"intent on nothing", func() error { return s.Intent(ctx, "placed:ext:ci:none", "retry", nil) }, "nothing is placed as placed:ext:ci:none"},
			{"intent on a bad node", func() error { return s.Intent(ctx, "build", "retry", nil) }, "is not a placed node"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				clock.Advance(time.Second)
				head := durableHead(t, s)
				err := tt.do()
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v, want a refusal containing %q", err, tt.want)
				}
				var re *kernel.RequestError
				if !asRequestError(err, &re) {
					t.Errorf("error %T, want a *kernel.RequestError", err)
				}
				if got := s.Head(); got != head {
					t.Errorf("head moved %d → %d: a refusal must log nothing", head, got)
				}
			})
		}
		// Every refusal kept the last good data.
		if got := valueAt(t, stateOf(t, s), "/data/ext:ci/build"); got != good {
			t.Errorf("data after the refusals = %s, want the last good %s", got, good)
		}
		if err := s.Data(ctx, ci, "build", kernel.DataUpdate{Patch: json.RawMessage(`[{"op":"replace","path":"/failed","value":5}]`)}); err != nil {
			t.Fatalf("Data() after the refusals = %v", err)
		}
	})
}

func mustOwner(t *testing.T, ext string) ui.Owner {
	t.Helper()
	o, err := ui.ExtOwner(ext)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func asRequestError(err error, re **kernel.RequestError) bool {
	r, ok := err.(*kernel.RequestError)
	*re = r
	return ok
}

func TestLinkRefusals(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		ws := t.TempDir()
		outside := t.TempDir()
		os.WriteFile(filepath.Join(ws, "report.md"), []byte("# r"), 0o600)
		os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600)
		if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "escape")); err != nil {
			t.Skip("no symlinks here:", err)
		}
		e := mode.newEnv(t, "offline", func(c *kernel.Config) { c.Workspace.Root = ws })
		ctx := context.Background()
		s := e.session(t)
		const link = `{"type":"button","label":"Open","href":"${/href}"}`
		show := func(href string) error {
			return s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "l", Placement: "band", Structure: json.RawMessage(link), Data: json.RawMessage(`{"href":` + mustJSON(href) + `}`)})
		}
		// Shapes a link may never name are refused when the data is bound,
		// so no client ever draws them.
		shapes := []struct{ href, want string }{
			{"file:///etc/passwd", "file: links can name anything on the machine; link a relative path inside the workspace instead"},
			{"javascript:alert(1)", "a link never runs code"},
			{"/etc/passwd", "absolute paths are refused; write the path relative to the workspace"},
			{"../secret", ".. may lead out of the workspace"},
			{"docs/../../x", ".. may lead out of the workspace"},
		}
		for _, tt := range shapes {
			if err := show(tt.href); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("show link %q = %v, want refused with %q", tt.href, err, tt.want)
			}
		}
		// What exists on the disk is checked when the link is opened.
		opens := []struct{ href, want string }{
			{"missing.md", "missing.md does not exist in the workspace; link a file that exists"},
			{"escape", "not inside the workspace"},
		}
		for _, tt := range opens {
			if err := show(tt.href); err != nil {
				t.Fatalf("show link %q = %v", tt.href, err)
			}
			head := durableHead(t, s)
			err := s.Intent(ctx, "placed:agent:l", "open", json.RawMessage(mustJSON(tt.href)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("open %q = %v, want refused with %q", tt.href, err, tt.want)
			}
			if s.Head() != head {
				t.Errorf("open %q logged something, want nothing", tt.href)
			}
		}
	})
}

// TestComponentResumeMidway: a client that joins from a snapshot halfway,
// then drops and resumes from the last seq it saw, holds the same state as
// one that followed from the start, and as the kernel.
func TestComponentResumeMidway(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		clock := newFakeClock()
		e := mode.newEnv(t, "offline", withClock(clock))
		registerCI(t, e.k, "")
		ctx := context.Background()
		s := e.session(t)
		ci := ciOwner(t)
		from := &client{t: t}
		step := func(do func() error) {
			t.Helper()
			clock.Advance(time.Second)
			if err := do(); err != nil {
				t.Fatal(err)
			}
		}
		set := func(id, data string) func() error {
			return func() error { return s.Data(ctx, ci, id, kernel.DataUpdate{Set: json.RawMessage(data)}) }
		}
		step(func() error {
			return s.Show(ctx, ci, kernel.ShowInput{ID: "a", Placement: "band", Component: "runs", Data: json.RawMessage(`{"runs":[]}`)})
		})
		step(set("a", `{"failed":1,"runs":[{"name":"lint"}]}`))
		from.follow(s)

		// The late client starts from a seq-0 snapshot.
		waitDurable(t, s)
		sub, err := s.Subscribe(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-sub.Ready()
		late := &client{t: t, seen: sub.Head()}
		snap, err := protocol.DecodeEvent(sub.Take(nil)[0].Data)
		if err != nil {
			t.Fatal(err)
		}
		late.apply(snap)
		sub.Close()

		step(func() error {
			return s.Show(ctx, ci, kernel.ShowInput{ID: "b", Placement: "pane.left", Component: "runs", Data: json.RawMessage(`{"runs":[{"name":"x"}]}`)})
		})
		step(set("a", `{"failed":0,"runs":[]}`))
		step(func() error { return s.Hide(ctx, ci, "a") })
		step(func() error {
			return s.Data(ctx, ci, "b", kernel.DataUpdate{Patch: json.RawMessage(`[{"op":"add","path":"/url","value":"https://ci.example.com"}]`)})
		})
		step(func() error {
			return s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "t", Placement: "band", Structure: json.RawMessage(`{"type":"text","value":"${/n}"}`), Data: json.RawMessage(`{"n":"one"}`)})
		})
		// The late client dropped after the snapshot and resumes from its seq.
		late.follow(s)
		from.follow(s)
		want := compact(t, string(stateOf(t, s)))
		if got := compact(t, string(from.doc)); got != want {
			t.Errorf("client from the start = %s, want %s", got, want)
		}
		if got := compact(t, string(late.doc)); got != want {
			t.Errorf("client resumed midway = %s, want %s", got, want)
		}
		if !strings.Contains(want, `"/data/ext:ci/b"`) || !strings.Contains(want, `"https://ci.example.com"`) {
			t.Errorf("final state %s lacks b and its data", want)
		}
	})
}
