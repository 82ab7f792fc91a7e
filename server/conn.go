package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/getorrery/orrery"
	"github.com/getorrery/orrery/auth"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// transport is one message connection: a WebSocket or a pipe. The
// protocol over it (conn) is the same: requests in, replies and frames out.
// transportName names a connection's transport for metrics.
func transportName(t transport) string {
	if _, ok := t.(*pipeTransport); ok {
		return "pipe"
	}
	return "ws"
}

type transport interface {
	// read returns the next message. A *badMessage error is
	// answered and the connection goes on; any other ends it.
	read(ctx context.Context) ([]byte, error)
	// write sends msgs in one write. It has no deadline of its own: a
	// write that takes writeTimeout is ended by abort.
	write(msgs [][]byte) error
	// abort closes the connection at once, ending a write in progress.
	abort()
	// close ends the connection, telling the peer why.
	close(code closeCode, reason string)
	// interrupt ends a read in progress because the connection must end
	// for cause (a *closeError says how); it may close the connection.
	interrupt(cause error)
	kind() string
}

// closeCode is why a connection was closed; WebSocket sends it as the
// close status.
type closeCode int

const (
	closeNormal    closeCode = 1000
	closeTooBig    closeCode = 1009
	closeShutdown  closeCode = 1001
	closeGoingAway           = closeShutdown
	closeAuth      closeCode = 4001 // no token, or a bad one
	closeRefused   closeCode = 4003 // a refused hello (draws)
	closeSlow      closeCode = 4008 // the client fell behind: resume from its last seq
)

// badMessage is a message that is answered with an error reply while the
// connection stays open (once it is authenticated).
type badMessage struct{ msg string }

func (e *badMessage) Error() string { return e.msg }

// maxOutbox bounds a connection's queue of messages not yet written. A
// connection that stays full is closed as slow.
const maxOutbox = 4096

// conn speaks Orrery's request protocol over one transport. One goroutine
// reads and handles requests. Writes are the server's flusher's: a drain
// writes, in one write, the queued replies and then every attached
// session's frames. An attached session with a stored backlog has a pump
// goroutine until that backlog is queued.
type conn struct {
	s      *Server
	t      transport
	log    *slog.Logger
	peer   peer // who is at the other end, as the server judged it
	ctx    context.Context
	cancel context.CancelCauseFunc

	// Owned by the read loop.
	authed     bool
	release    func()      // unties the connection from its hello's token; nil when none
	helloTimer *time.Timer // closes a connection that needs a token and gave none in time
	seen       bool        // a first message was handled
	client     string
	draws      []string
	sends      hubSends

	out  outbox // replies, hub messages and backlogs, in order
	sink sink   // this connection in the server's flusher
	// stall cuts off a peer that accepts nothing for writeTimeout.
	stall *time.Timer

	drainMu sync.Mutex    // serializes writes; guards what follows
	over    bool          // the connection is ending: nothing more is written
	werr    error         // the write that failed
	live    []*attachment // attachments whose backlog is queued: drains take their frames
	msgs    [][]byte      // a drain's messages, kept for reuse
	frames  []kernel.Frame

	mu       sync.Mutex // guards attached and watching
	attached map[string]*attachment
	watching map[string]*watchSet // state.watch, by session
	pumps    sync.WaitGroup
}

type attachment struct {
	session string
	sub     *kernel.Subscription
	watch   *watchSet
	cancel  context.CancelFunc
	done    chan struct{} // closed when the pump returns
}

// closeError ends a connection with a code and a reason.
type closeError struct {
	code   closeCode
	reason string
}

func (e *closeError) Error() string { return e.reason }

