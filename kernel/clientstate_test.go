package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// TestClientStateAndContext: a run's client state (RunAgentInput.state)
// sets the application keys of the shared state its STATE_SNAPSHOT holds,
// leaving Orrery's own keys alone, and the model reads those keys and the
// client's context entries in a system message first; the next run's
// state replaces the keys.
func TestClientStateAndContext(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		rec := &recorder{}
		e := mode.newEnv(t, "rec", func(c *kernel.Config) {
			c.Models = func(string) (agent.Provider, error) { return rec, nil }
		})
		s := e.session(t)
		send := func(state string) map[string]json.RawMessage {
			res, err := s.Send(context.Background(), kernel.SendInput{Text: "go", Subscribe: true,
				State:   json.RawMessage(state),
				Context: []protocol.Context{{Description: "the open document", Value: "notes.md"}}})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Sub.Close()
			var snap map[string]json.RawMessage
			for _, ev := range collect(t, res.Sub, res.RunID) {
				if ss, ok := ev.(*protocol.StateSnapshot); ok {
					_ = json.Unmarshal(ss.Snapshot, &snap)
				}
			}
			return snap
		}
		snap := send(`{"counter": 3, "todo": ["a"], "ui": "not the client's", "surfaces": 1}`)
		if string(snap["counter"]) != "3" || string(snap["todo"]) != `["a"]` {
			t.Errorf("the run's snapshot = %v, want the client's counter and todo", snap)
		}
		if !strings.HasPrefix(string(snap["ui"]), "{") || string(snap["surfaces"]) != "{}" {
			t.Errorf("the run's snapshot = %v: the client's state must not replace Orrery's ui and surfaces", snap)
		}
		rec.mu.Lock()
		first := rec.calls[0][0]
		rec.mu.Unlock()
		text := first.Content.String()
		if first.Role != protocol.RoleSystem || !strings.Contains(text, "the open document: notes.md") || !strings.Contains(text, `"counter":3`) || strings.Contains(text, "not the client's") {
			t.Errorf("the model's first message = %s %q, want a system message with the context and the application's keys", first.Role, text)
		}
		snap = send(`{"counter": 4}`)
		if string(snap["counter"]) != "4" || snap["todo"] != nil {
			t.Errorf("the second run's snapshot = %v, want counter 4 and no todo: the client's state replaces the keys", snap)
		}
		if _, err := s.Send(context.Background(), kernel.SendInput{Text: "go", State: json.RawMessage(`[1]`)}); err == nil || !strings.Contains(err.Error(), "state is not a JSON object") {
			t.Errorf("Send(state [1]) = %v, want a refusal", err)
		}
	})
}
