package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// DefaultMaxSteps bounds the model calls of one loop when Loop.MaxSteps is 0.
const DefaultMaxSteps = 50

// Loop is one agent turn's model ↔ tools loop. Its zero value is not usable:
// Provider is required.
type Loop struct {
	Provider Provider
	// Tools are the tools the kernel runs itself.
	Tools *tool.Set
	// ClientTools are the tools the client offered in RunAgentInput; a call
	// to one ends the loop with the call pending.
	ClientTools []protocol.Tool
	// MaxSteps bounds the model calls; 0 means DefaultMaxSteps.
	MaxSteps int
	// Searchable are tools kept out of every request: the model finds them
	// with the tools.search tool, and a tool found is callable from the
	// next step on.
	Searchable *tool.Set
	// Workspace is where the session's tools work.
	Workspace tool.Workspace
	// Gate, when set, decides whether each server tool call may run.
	Gate Gate
	// OnModelCall, when set, is told of each model call once it ends (for
	// metrics).
	OnModelCall func(ModelCall)

	found map[string]bool // searchable tools found in this run
	args  argChecker
}

// SearchTool is the name of the tool that finds searchable tools.
const SearchTool = "tools.search"

// maxSearchResults bounds how many tools one search returns.
const maxSearchResults = 10

func searchSpec() tool.Spec {
	return tool.Spec{
		Name:        SearchTool,
		Description: "Finds tools that are not listed by default (for example ui.show, to put a surface on the person's screen). Give words for what you want to do; the tools found can be called from the next step on.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words describing the tool you need; empty lists every searchable tool"}},"additionalProperties":false}`),
	}
}

// search answers a tools.search call: the searchable tools whose name or
// description has every word of the query, with their full specs.
func (l *Loop) search(args string) tool.Result {
	var q struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(argsOrEmpty(args), &q); err != nil {
		return tool.Result{Text: `tools.search needs arguments {"query": "…"}: ` + err.Error(), Error: true}
	}
	words := strings.Fields(strings.ToLower(q.Query))
	type found struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	var out []found
	for _, spec := range l.Searchable.Specs() {
		hay := strings.ToLower(spec.Name + " " + spec.Description)
		match := true
		for _, w := range words {
			if !strings.Contains(hay, w) {
				match = false
				break
			}
		}
		if match && len(out) < maxSearchResults {
			out = append(out, found{spec.Name, spec.Description, spec.Parameters})
			if l.found == nil {
				l.found = make(map[string]bool)
			}
			l.found[spec.Name] = true
		}
	}
	if len(out) == 0 {
		names := make([]string, 0)
		for _, spec := range l.Searchable.Specs() {
			names = append(names, spec.Name)
		}
		return tool.Result{Text: fmt.Sprintf("no tool matches %q; the searchable tools are: %s", q.Query, strings.Join(names, ", "))}
	}
	data, _ := json.Marshal(map[string]any{"tools": out})
	return tool.Result{Text: string(data)}
}

// Run runs model steps until the model answers without calling a tool, a
// client tool is called, or an error occurs. Every message, reasoning
// message and tool call it opens is closed before it returns.
func (l *Loop) Run(ctx context.Context, t Turn) Result {
	maxSteps := l.MaxSteps
	if maxSteps <= 0 {
		maxSteps = DefaultMaxSteps
	}
	for step := 0; step < maxSteps; step++ {
		specs := l.specs()
		msgs, err := t.Messages(ctx)
		if err != nil {
			return Result{Err: err}
		}
		st := &stepState{turn: t, msgID: t.NewID("msg")}
		mctx, ms := startModelSpan(ctx, l.Provider)
		usage, err := l.Provider.Stream(mctx, Request{Messages: msgs, Tools: specs}, func(d Delta) error {
			ms.delta()
			return st.apply(ctx, d)
		})
		call := ms.end(usage, err)
		if l.OnModelCall != nil {
			l.OnModelCall(call)
		}
		if cerr := st.closeAll(ctx); err == nil {
			err = cerr
		}
		if uerr := t.Usage(ctx, usage); err == nil {
			err = uerr
		}
		if err != nil {
			return Result{Err: err}
		}
		if len(st.calls) == 0 {
			return Result{}
		}
		pending, err := l.runTools(ctx, t, st.calls)
		if err != nil {
			return Result{Err: err}
		}
		if len(pending) > 0 {
			return Result{Pending: pending}
		}
	}
	return Result{Err: &Error{
		Code:    "max_steps",
		Message: fmt.Sprintf("the agent made %d model calls without finishing; raise max_steps in [agent] or narrow the task", maxSteps),
	}}
}

func (l *Loop) specs() []tool.Spec {
	specs := l.Tools.Specs()
	if len(l.Searchable.Specs()) > 0 {
		specs = append(specs, searchSpec())
		for _, spec := range l.Searchable.Specs() {
			if l.found[spec.Name] {
				specs = append(specs, spec)
			}
		}
	}
	for _, ct := range l.ClientTools {
		specs = append(specs, tool.Spec{Name: ct.Name, Description: ct.Description, Parameters: ct.Parameters})
	}
	return specs
}

func (l *Loop) isClientTool(name string) bool {
	for _, ct := range l.ClientTools {
		if ct.Name == name {
			return true
		}
	}
	return false
}

// runTools runs the server tools among calls, in order, and returns the ids
// of the client tool calls left for the client.
func (l *Loop) runTools(ctx context.Context, t Turn, calls []*call) ([]string, error) {
	var pending []string
	for _, c := range calls {
		if l.isClientTool(c.name) {
			pending = append(pending, c.id)
			continue
		}
		res, o, err := l.runTool(ctx, t, c)
		if err != nil {
			return nil, err
		}
		if err := t.Emit(ctx, toolResultEvents(t, c.id, res, o)...); err != nil {
			return nil, err
		}
	}
	return pending, nil
}

// outcome is what TOOL_CALL_RESULT's metadata.orrery.outcome says of a call
// beyond its status: the rule the gate applied, and whether the call's
// surface is the stream of its live output.
type outcome struct {
	rule     string
	denied   bool
	streamed bool
}

// runTool passes one server tool call through the gate and runs it. Its
// error ends the loop (the run was cancelled, or the session failed); a
// failure the model should read is in the result.
func (l *Loop) runTool(ctx context.Context, t Turn, c *call) (res tool.Result, o outcome, err error) {
	ctx, span := startToolSpan(ctx, c.name, c.id)
	defer func() {
		status := "ok"
		switch {
		case err != nil:
			status = "stopped"
			span.SetStatus(codes.Error, err.Error())
		case o.denied:
			status = "denied"
		case res.Error:
			status = "error"
			span.SetStatus(codes.Error, "the tool reported an error")
		}
		span.SetAttributes(attribute.String("orrery.tool.outcome", status))
		span.End()
	}()
	if c.name == SearchTool && l.Searchable != nil {
		return l.search(c.args.String()), o, nil
	}
	tl, ok := l.Tools.Lookup(c.name)
	if !ok {
		tl, ok = l.Searchable.Lookup(c.name)
	}
	if !ok {
		return tool.Result{Text: fmt.Sprintf("there is no tool named %q; call one of: %s", c.name, strings.Join(l.toolNames(), ", ")), Error: true}, o, nil
	}
	args := argsOrEmpty(c.args.String())
	if err := l.args.check(tl.Spec(), args); err != nil {
		return tool.Result{Text: err.Error(), Error: true}, o, nil
	}
	if l.Gate != nil {
		span.AddEvent("orrery.consent.check")
		v, err := l.Gate.Check(ctx, GateCall{ID: c.id, Tool: tl, Args: args})
		if err != nil {
			return tool.Result{}, o, err
		}
		span.AddEvent("orrery.consent.decided", trace.WithAttributes(attribute.Bool("orrery.consent.allowed", v.Allow), attribute.String("orrery.consent.rule", v.Rule)))
		o.rule = v.Rule
		if !v.Allow {
			o.denied = true
			return tool.Result{Text: v.Message, Error: true}, o, nil
		}
	}
	st := &liveSurface{turn: t, ctx: ctx, id: c.id}
	res, err = tl.Call(WithEnv(ctx, Env{Loop: l, Turn: t}), tool.Call{ID: c.id, Args: args, Workspace: l.Workspace, Stream: st.add})
	o.streamed = st.started()
	if err != nil {
		if ctx.Err() != nil {
			return tool.Result{}, o, ctx.Err()
		}
		res = tool.Result{Text: fmt.Sprintf("tool %s failed: %v", c.name, err), Error: true}
	}
	return res, o, nil
}

// liveSurface streams a tool's live output onto its surface in this turn's
// state: /surfaces/<call id> becomes a stream surface whose chunks grow.
type liveSurface struct {
	turn Turn
	ctx  context.Context
	id   string

	mu      sync.Mutex
	opened  bool
	stopped bool // the run ended: later output is dropped
}

func (s *liveSurface) add(chunk string) {
	if chunk == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	base := "/surfaces/" + escapePointer(s.id)
	value, _ := json.Marshal(chunk)
	var ops []protocol.PatchOp
	if !s.opened {
		ops = []protocol.PatchOp{
			{Op: "add", Path: base, Value: json.RawMessage(`{"kind":{"t":"stream","value":""}}`)},
			{Op: "add", Path: base + "/kind/chunks", Value: json.RawMessage("[" + string(value) + "]")},
		}
	} else {
		ops = []protocol.PatchOp{{Op: "add", Path: base + "/kind/chunks/-", Value: value}}
	}
	if err := s.turn.Emit(s.ctx, &protocol.StateDelta{Delta: ops}); err != nil {
		s.stopped = true
		return
	}
	s.opened = true
}

func (s *liveSurface) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened
}

func (l *Loop) toolNames() []string {
	var names []string
	for _, s := range l.specs() {
		names = append(names, s.Name)
	}
	return names
}

// toolResultEvents reports a tool's result: the tool message, with its
// outcome in metadata.orrery.outcome, and the result's surface in this
// turn's state (unless the call streamed onto its surface already).
func toolResultEvents(t Turn, callID string, res tool.Result, o outcome) []protocol.Event {
	status := "ok"
	switch {
	case o.denied:
		status = "denied"
	case res.Error:
		status = "error"
	}
	meta := map[string]string{"status": status, "surface": callID}
	if o.rule != "" {
		meta["rule"] = o.rule
	}
	outcomeJSON, _ := json.Marshal(meta)
	result := &protocol.ToolCallResult{
		MessageID:  t.NewID("tool"),
		ToolCallID: callID,
		Content:    protocol.TextContent(res.Text),
		Role:       protocol.RoleTool,
	}
	result.Orrery().Outcome = outcomeJSON
	evs := []protocol.Event{result}
	if o.streamed {
		return evs
	}
	surface := res.Surface
	if len(surface) == 0 {
		surface, _ = json.Marshal(map[string]any{"kind": map[string]string{"t": "text", "value": res.Text}})
	}
	return append(evs, &protocol.StateDelta{Delta: []protocol.PatchOp{{
		Op: "add", Path: "/surfaces/" + escapePointer(callID), Value: surface,
	}}})
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// call is a tool call the model made in the current step.
type call struct {
	id, name string
	args     strings.Builder
}

// stepState turns one model step's deltas into AG-UI events, opening and
// closing messages as the stream moves between text, reasoning and calls.
type stepState struct {
	turn        Turn
	msgID       string // the step's assistant message, parent of its calls
	textOpen    bool
	textUsed    bool   // the step has opened a text message
	textID      string // the open text message
	reasoningID string // open reasoning span and message, or ""
	openCall    *call
	calls       []*call
}

func (s *stepState) apply(ctx context.Context, d Delta) error {
	var evs []protocol.Event
	switch d.Kind {
	case DeltaText:
		evs = append(evs, s.closeReasoning()...)
		evs = append(evs, s.closeCall()...)
		if !s.textOpen {
			s.textOpen = true
			// A step's first text is its message; text after a call or
			// reasoning is a new message, since an id starts only once.
			s.textID = s.msgID
			if s.textUsed {
				s.textID = s.turn.NewID("msg")
			}
			s.textUsed = true
			evs = append(evs, &protocol.TextMessageStart{MessageID: s.textID, Role: protocol.RoleAssistant})
		}
		evs = append(evs, &protocol.TextMessageContent{MessageID: s.textID, Delta: d.Text})
	case DeltaReasoning:
		evs = append(evs, s.closeText()...)
		evs = append(evs, s.closeCall()...)
		if s.reasoningID == "" {
			s.reasoningID = s.turn.NewID("reason")
			evs = append(evs,
				&protocol.ReasoningStart{MessageID: s.reasoningID},
				&protocol.ReasoningMessageStart{MessageID: s.reasoningID, Role: protocol.RoleReasoning})
		}
		evs = append(evs, &protocol.ReasoningMessageContent{MessageID: s.reasoningID, Delta: d.Text})
	case DeltaToolCall:
		evs = append(evs, s.closeText()...)
		evs = append(evs, s.closeReasoning()...)
		evs = append(evs, s.closeCall()...)
		id := d.ToolCallID
		if id == "" {
			id = s.turn.NewID("call")
		}
		c := &call{id: id, name: d.ToolName}
		s.openCall = c
		s.calls = append(s.calls, c)
		evs = append(evs, &protocol.ToolCallStart{ToolCallID: id, ToolCallName: d.ToolName, ParentMessageID: s.msgID})
		if d.Text != "" {
			c.args.WriteString(d.Text)
			evs = append(evs, &protocol.ToolCallArgs{ToolCallID: id, Delta: d.Text})
		}
	case DeltaToolArgs:
		c := s.openCall
		if d.ToolCallID != "" && (c == nil || c.id != d.ToolCallID) {
			c = nil
			for _, cc := range s.calls {
				if cc.id == d.ToolCallID {
					c = cc
				}
			}
		}
		if c == nil || c != s.openCall {
			return &Error{Code: "provider_error", Message: "the model sent tool arguments for a call that is not open; this is a provider bug, try again or choose another model"}
		}
		c.args.WriteString(d.Text)
		evs = append(evs, &protocol.ToolCallArgs{ToolCallID: c.id, Delta: d.Text})
	default:
		return fmt.Errorf("agent: unknown delta kind %d", d.Kind)
	}
	return s.turn.Emit(ctx, evs...)
}

func (s *stepState) closeText() []protocol.Event {
	if !s.textOpen {
		return nil
	}
	s.textOpen = false
	return []protocol.Event{&protocol.TextMessageEnd{MessageID: s.textID}}
}

func (s *stepState) closeReasoning() []protocol.Event {
	if s.reasoningID == "" {
		return nil
	}
	id := s.reasoningID
	s.reasoningID = ""
	return []protocol.Event{&protocol.ReasoningMessageEnd{MessageID: id}, &protocol.ReasoningEnd{MessageID: id}}
}

func (s *stepState) closeCall() []protocol.Event {
	if s.openCall == nil {
		return nil
	}
	id := s.openCall.id
	s.openCall = nil
	return []protocol.Event{&protocol.ToolCallEnd{ToolCallID: id}}
}

// closeAll closes whatever the step left open. It uses a fresh context so
// the closing events are sequenced even when the step was interrupted; the
// session drops them if the run has already ended.
func (s *stepState) closeAll(ctx context.Context) error {
	var evs []protocol.Event
	evs = append(evs, s.closeText()...)
	evs = append(evs, s.closeReasoning()...)
	evs = append(evs, s.closeCall()...)
	if len(evs) == 0 {
		return nil
	}
	return s.turn.Emit(context.WithoutCancel(ctx), evs...)
}