// serveConn speaks the request protocol over t for peer p until the
// connection ends. A local program, a pipe or a token holder is
// authenticated at once; any other must give a token in its hello.
func (s *Server) serveConn(ctx context.Context, t transport, p peer) {
	// Requests on the connection are judged by its peer, as over HTTP.
	ctx, cancel := context.WithCancelCause(context.WithValue(ctx, peerKey{}, p))
	c := &conn{
		s: s, t: t, log: s.log.With("transport", t.kind()), peer: p,
		ctx: ctx, cancel: cancel, authed: p.local || p.pipe || p.token != "",
		attached: make(map[string]*attachment), watching: make(map[string]*watchSet),
	}
	c.sink.drain = c.drain
	c.out.init(func() { s.flush.schedule(&c.sink) })
	c.stall = time.AfterFunc(time.Hour, func() {
		c.cancel(&closeError{closeSlow, "the client read nothing for " + writeTimeout.String() + ": reconnect and attach with since=<last seq>"})
		t.abort()
	})
	c.stall.Stop()
	defer c.stall.Stop()
	stop := context.AfterFunc(ctx, func() { t.interrupt(context.Cause(ctx)) })
	defer stop()
	stopShutdown := context.AfterFunc(s.ctx, func() {
		cancel(&closeError{closeShutdown, "the server is shutting down: reconnect and attach with since=<last seq>"})
	})
	defer stopShutdown()
	if d := s.helloTimeout(); !c.authed && d > 0 {
		c.helloTimer = time.AfterFunc(d, func() {
			c.cancel(&closeError{closeAuth, "no hello with a token within " + d.String() + ": send hello {token} first (orrery node token create)"})
		})
		defer c.helloTimer.Stop()
	}
	defer func() {
		if c.release != nil {
			c.release()
		}
	}()

	// The read loop ends when the peer leaves, when a request ends the
	// connection (its refusal is queued), or when ctx is cancelled by a pump
	// or the server (interrupt). Everything queued is written before the
	// close, so a refusal reaches the peer.
	err := c.readLoop()
	c.leaveHub()
	c.detachAll()
	werr := c.finish()
	cancel(err)
	code, reason := closeNormal, ""
	var ce *closeError
	if errors.As(context.Cause(ctx), &ce) {
		code, reason = ce.code, ce.reason
	} else if errors.As(werr, &ce) {
		code, reason = ce.code, ce.reason
	}
	t.close(code, reason)
}

func (c *conn) readLoop() error {
	for {
		// Reads are ended by interrupt, not by the context: a WebSocket
		// whose read context ends is closed at once, without its close code.
		msg, err := c.t.read(context.WithoutCancel(c.ctx))
		var bad *badMessage
		if errors.As(err, &bad) {
			if !c.authed {
				return c.refuse(closeAuth, "", auth.ErrNoToken)
			}
			c.reply("", nil, err)
			continue
		}
		if err != nil {
			if cause := context.Cause(c.ctx); cause != nil {
				return cause
			}
			return err
		}
		if err := c.handle(msg); err != nil {
			return err
		}
	}
}

// handle answers one message. It returns an error only to end the
// connection.
func (c *conn) handle(msg []byte) error {
	first := !c.seen
	c.seen = true
	req, err := protocol.DecodeRequest(msg)
	if err != nil {
		if !c.authed {
			return c.refuse(closeAuth, requestID(msg), auth.ErrNoToken)
		}
		c.reply(requestID(msg), nil, err)
		return nil
	}
	id := req.Head().ID
	if h, ok := req.(*protocol.Hello); ok {
		if !first {
			c.reply(id, nil, errors.New("hello may only be the first message on a connection"))
			return nil
		}
		return c.hello(h)
	}
	if !c.authed {
		return c.refuse(closeAuth, id, auth.ErrNoToken)
	}
	switch q := req.(type) {
	case *protocol.SessionAttach:
		if err := c.attach(q); !errors.Is(err, errAnswered) {
			c.reply(id, nil, err)
		}
	case *protocol.StateWatch:
		value, err := c.watch(q)
		c.reply(id, value, err)
	case *protocol.SessionDetach:
		if q.Session == "" {
			c.reply(id, nil, &kernel.RequestError{Msg: "session is missing: name the session to detach"})
		} else if err := c.detach(q.Session); err != nil {
			c.reply(id, nil, err)
		} else {
			c.reply(id, protocol.Empty{}, nil)
		}
	case *protocol.HubSend:
		c.sendAsync(id, q)
	default:
		value, err := c.s.Do(c.ctx, kernel.Caller{Client: c.client, Draws: c.draws}, req)
		c.reply(id, value, err)
	}
	return nil
}

