package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
)

// Session is one session's actor. A single goroutine owns the session's
// state and sequences every change to it; other goroutines send it work
// through do, which waits for the result. Its committer makes each frame
// durable before the hub publishes it.
//
// A Session value stays usable for as long as anyone holds it: when the
// session is unloaded after a quiet spell (Config.IdleUnload) its
// goroutines stop and its state is dropped, and the next call loads it
// again, in place, from its checkpoint and log (unload.go).
type Session struct {
	id      string
	k       *Kernel
	hub     hub
	running atomic.Bool
	// broken is set when an append fails and cleared once one succeeds
	// again; failed is the failure the committer reported and the actor has
	// not yet dealt with (kernel/fault.go).
	broken atomic.Bool
	// lastFault is the store error that made the session broken (for
	// Kernel.Ready); it is left as it was once the session works again.
	lastFault atomic.Pointer[failure]
	failed    atomic.Pointer[failure]
	gid       atomic.Uint64 // the actor goroutine's id, when Config.DebugActor

	// lifeMu guards act and unloaded. do holds it read-locked while it
	// hands work to the actor, so an unload, which takes it with TryLock,
	// never strands work in the inbox of an actor that is going away.
	lifeMu   sync.RWMutex
	act      *actor // the running actor; replaced when the session loads again
	unloaded bool   // the actor stopped for a quiet spell; the next do reloads

	// cleanup is whether the kernel asked to forget s once it is
	// collected (unload.go); guarded by k.mu.
	cleanup bool

	// holds counts Hold calls not released: extension processes running.
	holds atomic.Int64
	// activeAt is when the session was last used (unix nanos of
	// Config.Now): a request it ran, a subscriber that left, a hold
	// released. The idle clock counts from it.
	activeAt atomic.Int64
	// ckpt writes checkpoints off the actor (checkpoint.go).
	ckpt checkpointWriter
	// follow is the feed of a session another node writes (follow.go).
	follow following

	// Owned by the actor goroutine: read and written only in functions it
	// runs (those that call assertActor), or before it starts.
	commits    *committer
	info       store.Session
	head       uint64 // seq of the last frame sequenced (maybe not yet durable)
	lastData   []byte // the data of frame head, for a checkpoint's fingerprint
	transcript transcript
	state      stateDoc
	run        *run    // the run in flight, or nil
	runIDs     runSet  // every run id the session has used
	lastRun    *run    // the most recent run, for shutdown to wait on
	orphan     openSet // what the log's open run (info.OpenRun) left open
	// snapshotted is whether the log holds a STATE_SNAPSHOT, the baseline a
	// client replaying from seq 1 applies later STATE_DELTAs to.
	snapshotted bool
	consents    map[string]*pendingConsent // consent requests awaiting an answer
	grants      map[string]string          // tool → who allowed it while the session is loaded
	comps       map[string]*instance       // components shown, by node id (rebuilt lazily after a load)
	inputs      map[string]*pendingInput   // questions awaiting an answer (input.go)
	// ckptFrames and ckptBytes count the frames sequenced since the last
	// checkpoint was taken, and their bytes.
	ckptFrames int
	ckptBytes  int64
	// idleStop stops the pending idle check; nil when none is armed.
	idleStop func() bool

	// extState holds the extensions' shared state keys ("<owner>/<key>").
	extState map[string]json.RawMessage

	// While the store fails (kernel/fault.go): fault is its error (nil while
	// the session is writable); ending are the events the log lacks to end
	// its open run, and endingSent whether subscribers got them with seq 0;
	// lostCost is cost charged but not yet stored; stale is whether the
	// reload from the log failed too.
	fault      error
	ending     []protocol.Event
	endingRun  *run // the run ending ends, when it is this process's
	endingSent bool
	// ended are the runs ended since their terminal event was last known
	// durable (kernel/fault.go).
	ended    []*run
	lostCost int64
	stale    bool
	handling bool // handleFailure is running

	// consenters counts the live subscriptions whose client draws consent.
	consenters atomic.Int64
	// ext are the tools extensions add to this session (kernel/extension.go).
	ext extTools
}

// actor is one life of a session's goroutines: from a load to a close, a
// store failure or an unload.
type actor struct {
	inbox  chan func()
	quit   chan struct{} // closed to stop the actor
	exited chan struct{} // closed once the actor and its committer stopped
	stop   sync.Once
	// unloading, set on the actor, makes serve stop after the current
	// work and unload the session (unload.go).
	unloading bool
}

