package crew_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/crew"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

func writeScript(t *testing.T, dir, name string, turns ...map[string]any) string {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"turns": turns})
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunnerPricesEachAgentsModel runs a crew of two agents on two models
// with different prices in a real kernel: RUN_FINISHED carries the sum of
// each agent's usage priced on its own model, one TokenUsage per model,
// and each orrery.usage names the agent's model and its sub-agent run.
func TestRunnerPricesEachAgentsModel(t *testing.T) {
	dir := t.TempDir()
	writer := writeScript(t, dir, "writer.json", map[string]any{"text": []string{"draft"}, "usage": map[string]int{"inputTokens": 100, "outputTokens": 50}})
	reviewer := writeScript(t, dir, "reviewer.json", map[string]any{"text": []string{"ok"}, "usage": map[string]int{"inputTokens": 1000, "outputTokens": 10}})
	text := `name = "pricing"

[[agents]]
id = "writer"
role = "Writer"
model = "script:` + writer + `"

[[agents]]
id = "reviewer"
role = "Reviewer"
model = "script:` + reviewer + `"

[[tasks]]
id = "write"
description = "Write."
agent = "writer"

[[tasks]]
id = "review"
description = "Review."
agent = "reviewer"
depends_on = ["write"]
`
	f, err := crew.Parse("crew.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(crew.Known{Model: func(spec string) error { _, err := models.Resolve(spec); return err }}); err != nil {
		t.Fatal(err)
	}
	runner := &crew.Runner{File: f, Models: models.Resolve, Tools: tool.NewSet(), Searchable: tool.NewSet()}
	prices := agent.PriceTable{
		"script:" + writer:   {Input: 2_000_000, Output: 10_000_000}, // 200 + 500
		"script:" + reviewer: {Input: 1_000_000, Output: 3_000_000},  // 1000 + 30
	}
	const want = 1730
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := kernel.New(kernel.Config{Store: st, DefaultModel: "crew", Prices: prices, DebugActor: true,
		Models: func(spec string) (agent.Provider, error) {
			if spec == "crew" {
				return runner, nil
			}
			return models.Resolve(spec)
		}})
	ctx := context.Background()
	if err := k.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	sess, err := k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sess.Send(ctx, kernel.SendInput{Text: "run the crew", Subscribe: true, UsageEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Sub.Close()
	var fin *protocol.RunFinished
	var usages []kernel.Usage
	var usageSubs []string
	subs := map[string]string{} // subagentRunId → role
	deadline := time.After(20 * time.Second)
	for fin == nil {
		select {
		case <-res.Sub.Ready():
		case <-deadline:
			t.Fatal("no terminal event")
		}
		for _, fr := range res.Sub.Take(nil) {
			ev, err := protocol.DecodeEvent(fr.Data)
			if err != nil {
				t.Fatal(err)
			}
			switch e := ev.(type) {
			case *protocol.SubagentStarted:
				subs[e.SubagentRunID] = e.Name
			case *protocol.Custom:
				if e.Name == kernel.UsageEvent {
					var u kernel.Usage
					if err := json.Unmarshal(e.Value, &u); err != nil {
						t.Fatal(err)
					}
					usages = append(usages, u)
					usageSubs = append(usageSubs, subs[e.SubagentRunID])
				}
			case *protocol.RunFinished:
				fin = e
			case *protocol.RunError:
				t.Fatalf("RUN_ERROR %s", e.Message)
			}
		}
	}
	var result protocol.RunResult
	if err := json.Unmarshal(fin.Result, &result); err != nil {
		t.Fatal(err)
	}
	if result.MicroUSD != want || result.InputTokens != 1100 || result.OutputTokens != 60 {
		t.Errorf("RUN_FINISHED.result = %+v, want micro_usd %d over 1100 in, 60 out", result, want)
	}
	if len(fin.Usage) != 2 || fin.Usage[0].Model != writer || fin.Usage[0].TotalTokens != 150 ||
		fin.Usage[1].Model != reviewer || fin.Usage[1].TotalTokens != 1010 {
		t.Errorf("RUN_FINISHED.usage = %+v, want the writer's model (150 tokens) then the reviewer's (1010)", fin.Usage)
	}
	if len(usages) != 2 {
		t.Fatalf("orrery.usage events = %+v, want one per model call", usages)
	}
	wantUsage := []struct {
		model, role string
		total, cost int64
	}{{writer, "Writer", 150, 700}, {reviewer, "Reviewer", 1160, want}}
	for i, w := range wantUsage {
		if u := usages[i]; u.Model != w.model || u.Provider != "script" || u.TotalTokens != w.total || u.MicroUSD != w.cost || usageSubs[i] != w.role {
			t.Errorf("orrery.usage %d = %+v from %q, want model %s, run total %d tokens and %d micro-USD, from the %s sub-agent",
				i, u, usageSubs[i], w.model, w.total, w.cost, w.role)
		}
	}
	list, err := k.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].MicroUSD != want {
		t.Errorf("session micro_usd = %+v, want %d", list, want)
	}
}