func (c *conn) hello(h *protocol.Hello) error {
	if h.Token != "" {
		// A token given is checked even where none is needed, so that the
		// connection ends when it is revoked.
		t, ok := c.s.cfg.Tokens.Lookup(h.Token)
		if ok {
			var release func()
			if release, ok = c.s.holdToken(t.ID, c.cancel); ok {
				if c.release != nil {
					c.release()
				}
				c.release = release
				c.peer.token = t.ID
				c.authed = true
				authenticated(c.ctx)
			}
		}
		if !ok && !c.authed {
			return c.refuse(closeAuth, h.ID, auth.ErrBadToken)
		}
	}
	if c.authed && c.helloTimer != nil {
		c.helloTimer.Stop()
	}
	if !c.authed {
		return c.refuse(closeAuth, h.ID, auth.ErrNoToken)
	}
	if err := protocol.CheckDraws(h.Client, h.Draws); err != nil {
		return c.refuse(closeRefused, h.ID, err)
	}
	if slices.Contains(h.Draws, protocol.DrawConsent) && !c.peer.mayConsent() {
		return c.refuse(closeRefused, h.ID, errors.New(errNoConsentRight))
	}
	c.client, c.draws = h.Client, h.Draws
	if b, ok := c.t.(interface{ batches() }); ok && h.Batch {
		b.batches()
	}
	c.s.takeSeat(c)
	c.reply(h.ID, protocol.HelloReply{Node: c.s.cfg.Node, Version: orrery.Version, Protocol: protocol.ProtocolVersion}, nil)
	return nil
}

// refuse answers id with err, then ends the connection.
func (c *conn) refuse(code closeCode, id string, err error) error {
	c.reply(id, nil, err)
	return &closeError{code, err.Error()}
}

// reply queues the reply to request id: value on success, err otherwise.
func (c *conn) reply(id string, value any, err error) {
	r := protocol.Reply{T: "reply", ReqID: id, OK: err == nil}
	if err != nil {
		r.Error = errorSentence(err)
	} else {
		if value == nil {
			value = protocol.Empty{}
		}
		data, merr := json.Marshal(value)
		if merr != nil {
			r.OK, r.Error = false, "internal error: "+merr.Error()
		} else {
			r.Value = data
		}
	}
	data, _ := json.Marshal(r)
	c.out.push(data)
}

// errorSentence turns an error into what a client reads in a refusal.
func errorSentence(err error) string {
	switch {
	case errors.Is(err, kernel.ErrUnknownSession):
		return "unknown session: create it with session.new, or list sessions with session.list"
	case errors.Is(err, kernel.ErrSessionClosed):
		return "the session is closed because the server is stopping: retry in a moment"
	}
	return err.Error()
}

// requestID digs the id out of a message that did not decode, so the error
// reply can name it.
func requestID(msg []byte) string {
	var env struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &env) != nil {
		return ""
	}
	var id string
	if json.Unmarshal(env.ID, &id) != nil {
		return ""
	}
	return id
}

func (c *conn) attach(q *protocol.SessionAttach) error {
	if q.Session == "" {
		return &kernel.RequestError{Msg: "session is missing: name the session to attach"}
	}
	sess, err := c.s.k.Session(c.ctx, q.Session)
	if err != nil {
		return err
	}
	// Attaching again restarts the session's stream from the new since.
	if err := c.detach(q.Session); err != nil && !errors.Is(err, errNotAttached) {
		return err
	}
	enc, err := encoderFor(q.StreamMode, q.A2UI)
	if err != nil {
		return &kernel.RequestError{Msg: err.Error()}
	}
	sub, err := sess.SubscribeWith(c.ctx, kernel.SubscribeOptions{Since: q.Since, Tagged: true, Coalesce: q.Coalesce,
		Caller: kernel.Caller{Client: c.client, Draws: c.draws}, Encoder: enc, Snapshot: q.Since != nil && q.Snapshot})
	if err != nil {
		return err
	}
	head := sub.Head()
	ctx, cancel := context.WithCancel(c.ctx)
	a := &attachment{session: q.Session, sub: sub, watch: c.watchSet(q.Session), cancel: cancel, done: make(chan struct{})}
	c.mu.Lock()
	c.attached[q.Session] = a
	c.mu.Unlock()
	// The reply goes out before any frame of the session.
	c.reply(q.ID, protocol.SessionAttachReply{Head: head}, nil)
	c.pumps.Add(1)
	go c.pump(ctx, q.Session, a)
	return errAnswered
}

