package openai_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/provider/openai"
	"github.com/getorrery/orrery/protocol"
)

// recordTurn is a Turn that holds a fixed conversation and records what
// the loop emits.
type recordTurn struct {
	msgs   []protocol.Message
	events []protocol.Event
	usage  agent.Usage
	ids    int
}

func (r *recordTurn) Messages(context.Context) ([]protocol.Message, error) { return r.msgs, nil }
func (r *recordTurn) Emit(_ context.Context, evs ...protocol.Event) error {
	r.events = append(r.events, evs...)
	return nil
}
func (r *recordTurn) Usage(_ context.Context, u agent.Usage) error {
	r.usage = r.usage.Add(u)
	return nil
}
func (r *recordTurn) NewID(prefix string) string {
	r.ids++
	return fmt.Sprintf("%s%d", prefix, r.ids)
}

// TestLoop runs the real agent loop on the provider: the calls of a
// streamed answer become TOOL_CALL events with Orrery's names and the
// arguments byte for byte, and the loop accepts their order.
func TestLoop(t *testing.T) {
	tests := []struct {
		fixture string
		names   map[string]string // call id → tool name
		args    map[string]string // call id → arguments
	}{
		{
			fixture: "tools_parallel.sse",
			names:   map[string]string{"call_Ab12": "tools.search", "call_Cd34": "mcp.github.create_issue"},
			args:    map[string]string{"call_Ab12": `{"query":"show surface"}`, "call_Cd34": `{"title": "Fix \u00e9 \"quotes\"", "labels": [ ]}`},
		},
		{
			fixture: "tools_ollama.sse",
			names:   map[string]string{"call_k1": "tools.search", "call_k2": "ui.show"},
			args:    map[string]string{"call_k1": `{"query":"clock"}`, "call_k2": `{"placement":"band"}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			f := newFake(t, testKey, testModel, reply{fixture: tt.fixture})
			p := newProvider(t, openai.Config{BaseURL: f.url(), APIKey: testKey})
			// Client tools: the loop leaves their calls pending instead of
			// running them, so one model step is the whole run.
			l := &agent.Loop{Provider: p, ClientTools: []protocol.Tool{
				{Name: "tools.search"}, {Name: "mcp.github.create_issue"}, {Name: "ui.show"},
			}}
			turn := &recordTurn{msgs: simple().Messages}
			res := l.Run(context.Background(), turn)
			if res.Err != nil {
				t.Fatalf("Loop.Run() error = %v", res.Err)
			}
			if len(res.Pending) != len(tt.names) {
				t.Errorf("Loop.Run() pending = %v, want %d calls", res.Pending, len(tt.names))
			}
			names := map[string]string{}
			gotArgs := map[string]string{}
			for _, ev := range turn.events {
				switch e := ev.(type) {
				case *protocol.ToolCallStart:
					names[e.ToolCallID] = e.ToolCallName
				case *protocol.ToolCallArgs:
					gotArgs[e.ToolCallID] += e.Delta
				}
			}
			if !reflect.DeepEqual(names, tt.names) {
				t.Errorf("TOOL_CALL_START names = %v, want %v", names, tt.names)
			}
			if !reflect.DeepEqual(gotArgs, tt.args) {
				t.Errorf("TOOL_CALL_ARGS joined = %q, want %q", gotArgs, tt.args)
			}
		})
	}
}
