package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/internal/redact"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// run is one agent turn in flight. It is owned by the session actor; the
// loop goroutine reaches it only through a turn.
type run struct {
	id          string
	ctx         context.Context
	cancel      context.CancelFunc
	span        trace.Span         // ended when the loop goroutine returns
	trace       *trace.SpanContext // span's, while a tracer records it (traceCommits)
	provider    agent.Provider
	clientTools []protocol.Tool
	perms       *RunPermissions // the run's own consent rules, or nil
	usageEvents bool            // log orrery.usage after each model call (SendInput.UsageEvents)
	// context and clientState are the client's context entries and shared
	// state (SendInput); contextMsg is the system message the model reads
	// them in (with the application keys the run started with), made once
	// at the run's start, or nil.
	context     []protocol.Context
	clientState json.RawMessage
	contextMsg  *protocol.Message
	workspace   tool.Workspace
	usage       runUsage
	// steers counts the steers that joined the run; mark is the count the
	// loop had seen when it last read the conversation.
	steers, mark int
	open         openSet
	done         chan struct{} // closed when the loop goroutine returns
	// endSeq is the seq of the run's terminal event, once sequenced.
	endSeq uint64
	// streamFail is the first error of a delta emitted without waiting
	// (turn.Emit), for the loop's next Emit.
	streamFail atomic.Pointer[error]
}

// failStream records err, the fate of a delta emitted without waiting.
func (r *run) failStream(err error) { r.streamFail.CompareAndSwap(nil, &err) }

// streamErr returns the first error of a delta emitted without waiting.
func (r *run) streamErr() error {
	if p := r.streamFail.Load(); p != nil {
		return *p
	}
	return nil
}

// streamed reports whether events are only streamed deltas, which cannot
// be refused but for a stopped run or a broken store.
func streamed(events []protocol.Event) bool {
	for _, ev := range events {
		switch ev.(type) {
		case *protocol.TextMessageContent, *protocol.ToolCallArgs, *protocol.ReasoningMessageContent:
		default:
			return false
		}
	}
	return len(events) > 0
}

// openSet tracks what a run has opened and not yet closed, in the order
// opened, so the run can close each before its terminal event.
type openSet struct {
	texts, calls, reasoningMsgs, reasoningSpans, steps, subagents []string
	// awaiting are the calls whose arguments ended and whose result has
	// not come: a tool running, or a client's tool the run handed over.
	awaiting []string
	// owner maps what a sub-agent opened (by its id) to that sub-agent's
	// subagentRunId, so its closer is attributed to it too.
	owner map[string]string
}

// attribution returns ev's subagentRunId, or "".
func attribution(ev protocol.Event) string {
	if a, ok := ev.(protocol.AttributedEvent); ok {
		return a.Attribution().SubagentRunID
	}
	return ""
}

// opened records id, opened by ev, with the sub-agent ev belongs to.
func (o *openSet) opened(list *[]string, id string, ev protocol.Event) {
	*list = append(*list, id)
	if sub := attribution(ev); sub != "" {
		if o.owner == nil {
			o.owner = make(map[string]string)
		}
		o.owner[id] = sub
	}
}

// closed removes id from list.
func (o *openSet) closed(list *[]string, id string) {
	*list = remove(*list, id)
	delete(o.owner, id)
}

// closer attributes ev, a closer of id, to the sub-agent that opened id.
func (o *openSet) closer(ev protocol.AttributedEvent, id string) protocol.Event {
	ev.Attribution().SubagentRunID = o.owner[id]
	return ev
}

func remove(list []string, id string) []string {
	if i := slices.Index(list, id); i >= 0 {
		return slices.Delete(list, i, i+1)
	}
	return list
}

