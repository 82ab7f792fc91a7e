package agent

import "context"

// Env is what a tool call can see of the loop that runs it: the loop (its
// provider, tools, gate and workspace) and the turn it emits through. Tools
// that run agents of their own, such as the task tool, start from it.
type Env struct {
	Loop *Loop
	Turn Turn
}

type envKey struct{}

// WithEnv returns ctx carrying env.
func WithEnv(ctx context.Context, env Env) context.Context {
	return context.WithValue(ctx, envKey{}, env)
}

// EnvFrom returns the Env of the loop running the tool call ctx belongs
// to; ok is false outside a loop's tool call.
func EnvFrom(ctx context.Context) (env Env, ok bool) {
	env, ok = ctx.Value(envKey{}).(Env)
	return env, ok
}

// Question is what an agent (or a crew task that declared human input)
// asks the person watching.
type Question struct {
	// Kind is text, confirm or choice.
	Kind string
	// Prompt is the question.
	Prompt string
	// Choices are a choice's options.
	Choices []string
	// Default is the value suggested.
	Default string
	// TaskDescription is the task asking, for a crew task.
	TaskDescription string
	// CrewID and AgentID say who asks, when known.
	CrewID, AgentID string
}

// Answer is the person's answer to a Question.
type Answer struct {
	// Value is the answer as given; for a confirm, "yes" or "no".
	Value string
	// Refused is set when nobody answered (nobody could be asked, the
	// channel closed, the run was cancelled) or a confirm was declined.
	Refused bool
	// Why says why it was refused.
	Why string
	// Unattended is set with Refused when nobody could be asked: no
	// client that can answer was attached. An agent may take its
	// unattended default instead of stopping.
	Unattended bool
}

// The question kinds.
const (
	QuestionText    = "text"
	QuestionConfirm = "confirm"
	QuestionChoice  = "choice"
)

// Asker is a Turn that can put a question to the person watching. The
// kernel's turns implement it; a Turn that does not cannot ask, and its
// questions are refused.
type Asker interface {
	// Ask waits for the answer, or refuses when nobody can answer. It
	// returns ctx's error when the run ends meanwhile.
	Ask(ctx context.Context, q Question) (Answer, error)
}

// Charge is one model call's usage by an agent of the run whose model is
// not the run's own, such as a sub-agent working on a model of its own.
type Charge struct {
	// Provider and Model name the model that incurred it; the price table
	// is looked up by provider:model.
	Provider, Model string
	// SubagentRunID is the sub-agent that made the call, when one did.
	SubagentRunID string
	Usage         Usage
}

// Charger is a Turn that prices each model call against the model that
// made it. The kernel's turns implement it. A Turn that does not takes
// the usage as its run's own (Turn.Usage), priced as the run's model.
type Charger interface {
	Charge(ctx context.Context, c Charge) error
}

type sessionKey struct{}

// WithSession returns ctx naming the session a run belongs to. The kernel
// runs every turn under it, so a tool can tell sessions apart (the hub
// tools address a session's agents by it).
func WithSession(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, sessionKey{}, id)
}

// SessionFrom returns the session WithSession put in ctx, or "".
func SessionFrom(ctx context.Context) string {
	id, _ := ctx.Value(sessionKey{}).(string)
	return id
}
