package kernel_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// planned is a stand-in for a hosted model: each call answers with the
// next planned tool call (or text), and records the tools it was offered.
type planned struct {
	mu      sync.Mutex
	steps   []agent.Delta // a DeltaToolCall carries its args in Text
	offered [][]string
}

func (p *planned) Name() string  { return "planned" }
func (p *planned) Model() string { return "test" }
func (p *planned) Stream(_ context.Context, req agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	p.mu.Lock()
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	p.offered = append(p.offered, names)
	step := p.steps[0]
	p.steps = p.steps[1:]
	p.mu.Unlock()
	if step.Kind != agent.DeltaToolCall {
		return agent.Usage{}, emit(step)
	}
	if err := emit(agent.Delta{Kind: agent.DeltaToolCall, ToolName: step.ToolName}); err != nil {
		return agent.Usage{}, err
	}
	return agent.Usage{}, emit(agent.Delta{Kind: agent.DeltaToolArgs, Text: step.Text})
}

func TestAgentFindsAndUsesUITools(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		p := &planned{steps: []agent.Delta{
			{Kind: agent.DeltaToolCall, ToolName: "tools.search", Text: `{"query":"screen surface"}`},
			{Kind: agent.DeltaToolCall, ToolName: "ui.show", Text: `{"id":"todo","placement":"pane.right","title":"Todo","surface":{"kind":{"t":"table","columns":["task"],"rows":[["write tests"]]}}}`},
			{Kind: agent.DeltaToolCall, ToolName: "ui.show", Text: `{"id":"bad","placement":"pane.right","surface":{"kind":{"t":"table","columns":["a"],"rows":[[1]]}}}`},
			{Kind: agent.DeltaText, Text: "placed"},
		}}
		e := mode.newEnv(t, "planned", func(c *kernel.Config) {
			c.Models = func(string) (agent.Provider, error) { return p, nil }
			c.Tools = tool.Builtins()
		})
		s := e.session(t)
		evs, _ := send(t, s, kernel.SendInput{Text: "show my todo list"})
		if len(p.offered) != 4 {
			t.Fatalf("%d model calls, want 4", len(p.offered))
		}
		if !slices.Contains(p.offered[0], "tools.search") || slices.Contains(p.offered[0], "ui.show") {
			t.Errorf("first call offered %v, want tools.search and not ui.show", p.offered[0])
		}
		// "screen surface" finds ui.show only (ui.hide's description does not
		// mention the screen): only what the search found becomes callable.
		if !slices.Contains(p.offered[1], "ui.show") || slices.Contains(p.offered[1], "ui.hide") {
			t.Errorf("second call offered %v, want ui.show, which the search found, and not ui.hide", p.offered[1])
		}
		var results []string
		var placed []string
		for _, ev := range evs {
			switch e := ev.(type) {
			case *protocol.ToolCallResult:
				results = append(results, e.Content.String())
			case *protocol.Custom:
				if e.Name == kernel.PlacedEvent {
					var v kernel.Placed
					json.Unmarshal(e.Value, &v)
					placed = append(placed, v.ID+"@"+v.Placement+":"+v.Text)
				}
			}
		}
		if len(results) != 3 {
			t.Fatalf("tool results = %q, want 3", results)
		}
		if !strings.Contains(results[0], `"name":"ui.show"`) || !strings.Contains(results[0], "table:") {
			t.Errorf("search result = %s, want ui.show with the kinds and their fields", results[0])
		}
		if results[1] != "placed todo in pane.right" {
			t.Errorf("ui.show result = %q", results[1])
		}
		if !strings.Contains(results[2], "surface /kind/rows/0/0") {
			t.Errorf("refused ui.show result = %q, want the path that failed, so the model can fix it", results[2])
		}
		if len(placed) != 1 || !strings.HasPrefix(placed[0], "todo@pane.right:") || !strings.Contains(placed[0], "write tests") {
			t.Errorf("orrery.placed = %q, want todo in pane.right with its text form", placed)
		}
		if !strings.Contains(string(stateOf(t, s)), `"placed:agent:todo"`) {
			t.Errorf("state lacks placed:agent:todo: %s", stateOf(t, s))
		}
	})
}

