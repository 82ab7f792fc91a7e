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
	// ReadOnly marks a tool that only reads: the consent gate allows it by
	// default, where a tool that writes or executes is asked about.
	ReadOnly bool
	// PathSubject says the tool's subject (see Subjecter) is a path, so a
	// * in a consent rule's subject stops at "/".
	PathSubject bool
	// ShellSubject says the tool's subject is a shell command line: the
	// consent rules judge each command in it (see package consent).
	ShellSubject bool
}

// Call is one invocation of a tool.
type Call struct {
	// ID is the tool call's id, unique in the session.
	ID string
	// Args is the JSON arguments object.
	Args json.RawMessage
	// Workspace is where the call's paths resolve and its commands run.
	Workspace Workspace
	// Stream, when set, receives the call's live output piece by piece (a
	// command's stdout and stderr); the kernel appends each piece to the
	// call's stream surface. Tools without live output ignore it.
	Stream func(chunk string)
}

// Workspace is the directory tree a session's tools may touch: Root (the
// session's cwd) and any Extra roots config widens it with.
type Workspace struct {
	Root  string
	Extra []string
}

// Result is what a call returns: text for the model, and optionally a
// surface for a screen.
type Result struct {
	// Text is the result as the model reads it.
	Text string
	// Error marks a result that reports a failure the model should see.
	Error bool
	// Surface, when set, is the result's own surface ({"kind": {…}}), such
	// as the diff of an edit; without it the result shows as its text.
	Surface json.RawMessage
}

// Tool is a tool the kernel runs itself.
type Tool interface {
	// Spec describes the tool.
	Spec() Spec
	// Call runs the tool. It returns when ctx ends. A failure the model
	// should read (bad arguments, a missing file) is a Result with Error
	// set; an error return is for failures of the host itself.
	Call(ctx context.Context, c Call) (Result, error)
}

// Subjecter is a tool whose calls consent rules can match by subject: the
// command of shell, the path of a file tool. A rule "shell(git status*)"
// matches the calls of shell whose subject matches "git status*".
type Subjecter interface {
	// Subject returns what rules match for a call with args.
	Subject(args json.RawMessage) (string, error)
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
		ReadOnly:    true,
		Parameters:  json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
	}
}

// Call implements Tool.
func (c Clock) Call(ctx context.Context, _ Call) (Result, error) {
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
		ReadOnly:    true,
		Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`),
	}
}

// Call implements Tool.
func (Echo) Call(ctx context.Context, c Call) (Result, error) {
	var a struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return Result{Text: "echo needs arguments {\"text\": \"…\"}: " + err.Error(), Error: true}, nil
	}
	if a.Text == nil {
		return Result{Text: `echo needs arguments {"text": "…"}: text is missing`, Error: true}, nil
	}
	return Result{Text: strings.Clone(*a.Text)}, nil
}
