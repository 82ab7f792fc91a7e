// Package tool defines the tools an agent can call and holds the built-in
// ones. A tool has a name, a description the model reads, a JSON Schema for
// its arguments, and a Call that runs it.
package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Spec describes a tool to a model.
type Spec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
}

// Result is what a call returns: text for the model, and optionally a
// surface for a screen.
type Result struct {
	// Text is the result as the model reads it.
	Text string
	// Error marks a result that reports a failure the model should see.
	Error bool
}

// Tool is a tool the kernel runs itself.
type Tool interface {
	// Spec describes the tool.
	Spec() Spec
	// Call runs the tool with its JSON arguments. It returns when ctx ends.
	Call(ctx context.Context, args json.RawMessage) (Result, error)
}

// Set is a set of tools by name. The zero Set is empty; a Set is not safe
// for concurrent mutation, so build it before sharing it.
type Set struct {
	tools map[string]Tool
}

// NewSet returns a Set holding tools. A duplicate name panics: it is a
// programming error caught at start.
func NewSet(tools ...Tool) *Set {
	s := &Set{tools: make(map[string]Tool, len(tools))}
	for _, t := range tools {
		name := t.Spec().Name
		if _, dup := s.tools[name]; dup {
			panic(fmt.Sprintf("tool: duplicate tool name %q", name))
		}
		s.tools[name] = t
	}
	return s
}

// Lookup returns the tool called name.
func (s *Set) Lookup(name string) (Tool, bool) {
	if s == nil {
		return nil, false
	}
	t, ok := s.tools[name]
	return t, ok
}

// Specs returns every tool's Spec, sorted by name.
func (s *Set) Specs() []Spec {
	if s == nil {
		return nil
	}
	out := make([]Spec, 0, len(s.tools))
	for _, t := range s.tools {
		out = append(out, t.Spec())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Builtins returns the tools every kernel has: clock and echo.
func Builtins() *Set { return NewSet(Clock{}, Echo{}) }

// Clock tells the current time. Now, when set, replaces the system clock.
type Clock struct {
	Now func() time.Time
}

// Spec implements Tool.
func (Clock) Spec() Spec {
	return Spec{
		Name:        "clock",
		Description: "Tells the current date and time (UTC, RFC 3339).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
	}
}

// Call implements Tool.
func (c Clock) Call(ctx context.Context, _ json.RawMessage) (Result, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	return Result{Text: now().UTC().Format(time.RFC3339)}, nil
}

// Echo returns its text argument unchanged.
type Echo struct{}

// Spec implements Tool.
func (Echo) Spec() Spec {
	return Spec{
		Name:        "echo",
		Description: "Returns the given text unchanged.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`),
	}
}

// Call implements Tool.
func (Echo) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	var a struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return Result{Text: "echo needs arguments {\"text\": \"…\"}: " + err.Error(), Error: true}, nil
	}
	if a.Text == nil {
		return Result{Text: `echo needs arguments {"text": "…"}: text is missing`, Error: true}, nil
	}
	return Result{Text: strings.Clone(*a.Text)}, nil
}