func newActor() *actor {
	return &actor{inbox: make(chan func(), 64), quit: make(chan struct{}), exited: make(chan struct{})}
}

func newSession(k *Kernel, info store.Session) *Session {
	s := &Session{id: info.ID, k: k, info: info}
	s.hub.now = k.now
	s.hub.left = &s.activeAt
	if obs := k.cfg.Observer; obs != nil {
		s.hub.onSlow = obs.DroppedSlow
	}
	s.reset()
	return s
}

// reset empties the actor-owned state, as a new session holds it. It runs
// before an actor starts, or once one stopped.
func (s *Session) reset() {
	s.head, s.lastData = 0, nil
	s.transcript = transcript{}
	s.state = newStateDoc()
	s.run, s.lastRun = nil, nil
	s.runIDs = make(runSet)
	s.orphan = openSet{}
	s.snapshotted = false
	s.consents, s.grants, s.inputs = nil, nil, nil
	s.comps = make(map[string]*instance)
	s.ckptFrames, s.ckptBytes = 0, 0
	s.extState = nil
}

// ID returns the session's id.
func (s *Session) ID() string { return s.id }

// Running reports whether a run is in flight.
func (s *Session) Running() bool { return s.running.Load() }

// Head returns the seq of the last frame published (and so durable).
func (s *Session) Head() uint64 { return s.hub.head() }

// load rebuilds the session's state: from its latest usable checkpoint and
// the frames after it, or from its whole log. It runs before the actor
// starts. A load that had to read CheckpointEvery frames or more writes a
// checkpoint, so the next one does not. A log that is not whole after the
// checkpoint (damage.go) refuses the session with a *DamagedError.
func (s *Session) load(ctx context.Context) error {
	var since uint64
	if c := s.loadCheckpoint(ctx); c != nil {
		s.restore(c)
		since = c.head
	}
	var last []byte // the frame's data outlives Scan's call: kept in one buffer
	err := s.k.cfg.Store.Scan(ctx, s.id, since, func(f store.Frame) error {
		if f.Seq > s.info.Head && s.k.cfg.Cluster != nil {
			// Another node writes on while this one loads: what comes
			// after the record's head is the feed's, or the claim's.
			return errLoadedToHead
		}
		if err := s.loadedFrame(f); err != nil {
			return err
		}
		ev, err := protocol.DecodeEvent(f.Data)
		if err != nil {
			return s.undecodable(f, err)
		}
		last = append(last[:0], f.Data...)
		f.Data = last
		s.replay(f, ev)
		return nil
	})
	if errors.Is(err, errLoadedToHead) {
		err = nil
	}
	if err := s.loaded(err); err != nil {
		return err
	}
	s.hub.setHead(s.head, s.state.doc)
	if every := s.k.checkpointEvery(); every > 0 && s.ckptFrames >= every {
		c := s.takeCheckpoint()
		s.ckpt.submit(s, c)
	}
	return nil
}

// errLoadedToHead stops a load at the head the session's record gave.
var errLoadedToHead = errors.New("loaded to the record's head")

// replay folds one logged frame into the state, as load reads the log. It
// keeps f.Data as the head frame's data.
func (s *Session) replay(f store.Frame, ev protocol.Event) {
	if next, err := s.state.check(ev); err == nil && next != nil {
		s.state.doc = bytes.Clone(next)
	}
	if ev.EventType() == protocol.TypeStateSnapshot {
		s.snapshotted = true
	}
	s.transcript.apply(ev)
	s.applyExtension(ev)
	if rs, ok := ev.(*protocol.RunStarted); ok {
		s.runIDs.add(rs.RunID)
	}
	if f.Run != "" && f.Run == s.info.OpenRun {
		s.orphan.apply(ev)
	}
	s.head = f.Seq
	s.noteFrame(f.Data)
}

// start starts a new life of the session's goroutines.
func (s *Session) start() {
	a := newActor()
	s.commits = newCommitter(s)
	s.lifeMu.Lock()
	s.act, s.unloaded = a, false
	s.lifeMu.Unlock()
	s.touch()
	s.armIdle(a, s.k.cfg.IdleUnload)
	go s.serve(a)
	go s.commits.run()
}

