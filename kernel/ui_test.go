package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui"
)

// frames returns the session's logged events after since.
func logged(t *testing.T, s *kernel.Session, since uint64) []protocol.Event {
	t.Helper()
	frames, _, err := s.Read(context.Background(), since, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []protocol.Event
	for _, f := range frames {
		ev, err := protocol.DecodeEvent(f.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// waitHead waits until the session's published head reaches seq.
func waitHead(t *testing.T, s *kernel.Session, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Head() < seq {
		if time.Now().After(deadline) {
			t.Fatalf("head = %d, want it to reach %d", s.Head(), seq)
		}
		time.Sleep(time.Millisecond)
	}
}

func stateOf(t *testing.T, s *kernel.Session) json.RawMessage {
	t.Helper()
	sub, err := s.Subscribe(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	<-sub.Ready()
	ev, err := protocol.DecodeEvent(sub.Take(nil)[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	return ev.(*protocol.StateSnapshot).Snapshot
}

func TestShowReplaceMoveHide(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		dir := t.TempDir()
		e := mode.openEnv(t, dir, "offline")
		ctx := context.Background()
		s, err := e.k.CreateSession(ctx, kernel.SessionOptions{ID: "ui"})
		if err != nil {
			t.Fatal(err)
		}
		doc := json.RawMessage(stateOf(t, s))
		apply := func(evs []protocol.Event) {
			for _, ev := range evs {
				if snap, ok := ev.(*protocol.StateSnapshot); ok {
					doc = snap.Snapshot
				}
				if d, ok := ev.(*protocol.StateDelta); ok {
					ops, _ := json.Marshal(d.Delta)
					patch, err := jsonpatch.DecodePatch(ops)
					if err != nil {
						t.Fatal(err)
					}
					if doc, err = patch.Apply(doc); err != nil {
						t.Fatalf("apply %s: %v", ops, err)
					}
				}
			}
		}
		owner, _ := ui.ExtOwner("ci")
		surface := func(v string) json.RawMessage { return json.RawMessage(`{"kind":{"t":"text","value":"` + v + `"}}`) }
		steps := []struct {
			name    string
			do      func() error
			wantOps string // the STATE_DELTA ops, as "op path" lines
			wantEv  string // the CUSTOM event name
		}{
			{"show", func() error {
				return s.Show(ctx, owner, kernel.ShowInput{ID: "build", Placement: "pane.right", Title: "CI", Surface: surface("running")})
			}, "add /ui/nodes/placed:ext:ci:build", kernel.PlacedEvent},
			{"replace in place", func() error {
				return s.Show(ctx, owner, kernel.ShowInput{ID: "build", Placement: "pane.right", Title: "CI", Surface: surface("passed")})
			}, "replace /ui/nodes/placed:ext:ci:build/surface/kind/value", kernel.PlacedEvent},
			{"move", func() error {
				return s.Show(ctx, owner, kernel.ShowInput{ID: "build", Placement: "band", Title: "CI", Surface: surface("passed")})
			}, "replace /ui/nodes/placed:ext:ci:build/placement", kernel.PlacedEvent},
			{"hide", func() error { return s.Hide(ctx, owner, "build") }, "remove /ui/nodes/placed:ext:ci:build", kernel.UnplacedEvent},
		}
		for _, st := range steps {
			head := s.Head()
			if err := st.do(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			want := uint64(2)
			if st.name == "show" {
				want = 3 // the session's first state change brings its baseline
			}
			waitHead(t, s, head+want)
			evs := logged(t, s, head)
			if uint64(len(evs)) != want {
				t.Fatalf("%s: %d events, want %d", st.name, len(evs), want)
			}
			if want == 3 {
				if _, ok := evs[0].(*protocol.StateSnapshot); !ok {
					t.Fatalf("%s: first event %s, want a STATE_SNAPSHOT baseline", st.name, evs[0].EventType())
				}
				apply(evs[:1])
				evs = evs[1:]
			}
			var lines []string
			for _, op := range evs[0].(*protocol.StateDelta).Delta {
				lines = append(lines, op.Op+" "+op.Path)
			}
			if got := strings.Join(lines, "\n"); got != st.wantOps {
				t.Errorf("%s: ops =\n%s\nwant\n%s", st.name, got, st.wantOps)
			}
			if c := evs[1].(*protocol.Custom); c.Name != st.wantEv {
				t.Errorf("%s: event %s, want %s", st.name, c.Name, st.wantEv)
			}
			apply(evs)
			if want := stateOf(t, s); !jsonEq(doc, want) {
				t.Errorf("%s: applying the deltas gives %s, want the kernel's %s", st.name, doc, want)
			}
		}
		// Placements are session content: a restart keeps them.
		if err := s.Show(ctx, owner, kernel.ShowInput{ID: "kept", Placement: "footer", Surface: surface("x")}); err != nil {
			t.Fatal(err)
		}
		before := stateOf(t, s)
		e.close()
		e2 := mode.openEnv(t, dir, "offline")
		s2, err := e2.k.Session(ctx, "ui")
		if err != nil {
			t.Fatal(err)
		}
		if after := stateOf(t, s2); !jsonEq(after, before) || !strings.Contains(string(after), "placed:ext:ci:kept") {
			t.Errorf("state after restart = %s, want %s", after, before)
		}
	})
}

// nodesOf returns the placed nodes of the session's state.
func nodesOf(t *testing.T, s *kernel.Session) map[string]json.RawMessage {
	t.Helper()
	var doc struct {
		UI struct {
			Nodes map[string]json.RawMessage `json:"nodes"`
		} `json:"ui"`
	}
	if err := json.Unmarshal(stateOf(t, s), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.UI.Nodes
}

// placementOf returns where node is placed, or "" when it is not.
func placementOf(t *testing.T, s *kernel.Session, node string) string {
	t.Helper()
	var n struct {
		Placement string `json:"placement"`
	}
	if raw, ok := nodesOf(t, s)[node]; ok {
		if err := json.Unmarshal(raw, &n); err != nil {
			t.Fatal(err)
		}
	}
	return n.Placement
}

func jsonEq(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func TestShowRefusals(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, "offline")
		ctx := context.Background()
		s := e.session(t)
		text := json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)
		tests := []struct {
			name string
			in   kernel.ShowInput
			want string
		}{
			{"schema failure", kernel.ShowInput{ID: "t", Placement: "band", Surface: json.RawMessage(`{"kind":{"t":"table","columns":["a"],"rows":[[1]]}}`)}, "surface /kind/rows/0/0"},
			{"host-only id", kernel.ShowInput{ID: "consent", Placement: "band", Surface: text}, "the host's own ids"},
			{"non-core fallback", kernel.ShowInput{ID: "c", Placement: "band", Surface: text, Fallback: json.RawMessage(`{"kind":{"t":"image","mime":"image/png","data":"","alt":"x"}}`)}, "fallback"},
			{"unknown placement", kernel.ShowInput{ID: "p", Placement: "sidebar", Surface: text}, "sidebar"},
			{"unknown kind", kernel.ShowInput{ID: "k", Placement: "band", Surface: json.RawMessage(`{"kind":{"t":"hologram"}}`)}, "hologram"},
		}
		head := s.Head()
		before := stateOf(t, s)
		for _, tt := range tests {
			err := s.Show(ctx, ui.OwnerAgent, tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: Show() = %v, want a refusal containing %q", tt.name, err, tt.want)
			}
		}
		if err := s.Hide(ctx, ui.OwnerAgent, "nothing"); err == nil || !strings.Contains(err.Error(), "nothing to hide") {
			t.Errorf("Hide(unknown) = %v, want a refusal", err)
		}
		// Another owner's id is another node: hiding it as agent finds nothing.
		owner, _ := ui.ExtOwner("x")
		if err := s.Show(ctx, owner, kernel.ShowInput{ID: "mine", Placement: "band", Surface: text}); err != nil {
			t.Fatal(err)
		}
		if err := s.Hide(ctx, ui.OwnerAgent, "mine"); err == nil {
			t.Errorf("Hide(another owner's id) = nil, want a refusal")
		}
		// The one accepted show logs the baseline snapshot, its delta and its event.
		waitHead(t, s, head+3)
		time.Sleep(50 * time.Millisecond)
		if s.Head() != head+3 {
			t.Errorf("head = %d, want %d: only the one accepted show may log frames", s.Head(), head+3)
		}
		// The refusals left the state as it was: removing the one accepted
		// node gives it back.
		var after map[string]map[string]map[string]json.RawMessage
		if err := json.Unmarshal(stateOf(t, s), &after); err != nil {
			t.Fatal(err)
		}
		if _, ok := after["ui"]["nodes"]["placed:ext:x:mine"]; !ok || len(after["ui"]["nodes"]) != 1 {
			t.Fatalf("nodes = %v, want only placed:ext:x:mine", after["ui"]["nodes"])
		}
		delete(after["ui"]["nodes"], "placed:ext:x:mine")
		rest, _ := json.Marshal(after)
		if !jsonEq(rest, before) {
			t.Errorf("state without the accepted node = %s, want %s", rest, before)
		}
	})
}

func TestMoveAndHideForThePerson(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, "offline")
		ctx := context.Background()
		s := e.session(t)
		text := json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)
		if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "todo", Placement: "pane.left", Surface: text}); err != nil {
			t.Fatal(err)
		}
		other, _ := ui.ExtOwner("other")
		tests := []struct {
			name  string
			do    func() error
			want  string // "" means accepted
			place string // the node's placement after, "" means gone
		}{
			{"a foreign owner may not move it", func() error { return s.Move(ctx, other, "placed:agent:todo", "band") }, "agent placed it", "pane.left"},
			{"a bad node id", func() error { return s.Move(ctx, ui.OwnerConfig, "agent:todo", "band") }, "not a placed node", "pane.left"},
			{"an unknown placement", func() error { return s.Move(ctx, ui.OwnerConfig, "placed:agent:todo", "sidebar") }, "sidebar", "pane.left"},
			{"nothing placed there", func() error { return s.Move(ctx, ui.OwnerConfig, "placed:agent:nope", "band") }, "nothing is placed", "pane.left"},
			{"the person moves it", func() error { return s.Move(ctx, ui.OwnerConfig, "placed:agent:todo", "band") }, "", "band"},
			{"the owner moves it back", func() error { return s.Move(ctx, ui.OwnerAgent, "placed:agent:todo", "footer") }, "", "footer"},
			{"a foreign owner may not hide it", func() error { return s.HideNode(ctx, other, "placed:agent:todo") }, "agent placed it", "footer"},
			{"the person hides it", func() error { return s.HideNode(ctx, ui.OwnerConfig, "placed:agent:todo") }, "", ""},
		}
		for _, tt := range tests {
			err := tt.do()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("%s: %v", tt.name, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("%s: err = %v, want one containing %q", tt.name, err, tt.want)
			}
			if got := placementOf(t, s, "placed:agent:todo"); got != tt.place {
				t.Errorf("%s: placement = %q, want %q", tt.name, got, tt.place)
			}
		}
	})
}