func (o *openSet) apply(ev protocol.Event) {
	switch e := ev.(type) {
	case *protocol.TextMessageStart:
		o.opened(&o.texts, e.MessageID, ev)
	case *protocol.TextMessageEnd:
		o.closed(&o.texts, e.MessageID)
	case *protocol.ToolCallStart:
		o.opened(&o.calls, e.ToolCallID, ev)
	case *protocol.ToolCallEnd:
		// The call waits for its result now; its owner stays, since the
		// result belongs to the same sub-agent.
		o.calls = remove(o.calls, e.ToolCallID)
		o.awaiting = append(o.awaiting, e.ToolCallID)
	case *protocol.ToolCallResult:
		o.closed(&o.awaiting, e.ToolCallID)
	case *protocol.ReasoningMessageStart:
		o.opened(&o.reasoningMsgs, e.MessageID, ev)
	case *protocol.ReasoningMessageEnd:
		o.closed(&o.reasoningMsgs, e.MessageID)
	case *protocol.ReasoningStart:
		o.opened(&o.reasoningSpans, e.MessageID, ev)
	case *protocol.ReasoningEnd:
		o.closed(&o.reasoningSpans, e.MessageID)
	case *protocol.StepStarted:
		o.opened(&o.steps, e.StepName, ev)
	case *protocol.StepFinished:
		o.closed(&o.steps, e.StepName)
	case *protocol.SubagentStarted:
		o.subagents = append(o.subagents, e.SubagentRunID)
	case *protocol.SubagentFinished:
		o.subagents = remove(o.subagents, e.SubagentRunID)
	case *protocol.SubagentError:
		o.subagents = remove(o.subagents, e.SubagentRunID)
	}
}

// closers returns the events that close everything still open, innermost
// first, before terminal. A run that did not finish (cancelled, or ended
// by an error) gives each call still waiting its result one, saying so,
// so that every client marks the call as stopped rather than running, and
// the conversation a model reads next has a result for every call. A run
// that finished leaves its client tools' calls waiting: their results
// come with the client's next run.
func (o *openSet) closers(terminal protocol.Event) []protocol.Event {
	var evs []protocol.Event
	for _, id := range o.calls {
		evs = append(evs, o.closer(&protocol.ToolCallEnd{ToolCallID: id}, id))
	}
	// A sub-agent's own calls get their results inside its span, before
	// its SUBAGENT_ERROR; the run's own (the task call that started the
	// sub-agent among them) after every span is closed.
	var own []protocol.Event
	if status, why := unfinished(terminal); status != "" {
		for _, id := range append(slices.Clone(o.calls), o.awaiting...) {
			res := &protocol.ToolCallResult{MessageID: newID("tool"), ToolCallID: id, Content: protocol.TextContent(why), Role: protocol.RoleTool}
			res.Orrery().Outcome = json.RawMessage(`{"status":"` + status + `"}`)
			if o.owner[id] == "" {
				own = append(own, res)
			} else {
				evs = append(evs, o.closer(res, id))
			}
		}
	}
	for _, id := range o.texts {
		evs = append(evs, o.closer(&protocol.TextMessageEnd{MessageID: id}, id))
	}
	for _, id := range o.reasoningMsgs {
		evs = append(evs, o.closer(&protocol.ReasoningMessageEnd{MessageID: id}, id))
	}
	for _, id := range o.reasoningSpans {
		evs = append(evs, o.closer(&protocol.ReasoningEnd{MessageID: id}, id))
	}
	for i := len(o.steps) - 1; i >= 0; i-- {
		evs = append(evs, o.closer(&protocol.StepFinished{StepName: o.steps[i]}, o.steps[i]))
	}
	for i := len(o.subagents) - 1; i >= 0; i-- {
		evs = append(evs, &protocol.SubagentError{SubagentRunID: o.subagents[i], Code: "cancelled", Message: "the run ended before the sub-agent finished"})
	}
	return append(evs, own...)
}

