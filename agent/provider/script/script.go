// Package script is a model for tests: it plays back a JSON file of turns,
// one turn per model request, so a test can drive every path of a run
// (text, reasoning, tool calls, usage, provider errors, slow streams,
// turns that hang until cancelled) without a network.
//
// The file is {"turns":[…]}; a turn may have text (an array of chunks),
// reasoning (a string), tool_calls ([{"name","args"}]), usage
// ({"inputTokens","outputTokens"}), error (the provider fails with it after
// streaming the rest of the turn), delay_ms (slept before each chunk) and
// hang (after its chunks, the turn waits until the run is cancelled).
package script

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/getorrery/orrery/agent"
)

var _ agent.Provider = (*Model)(nil)

// Turn is one scripted model answer.
type Turn struct {
	Text      []string   `json:"text,omitempty"`
	Reasoning string     `json:"reasoning,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Usage     *Usage     `json:"usage,omitempty"`
	Error     string     `json:"error,omitempty"`
	DelayMS   int        `json:"delay_ms,omitempty"`
	// Hang keeps the turn open after its chunks until the run ends, as a
	// model still thinking does: a test cancels it there.
	Hang bool `json:"hang,omitempty"`
}

// ToolCall is a scripted call; Args is the arguments object.
type ToolCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Usage is a scripted turn's token counts.
type Usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// File is the script file's shape.
type File struct {
	Turns []Turn `json:"turns"`
}

// Model plays a script. Each Stream call consumes the next turn; it is safe
// for concurrent use.
type Model struct {
	path string

	mu   sync.Mutex // guards next
	file File
	next int
}

// Load reads the script at path.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load script model: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("load script model %s: %w (want {\"turns\":[{\"text\":[…]}, …]})", path, err)
	}
	if len(f.Turns) == 0 {
		return nil, fmt.Errorf("load script model %s: it has no turns; add at least one to \"turns\"", path)
	}
	for i, t := range f.Turns {
		for j, c := range t.ToolCalls {
			if c.Name == "" {
				return nil, fmt.Errorf("load script model %s: turns[%d].tool_calls[%d] has no name", path, i, j)
			}
		}
	}
	return &Model{path: path, file: f}, nil
}

// Name implements agent.Provider.
func (*Model) Name() string { return "script" }

// Model implements agent.Provider.
func (m *Model) Model() string { return m.path }

// Stream implements agent.Provider.
func (m *Model) Stream(ctx context.Context, _ agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	m.mu.Lock()
	if m.next >= len(m.file.Turns) {
		n := len(m.file.Turns)
		m.mu.Unlock()
		return agent.Usage{}, &agent.Error{Code: "provider_error",
			Message: fmt.Sprintf("script %s has no turn %d (it has %d); add more turns", m.path, n+1, n)}
	}
	t := m.file.Turns[m.next]
	m.next++
	m.mu.Unlock()

	var usage agent.Usage
	if t.Usage != nil {
		usage = agent.Usage{InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens}
	}
	send := func(d agent.Delta) error {
		if t.DelayMS > 0 {
			timer := time.NewTimer(time.Duration(t.DelayMS) * time.Millisecond)
			select {
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			case <-timer.C:
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return emit(d)
	}
	if t.Reasoning != "" {
		if err := send(agent.Delta{Kind: agent.DeltaReasoning, Text: t.Reasoning}); err != nil {
			return usage, err
		}
	}
	for _, chunk := range t.Text {
		if err := send(agent.Delta{Kind: agent.DeltaText, Text: chunk}); err != nil {
			return usage, err
		}
	}
	for _, c := range t.ToolCalls {
		args := "{}"
		if len(c.Args) > 0 {
			args = string(c.Args)
		}
		if err := send(agent.Delta{Kind: agent.DeltaToolCall, ToolName: c.Name}); err != nil {
			return usage, err
		}
		if err := send(agent.Delta{Kind: agent.DeltaToolArgs, Text: args}); err != nil {
			return usage, err
		}
	}
	if t.Error != "" {
		return usage, &agent.Error{Code: "provider_error", Message: t.Error}
	}
	if t.Hang {
		<-ctx.Done()
		return usage, ctx.Err()
	}
	return usage, nil
}