func TestAppendChunk(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, "offline")
		ctx := context.Background()
		s := e.session(t)
		if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "log", Placement: "footer", Surface: json.RawMessage(`{"kind":{"t":"stream","value":"$ make\n"}}`)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "note", Placement: "band", Surface: json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)}); err != nil {
			t.Fatal(err)
		}
		// The shows logged a baseline snapshot, then a delta and an event each.
		waitHead(t, s, 5)
		head := s.Head()
		for _, c := range []string{"ok 1\n", "ok 2\n", "done\n"} {
			if err := s.AppendChunk(ctx, ui.OwnerAgent, "log", c); err != nil {
				t.Fatal(err)
			}
		}
		waitHead(t, s, head+3)
		var paths []string
		for _, ev := range logged(t, s, head) {
			for _, op := range ev.(*protocol.StateDelta).Delta {
				paths = append(paths, op.Op+" "+op.Path+" "+string(op.Value))
			}
		}
		want := []string{
			`add /ui/nodes/placed:agent:log/surface/kind/chunks ["ok 1\n"]`,
			`add /ui/nodes/placed:agent:log/surface/kind/chunks/- "ok 2\n"`,
			`add /ui/nodes/placed:agent:log/surface/kind/chunks/- "done\n"`,
		}
		if strings.Join(paths, "|") != strings.Join(want, "|") {
			t.Errorf("ops =\n%s\nwant\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
		}
		var n struct{ Surface json.RawMessage }
		if err := json.Unmarshal(nodesOf(t, s)["placed:agent:log"], &n); err != nil {
			t.Fatal(err)
		}
		if text, err := ui.Text(n.Surface); err != nil || !strings.Contains(text, "$ make\nok 1\nok 2\ndone") {
			t.Errorf("text of the stream = %q, %v, want its value and chunks joined", text, err)
		}
		for _, tt := range []struct{ id, want string }{{"note", "only a stream surface"}, {"nope", "placed nothing"}} {
			if err := s.AppendChunk(ctx, ui.OwnerAgent, tt.id, "x"); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("AppendChunk(%s) = %v, want a refusal containing %q", tt.id, err, tt.want)
			}
		}
	})
}

