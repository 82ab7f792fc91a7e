package bus

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/getorrery/orrery/agent/subagent"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// Bridge puts one run of a session on the bus: it translates the session's
// frames into outbound kinds, answers consent requests and questions from
// input.given, and seats the watching program on the hub. Create it with
// NewBridge; it is safe for concurrent use.
type Bridge struct {
	w       *Writer
	sess    Session
	hub     Hub // nil: hub verbs are refused
	seat    string
	stream  bool
	caller  kernel.Caller
	log     *slog.Logger
	detach  func()
	sendCtx context.Context

	mu       sync.Mutex // guards the fields below
	runID    string
	pending  []pendingAsk    // questions waiting for an answer from stdin, oldest first
	open     map[string]bool // questions asked and not yet resolved, as the frames tell
	inClosed bool            // stdin ended: every question is refused
	calls    map[string]*callInfo
	agents   map[string]who // subagentRunId → who
}

type pendingAsk struct {
	id      string
	consent bool // a consent request; else a question
}

type callInfo struct {
	name  string
	args  strings.Builder
	ended int64 // TOOL_CALL_END's timestamp (ms)
	who   who
}

type who struct{ crew, agent string }

// Options configure a Bridge.
type Options struct {
	// Client is the watching program's seat, client://{Client}; empty
	// means hub.DefaultClient.
	Client string
	// Stream adds llm.delta for each piece of generated text.
	Stream bool
	// Logger receives what the bridge ignores; nil means slog.Default().
	Logger *slog.Logger
}

// Session is what a bridge needs of the session it follows: to settle
// its questions as the watching program.
type Session interface {
	AnswerConsent(ctx context.Context, request, option string) error
	AnswerInput(ctx context.Context, request, value string) error
	RefuseInput(ctx context.Context, request string) error
}

// Hub is the event hub the watching program is seated on, acting from its
// seat. *hub.Hub is one; a client of another process's kernel is another.
type Hub interface {
	Attach(addr string, deliver func(hub.Message)) (detach func(), err error)
	Post(from, to string, payload json.RawMessage) error
	Send(ctx context.Context, from, to string, payload json.RawMessage, timeout time.Duration, correlationID string) (hub.Message, error)
	Publish(from, topic string, payload json.RawMessage, retainAs string) (hub.PublishReport, error)
	Reply(correlationID string, payload json.RawMessage) error
	Subscribe(addr, topic string) error
	Unsubscribe(addr, topic string) error
}

// kernelSession is a session of this process's kernel, answered as by.
type kernelSession struct {
	s  *kernel.Session
	by kernel.Caller
}

func (k kernelSession) AnswerConsent(ctx context.Context, request, option string) error {
	return k.s.AnswerConsent(ctx, k.by, request, option)
}

func (k kernelSession) AnswerInput(ctx context.Context, request, value string) error {
	return k.s.AnswerInput(ctx, k.by, request, value)
}

func (k kernelSession) RefuseInput(ctx context.Context, request string) error {
	return k.s.RefuseInput(ctx, k.by, request)
}

// NewBridge returns a bridge writing to w for sess of this process's
// kernel, seated on h (which may be nil: then hub verbs are refused).
func NewBridge(ctx context.Context, w *Writer, sess *kernel.Session, h *hub.Hub, opts Options) (*Bridge, error) {
	caller := callerOf(opts)
	var hb Hub
	if h != nil {
		hb = h
	}
	return NewRemoteBridge(ctx, w, kernelSession{sess, caller}, hb, opts)
}

// callerOf is the kernel caller a bridge with opts answers as.
func callerOf(opts Options) kernel.Caller {
	if opts.Client == "" {
		opts.Client = hub.DefaultClient
	}
	return kernel.Caller{Client: opts.Client, Draws: []string{protocol.DrawConsent}}
}