// unfinished is the status and the result text of the calls a run left
// waiting when it ended with terminal, or "" when the run finished.
func unfinished(terminal protocol.Event) (status, why string) {
	switch e := terminal.(type) {
	case *protocol.RunFinished:
		if e.Outcome != nil && e.Outcome.Type == protocol.OutcomeCancelled {
			return "cancelled", "the run was stopped before this call returned a result"
		}
	case *protocol.RunError:
		if e.Code == "interrupted" {
			return "interrupted", "the run was interrupted before this call returned a result"
		}
		return "error", "the run ended with an error (" + e.Code + ") before this call returned a result"
	}
	return "", ""
}

// startRun begins a run: the person's new messages, RUN_STARTED, the turn's
// state snapshot, then the loop on its own goroutine. When sub is not nil it
// is registered to receive the log from RUN_STARTED on. Runs on the actor.
func (s *Session) startRun(r *run, userMsgs []protocol.Message, input *protocol.RunAgentInput, sub *Subscription) error {
	s.assertActor()
	for _, m := range userMsgs {
		value, err := json.Marshal(UserMessage{ID: m.ID, Role: protocol.RoleUser, Content: m.Content, RunID: r.id})
		if err != nil {
			return err
		}
		if err := s.emit("", &protocol.Custom{Name: UserMessageEvent, Value: value}); err != nil {
			return err
		}
	}
	snapshot, app, err := s.state.newTurn(r.clientState)
	if err != nil {
		return err
	}
	r.contextMsg = contextMessage(r.id, r.context, app)
	if sub != nil {
		s.commits.register(sub, nil)
	}
	r.workspace = s.workspace()
	s.running.Store(true) // before RUN_STARTED can be published
	s.runIDs.add(r.id)
	// The run is in flight once its start is sequenced: a send refused
	// here (the store fails) started nothing.
	if err := s.emit(r.id,
		&protocol.RunStarted{ThreadID: s.id, RunID: r.id, ProtocolVersion: "1.0", Input: input},
		&protocol.StateSnapshot{Snapshot: snapshot},
	); err != nil {
		s.running.Store(false)
		return err
	}
	s.run = r
	s.info.OpenRun = r.id
	s.changed(SessionRunning)
	if s.info.Title == "" && len(userMsgs) > 0 {
		s.setTitle(userMsgs[0].Content.String())
	}
	go s.loop(r)
	return nil
}

// loop runs the agent loop for r until the actor accepts its end. A steer
// that arrives while the loop is finishing sends it round again.
func (s *Session) loop(r *run) {
	defer close(r.done)
	defer r.span.End()
	l := &agent.Loop{Provider: r.provider, Tools: s.runTools(), ClientTools: r.clientTools, MaxSteps: s.k.cfg.MaxSteps,
		Searchable: searchable(s), Workspace: r.workspace, Gate: &gate{s: s, r: r}}
	if obs := s.k.cfg.Observer; obs != nil {
		l.OnModelCall = func(c agent.ModelCall) { obs.ModelCalled(s.id, c) }
	}
	t := &turn{s: s, r: r}
	runTurn := func() agent.Result { return l.Run(r.ctx, t) }
	if rn, ok := r.provider.(agent.Runner); ok {
		runTurn = func() agent.Result {
			return rn.Run(r.ctx, agent.RunInput{Session: s.id, Turn: t, Gate: l.Gate, Workspace: l.Workspace, ClientTools: r.clientTools})
		}
	}
	for {
		res := runTurn()
		finished := true
		if err := s.do(context.Background(), func() { finished = s.finishRun(r, res) }); err != nil {
			return
		}
		if finished {
			return
		}
	}
}

// finishRun ends r with res, unless a steer arrived after the loop last read
// the conversation, in which case it returns false and the loop goes on.
// Runs on the actor.
func (s *Session) finishRun(r *run, res agent.Result) bool {
	s.assertActor()
	if s.run != r {
		return true // already ended by a cancel or a shutdown
	}
	if res.Err == nil && len(res.Pending) == 0 && r.steers > r.mark {
		return false
	}
	switch {
	case res.Err != nil:
		code, msg := "internal", res.Err.Error()
		var ae *agent.Error
		if errors.As(res.Err, &ae) {
			code, msg = ae.Code, ae.Message
		}
		s.endRun(r, errorTerminal(code, msg))
	case res.Cancelled:
		s.endRun(r, &protocol.RunFinished{ThreadID: s.id, RunID: r.id, Outcome: &protocol.Outcome{Type: protocol.OutcomeCancelled}})
	default:
		outcome := &protocol.Outcome{Type: protocol.OutcomeSuccess, PendingToolCallIDs: res.Pending}
		s.endRun(r, &protocol.RunFinished{ThreadID: s.id, RunID: r.id, Outcome: outcome})
	}
	return true
}

