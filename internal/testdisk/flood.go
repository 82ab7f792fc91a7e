package testdisk

import (
	"context"
	"strings"
	"sync"

	"github.com/getorrery/orrery/agent"
)

// Flood is a model for these tests. Its first answer streams a little text,
// waits until Release, then streams far more text than the tests' disks
// hold, so a test can break the disk at a known point with nothing in
// flight. Every later answer is the one word "back".
type Flood struct {
	gate     chan struct{}
	mu       sync.Mutex
	calls    int
	released bool
}

var _ agent.Provider = (*Flood)(nil)

// NewFlood returns a Flood; with flood false even its first answer is
// "back".
func NewFlood(flood bool) *Flood {
	m := &Flood{gate: make(chan struct{})}
	if !flood {
		m.calls = 1
	}
	return m
}

// Release lets the first answer flood. It is safe to call more than once.
func (m *Flood) Release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.released {
		m.released = true
		close(m.gate)
	}
}

// Name implements agent.Provider.
func (m *Flood) Name() string { return "flood" }

// Model implements agent.Provider.
func (m *Flood) Model() string { return "flood" }

// Stream implements agent.Provider.
func (m *Flood) Stream(ctx context.Context, _ agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	m.mu.Lock()
	m.calls++
	first := m.calls == 1
	m.mu.Unlock()
	if !first {
		return agent.Usage{OutputTokens: 1}, emit(agent.Delta{Kind: agent.DeltaText, Text: "back"})
	}
	if err := emit(agent.Delta{Kind: agent.DeltaText, Text: "before the flood "}); err != nil {
		return agent.Usage{}, err
	}
	select {
	case <-m.gate:
	case <-ctx.Done():
		return agent.Usage{}, ctx.Err()
	}
	chunk := strings.Repeat("x", 4096)
	for range 1 << 14 {
		if err := emit(agent.Delta{Kind: agent.DeltaText, Text: chunk}); err != nil {
			return agent.Usage{}, err
		}
	}
	return agent.Usage{OutputTokens: 1 << 14}, nil
}

// Models resolves the spec "flood" to m and every other spec with resolve.
func (m *Flood) Models(resolve func(string) (agent.Provider, error)) func(string) (agent.Provider, error) {
	return func(spec string) (agent.Provider, error) {
		if spec == "flood" {
			return m, nil
		}
		return resolve(spec)
	}
}