func (s *Session) serve(a *actor) {
	defer func() {
		if a.unloading {
			s.finishUnload(a)
			return
		}
		close(a.exited)
	}()
	if s.k.cfg.DebugActor {
		s.gid.Store(goroutineID())
	}
	for {
		select {
		case fn := <-a.inbox:
			fn()
			s.maybeCheckpoint(false)
			if a.unloading {
				return
			}
		case <-a.quit:
			return
		}
	}
}

// touch records that the session was used now.
func (s *Session) touch() { s.activeAt.Store(s.k.now().UnixNano()) }

// do runs fn on the actor and waits for it to finish. On a session that
// was unloaded it loads the session again first.
func (s *Session) do(ctx context.Context, fn func()) error {
	for {
		s.lifeMu.RLock()
		a, unloaded := s.act, s.unloaded
		if unloaded {
			s.lifeMu.RUnlock()
			if err := s.k.reload(ctx, s); err != nil {
				return err
			}
			continue
		}
		done := make(chan struct{})
		select {
		case a.inbox <- func() { defer close(done); s.touch(); fn() }:
			s.lifeMu.RUnlock()
		case <-a.quit:
			s.lifeMu.RUnlock()
			return ErrSessionClosed
		case <-ctx.Done():
			s.lifeMu.RUnlock()
			return ctx.Err()
		}
		select {
		case <-done:
			return nil
		case <-a.exited:
			// The actor stopped; fn ran only if done was closed first.
			select {
			case <-done:
				return nil
			default:
				return ErrSessionClosed
			}
		}
	}
}

// post runs fn on the actor a without waiting, if a is still the
// session's running actor, and reports whether it could; otherwise fn is
// dropped. It is how the session's own timers reach it: a timer never
// loads an unloaded session.
func (s *Session) post(a *actor, fn func()) bool {
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	return s.postLocked(a, fn)
}

// postCurrent posts fn to the running actor as work of the session's own
// (it counts as activity, as do's requests do), and reports whether it
// could: not while the session is unloaded or closing. A streamed delta
// comes this way, so it takes lifeMu once.
func (s *Session) postCurrent(fn func()) bool {
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	return s.postLocked(s.act, func() { s.touch(); fn() })
}

// postLocked is post with lifeMu held for reading.
func (s *Session) postLocked(a *actor, fn func()) bool {
	if a == nil || s.act != a || s.unloaded {
		return false
	}
	select {
	case a.inbox <- fn:
		return true
	case <-a.quit:
		return false
	}
}

// awake loads the session again if it was unloaded.
func (s *Session) awake(ctx context.Context) error {
	s.lifeMu.RLock()
	unloaded := s.unloaded
	s.lifeMu.RUnlock()
	if unloaded {
		return s.k.reload(ctx, s)
	}
	return nil
}

// current returns the running actor. Runs on the actor.
func (s *Session) current() *actor {
	s.assertActor()
	return s.act
}

// assertActor panics, when Config.DebugActor is set, if the caller is not
// the actor goroutine.
func (s *Session) assertActor() {
	if !s.k.cfg.DebugActor {
		return
	}
	if want := s.gid.Load(); want != 0 && want != goroutineID() {
		panic(fmt.Sprintf("kernel: session %s state touched off its actor goroutine", s.id))
	}
}

func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

// emit sequences events: each gets the next seq, changes the session's
// state, is encoded once and is queued for commit. A state change that does
// not apply refuses that event and the ones after it. While the session's
// store fails, emit first retries it and refuses the events with a
// *StoreError if it still fails. Runs on the actor.
func (s *Session) emit(runID string, events ...protocol.Event) error {
	s.assertActor()
	if s.broken.Load() {
		if err := s.writable(); err != nil {
			return err
		}
	}
	for _, ev := range events {
		it, err := s.sequence(runID, ev)
		if err != nil {
			return err
		}
		s.commits.push(it)
	}
	return nil
}