// NewRemoteBridge returns a bridge writing to w for sess, which may be a
// session of another process's kernel, seated on h (nil: hub verbs are
// refused). sess must answer as a client that draws consent, named
// opts.Client, and h act from that client's seat.
func NewRemoteBridge(ctx context.Context, w *Writer, sess Session, h Hub, opts Options) (*Bridge, error) {
	if opts.Client == "" {
		opts.Client = hub.DefaultClient
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	b := &Bridge{
		w: w, sess: sess, hub: h, seat: hub.Client(opts.Client), stream: opts.Stream, log: opts.Logger, sendCtx: ctx,
		caller: callerOf(opts),
		calls:  map[string]*callInfo{}, agents: map[string]who{}, open: map[string]bool{},
	}
	if h != nil {
		detach, err := h.Attach(b.seat, b.deliver)
		if err != nil {
			return nil, err
		}
		b.detach = detach
	}
	return b, nil
}

// Caller is the kernel caller the bridge subscribes and answers as (on
// this process's kernel): it draws consent, so the kernel asks it.
func (b *Bridge) Caller() kernel.Caller { return b.caller }

// Seat returns the watching program's hub address.
func (b *Bridge) Seat() string { return b.seat }

// Close leaves the hub seat.
func (b *Bridge) Close() {
	if b.detach != nil {
		b.detach()
	}
}

// Started writes run.started and follows runID from now on.
func (b *Bridge) Started(target string) error {
	_, err := b.w.Write(Event{Kind: KindRunStarted}.With("target", target).With("stream", b.stream))
	return err
}

// Follow names the run whose terminal frame ends the bus's run.
func (b *Bridge) Follow(runID string) {
	b.mu.Lock()
	b.runID = runID
	b.mu.Unlock()
}

func (b *Bridge) write(ev Event) {
	if _, err := b.w.Write(ev); err != nil {
		b.log.Error("bus: write", "kind", ev.Kind, "err", err)
	}
}

// deliver relays what the hub sends the seat as hub.message.
func (b *Bridge) deliver(m hub.Message) {
	ev := Event{Kind: KindHubMessage, CorrelationID: m.CorrelationID}.With("from", m.From).With("topic", m.Topic)
	if len(m.Payload) > 0 {
		ev = ev.With("payload", m.Payload)
	}
	if m.ExpectsReply {
		ev = ev.With("expectsReply", true)
	}
	b.write(ev)
}

// Frame translates one frame of the session. It reports whether the frame
// ended the followed run, and the run's exit code then.
func (b *Bridge) Frame(f kernel.Frame) (done bool, exitCode int) {
	ev, err := protocol.DecodeEvent(f.Data)
	if err != nil {
		b.log.Warn("bus: undecodable frame", "seq", f.Seq, "err", err)
		return false, 0
	}
	ts := ev.Header().Timestamp
	b.mu.Lock()
	runID := b.runID
	w := b.agents[subagent.Attribution(ev)]
	b.mu.Unlock()
	switch e := ev.(type) {
	case *protocol.TextMessageContent:
		if b.stream && e.Delta != "" {
			b.write(Event{Kind: KindLLMDelta, CrewID: w.crew, AgentID: w.agent}.With("text", e.Delta))
		}
	case *protocol.ToolCallStart:
		b.mu.Lock()
		b.calls[e.ToolCallID] = &callInfo{name: e.ToolCallName, who: w}
		b.mu.Unlock()
	case *protocol.ToolCallArgs:
		b.mu.Lock()
		if c := b.calls[e.ToolCallID]; c != nil {
			c.args.WriteString(e.Delta)
		}
		b.mu.Unlock()
	case *protocol.ToolCallEnd:
		b.mu.Lock()
		c := b.calls[e.ToolCallID]
		if c != nil {
			c.ended = ts
		}
		b.mu.Unlock()
		if c != nil {
			b.write(Event{Kind: KindToolCalled, CrewID: c.who.crew, AgentID: c.who.agent, CorrelationID: e.ToolCallID}.
				With("toolName", c.name).With("argsSummary", ArgsSummary(c.args.String())))
		}
	case *protocol.ToolCallResult:
		b.mu.Lock()
		c := b.calls[e.ToolCallID]
		delete(b.calls, e.ToolCallID)
		b.mu.Unlock()
		if c == nil {
			break
		}
		var o struct{ Status string }
		_ = json.Unmarshal(e.Orrery().Outcome, &o)
		b.write(Event{Kind: KindToolReturned, CrewID: c.who.crew, AgentID: c.who.agent, CorrelationID: e.ToolCallID}.
			With("toolName", c.name).With("success", o.Status == "ok").With("durationMs", max(ts-c.ended, 0)))
	case *protocol.Custom:
		b.custom(e, w)
	case *protocol.RunFinished:
		if e.RunID != runID {
			break
		}
		tokens := totalTokens(e.Usage)
		var result protocol.RunResult
		_ = json.Unmarshal(e.Result, &result)
		if e.Outcome != nil && e.Outcome.Type == protocol.OutcomeCancelled {
			b.write(Event{Kind: KindError}.With("code", CodeCrewCancelled).With("message", "the run was cancelled").With("recoverable", false))
			b.write(Event{Kind: KindRunFinished}.With("success", false).With("exitCode", 130).With("tokens", tokens).With("microUsd", result.MicroUSD))
			return true, 130
		}
		b.write(Event{Kind: KindRunFinished}.With("success", true).With("exitCode", 0).With("tokens", tokens).With("microUsd", result.MicroUSD))
		return true, 0
	case *protocol.RunError:
		if f.Run != runID {
			break
		}
		code := CodeCrewFailed
		if e.Code == "interrupted" {
			code = CodeCrewCancelled
		}
		b.write(Event{Kind: KindError}.With("code", code).With("message", e.Message).With("recoverable", false))
		var micro int64
		if r := e.Orrery().Result; r != nil {
			micro = r.MicroUSD
		}
		b.write(Event{Kind: KindRunFinished}.With("success", false).With("exitCode", 3).With("tokens", totalTokens(e.Usage)).With("microUsd", micro))
		return true, 3
	}
	return false, 0
}

func totalTokens(u []protocol.TokenUsage) int64 {
	var n int64
	for _, t := range u {
		n += t.InputTokens + t.OutputTokens
	}
	return n
}

func (b *Bridge) custom(e *protocol.Custom, w who) {
	switch e.Name {
	case subagent.TaskStartedEvent:
		var v subagent.TaskStarted
		if json.Unmarshal(e.Value, &v) != nil {
			return
		}
		agentID := v.AgentID
		if agentID == "" {
			agentID = v.Role
		}
		b.mu.Lock()
		b.agents[v.SubagentRunID] = who{crew: v.CrewID, agent: agentID}
		b.mu.Unlock()
		if v.Delegated {
			b.write(Event{Kind: KindDelegationStarted, CrewID: w.crew, AgentID: w.agent, CausationID: v.ToolCallID}.With("toRole", v.Role))
			b.write(Event{Kind: KindAgentSpawned, CrewID: v.CrewID, AgentID: agentID, CausationID: v.ToolCallID}.
				With("role", v.Role).With("reason", "delegated with the task tool"))
		}
		b.write(Event{Kind: KindTaskStarted, CrewID: v.CrewID, AgentID: agentID}.With("taskId", v.TaskID).With("agentRole", v.Role))
	case subagent.TaskCompletedEvent:
		var v subagent.TaskCompleted
		if json.Unmarshal(e.Value, &v) != nil {
			return
		}
		agentID := v.AgentID
		if agentID == "" {
			agentID = v.Role
		}
		b.write(Event{Kind: KindTaskCompleted, CrewID: v.CrewID, AgentID: agentID}.With("taskId", v.TaskID).With("agentRole", v.Role).
			With("success", v.Success).With("durationMs", v.DurationMS).With("tokens", v.Tokens).With("toolCalls", v.ToolCalls))
	case kernel.UsageEvent:
		var v kernel.Usage
		if json.Unmarshal(e.Value, &v) != nil {
			return
		}
		b.write(Event{Kind: KindCostUpdated, CrewID: w.crew, AgentID: w.agent}.With("tokens", v.TotalTokens).With("model", v.Model).
			With("provider", v.Provider).With("microUsd", v.MicroUSD))
	case kernel.ConsentRequestedEvent:
		var v kernel.ConsentRequested
		if json.Unmarshal(e.Value, &v) != nil {
			return
		}
		what := v.Tool
		if v.Subject != "" {
			what += "(" + v.Subject + ")"
		}
		// Recorded before it is written, so an answer that comes at once
		// finds it.
		refuse := b.ask(pendingAsk{id: v.Request, consent: true})
		b.write(Event{Kind: KindInputNeeded, CrewID: w.crew, AgentID: w.agent, CorrelationID: v.Request}.
			With("inputKind", InputConfirm).With("prompt", "Allow "+what+"?").With("defaultValue", "no"))
		refuse()
	case kernel.InputRequestedEvent:
		var v kernel.InputRequested
		if json.Unmarshal(e.Value, &v) != nil {
			return
		}
		ev := Event{Kind: KindInputNeeded, CrewID: v.CrewID, AgentID: v.AgentID, CorrelationID: v.Request}.
			With("inputKind", v.InputKind).With("prompt", v.Prompt)
		if len(v.Choices) > 0 {
			ev = ev.With("choices", v.Choices)
		}
		refuse := b.ask(pendingAsk{id: v.Request})
		b.write(ev.With("defaultValue", v.DefaultValue).With("taskDescription", v.TaskDescription))
		refuse()
	case kernel.ConsentResolvedEvent, kernel.InputResolvedEvent:
		var v struct{ Request string }
		if json.Unmarshal(e.Value, &v) != nil {
			return
		}
		b.mu.Lock()
		b.pending = slices.DeleteFunc(b.pending, func(p pendingAsk) bool { return p.id == v.Request })
		delete(b.open, v.Request)
		b.mu.Unlock()
	}
}

// ask records a question. It returns what to call once the question is
// on the stream: when stdin has ended, that refuses it.
func (b *Bridge) ask(p pendingAsk) func() {
	b.mu.Lock()
	b.open[p.id] = true
	closed := b.inClosed
	if !closed {
		b.pending = append(b.pending, p)
	}
	b.mu.Unlock()
	if closed {
		return func() { b.refuse(p) }
	}
	return func() {}
}

// refuse answers p with a refusal.
func (b *Bridge) refuse(p pendingAsk) {
	ctx := context.WithoutCancel(b.sendCtx)
	var err error
	if p.consent {
		err = b.sess.AnswerConsent(ctx, p.id, kernel.ConsentDeny)
	} else {
		err = b.sess.RefuseInput(ctx, p.id)
	}
	if err != nil {
		b.log.Debug("bus: refuse", "request", p.id, "err", err)
	}
}

// InputClosed refuses every question waiting, and every later one: with
// stdin closed nobody can answer, and silence is never consent.
func (b *Bridge) InputClosed() {
	b.mu.Lock()
	b.inClosed = true
	pending := b.pending
	b.pending = nil
	b.mu.Unlock()
	for _, p := range pending {
		b.refuse(p)
	}
}

// Handle carries out one inbound verb. What it cannot use is logged and
// ignored.
func (b *Bridge) Handle(ctx context.Context, in Inbound) {
	switch in.Kind {
	case VerbInputGiven:
		b.answer(ctx, in)
	case VerbPost, VerbSend, VerbPublish, VerbReply, VerbSubscribe, VerbUnsubscribe:
		if b.hub == nil {
			b.log.Warn("bus: ignored a hub verb: this run has no hub", "kind", in.Kind)
			return
		}
		b.hubVerb(ctx, in)
	}
}

// yes are the values that grant a confirm.
var yes = []string{"yes", "y", "true", "ok", "allow", "allow_once", "approve", "approved", "confirm"}

func (b *Bridge) answer(ctx context.Context, in Inbound) {
	b.mu.Lock()
	var p pendingAsk
	found := false
	for i, q := range b.pending {
		if in.CorrelationID == "" || q.id == in.CorrelationID {
			p, found = q, true
			b.pending = slices.Delete(b.pending, i, i+1)
			break
		}
	}
	b.mu.Unlock()
	if !found {
		if in.CorrelationID == "" {
			b.log.Warn("bus: ignored input.given: no question is waiting")
		} else {
			b.log.Warn("bus: ignored input.given: no question is waiting with that correlationId", "correlationId", in.CorrelationID)
		}
		return
	}
	value := valueText(in.Value)
	var err error
	if p.consent {
		option := kernel.ConsentDeny
		switch v := strings.ToLower(strings.TrimSpace(value)); {
		case v == kernel.ConsentAllowSession:
			option = kernel.ConsentAllowSession
		case slices.Contains(yes, v):
			option = kernel.ConsentAllowOnce
		}
		err = b.sess.AnswerConsent(ctx, p.id, option)
	} else {
		err = b.sess.AnswerInput(ctx, p.id, value)
	}
	if err != nil {
		b.log.Warn("bus: input.given was not taken", "correlationId", p.id, "why", err.Error())
		if !p.consent && b.stillPending(p.id) {
			// A value the question cannot take (not one of its choices)
			// leaves it waiting: the next answer, or stdin's end, settles it.
			b.mu.Lock()
			closed := b.inClosed
			if !closed {
				b.pending = slices.Insert(b.pending, 0, p)
			}
			b.mu.Unlock()
			if closed {
				b.refuse(p)
			}
		}
	}
}

// stillPending reports whether question id is still waiting, as far as
// the frames seen so far tell. A question another client answered in the
// meantime may look waiting until its resolution's frame comes; that
// frame then drops it again.
func (b *Bridge) stillPending(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open[id]
}

// valueText returns a JSON string's text, or any other JSON value as written.
func valueText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(v))
}