// watchSet returns the state keys the connection watches in session.
func (c *conn) watchSet(session string) *watchSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.watching[session]
	if w == nil {
		w = &watchSet{}
		c.watching[session] = w
	}
	return w
}

// watch serves state.watch: from now on the connection receives
// orrery.state.changed of session for those keys only, and the reply holds
// their current values.
func (c *conn) watch(q *protocol.StateWatch) (any, error) {
	sess, err := c.s.sessionFor(c.ctx, q.Session)
	if err != nil {
		return nil, err
	}
	if err := checkWatch(q.Keys); err != nil {
		return nil, err
	}
	values, err := watchValues(c.ctx, sess, q.Keys)
	if err != nil {
		return nil, err
	}
	c.watchSet(q.Session).set(slices.Clone(q.Keys))
	return protocol.StateWatchReply{Values: values}, nil
}

// errAnswered tells handle the request was already answered.
var errAnswered = errors.New("answered")

// errNotAttached starts the refusal of a detach of a session that is not
// attached.
var errNotAttached = errors.New("not attached")

func (c *conn) detach(session string) error {
	c.mu.Lock()
	a, ok := c.attached[session]
	delete(c.attached, session)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: session %s is not attached on this connection, so there is nothing to detach (attach it with session.attach)", errNotAttached, session)
	}
	a.cancel()
	<-a.done
	c.unlive(a)
	a.sub.Close()
	return nil
}

// unlive stops drains taking a's frames; its pump has returned.
func (c *conn) unlive(a *attachment) {
	c.drainMu.Lock()
	defer c.drainMu.Unlock()
	if i := slices.Index(c.live, a); i >= 0 {
		c.live = slices.Delete(c.live, i, i+1)
	}
}

func (c *conn) detachAll() {
	c.mu.Lock()
	list := make([]*attachment, 0, len(c.attached))
	for _, a := range c.attached {
		list = append(list, a)
	}
	c.attached = map[string]*attachment{}
	c.mu.Unlock()
	for _, a := range list {
		a.cancel()
		<-a.done
		c.unlive(a)
		a.sub.Close()
	}
	c.pumps.Wait()
}

// pump queues one attached session's stored backlog, then hands the
// session's live frames to the connection's drains, and returns.
func (c *conn) pump(ctx context.Context, session string, a *attachment) {
	defer c.pumps.Done()
	defer close(a.done)
	defer c.s.subscribed(transportName(c.t))()
	var batch [][]byte
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.out.pushWait(ctx, batch...)
		batch = batch[:0]
		return err
	}
	err := a.sub.Backlog(ctx, func(f kernel.Frame) error {
		if !a.watch.keep(f) {
			return nil
		}
		batch = append(batch, append([]byte(nil), f.Data...))
		if len(batch) >= 256 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		if ctx.Err() == nil {
			c.cancel(&closeError{closeShutdown, fmt.Sprintf("session %s: %v", session, err)})
		}
		return
	}
	// Everything queued so far goes out before the first live frame: a
	// drain takes the queue, then the live sessions' frames.
	c.drainMu.Lock()
	c.live = append(c.live, a)
	c.drainMu.Unlock()
	a.sub.Notify(func() { c.s.flush.schedule(&c.sink) })
}

// writeTimeout bounds one write; a peer that accepts nothing for this long
// is cut off.
const writeTimeout = 10 * time.Second

