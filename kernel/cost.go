package kernel

import (
	"context"
	"encoding/json"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/protocol"
)

// modelUsage is what one model used in a run.
type modelUsage struct {
	provider, model string
	usage           agent.Usage
}

// runUsage is a run's usage by model, in the order the models were first
// used, so each part is priced against the model that incurred it (a
// crew's agents, a sub-agent on a model of its own).
type runUsage struct {
	total  agent.Usage
	models []modelUsage
}

// add counts u against provider:model.
func (ru *runUsage) add(provider, model string, u agent.Usage) {
	ru.total = ru.total.Add(u)
	for i := range ru.models {
		if ru.models[i].provider == provider && ru.models[i].model == model {
			ru.models[i].usage = ru.models[i].usage.Add(u)
			return
		}
	}
	ru.models = append(ru.models, modelUsage{provider: provider, model: model, usage: u})
}

// cost prices each model's usage in micro-USD and adds them up; each
// model's sum is rounded down once.
func (ru *runUsage) cost(prices agent.PriceTable) int64 {
	var cost int64
	for _, m := range ru.models {
		cost += prices.Cost(m.provider, m.model, m.usage)
	}
	return cost
}

// tokenUsage is RUN_FINISHED.usage: one entry per model used, or the
// run's own model with zero counts when none was.
func (ru *runUsage) tokenUsage(p agent.Provider) []protocol.TokenUsage {
	models := ru.models
	if len(models) == 0 {
		models = []modelUsage{{provider: p.Name(), model: p.Model()}}
	}
	out := make([]protocol.TokenUsage, len(models))
	for i, m := range models {
		out[i] = protocol.TokenUsage{
			Provider:          m.provider,
			Model:             m.model,
			InputTokens:       m.usage.InputTokens,
			OutputTokens:      m.usage.OutputTokens,
			TotalTokens:       m.usage.InputTokens + m.usage.OutputTokens,
			CachedInputTokens: m.usage.CachedInputTokens,
			ReasoningTokens:   m.usage.ReasoningTokens,
		}
	}
	return out
}

var _ agent.Charger = (*turn)(nil)

// Usage implements agent.Turn: one call of the run's own model.
func (t *turn) Usage(ctx context.Context, u agent.Usage) error {
	return t.Charge(ctx, agent.Charge{Provider: t.r.provider.Name(), Model: t.r.provider.Model(), Usage: u})
}

// Charge implements agent.Charger: the call is priced against c's model.
func (t *turn) Charge(ctx context.Context, c agent.Charge) error {
	if c.Provider == "" {
		c.Provider, c.Model = t.r.provider.Name(), t.r.provider.Model()
	}
	return t.s.do(context.WithoutCancel(ctx), func() {
		t.r.usage.add(c.Provider, c.Model, c.Usage)
		t.s.emitUsage(t.r, c)
		if t.s.run != t.r {
			// The run ended (cancelled) before the provider reported this
			// call's usage: its terminal event is out, but the session is
			// still charged for it.
			cost := t.s.k.cfg.Prices.Cost(c.Provider, c.Model, c.Usage)
			t.s.charge(cost)
			if cost != 0 {
				t.s.changed(SessionCost)
			}
		}
	})
}

// emitUsage logs orrery.usage for one model call of r, attributed to the
// sub-agent that made it. Runs on the actor.
func (s *Session) emitUsage(r *run, c agent.Charge) {
	s.assertActor()
	if !r.usageEvents || s.run != r {
		return
	}
	value, _ := json.Marshal(Usage{Provider: c.Provider, Model: c.Model, InputTokens: c.Usage.InputTokens,
		OutputTokens: c.Usage.OutputTokens, TotalTokens: r.usage.total.InputTokens + r.usage.total.OutputTokens,
		MicroUSD: r.usage.cost(s.k.cfg.Prices)})
	ev := &protocol.Custom{Name: UsageEvent, Value: value}
	ev.SubagentRunID = c.SubagentRunID
	if err := s.emit(r.id, ev); err != nil {
		s.k.log.Warn("log usage", "session", s.id, "err", err)
	}
}