// sequence gives ev the next seq, applies it to the session and encodes it.
// Runs on the actor.
func (s *Session) sequence(runID string, ev protocol.Event) (commitItem, error) {
	protocol.Stamp(ev)
	h := ev.Header()
	next, err := s.state.check(ev)
	if err != nil {
		return commitItem{}, &RequestError{Msg: err.Error()}
	}
	h.Timestamp = s.k.now().UnixMilli()
	h.Orrery().Seq = s.head + 1
	// A logged frame's run is the log's (an event ended with seq 0 first,
	// retryStore's, named it for that send).
	h.Orrery().Run = ""
	data, err := json.Marshal(ev)
	if err != nil {
		return commitItem{}, fmt.Errorf("encode %s: %w", h.Type, err)
	}
	s.head++
	if next != nil {
		s.state.doc = next
	}
	if h.Type == protocol.TypeStateSnapshot {
		s.snapshotted = true
	}
	s.transcript.apply(ev)
	s.applyExtension(ev)
	if s.run != nil {
		s.run.open.apply(ev)
	}
	s.noteFrame(data)
	return commitItem{frame: Frame{Seq: s.head, Type: string(h.Type), Run: runID, Data: data}, state: next}, nil
}

// encodeSnapshot encodes an event sent outside the session's order (seq 0).
func encodeSnapshot(ev protocol.Event) (Frame, error) {
	protocol.Stamp(ev)
	ev.Header().Orrery().Seq = 0
	data, err := json.Marshal(ev)
	if err != nil {
		return Frame{}, fmt.Errorf("encode %s: %w", ev.EventType(), err)
	}
	return Frame{Type: string(ev.EventType()), Data: data}, nil
}

// SendInput starts a run, or steers the run in flight.
type SendInput struct {
	// RunID names a new run; empty means the kernel picks one.
	RunID string
	// Text and Attachments are a person's new message.
	Text        string
	Attachments []protocol.ContentPart
	// Messages is the conversation as a stock client sends it: only the
	// messages whose ids the session does not hold yet are taken.
	Messages []protocol.Message
	// Tools are the client's own tools; Context is its context entries,
	// which the run's model reads with the conversation.
	Tools   []protocol.Tool
	Context []protocol.Context
	// State is the client's shared state (RunAgentInput.state), a JSON
	// object: its keys but Orrery's own (ui, surfaces, data) replace the
	// application keys of the session's shared state when the run starts
	// (its STATE_SNAPSHOT holds them), and the model reads them. Nil
	// leaves them as they are.
	State json.RawMessage
	// Steer joins the run in flight instead of being refused.
	Steer bool
	// Permissions are the new run's own consent rules; nil adds none. A
	// steer may not carry them: it joins a run that has its own.
	Permissions *RunPermissions
	// UsageEvents logs an orrery.usage event after each of the new run's
	// model calls, with the run's tokens so far (for the run event bus's
	// cost.updated).
	UsageEvents bool
	// Subscribe asks for a Subscription that starts at the new run's
	// RUN_STARTED.
	Subscribe bool
	// Encoder, with Subscribe, encodes the subscription's frames into
	// another dialect; nil sends them as logged.
	Encoder Encoder

	// parent is the span of the request that sent this (Send's ctx): the
	// new run's span is its child.
	parent trace.SpanContext
}

// SendResult says where a send went.
type SendResult struct {
	RunID  string
	Target string // protocol.TargetRun or protocol.TargetSteer
	// Sub is set when SendInput.Subscribe was and a run started.
	Sub *Subscription
}

// Send starts a run on an idle session. While a run is in flight it joins
// that run when in.Steer is set and is refused with a *BusyError otherwise.
//
// Every part of the new messages that names a local file (a workspace path
// or a file:// URL) must name one inside the session's workspace; a send
// with one outside is refused whole, so no agent is handed a path the
// workspace rules would not let a tool read.
func (s *Session) Send(ctx context.Context, in SendInput) (SendResult, error) {
	var res SendResult
	var err error
	if in.Permissions != nil {
		if err := in.Permissions.Validate(); err != nil {
			return res, &RequestError{Msg: err.Error()}
		}
	}
	if err := s.checkFileParts(ctx, in); err != nil {
		return res, err
	}
	if st := bytes.TrimSpace(in.State); len(st) > 0 && string(st) != "null" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(st, &obj); err != nil {
			return res, &RequestError{Msg: "state is not a JSON object: send the application's shared state as an object, or leave it out"}
		}
	}
	in.parent = trace.SpanContextFromContext(ctx)
	if derr := s.do(ctx, func() { res, err = s.send(in) }); derr != nil {
		return res, derr
	}
	return res, err
}

