package kernel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// TestRunUsageEvents: a run started with SendInput.UsageEvents logs an
// orrery.usage event after each model call, with the run's tokens so far;
// the next run of the session, started without it, logs none.
func TestRunUsageEvents(t *testing.T) {
	run(t, func(t *testing.T, m storeMode) {
		model := script(t,
			map[string]any{"text": []string{"a"}, "tool_calls": []map[string]any{{"name": "echo", "args": map[string]any{"text": "x"}}}, "usage": map[string]any{"inputTokens": 10, "outputTokens": 5}},
			map[string]any{"text": []string{"b"}, "usage": map[string]any{"inputTokens": 20, "outputTokens": 2}},
			map[string]any{"text": []string{"c"}, "usage": map[string]any{"inputTokens": 1, "outputTokens": 1}},
		)
		e := m.newEnv(t, model)
		s := e.session(t)
		ctx := context.Background()
		usages := func(in kernel.SendInput) []int64 {
			t.Helper()
			in.Subscribe = true
			res, err := s.Send(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Sub.Close()
			var totals []int64
			for _, ev := range collect(t, res.Sub, res.RunID) {
				if c, ok := ev.(*protocol.Custom); ok && c.Name == kernel.UsageEvent {
					var u kernel.Usage
					if err := json.Unmarshal(c.Value, &u); err != nil {
						t.Fatal(err)
					}
					totals = append(totals, u.TotalTokens)
				}
			}
			return totals
		}
		if got := usages(kernel.SendInput{Text: "one", UsageEvents: true}); len(got) != 2 || got[0] != 15 || got[1] != 37 {
			t.Errorf("usage totals with UsageEvents = %v, want [15 37]", got)
		}
		if got := usages(kernel.SendInput{Text: "two"}); len(got) != 0 {
			t.Errorf("usage totals without UsageEvents = %v, want none", got)
		}
	})
}
