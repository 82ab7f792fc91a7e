package subagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/tool"
)

// TaskToolName is the name of the tool an agent delegates with.
const TaskToolName = "task"

// TaskTool lets an agent hand a piece of work to a sub-agent with its own
// loop and messages. The sub-agent uses the caller's model, tools, gate and
// workspace; its answer is the tool's result.
type TaskTool struct {
	// Models resolves the optional model argument; nil means the caller's
	// model is always used.
	Models func(spec string) (agent.Provider, error)
	// OnStart, when set, is called before the sub-agent runs, with its
	// hub address; it may give it a mailbox.
	OnStart func(addr string)
	// OnEnd, when set, is called once the sub-agent has ended, however it
	// ended (an answer, an error, a cancel or a panic), with the address
	// OnStart was given; it may release its mailbox. Every call that
	// reaches OnStart reaches OnEnd.
	OnEnd func(addr string)
	// Self returns the hub address of the calling agent when ctx names
	// none (WithSelf); nil means agent://run/main. A delegated sub-agent
	// is addressed in its caller's crew: agent://{crew}/{role}.
	Self func(ctx context.Context) string
}

var _ tool.Tool = TaskTool{}

// Spec implements tool.Tool.
func (TaskTool) Spec() tool.Spec {
	return tool.Spec{
		Name: TaskToolName,
		Description: "Delegates a self-contained task to a sub-agent, which works with its own conversation and your tools " +
			"and returns its final answer. Describe the task fully: the sub-agent sees nothing else.",
		ReadOnly: true, // the sub-agent's own tool calls pass the consent gate
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"description":{"type":"string","description":"the task, with everything the sub-agent needs to know"},` +
			`"role":{"type":"string","description":"the sub-agent's role, such as researcher"},` +
			`"instructions":{"type":"string","description":"how the sub-agent should work (its system message)"},` +
			`"model":{"type":"string","description":"a model spec; default: your own model"}},` +
			`"required":["description"],"additionalProperties":false}`),
	}
}

// Call implements tool.Tool.
func (tt TaskTool) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		Description, Role, Instructions, Model string
	}
	if err := json.Unmarshal(c.Args, &a); err != nil || strings.TrimSpace(a.Description) == "" {
		return tool.Result{Text: `task needs {"description": "…"} with the whole task in it`, Error: true}, nil
	}
	env, ok := agent.EnvFrom(ctx)
	if !ok || env.Loop == nil || env.Turn == nil {
		return tool.Result{Text: "task can only run inside an agent's turn", Error: true}, nil
	}
	if a.Role == "" {
		a.Role = "sub-agent"
	}
	provider := env.Loop.Provider
	if a.Model != "" && tt.Models != nil {
		p, err := tt.Models(a.Model)
		if err != nil {
			return tool.Result{Text: fmt.Sprintf("task cannot use model %q: %v; omit model to use your own", a.Model, err), Error: true}, nil
		}
		provider = p
	}
	addr := tt.address(ctx, a.Role)
	if tt.OnStart != nil {
		tt.OnStart(addr)
	}
	if tt.OnEnd != nil {
		defer tt.OnEnd(addr)
	}
	res := Run(WithSelf(ctx, addr), env.Turn, Spec{
		Role: a.Role, Instructions: a.Instructions, Task: a.Description, ToolCallID: c.ID,
		Provider: provider, Tools: env.Loop.Tools, Searchable: env.Loop.Searchable, Gate: env.Loop.Gate,
		Workspace: env.Loop.Workspace, MaxSteps: env.Loop.MaxSteps,
	})
	if res.Err != nil {
		if ctx.Err() != nil {
			return tool.Result{}, ctx.Err()
		}
		return tool.Result{Text: fmt.Sprintf("the %s sub-agent failed: %v", a.Role, res.Err), Error: true}, nil
	}
	if res.Text == "" {
		return tool.Result{Text: fmt.Sprintf("the %s sub-agent finished without an answer", a.Role)}, nil
	}
	return tool.Result{Text: res.Text}, nil
}

// address returns the hub address of a sub-agent in role delegated by the
// agent ctx runs: the same crew, named for the role.
func (tt TaskTool) address(ctx context.Context, role string) string {
	caller := Self(ctx)
	if caller == "" && tt.Self != nil {
		caller = tt.Self(ctx)
	}
	crew := "run"
	if rest, ok := strings.CutPrefix(caller, "agent://"); ok {
		if c, _, ok := strings.Cut(rest, "/"); ok && c != "" {
			crew = c
		}
	}
	name := strings.Map(func(r rune) rune {
		if strings.ContainsRune("/ \t\r\n", r) {
			return '-'
		}
		return r
	}, role)
	return "agent://" + crew + "/" + name
}

type selfKey struct{}

// WithSelf returns ctx naming addr as the hub address of the agent whose
// loop runs under it; hub tools send from it.
func WithSelf(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, selfKey{}, addr)
}

// Self returns the hub address WithSelf put in ctx, or "".
func Self(ctx context.Context) string {
	s, _ := ctx.Value(selfKey{}).(string)
	return s
}