func (s *Session) send(in SendInput) (SendResult, error) {
	s.assertActor()
	var fresh []protocol.Message
	for _, m := range in.Messages {
		if !s.transcript.has(m.ID) && !containsID(fresh, m.ID) {
			fresh = append(fresh, m)
		}
	}
	if in.Text != "" || len(in.Attachments) > 0 {
		content := protocol.TextContent(in.Text)
		if len(in.Attachments) > 0 {
			parts := []protocol.ContentPart{{Type: "text", Text: in.Text}}
			content = protocol.PartsContent(append(parts, in.Attachments...))
		}
		fresh = append(fresh, protocol.Message{ID: newID("user"), Role: protocol.RoleUser, Content: content})
	}
	var users []protocol.Message
	for _, m := range fresh {
		if m.Role == protocol.RoleUser {
			users = append(users, m)
		}
	}

	if r := s.run; r != nil {
		if !in.Steer {
			return SendResult{}, &BusyError{Session: s.id, RunID: r.id}
		}
		if in.Permissions != nil {
			return SendResult{}, &RequestError{Msg: "a steer joins the run in flight, which keeps its own permissions: send the steer without permissions"}
		}
		if len(users) == 0 {
			return SendResult{}, &RequestError{Msg: "a steer needs text: send input.text"}
		}
		for _, m := range users {
			if err := s.steer(r, m); err != nil {
				return SendResult{}, err
			}
		}
		return SendResult{RunID: r.id, Target: protocol.TargetSteer}, nil
	}

	runID := in.RunID
	if runID == "" {
		runID = newID("run")
	}
	if s.runIDs.has(runID) {
		return SendResult{}, &RequestError{Msg: fmt.Sprintf("runId %s was already used in session %s: send a fresh runId for each run", runID, s.id)}
	}
	provider, err := s.k.provider(s.model())
	if err != nil {
		return SendResult{}, &RequestError{Msg: err.Error()}
	}
	base := agent.WithRun(agent.WithSession(context.Background(), s.id), runID)
	if in.parent.IsValid() {
		base = trace.ContextWithSpanContext(base, in.parent)
	}
	base, span := tracer().Start(base, runSpanName, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", "orrery"),
		attribute.String("gen_ai.conversation.id", s.id),
		attribute.String("orrery.run.id", runID),
		attribute.String("gen_ai.request.model", s.model()),
	))
	ctx, cancel := context.WithCancel(base)
	r := &run{id: runID, ctx: ctx, cancel: cancel, span: span, provider: provider, clientTools: in.Tools, perms: in.Permissions, usageEvents: in.UsageEvents, done: make(chan struct{}),
		context: in.Context, clientState: in.State}
	if fresh == nil {
		fresh = []protocol.Message{}
	}
	input := &protocol.RunAgentInput{
		ThreadID: s.id, RunID: runID, Messages: fresh,
		Tools: nonNil(in.Tools), Context: nonNil(in.Context),
	}
	var sub *Subscription
	if in.Subscribe {
		sub = newSubscription(&s.hub, s.k.cfg.QueueFrames)
		sub.enc = in.Encoder
	}
	s.traceCommits(r)
	if err := s.startRun(r, users, input, sub); err != nil {
		s.untraceCommits(r, true)
		cancel()
		span.SetStatus(codes.Error, err.Error())
		span.End()
		if sub != nil {
			sub.Close()
		}
		return SendResult{}, err
	}
	s.lastRun = r
	return SendResult{RunID: runID, Target: protocol.TargetRun, Sub: sub}, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func containsID(msgs []protocol.Message, id string) bool {
	for _, m := range msgs {
		if m.ID == id {
			return true
		}
	}
	return false
}

func (s *Session) model() string {
	if s.info.Model != "" {
		return s.info.Model
	}
	return s.k.cfg.DefaultModel
}

// setTitle names the session after its first prompt. Runs on the actor.
func (s *Session) setTitle(text string) {
	title := strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(title) > 60 {
		r := []rune(title)
		title = string(r[:59]) + "…"
	}
	if title == "" {
		return
	}
	s.info.Title = title
	if err := s.k.cfg.Store.UpdateSession(context.Background(), s.info); err != nil {
		s.k.log.Warn("set session title", "session", s.id, "err", err)
	}
	s.changed(SessionTitle)
}

// Cancel ends the run in flight with RUN_FINISHED and outcome cancelled.
// runID, when not empty, must name that run.
func (s *Session) Cancel(ctx context.Context, runID string) error {
	var err error
	if derr := s.do(ctx, func() { err = s.cancelRun(runID) }); derr != nil {
		return derr
	}
	return err
}

