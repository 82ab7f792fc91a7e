package crew

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/subagent"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// Runner runs a crew as a session's agent: it is an agent.Runner, so the
// kernel hands it the run, and it runs each task as a sub-agent in
// dependency order. The run's answer is the last task's result.
type Runner struct {
	File *File
	// Reload reads File's path again at the start of each run and checks
	// it with Known, so that a kernel that lives long runs the file as it
	// is now.
	Reload bool
	// Known is what Reload checks the file against.
	Known Known
	// Hub, when set, seats the crew for the length of each run (AddCrew,
	// then RemoveCrew): its agents' mailboxes and its links.
	Hub *hub.Hub
	// Models resolves an agent's model spec, once a run for each spec.
	Models func(spec string) (agent.Provider, error)
	// DefaultModel is the model of agents whose crew names none.
	DefaultModel string
	// Tools are the tools agents may list; an agent that lists none gets
	// them all.
	Tools *tool.Set
	// Searchable are tools found with tools.search (hub tools, MCP tools).
	Searchable *tool.Set
	// MaxSteps bounds each agent's model calls; 0 is the agent default.
	MaxSteps int

	mu     sync.Mutex
	seated map[string]context.Context // crew name → the run that holds its seat
}

var _ agent.Runner = (*Runner)(nil)

// Name implements agent.Provider.
func (*Runner) Name() string { return "crew" }

// Model implements agent.Provider: the crew's name.
func (r *Runner) Model() string { return r.File.Name }

// Stream implements agent.Provider; a Runner's is never called.
func (r *Runner) Stream(context.Context, agent.Request, func(agent.Delta) error) (agent.Usage, error) {
	return agent.Usage{}, errors.New("crew: a crew runs whole turns; Stream is not used")
}

// Run implements agent.Runner.
func (r *Runner) Run(ctx context.Context, in agent.RunInput) agent.Result {
	f := r.File
	if r.Reload {
		nf, err := Load(f.Path())
		if err == nil {
			err = nf.Validate(r.Known)
		}
		if err != nil {
			return agent.Result{Err: &agent.Error{Code: "crew_failed", Message: fmt.Sprintf("the crew file cannot run: %v (fix it and run the crew again)", err), Err: err}}
		}
		f = nf
	}
	if r.Hub != nil {
		release, err := r.seat(ctx, f)
		if err != nil {
			return agent.Result{Err: &agent.Error{Code: "crew_failed", Message: err.Error(), Err: err}}
		}
		defer release()
	}
	// The agents that name one spec share its provider for the run (a
	// script's position).
	providers := map[string]agent.Provider{}
	outputs := map[string]string{}
	last := ""
	for _, t := range f.Order() {
		a, _ := f.Agent(t.Agent)
		if t.NeedsHuman() {
			if err := confirm(ctx, in.Turn, f, t, a); err != nil {
				return agent.Result{Err: err}
			}
		}
		spec := a.Model
		if spec == "" {
			spec = f.Model
		}
		if spec == "" {
			spec = r.DefaultModel
		}
		provider, ok := providers[spec]
		if !ok {
			var err error
			if provider, err = r.Models(spec); err != nil {
				return agent.Result{Err: &agent.Error{Code: "crew_failed", Message: fmt.Sprintf("agent %s of crew %s cannot use model %q: %v", a.ID, f.Name, spec, err), Err: err}}
			}
			providers[spec] = provider
		}
		tools, searchable := r.toolsFor(a)
		var deps []string
		for _, d := range t.DependsOn {
			deps = append(deps, outputs[d])
		}
		res := subagent.Run(subagent.WithSelf(ctx, hub.Agent(f.Name, a.ID)), in.Turn, subagent.Spec{
			TaskID: t.ID, Role: a.Role, Instructions: a.Instructions, Task: t.Description, Context: deps,
			CrewID: f.Name, AgentID: a.ID, Provider: provider, Tools: tools, Searchable: searchable,
			Gate: in.Gate, Workspace: in.Workspace, MaxSteps: r.MaxSteps,
		})
		if res.Err != nil {
			if ctx.Err() != nil {
				return agent.Result{Err: ctx.Err()}
			}
			return agent.Result{Err: &agent.Error{Code: "crew_failed", Message: fmt.Sprintf("task %s (agent %s) failed: %v", t.ID, a.ID, res.Err), Err: res.Err}}
		}
		outputs[t.ID] = res.Text
		last = res.Text
	}
	if last != "" {
		id := in.Turn.NewID("msg")
		if err := in.Turn.Emit(ctx,
			&protocol.TextMessageStart{MessageID: id, Role: protocol.RoleAssistant},
			&protocol.TextMessageContent{MessageID: id, Delta: last},
			&protocol.TextMessageEnd{MessageID: id},
		); err != nil {
			return agent.Result{Err: err}
		}
	}
	return agent.Result{}
}

// seat seats the crew on the hub for the run of ctx and returns what
// gives the seat up. A run of this runner that ended (its context is done:
// it was cancelled, and its goroutines are still winding down) gives its
// seat to the new run at once, so a crew cancelled and run again runs; a
// run still in flight keeps it, and the new run is refused.
func (r *Runner) seat(ctx context.Context, f *File) (release func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.seated[f.Name]; ok && prev.Err() != nil {
		r.Hub.RemoveCrew(f.Name)
		delete(r.seated, f.Name)
	}
	if err := r.Hub.AddCrew(f.Name, f.AgentIDs(), f.Links); err != nil {
		return nil, err
	}
	if r.seated == nil {
		r.seated = make(map[string]context.Context)
	}
	r.seated[f.Name] = ctx
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.seated[f.Name] == ctx {
			r.Hub.RemoveCrew(f.Name)
			delete(r.seated, f.Name)
		}
	}, nil
}

// confirm asks the person to approve a task that declared human input.
// When nobody can be asked (no client that answers is attached), the task
// is approved: the fallback for an unattended run.
func confirm(ctx context.Context, t agent.Turn, f *File, task Task, a Agent) error {
	asker, ok := t.(agent.Asker)
	if !ok {
		return &agent.Error{Code: "crew_failed", Message: fmt.Sprintf("task %s needs a person's confirmation and nobody can be asked: run it with --events jsonl, or remove human_input", task.ID)}
	}
	ans, err := asker.Ask(ctx, agent.Question{
		Kind: agent.QuestionConfirm, Prompt: fmt.Sprintf("Run task %s (%s)?", task.ID, a.Role),
		TaskDescription: task.Description, CrewID: f.Name, AgentID: a.ID,
	})
	if err != nil {
		return err
	}
	if ans.Refused && ans.Unattended {
		return nil
	}
	if ans.Refused {
		return &agent.Error{Code: "crew_failed", Message: fmt.Sprintf("task %s needed a person's confirmation and it was refused (%s), so the crew stopped", task.ID, ans.Why)}
	}
	return nil
}

// toolsFor returns the tools an agent may call: those it lists (or every
// tool when it lists none), and the searchable ones.
func (r *Runner) toolsFor(a Agent) (*tool.Set, *tool.Set) {
	if a.Tools == nil {
		return r.Tools, r.Searchable
	}
	var tools, searchable []tool.Tool
	for _, name := range a.Tools {
		if t, ok := r.Tools.Lookup(name); ok {
			tools = append(tools, t)
		}
	}
	for _, spec := range r.Searchable.Specs() {
		if t, ok := r.Searchable.Lookup(spec.Name); ok {
			searchable = append(searchable, t)
		}
	}
	return tool.NewSet(tools...), tool.NewSet(searchable...)
}