func TestShowPermissions(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, "offline", func(c *kernel.Config) {
			c.Permissions = ui.Permissions{"ext:ci": {Deny: []string{"ui(pane.right)"}, Ask: []string{"ui(band)"}}}
		})
		ctx := context.Background()
		s := e.session(t)
		ci, _ := ui.ExtOwner("ci")
		text := json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)
		tests := []struct {
			placement, want string
		}{
			{"pane.right", `deny = ["ui(pane.right)"] in [permissions."ext:ci"]`},
			{"band", "change it to allow or deny"},
			{"footer", ""},
		}
		for _, tt := range tests {
			err := s.Show(ctx, ci, kernel.ShowInput{ID: "build", Placement: tt.placement, Surface: text})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Show(%s) = %v, want it allowed", tt.placement, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Show(%s) = %v, want a refusal naming %s", tt.placement, err, tt.want)
			}
		}
	})
}

func TestConfiguredPlacementMovesWhatExists(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, "offline", func(c *kernel.Config) {
			c.Placements = map[string]string{"build-times": "pane.left", "never-shown": "band"}
		})
		ctx := context.Background()
		s := e.session(t)
		ci, _ := ui.ExtOwner("ci")
		text := json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)
		if err := s.Show(ctx, ci, kernel.ShowInput{ID: "build-times", Placement: "footer", Surface: text}); err != nil {
			t.Fatal(err)
		}
		if got := placementOf(t, s, "placed:ext:ci:build-times"); got != "pane.left" {
			t.Errorf("placement = %q, want the configured pane.left", got)
		}
		if nodes := nodesOf(t, s); len(nodes) != 1 {
			t.Errorf("nodes = %v, want only the one shown: a configured id creates nothing", nodes)
		}
	})
}