// SubscribeOptions choose where a subscription starts and how its frames
// are encoded.
type SubscribeOptions struct {
	// Since resumes after that seq; nil starts from a seq-0 snapshot.
	Since *uint64
	// Tagged adds metadata.orrery.session to every frame, for transports
	// that carry several sessions (WebSocket, pipe).
	Tagged bool
	// Coalesce merges each run of TEXT_MESSAGE_CONTENT of one message, and of
	// TOOL_CALL_ARGS of one call, in the replayed backlog into one frame.
	Coalesce bool
	// Caller is the subscribing client; one that draws consent can be
	// asked while the subscription lives.
	Caller Caller
	// Encoder turns every frame into another dialect; nil sends frames as
	// logged (AG-UI 1.0).
	Encoder Encoder
	// Snapshot, with Since, starts the replay with a seq-0 STATE_SNAPSHOT
	// of the state as it stood at Since, so a client that holds nothing
	// can apply the replayed deltas.
	Snapshot bool
}

// Subscribe returns a subscription to the session's frames. With since nil
// it starts with a STATE_SNAPSHOT and a MESSAGES_SNAPSHOT of the session as
// it stands (seq 0), then every later frame. With since set it replays the
// frames after since (Backlog), then continues live, with no gap and no
// duplicate at the seam.
func (s *Session) Subscribe(ctx context.Context, since *uint64) (*Subscription, error) {
	return s.SubscribeWith(ctx, SubscribeOptions{Since: since})
}

// SubscribeWith is Subscribe with options.
func (s *Session) SubscribeWith(ctx context.Context, opts SubscribeOptions) (*Subscription, error) {
	sub := newSubscription(&s.hub, s.k.cfg.QueueFrames)
	if opts.Caller.DrawsConsent() {
		s.consentersChanged(s.consenters.Add(1), true)
		sub.onEnd = func() { s.consentersChanged(s.consenters.Add(-1), false) }
	}
	if opts.Tagged {
		sub.tag = s.id
	}
	sub.enc = opts.Encoder
	if opts.Since == nil {
		var err error
		if derr := s.do(ctx, func() {
			var frames []Frame
			frames, err = s.snapshotFrames()
			if err == nil {
				sub.head = s.head
				s.commits.register(sub, frames)
			}
		}); derr != nil {
			return nil, derr
		}
		if err != nil {
			return nil, err
		}
		return sub, nil
	}
	if err := s.awake(ctx); err != nil {
		sub.Close()
		return nil, err
	}
	head, ended, err := s.hub.attachAt(sub)
	if err != nil {
		return nil, err
	}
	if *opts.Since > head {
		sub.Close()
		return nil, &SinceError{Session: s.id, Since: *opts.Since, Head: head}
	}
	from := *opts.Since
	sub.head = head
	if obs := s.k.cfg.Observer; obs != nil {
		obs.Resumed(head - from)
	}
	sub.backlog = func(ctx context.Context, fn func(Frame) error) error {
		emit := fn
		if sub.enc != nil {
			encode := sub.enc.Encode
			if se, ok := sub.enc.(StateEncoder); ok {
				// The encoder reads the state after each frame: start from
				// the state at since, rebuilt from the log, and follow it.
				at, err := s.StateAt(ctx, from)
				if err != nil {
					return err
				}
				doc := stateDoc{doc: at}
				encode = func(dst []Frame, f Frame) []Frame {
					_ = doc.follow(f) // a frame that does not decode leaves the state as it was
					return se.EncodeState(dst, f, doc.doc)
				}
			}
			var out []Frame
			emit = func(f Frame) error {
				out = encode(out[:0], f)
				for _, e := range out {
					if err := fn(e); err != nil {
						return err
					}
				}
				return nil
			}
		}
		if sub.tag != "" {
			encoded := emit
			emit = func(f Frame) error {
				f.Data = TagSession(f.Data, sub.tag)
				return encoded(f)
			}
		}
		if opts.Snapshot {
			doc, err := s.StateAt(ctx, from)
			if err != nil {
				return err
			}
			f, err := stateSnapshotFrame(doc)
			if err != nil {
				return err
			}
			if err := emit(f); err != nil {
				return err
			}
		}
		shaped := emit
		var co *coalescer
		if opts.Coalesce {
			co = &coalescer{emit: emit}
			emit = co.add
		}
		// Read in pages, so a subscriber that is slow to write its backlog
		// never holds one of the store's read connections.
		for at := from; at < head; {
			n := int(min(backlogPage, head-at))
			frames, err := s.readLogged(ctx, at, n, n)
			if err != nil {
				return err
			}
			if len(frames) == 0 {
				break
			}
			for _, f := range frames {
				if err := emit(f); err != nil {
					return err
				}
			}
			at = frames[len(frames)-1].Seq
		}
		if co != nil {
			if err := co.flush(); err != nil {
				return err
			}
		}
		// The end of a run the store could not log, as every subscriber
		// attached then received it.
		for _, f := range ended {
			if err := shaped(f); err != nil {
				return err
			}
		}
		return nil
	}
	return sub, nil
}