// drain writes, in one write, everything queued: replies and backlogs
// first, then the live frames of every attached session. The server's
// flusher calls it.
func (c *conn) drain() {
	c.drainMu.Lock()
	defer c.drainMu.Unlock()
	if c.over {
		return
	}
	msgs := c.out.takeNow(c.msgs[:0])
	var cause error
	for _, a := range c.live {
		c.frames = a.sub.Take(c.frames[:0])
		for _, f := range c.frames {
			if a.watch.keep(f) {
				msgs = append(msgs, f.Data)
			}
		}
		clear(c.frames)
		select {
		case <-a.sub.Done():
			// Ended by the session, not by a detach: the connection ends,
			// after the frames queued before the end.
			switch err := a.sub.Err(); {
			case errors.Is(err, kernel.ErrSlow):
				cause = &closeError{closeSlow, fmt.Sprintf("too far behind on session %s: reconnect and attach with since=<last seq>", a.session)}
			case err != nil:
				cause = &closeError{closeShutdown, fmt.Sprintf("session %s: %v", a.session, err)}
			}
		default:
		}
	}
	c.write(msgs)
	clear(msgs)
	c.msgs = msgs[:0]
	if cause != nil {
		c.cancel(cause)
	}
}

// write writes msgs; a failure ends the connection. drainMu is held.
func (c *conn) write(msgs [][]byte) {
	if len(msgs) == 0 {
		return
	}
	c.stall.Reset(writeTimeout)
	err := c.t.write(msgs)
	c.stall.Stop()
	if err != nil {
		c.over, c.werr = true, err
		c.out.close()
		c.cancel(err)
	}
}

// finish writes what is still queued (a refusal, say) and stops all
// writing; it returns the write error that ended the connection, if any.
func (c *conn) finish() error {
	c.drainMu.Lock()
	defer c.drainMu.Unlock()
	if !c.over {
		msgs := c.out.takeNow(c.msgs[:0])
		c.write(msgs)
		c.over = true
	}
	c.out.close()
	return c.werr
}

// outbox is a connection's queue of encoded messages. Replies and frames
// share it, so a connection's output is in one order.
type outbox struct {
	mu     sync.Mutex // guards msgs and closed
	msgs   [][]byte
	closed bool
	space  chan struct{} // signalled when msgs shrinks
	// ready runs after msgs grows: it schedules a drain.
	ready func()
}

func (o *outbox) init(ready func()) {
	o.ready = ready
	o.space = make(chan struct{}, 1)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// tryPush queues msg unless the queue is full; it reports whether it did.
func (o *outbox) tryPush(msg []byte) bool {
	o.mu.Lock()
	ok := !o.closed && len(o.msgs) < maxOutbox
	if ok {
		o.msgs = append(o.msgs, msg)
	}
	o.mu.Unlock()
	if ok {
		o.ready()
	}
	return ok
}

// push queues msgs without waiting (replies are small and few).
func (o *outbox) push(msgs ...[]byte) {
	o.mu.Lock()
	if !o.closed {
		o.msgs = append(o.msgs, msgs...)
	}
	o.mu.Unlock()
	o.ready()
}

// pushWait queues msgs once the queue has room, so a slow connection holds
// frames back in the session's bounded subscription, which drops it when
// that overflows.
func (o *outbox) pushWait(ctx context.Context, msgs ...[]byte) error {
	for {
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			return context.Canceled
		}
		if len(o.msgs) < maxOutbox {
			o.msgs = append(o.msgs, msgs...)
			o.mu.Unlock()
			o.ready()
			return nil
		}
		o.mu.Unlock()
		select {
		case <-o.space:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// takeNow appends every queued message to dst, without waiting.
func (o *outbox) takeNow(dst [][]byte) [][]byte {
	o.mu.Lock()
	took := len(o.msgs) > 0
	dst = append(dst, o.msgs...)
	clear(o.msgs)
	o.msgs = o.msgs[:0]
	o.mu.Unlock()
	if took {
		signal(o.space)
	}
	return dst
}

func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	signal(o.space)
}
