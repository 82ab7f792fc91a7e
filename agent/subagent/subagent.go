// Package subagent runs a sub-agent inside a run: another agent loop with
// its own messages, whose events go through the parent's turn attributed
// to it (subagentRunId), between SUBAGENT_STARTED and SUBAGENT_FINISHED or
// SUBAGENT_ERROR. The task tool and crews both run their agents this way.
//
// Besides the AG-UI frames, each sub-agent run is framed by two CUSTOM
// events, orrery.task.started and orrery.task.completed, that carry what
// the run event bus reports (task id, crew, agent, tokens, tool calls).
package subagent

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// Names of the CUSTOM events that frame a sub-agent run.
const (
	TaskStartedEvent   = "orrery.task.started"
	TaskCompletedEvent = "orrery.task.completed"
)

// TaskStarted is the value of orrery.task.started.
type TaskStarted struct {
	SubagentRunID string `json:"subagentRunId"`
	TaskID        string `json:"taskId"`
	Role          string `json:"role"`
	CrewID        string `json:"crewId,omitempty"`
	AgentID       string `json:"agentId,omitempty"`
	// Delegated is set when an agent handed the work over with the task
	// tool; ToolCallID is that call.
	Delegated  bool   `json:"delegated,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
	// ParentSubagentRunID is the sub-agent that delegated, when one did.
	ParentSubagentRunID string `json:"parentSubagentRunId,omitempty"`
}

// TaskCompleted is the value of orrery.task.completed.
type TaskCompleted struct {
	SubagentRunID string `json:"subagentRunId"`
	TaskID        string `json:"taskId"`
	Role          string `json:"role"`
	CrewID        string `json:"crewId,omitempty"`
	AgentID       string `json:"agentId,omitempty"`
	Success       bool   `json:"success"`
	DurationMS    int64  `json:"durationMs"`
	Tokens        int64  `json:"tokens"`
	ToolCalls     int    `json:"toolCalls"`
	// Code and Message say why it failed.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// Spec is one sub-agent run.
type Spec struct {
	// TaskID names the task; empty means the sub-agent run's id.
	TaskID string
	// Role is the agent's role, its name in SUBAGENT_STARTED.
	Role string
	// Instructions become the sub-agent's system message.
	Instructions string
	// Task is what it is asked to do, its first user message. It stays
	// off the run event bus.
	Task string
	// Context are earlier results it builds on (a crew task's
	// dependencies), given with the task.
	Context []string
	// CrewID and AgentID identify it on the hub and the bus.
	CrewID, AgentID string
	// ToolCallID is the task tool's call when an agent delegated.
	ToolCallID string

	Provider   agent.Provider
	Tools      *tool.Set
	Searchable *tool.Set
	Gate       agent.Gate
	Workspace  tool.Workspace
	MaxSteps   int
}

// Result is how a sub-agent run ended.
type Result struct {
	// RunID is the sub-agent run's id (subagentRunId).
	RunID string
	// Text is its last answer.
	Text      string
	Tokens    int64
	ToolCalls int
	Duration  time.Duration
	// Err is why it failed; nil on success.
	Err error
}

// MaxDepth bounds how deep sub-agents may nest.
const MaxDepth = 4

// Run runs spec as a sub-agent of parent's run and returns when it ends.
func Run(ctx context.Context, parent agent.Turn, spec Spec) Result {
	start := time.Now()
	id := parent.NewID("sub")
	st := &Turn{parent: parent, id: id, crew: spec.CrewID, agentID: spec.AgentID, provider: spec.Provider}
	if p, ok := parent.(*Turn); ok {
		st.parentID = p.id
		st.depth = p.depth + 1
	}
	res := Result{RunID: id}
	if st.depth >= MaxDepth {
		res.Err = &agent.Error{Code: "too_deep", Message: fmt.Sprintf("sub-agents may nest %d deep at most: do this task yourself instead of delegating it", MaxDepth)}
		return res
	}
	taskID := spec.TaskID
	if taskID == "" {
		taskID = id
	}
	started, _ := json.Marshal(TaskStarted{SubagentRunID: id, TaskID: taskID, Role: spec.Role, CrewID: spec.CrewID,
		AgentID: spec.AgentID, Delegated: spec.ToolCallID != "", ToolCallID: spec.ToolCallID, ParentSubagentRunID: st.parentID})
	if err := parent.Emit(ctx,
		&protocol.Custom{Name: TaskStartedEvent, Value: started},
		&protocol.SubagentStarted{SubagentRunID: id, Name: spec.Role, Description: spec.Task,
			ParentSubagentRunID: st.parentID, ParentToolCallID: spec.ToolCallID},
	); err != nil {
		res.Err = err
		return res
	}
	if spec.Instructions != "" {
		st.add(protocol.Message{ID: parent.NewID("sys"), Role: protocol.RoleSystem, Content: protocol.TextContent(spec.Instructions)})
	}
	task := spec.Task
	if len(spec.Context) > 0 {
		task += "\n\nResults of the tasks this one builds on:\n\n" + strings.Join(spec.Context, "\n\n---\n\n")
	}
	st.add(protocol.Message{ID: parent.NewID("user"), Role: protocol.RoleUser, Content: protocol.TextContent(task)})

	l := &agent.Loop{Provider: spec.Provider, Tools: spec.Tools, Searchable: spec.Searchable, Gate: spec.Gate,
		Workspace: spec.Workspace, MaxSteps: spec.MaxSteps}
	out := l.Run(ctx, st)
	st.mu.Lock()
	res.Text, res.Tokens, res.ToolCalls = st.lastText(), st.tokens, st.toolCalls
	st.mu.Unlock()
	res.Duration = time.Since(start)
	res.Err = out.Err
	if res.Err == nil && len(out.Pending) > 0 {
		res.Err = &agent.Error{Code: "client_tool", Message: "a sub-agent cannot call the client's tools: give it server tools only"}
	}
	done := TaskCompleted{SubagentRunID: id, TaskID: taskID, Role: spec.Role, CrewID: spec.CrewID, AgentID: spec.AgentID,
		Success: res.Err == nil, DurationMS: res.Duration.Milliseconds(), Tokens: res.Tokens, ToolCalls: res.ToolCalls}
	var end protocol.Event
	if res.Err != nil {
		done.Code, done.Message = "failed", res.Err.Error()
		if ae, ok := res.Err.(*agent.Error); ok {
			done.Code, done.Message = ae.Code, ae.Message
		}
		if ctx.Err() != nil {
			done.Code, done.Message = "cancelled", "the run was cancelled while the sub-agent worked"
		}
		end = &protocol.SubagentError{SubagentRunID: id, Message: done.Message, Code: done.Code}
	} else {
		result, _ := json.Marshal(res.Text)
		end = &protocol.SubagentFinished{SubagentRunID: id, Result: result, Outcome: &protocol.Outcome{Type: protocol.OutcomeSuccess}}
	}
	value, _ := json.Marshal(done)
	// The closing events go out even when ctx ended; the session drops
	// them if the run is over.
	if err := parent.Emit(context.WithoutCancel(ctx), &protocol.Custom{Name: TaskCompletedEvent, Value: value}, end); err != nil && res.Err == nil {
		res.Err = err
	}
	return res
}

// Turn is a sub-agent's agent.Turn: its own conversation, with every event
// it emits attributed to it and passed to the parent's turn.
type Turn struct {
	parent   agent.Turn
	id       string
	parentID string
	depth    int
	crew     string
	agentID  string
	provider agent.Provider // its model, which its usage is priced against

	mu        sync.Mutex // guards what follows
	msgs      []protocol.Message
	index     map[string]int
	tokens    int64
	toolCalls int
}

var (
	_ agent.Turn    = (*Turn)(nil)
	_ agent.Asker   = (*Turn)(nil)
	_ agent.Charger = (*Turn)(nil)
)

// ID returns the sub-agent run's id.
func (t *Turn) ID() string { return t.id }

func (t *Turn) add(m protocol.Message) *protocol.Message {
	if t.index == nil {
		t.index = make(map[string]int)
	}
	if i, ok := t.index[m.ID]; ok {
		return &t.msgs[i]
	}
	t.index[m.ID] = len(t.msgs)
	t.msgs = append(t.msgs, m)
	return &t.msgs[len(t.msgs)-1]
}

func (t *Turn) assistant(id string) *protocol.Message {
	if i, ok := t.index[id]; ok {
		return &t.msgs[i]
	}
	return t.add(protocol.Message{ID: id, Role: protocol.RoleAssistant, Content: protocol.TextContent("")})
}

// lastText returns the text of the last assistant message that has some.
func (t *Turn) lastText() string {
	for i := len(t.msgs) - 1; i >= 0; i-- {
		if t.msgs[i].Role == protocol.RoleAssistant && t.msgs[i].Content.String() != "" {
			return t.msgs[i].Content.String()
		}
	}
	return ""
}

// Messages implements agent.Turn: the sub-agent's own conversation.
func (t *Turn) Messages(ctx context.Context) ([]protocol.Message, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]protocol.Message, len(t.msgs))
	copy(out, t.msgs)
	for i := range out {
		out[i].ToolCalls = append([]protocol.ToolCall(nil), out[i].ToolCalls...)
	}
	return out, nil
}

// Emit implements agent.Turn: it folds the events into the sub-agent's
// conversation and passes them, attributed, to the parent.
func (t *Turn) Emit(ctx context.Context, events ...protocol.Event) error {
	t.mu.Lock()
	for _, ev := range events {
		Attribute(ev, t.id)
		if Attribution(ev) == t.id {
			t.apply(ev) // a nested sub-agent's events are its own
		}
	}
	t.mu.Unlock()
	return t.parent.Emit(ctx, events...)
}

func (t *Turn) apply(ev protocol.Event) {
	switch e := ev.(type) {
	case *protocol.TextMessageStart:
		t.assistant(e.MessageID)
	case *protocol.TextMessageContent:
		m := t.assistant(e.MessageID)
		m.Content = protocol.TextContent(m.Content.String() + e.Delta)
	case *protocol.ToolCallStart:
		parent := e.ParentMessageID
		if parent == "" {
			parent = e.ToolCallID
		}
		m := t.assistant(parent)
		m.ToolCalls = append(m.ToolCalls, protocol.ToolCall{ID: e.ToolCallID, Type: "function", Function: protocol.FunctionCall{Name: e.ToolCallName}})
	case *protocol.ToolCallArgs:
		for i := len(t.msgs) - 1; i >= 0; i-- {
			for j := range t.msgs[i].ToolCalls {
				if t.msgs[i].ToolCalls[j].ID == e.ToolCallID {
					t.msgs[i].ToolCalls[j].Function.Arguments += e.Delta
					return
				}
			}
		}
	case *protocol.ToolCallResult:
		t.toolCalls++
		t.add(protocol.ToolResultMessage(e))
	}
}

// Usage implements agent.Turn: it counts the sub-agent's tokens and
// charges them to the parent against the sub-agent's own model.
func (t *Turn) Usage(ctx context.Context, u agent.Usage) error {
	c := agent.Charge{Usage: u, SubagentRunID: t.id}
	if t.provider != nil {
		c.Provider, c.Model = t.provider.Name(), t.provider.Model()
	}
	return t.Charge(ctx, c)
}

// Charge implements agent.Charger: a nested sub-agent's usage counts in
// this one's tokens and goes on to the parent, keeping its model. A
// parent that is no Charger takes it as its own usage.
func (t *Turn) Charge(ctx context.Context, c agent.Charge) error {
	t.mu.Lock()
	t.tokens += c.Usage.InputTokens + c.Usage.OutputTokens
	t.mu.Unlock()
	if ch, ok := t.parent.(agent.Charger); ok && c.Provider != "" {
		return ch.Charge(ctx, c)
	}
	return t.parent.Usage(ctx, c.Usage)
}

// NewID implements agent.Turn.
func (t *Turn) NewID(prefix string) string { return t.parent.NewID(prefix) }

// Ask implements agent.Asker through the parent, naming the sub-agent's
// crew and agent. A parent that cannot ask refuses.
func (t *Turn) Ask(ctx context.Context, q agent.Question) (agent.Answer, error) {
	if q.CrewID == "" {
		q.CrewID = t.crew
	}
	if q.AgentID == "" {
		q.AgentID = t.agentID
	}
	if a, ok := t.parent.(agent.Asker); ok {
		return a.Ask(ctx, q)
	}
	return agent.Answer{Refused: true, Why: "nobody can be asked in this run"}, nil
}

var attributedType = reflect.TypeFor[protocol.Attributed]()

// Attribute sets ev's subagentRunId to id when ev's type carries one and
// it is not set yet (a nested sub-agent's events keep their own).
func Attribute(ev protocol.Event, id string) {
	v := reflect.ValueOf(ev)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	f := v.Elem().FieldByName("Attributed")
	if !f.IsValid() || f.Type() != attributedType || !f.CanSet() {
		return
	}
	if f.Field(0).String() == "" {
		f.Field(0).SetString(id)
	}
}

// Attribution returns ev's subagentRunId, or "" when it has none.
func Attribution(ev protocol.Event) string {
	v := reflect.ValueOf(ev)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return ""
	}
	f := v.Elem().FieldByName("Attributed")
	if !f.IsValid() || f.Type() != attributedType {
		return ""
	}
	return f.Field(0).String()
}