// backlogPage is how many frames a backlog reads from the store at once.
const backlogPage = 1024

// snapshotFrames encodes the session's state and conversation as seq-0
// snapshots. Runs on the actor.
func (s *Session) snapshotFrames() ([]Frame, error) {
	s.assertActor()
	state, err := encodeSnapshot(&protocol.StateSnapshot{Snapshot: bytes.Clone(s.state.JSON())})
	if err != nil {
		return nil, err
	}
	msgs, err := encodeSnapshot(&protocol.MessagesSnapshot{Messages: s.transcript.thread()})
	if err != nil {
		return nil, err
	}
	return []Frame{state, msgs}, nil
}

// Read returns up to limit logged frames with seq > since, exactly as
// logged. A since beyond the head is refused with a *SinceError.
func (s *Session) Read(ctx context.Context, since uint64, limit int) ([]Frame, uint64, error) {
	head := s.hub.head()
	if since > head {
		return nil, head, &SinceError{Session: s.id, Since: since, Head: head}
	}
	if limit <= 0 || uint64(limit) > head-since {
		limit = int(head - since)
	}
	if limit == 0 {
		return []Frame{}, head, nil
	}
	frames, err := s.readLogged(ctx, since, limit, limit)
	return frames, head, err
}

// Info returns the session's record as the actor holds it.
func (s *Session) Info(ctx context.Context) (store.Session, error) {
	var info store.Session
	err := s.do(ctx, func() { info = s.info; info.Head = s.head })
	return info, err
}

// interrupt ends a run the log shows open but no process is running, with
// one RUN_ERROR interrupted. Runs on the actor.
func (s *Session) interrupt(runID, why string) error {
	s.assertActor()
	ev := errorTerminal("interrupted", why)
	ev.Orrery().Result = &protocol.RunResult{}
	evs := append(s.orphan.closers(ev), ev)
	s.orphan = openSet{}
	s.info.OpenRun = ""
	return s.emit(runID, evs...)
}

// runningActor returns the running actor, or nil when the session is
// unloaded.
func (s *Session) runningActor() *actor {
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	if s.unloaded {
		return nil
	}
	return s.act
}

func (s *Session) stopActor() {
	a := s.runningActor()
	if a == nil {
		return
	}
	a.stop.Do(func() { close(a.quit) })
	<-a.exited
}

// close ends a run in flight as interrupted, commits everything queued,
// writes a checkpoint when frames were logged since the last one, and stops
// the session's goroutines.
func (s *Session) close(ctx context.Context) error {
	s.stopFollowing()
	var last *run
	var stopIdle func() bool
	err := s.do(context.WithoutCancel(ctx), func() {
		s.takeFailure()
		if s.fault == nil {
			// Held data updates go out now: nothing accepted is dropped.
			// (A broken session keeps its log as it is: a restart closes
			// the run it left open.)
			s.flushAllData()
		}
		if s.run != nil {
			s.endRun(s.run, errorTerminal("interrupted", "the server shut down during this run; its output so far is kept: send the prompt again to retry"))
		}
		last = s.lastRun
		if s.ckptFrames > 0 && s.k.checkpointEvery() > 0 {
			s.checkpointNow()
		}
		stopIdle, s.idleStop = s.idleStop, nil
	})
	if stopIdle != nil {
		stopIdle()
	}
	a := s.runningActor()
	s.stopActor()
	if last != nil {
		select {
		case <-last.done:
		case <-ctx.Done():
			err = errors.Join(err, ctx.Err())
		}
	}
	if a != nil {
		close(s.commits.stop)
		<-s.commits.done
	}
	s.ckpt.wait()
	s.hub.close(ErrSessionClosed)
	if errors.Is(err, ErrSessionClosed) {
		err = nil
	}
	return err
}