func TestAgentShowsComponents(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		p := &planned{steps: []agent.Delta{
			{Kind: agent.DeltaToolCall, ToolName: "tools.search", Text: `{"query":"show a button on the screen"}`},
			{Kind: agent.DeltaToolCall, ToolName: "ui.show", Text: `{"id":"todo","placement":"pane.right","title":"Todo","structure":{"type":"stack","children":[{"type":"text","value":"${/left} left"},{"type":"button","label":"Done","on":{"press":"done"}}]},"data":{"left":3}}`},
			{Kind: agent.DeltaToolCall, ToolName: "ui.show", Text: `{"id":"todo","placement":"pane.right","title":"Todo","structure":{"type":"stack","children":[{"type":"text","value":"${/left} left"},{"type":"button","label":"Done","on":{"press":"done"}}]},"data":{"left":2}}`},
			{Kind: agent.DeltaToolCall, ToolName: "ui.show", Text: `{"id":"ci","placement":"band","component":"runs","data":{"runs":[]}}`},
			{Kind: agent.DeltaToolCall, ToolName: "ui.show", Text: `{"id":"bad","placement":"band","structure":{"type":"stack","children":[{"type":"marquee"}]},"data":{}}`},
			{Kind: agent.DeltaText, Text: "shown"},
		}}
		e := mode.newEnv(t, "planned", func(c *kernel.Config) {
			c.Models = func(string) (agent.Provider, error) { return p, nil }
		})
		registerCI(t, e.k, "")
		s := e.session(t)
		evs, _ := send(t, s, kernel.SendInput{Text: "show my todo list"})
		var results []string
		var deltas []string
		for _, ev := range evs {
			switch e := ev.(type) {
			case *protocol.ToolCallResult:
				results = append(results, e.Content.String())
			case *protocol.StateDelta:
				for _, op := range e.Delta {
					if strings.HasPrefix(op.Path, "/data") || strings.HasPrefix(op.Path, "/ui/components") {
						deltas = append(deltas, op.Op+" "+op.Path+" "+string(op.Value))
					}
				}
			}
		}
		if len(results) != 5 {
			t.Fatalf("tool results = %q, want 5", results)
		}
		// The search answer lists the catalog: node types, their fields and
		// events, and button.
		for _, want := range []string{`"name":"ui.show"`, "- button:", "Events: press", "structure with data"} {
			if !strings.Contains(results[0], want) {
				t.Errorf("search result lacks %q: %s", want, results[0])
			}
		}
		if results[1] != "placed todo in pane.right" || results[2] != "placed todo in pane.right" {
			t.Errorf("ui.show results = %q, %q, want both placed", results[1], results[2])
		}
		if !strings.Contains(results[3], `component "runs" belongs to ext:ci`) || !strings.Contains(results[3], "compose your own structure") {
			t.Errorf("ui.show of a declared component = %q, want refused with the fix", results[3])
		}
		if !strings.Contains(results[4], `structure /children/0/type: unknown type "marquee"`) {
			t.Errorf("ui.show of an unknown type = %q, want the path and the type", results[4])
		}
		// The structure went once; the second show sent only the change.
		want := []string{
			`add /ui/components/agent#todo {"type":"stack","children":[{"type":"text","value":"${/left} left"},{"type":"button","label":"Done","on":{"press":"done"}}]}`,
			`add /data {"agent":{"todo":{"left":3}}}`,
			`replace /data/agent/todo/left 2`,
		}
		if strings.Join(deltas, "\n") != strings.Join(want, "\n") {
			t.Errorf("component deltas:\n%s\nwant:\n%s", strings.Join(deltas, "\n"), strings.Join(want, "\n"))
		}
	})
}