func TestRemoveOwner(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, "offline")
		ctx := context.Background()
		s := e.session(t)
		text := json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)
		ci, _ := ui.ExtOwner("ci")
		for _, sh := range []struct {
			owner ui.Owner
			id    string
		}{{ci, "a"}, {ci, "b"}, {ui.OwnerAgent, "a"}} {
			if err := s.Show(ctx, sh.owner, kernel.ShowInput{ID: sh.id, Placement: "band", Surface: text}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RemoveOwner(ctx, ci); err != nil {
			t.Fatal(err)
		}
		if nodes := nodesOf(t, s); len(nodes) != 1 || nodes["placed:agent:a"] == nil {
			t.Errorf("nodes after the owner unloads = %v, want only placed:agent:a", nodes)
		}
		if err := s.RemoveOwner(ctx, ci); err != nil {
			t.Errorf("RemoveOwner() again = %v, want nil (nothing left to remove)", err)
		}
	})
}

// TestRefusalMessages holds the exact sentence of every refusal a show, a
// move or a hide can meet, and checks that none of them changes the state.
func TestRefusalMessages(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, "offline", func(c *kernel.Config) {
			c.Permissions = ui.Permissions{"ext:ci": {Deny: []string{"ui(pane.right)"}, Ask: []string{"ui(band)"}}}
		})
		ctx := context.Background()
		s := e.session(t)
		text := json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)
		ci, _ := ui.ExtOwner("ci")
		if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "x", Placement: "footer", Surface: text}); err != nil {
			t.Fatal(err)
		}
		wide := `{"kind":{"t":"raster","rows":["` + strings.Repeat("#", 65) + `"]}}`
		tests := []struct {
			name string
			do   func() error
			want string
		}{
			{"schema failure", func() error {
				return s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "t", Placement: "band", Surface: json.RawMessage(`{"kind":{"t":"table","columns":["a"],"rows":[[1]]}}`)})
			}, "surface /kind/rows/0/0: expected string, got number; each cell is a string: format numbers and dates before sending them"},
			{"host-only id", func() error {
				return s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "consent", Placement: "band", Surface: text})
			}, `agent cannot place under "consent": input, consent and trust are the host's own ids, and nobody else may place under them; choose another id`},
			{"non-core fallback", func() error {
				return s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "c", Placement: "band", Surface: text, Fallback: json.RawMessage(`{"kind":{"t":"chart","kind":"bars","labels":["a"],"series":[{"values":[1]}]}}`)})
			}, "fallback /kind/t: chart is not a core kind, and a fallback may use core kinds only: text, markdown, table, tree, diff, progress, stream, task, question, form or stack"},
			{"unknown placement", func() error {
				return s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "p", Placement: "sidebar", Surface: text})
			}, `placement "sidebar" is unknown; use band, pane.left, pane.right, footer, inline or hidden`},
			{"denied rule", func() error {
				return s.Show(ctx, ci, kernel.ShowInput{ID: "b", Placement: "pane.right", Surface: text})
			}, `ext:ci may not place in pane.right: the rule deny = ["ui(pane.right)"] in [permissions."ext:ci"] forbids it; place it elsewhere, or remove the rule`},
			{"ask rule", func() error {
				return s.Show(ctx, ci, kernel.ShowInput{ID: "b", Placement: "band", Surface: text})
			}, `ext:ci may not place in band: the rule ask = ["ui(band)"] in [permissions."ext:ci"] cannot be asked about a placement; change it to allow or deny`},
			{"foreign owner", func() error { return s.Move(ctx, ci, "placed:agent:x", "band") },
				`ext:ci cannot move or hide "x": agent placed it; only its owner or the person (with /ui or config) changes where it goes`},
			{"nothing to hide", func() error { return s.Hide(ctx, ci, "x") },
				`ext:ci has placed nothing under "x": there is nothing to hide`},
		}
		before := stateOf(t, s)
		for _, tt := range tests {
			err := tt.do()
			if err == nil || err.Error() != tt.want {
				t.Errorf("%s: err = %v\nwant %s", tt.name, err, tt.want)
			}
		}
		// An oversized raster: the exact limit sentence comes from ui/, whose
		// own tests hold it; here, that it is refused and names the path.
		if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "r", Placement: "band", Surface: json.RawMessage(wide)}); err == nil || !strings.HasPrefix(err.Error(), "surface /kind/rows/0") {
			t.Errorf("oversized raster: err = %v, want a refusal naming /kind/rows/0", err)
		}
		if after := stateOf(t, s); !jsonEq(after, before) {
			t.Errorf("state after the refusals = %s, want it unchanged: %s", after, before)
		}
	})
}