// errorTerminal is a run's RUN_ERROR. Its message is logged and sent to
// every client, so a URL in it (a provider's error naming its base URL)
// has its credentials masked, whichever provider or runner made it.
func errorTerminal(code, msg string) *protocol.RunError {
	return &protocol.RunError{Message: redact.Text(msg), Code: code}
}

// workspace is where the session's tools work: its cwd, or the kernel's
// default root, widened by the configured extra roots. Runs on the actor.
func (s *Session) workspace() tool.Workspace {
	w := s.k.cfg.Workspace
	if s.info.Cwd != "" {
		w.Root = s.info.Cwd
	}
	w.Extra = slices.Clone(w.Extra)
	return w
}

// endRun closes what r left open, sequences its terminal event with the
// run's usage and cost, and makes the session idle. Runs on the actor.
func (s *Session) endRun(r *run, terminal protocol.Event) {
	s.assertActor()
	r.cancel()
	endSpan(r.span, terminal)
	// A call waiting for consent when its run ends gets no answer.
	s.resolveAllConsent(ConsentCancelled)
	result, tokenUsage := s.runResult(r)
	switch t := terminal.(type) {
	case *protocol.RunFinished:
		t.Result, _ = json.Marshal(result)
		t.Usage = tokenUsage
	case *protocol.RunError:
		t.Usage = tokenUsage
		t.Orrery().Result = &result
	}
	// The cost is queued and the session marked idle before the terminal
	// frame, so a client that sees the run end also sees its cost
	// committed and the session idle.
	s.charge(result.MicroUSD)
	s.running.Store(false)
	// The run is over before its last frames are sequenced: should the
	// store fail now, the session ends it (kernel/fault.go), not this.
	s.run = nil
	s.info.OpenRun = ""
	// Until its terminal event is durable, a failure of the store must
	// still end the run for its clients (kernel/fault.go).
	published := s.hub.head()
	s.ended = append(slices.DeleteFunc(s.ended, func(e *run) bool { return e.endSeq != 0 && e.endSeq <= published }), r)
	evs := append(r.open.closers(terminal), terminal)
	if err := s.emit(r.id, evs...); err != nil {
		s.k.log.Error("end run", "session", s.id, "run", r.id, "err", err)
	} else {
		r.endSeq = s.head
	}
	s.untraceCommits(r, false)
	if result.MicroUSD != 0 {
		s.changed(SessionCost)
	}
	s.changed(SessionEnded)
	s.maybeCheckpoint(true)
}

// runResult is r's usage and cost as its terminal event reports them.
func (s *Session) runResult(r *run) (protocol.RunResult, []protocol.TokenUsage) {
	usage := r.usage.total
	return protocol.RunResult{
		MicroUSD:          r.usage.cost(s.k.cfg.Prices),
		InputTokens:       usage.InputTokens,
		OutputTokens:      usage.OutputTokens,
		CachedInputTokens: usage.CachedInputTokens,
		ReasoningTokens:   usage.ReasoningTokens,
	}, r.usage.tokenUsage(r.provider)
}

// cancelRun ends the run in flight as cancelled. Runs on the actor.
func (s *Session) cancelRun(runID string) error {
	s.assertActor()
	r := s.run
	if r == nil {
		return &RequestError{Msg: "no run is in flight in session " + s.id + ": there is nothing to cancel"}
	}
	if runID != "" && runID != r.id {
		return &RequestError{Msg: "run " + runID + " is not in flight in session " + s.id + " (run " + r.id + " is): cancel that one, or omit runId"}
	}
	s.endRun(r, &protocol.RunFinished{ThreadID: s.id, RunID: r.id, Outcome: &protocol.Outcome{Type: protocol.OutcomeCancelled}})
	return nil
}