func (b *Bridge) hubError(in Inbound, code string, err error) {
	b.log.Warn("bus: hub refused "+in.Kind, "why", err.Error())
	b.write(Event{Kind: KindError, CorrelationID: in.CorrelationID}.With("code", code).With("message", err.Error()).With("recoverable", true))
}

func (b *Bridge) hubVerb(ctx context.Context, in Inbound) {
	switch in.Kind {
	case VerbPost:
		if err := b.hub.Post(b.seat, in.To, in.Payload); err != nil {
			b.hubError(in, "hub_refused", err)
		}
	case VerbSend:
		go func() {
			m, err := b.hub.Send(ctx, b.seat, in.To, in.Payload, time.Duration(in.TimeoutMS)*time.Millisecond, in.CorrelationID)
			if err != nil {
				if errors.Is(err, hub.ErrTimeout) {
					in.CorrelationID = m.CorrelationID
					b.hubError(in, "send_timeout", err)
				} else if ctx.Err() == nil {
					b.hubError(in, "hub_refused", err)
				}
				return
			}
			b.deliver(hub.Message{CorrelationID: m.CorrelationID, Payload: m.Payload})
		}()
	case VerbPublish:
		rep, err := b.hub.Publish(b.seat, in.Topic, in.Payload, in.RetainAs)
		if err != nil {
			b.hubError(in, "hub_refused", err)
			return
		}
		for _, r := range rep.Refused {
			b.hubError(in, "hub_refused", r)
		}
	case VerbReply:
		if err := b.hub.Reply(in.CorrelationID, in.Payload); err != nil {
			b.log.Warn("bus: ignored reply", "correlationId", in.CorrelationID, "why", err.Error())
		}
	case VerbSubscribe:
		if err := b.hub.Subscribe(b.seat, in.Topic); err != nil {
			b.hubError(in, "hub_refused", err)
		}
	case VerbUnsubscribe:
		_ = b.hub.Unsubscribe(b.seat, in.Topic)
	}
}

// ArgsSummary is tool.called's digest of a call's arguments: their names,
// sorted and comma-separated, never their values. It is empty when the
// arguments are not a JSON object or have no fields.
func ArgsSummary(args string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &m) != nil || len(m) == 0 {
		return ""
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}
