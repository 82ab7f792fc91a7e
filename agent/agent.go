// Package agent runs one agent turn: it asks a model for its next step,
// streams what the model says as AG-UI events, runs the tools it calls and
// loops until the model stops.
//
// Models are reached through the Provider interface; implementations live in
// agent/provider/<name>. The loop never touches session state directly: it
// reads the conversation and emits events through a Turn, which the kernel
// implements on the session's actor.
package agent

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// Request is one model call: the conversation so far and the tools the model
// may call.
type Request struct {
	Messages []protocol.Message
	Tools    []tool.Spec
}

// DeltaKind says what a Delta carries.
type DeltaKind int

// The kinds of Delta a provider streams.
const (
	// DeltaText is a piece of the answer's text.
	DeltaText DeltaKind = iota + 1
	// DeltaReasoning is a piece of the model's visible reasoning.
	DeltaReasoning
	// DeltaToolCall starts a tool call: ToolCallID and ToolName are set.
	DeltaToolCall
	// DeltaToolArgs is a piece of a started call's JSON argument text.
	DeltaToolArgs
)

// Delta is one piece of a streamed model answer.
type Delta struct {
	Kind       DeltaKind
	Text       string
	ToolCallID string
	ToolName   string
}

// Usage counts a model call's tokens. Input and output are totals; cached
// and reasoning tokens are parts of them.
type Usage struct {
	InputTokens       int64
	OutputTokens      int64
	CachedInputTokens int64
	ReasoningTokens   int64
	// ReportedMicroUSD is a cost the agent reported itself (an external
	// agent that prices its own calls), added to the priced cost.
	ReportedMicroUSD int64
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:       u.InputTokens + v.InputTokens,
		OutputTokens:      u.OutputTokens + v.OutputTokens,
		CachedInputTokens: u.CachedInputTokens + v.CachedInputTokens,
		ReasoningTokens:   u.ReasoningTokens + v.ReasoningTokens,
		ReportedMicroUSD:  u.ReportedMicroUSD + v.ReportedMicroUSD,
	}
}

// Provider is a model. Stream sends one request and calls emit for each
// piece of the answer, in order, returning the call's usage. It stops when
// ctx ends or emit returns an error, and returns that error.
type Provider interface {
	// Name is the provider's name, the part before the colon of a model
	// spec ("offline", "script", "openai" …).
	Name() string
	// Model is the model's name within its provider.
	Model() string
	Stream(ctx context.Context, req Request, emit func(Delta) error) (Usage, error)
}

// Runner is an agent that runs whole turns itself, such as an external ACP
// agent with its own loop and tools: when a session's provider is also a
// Runner, the kernel hands it the turn instead of running the built-in
// Loop. Its Stream is never called.
type Runner interface {
	Provider
	// Run runs one turn: it reads the conversation and emits the turn's
	// events through in.Turn, asks in.Gate before anything the consent
	// rules cover, and returns how the turn ended. It returns when ctx
	// ends (the run was cancelled).
	Run(ctx context.Context, in RunInput) Result
}

// RunInput is what a Runner gets for one turn.
type RunInput struct {
	// Session is the id of the session the turn belongs to.
	Session   string
	Turn      Turn
	Gate      Gate
	Workspace tool.Workspace
	// ClientTools are the tools the client offered in RunAgentInput.
	ClientTools []protocol.Tool
}

// Error is a provider failure with a code for RUN_ERROR and a message that
// says what to do.
type Error struct {
	Code    string
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ErrNoAPIKey is wrapped by a provider's constructor when the key it needs
// is not set: the spec is right, and only the environment lacks the key
// (orrery config validate warns of it rather than refusing the file).
var ErrNoAPIKey = errors.New("no API key is set")

// ErrStopped is returned by a Turn whose run has ended (cancelled, or
// finished elsewhere); the loop stops quietly on it.
var ErrStopped = errors.New("run stopped")

// Turn is the loop's window onto its session.
type Turn interface {
	// Messages returns the conversation as the session holds it now,
	// including steers that arrived during the run.
	Messages(ctx context.Context) ([]protocol.Message, error)
	// Emit sequences events into the session's log, in order.
	Emit(ctx context.Context, events ...protocol.Event) error
	// Usage adds one model call's usage to the run's total.
	Usage(ctx context.Context, u Usage) error
	// NewID returns a new id, unique in the session, starting with prefix.
	NewID(prefix string) string
}

// Gate is the consent gate: every call of a server tool passes it before
// it runs. The kernel implements it with the [permissions] rules and, for
// an ask, a person's answer.
type Gate interface {
	// Check decides whether call may run. It may wait for a person; it
	// returns ctx's error when the run is cancelled meanwhile.
	Check(ctx context.Context, call GateCall) (Verdict, error)
}

// PermissionAsker is a Gate that can also put a permission question with
// the caller's own options, such as an external agent's permission
// request. The kernel's gate implements it.
type PermissionAsker interface {
	// Ask applies the consent rules to q and, when they ask, places the
	// question for clients that draw consent and waits for the first valid
	// answer, the timeout or ctx's end. It returns ctx's error when ctx
	// ends first (the run was cancelled or the question withdrawn); the
	// question is then withdrawn from every client.
	AskPermission(ctx context.Context, q Permission) (PermissionAnswer, error)
}

// Permission is a permission question with the asker's own options.
type Permission struct {
	// ToolCallID is the tool call the question is about.
	ToolCallID string
	// Tool and Subject are what the [permissions] rules match.
	Tool    string
	Subject string
	// PathSubject, ShellSubject and ReadOnly are as in consent.Call.
	PathSubject  bool
	ShellSubject bool
	ReadOnly     bool
	// Title is what the person reads, such as "Edit notes.txt".
	Title string
	// Args are the call's arguments as the asker has them.
	Args json.RawMessage
	// Options are the answers offered; at least one.
	Options []PermissionOption
	// Raw is the asker's own request (an ACP RequestPermissionRequest),
	// kept in orrery.consent.requested as source.
	Raw json.RawMessage
}

// PermissionOption is one answer a Permission offers.
type PermissionOption struct {
	ID    string
	Label string
	// Allow says choosing it lets the call run.
	Allow bool
}

// PermissionAnswer is how a Permission was answered.
type PermissionAnswer struct {
	// Option is the option a person chose; "" when the rules decided, or
	// nobody could be asked or answered in time.
	Option string
	// Allow, when Option is "", is whether the rules allow the call; false
	// also when nobody could answer (fail closed).
	Allow bool
	// Rule names what decided.
	Rule string
}

// GateCall is a tool call at the gate.
type GateCall struct {
	// ID is the tool call's id.
	ID string
	// Tool is the tool called.
	Tool tool.Tool
	// Args is the call's JSON arguments.
	Args json.RawMessage
}

// Verdict is the gate's answer.
type Verdict struct {
	// Allow says the call may run.
	Allow bool
	// Rule names what decided: a [permissions] rule, a default, or the
	// person's answer. It goes into the result's outcome.
	Rule string
	// Message, for a refused call, is what the model reads: why, and what
	// it may do instead.
	Message string
}

// Result is how a loop ended.
type Result struct {
	// Pending lists client tool calls the client must answer in the next run.
	Pending []string
	// Err is the failure that ended the loop, if any.
	Err error
	// Cancelled says the agent itself ended the turn as cancelled (an
	// external agent's stop reason): the run finishes with outcome
	// cancelled.
	Cancelled bool
}

// argsOrEmpty returns a tool call's argument text as JSON, "{}" when empty.
func argsOrEmpty(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(s)
}