// turn is the loop's agent.Turn on a session.
type turn struct {
	s *Session
	r *run
}

var _ agent.Turn = (*turn)(nil)

func (t *turn) Messages(ctx context.Context) ([]protocol.Message, error) {
	var msgs []protocol.Message
	var err error
	if derr := t.s.do(ctx, func() {
		if t.s.run != t.r {
			err = agent.ErrStopped
			return
		}
		msgs = t.s.transcript.snapshot()
		if m := t.r.contextMsg; m != nil {
			msgs = append([]protocol.Message{*m}, msgs...)
		}
		t.r.mark = t.r.steers
	}); derr != nil {
		return nil, derr
	}
	return msgs, err
}

// maxStateForModel bounds the bytes of a client's shared state the model
// is shown.
const maxStateForModel = 32 << 10

// contextMessage is the system message of run runID that gives the model
// the client's context entries and the application's shared state (app),
// or nil when there is neither.
func contextMessage(runID string, context []protocol.Context, app json.RawMessage) *protocol.Message {
	if len(context) == 0 && len(app) == 0 {
		return nil
	}
	var b strings.Builder
	if len(context) > 0 {
		b.WriteString("Context the client gave for this turn:\n")
		for _, c := range context {
			fmt.Fprintf(&b, "- %s: %s\n", c.Description, c.Value)
		}
	}
	if len(app) > 0 {
		// Every step of the run sends it: a client's state is not allowed
		// to make each call a megabyte.
		state := string(app)
		if len(state) > maxStateForModel {
			state = state[:maxStateForModel] + " … (cut: the state is longer than the model is shown)"
		}
		fmt.Fprintf(&b, "The application's shared state (JSON): %s\n", state)
	}
	return &protocol.Message{ID: "ctx_" + runID, Role: protocol.RoleSystem, Content: protocol.TextContent(b.String())}
}

// Emit logs events in the run. While the kernel holds more unsaved frames
// than Config.UnsavedFrames it first waits for the store to catch up, so
// that a loop never runs further ahead of the log than that.
//
// A streamed delta (text, tool arguments, reasoning) is handed to the
// actor without waiting for it: the actor's inbox keeps it in order with
// everything else the loop asks of the actor, and what goes wrong with it
// (the run was stopped, the store broke) is returned by the loop's next
// Emit. A loop and its actor that handed each delta back and forth ran as
// a pair that held a processor, and starved the store's writer of it.
// Every other event waits, so its error (a state delta that does not
// apply, say) is the caller's at once.
func (t *turn) Emit(ctx context.Context, events ...protocol.Event) error {
	if err := t.s.k.unsaved.admit(ctx, t.r.ctx); err != nil {
		return err
	}
	if err := t.r.streamErr(); err != nil {
		return err
	}
	if streamed(events) {
		// Counted unsaved from now, so the bound holds for deltas still in
		// the inbox; once sequenced they are counted as queued frames.
		n := len(events)
		t.s.k.unsaved.add(n)
		if t.s.postCurrent(func() {
			t.s.k.unsaved.done(n)
			if t.s.run != t.r {
				t.r.failStream(agent.ErrStopped)
				return
			}
			if err := t.s.emit(t.r.id, events...); err != nil {
				t.r.failStream(err)
			}
		}) {
			return nil
		}
		t.s.k.unsaved.done(n)
	}
	var err error
	if derr := t.s.do(ctx, func() {
		if t.s.run != t.r {
			err = agent.ErrStopped
			return
		}
		err = t.s.emit(t.r.id, events...)
	}); derr != nil {
		return derr
	}
	return err
}

func (t *turn) NewID(prefix string) string { return newID(prefix) }
