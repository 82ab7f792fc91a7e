package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/getorrery/orrery/protocol"
)

// Frame is one frame of a session, as the server sent it.
type Frame struct {
	// Seq is the frame's place in its session; 0 marks a snapshot sent
	// outside the order.
	Seq uint64
	// MergedFrom is, on a coalesced frame, the first seq it stands for.
	MergedFrom uint64
	// Session is the session the frame belongs to.
	Session string
	// Type is the AG-UI event type.
	Type protocol.EventType
	// Data is the frame's JSON exactly as received (over WebSocket and pipe
	// it carries metadata.orrery.session).
	Data json.RawMessage
	// Event is Data decoded; nil when the type is not one this client
	// knows, which a client must skip.
	Event protocol.Event
}

// Logged returns Data as the session logged it: without the
// metadata.orrery.session that transports carrying several sessions
// (WebSocket, pipe) add to each frame, so that it is byte for byte what
// session.read, SSE and the store hold. A frame without that tag is
// returned as it is.
func (f Frame) Logged() json.RawMessage {
	return untagSession(f.Data, f.Session)
}

var orreryMetaKey = []byte(`"metadata":{"orrery":{`)

// untagSession undoes kernel.TagSession: the kernel writes the tag first
// in metadata.orrery, as "session":<quoted>, before the other keys.
func untagSession(data []byte, session string) []byte {
	if session == "" {
		return data
	}
	quoted, err := json.Marshal(session)
	if err != nil {
		return data
	}
	tag := append(append([]byte(`"session":`), quoted...), ',')
	i := bytes.Index(data, orreryMetaKey)
	if i >= 0 {
		i += len(orreryMetaKey)
		if bytes.HasPrefix(data[i:], tag) {
			out := make([]byte, 0, len(data)-len(tag))
			out = append(out, data[:i]...)
			return append(out, data[i+len(tag):]...)
		}
	}
	// Tagged elsewhere (the kernel decoded and encoded the frame again to
	// tag it): do the same to take the tag off.
	ev, err := protocol.DecodeEvent(data)
	if err != nil || ev.Header().Orrery().Session != session {
		return data
	}
	ev.Header().Orrery().Session = ""
	out, err := json.Marshal(ev)
	if err != nil {
		return data
	}
	return out
}

// frameMeta is what routing and ordering need from a frame.
type frameMeta struct {
	typ        protocol.EventType
	seq        uint64
	mergedFrom uint64
	session    string
}

// parseMeta reads a frame's type and metadata.orrery.
func parseMeta(data []byte) (frameMeta, error) {
	var h struct {
		Type     protocol.EventType `json:"type"`
		Metadata *struct {
			Orrery *struct {
				Seq        uint64 `json:"seq"`
				Session    string `json:"session"`
				MergedFrom uint64 `json:"merged_from"`
			} `json:"orrery"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return frameMeta{}, fmt.Errorf("decode frame: %w", err)
	}
	if h.Type == "" {
		return frameMeta{}, errors.New("decode frame: it has no type")
	}
	if h.Metadata == nil || h.Metadata.Orrery == nil {
		return frameMeta{}, fmt.Errorf("decode %s frame: it has no metadata.orrery", h.Type)
	}
	o := h.Metadata.Orrery
	return frameMeta{typ: h.Type, seq: o.Seq, mergedFrom: o.MergedFrom, session: o.Session}, nil
}

// GapError says a stream received a frame that does not follow the last
// one it holds. The stream recovers by itself (it resumes from its last
// seq); Stream.Gaps counts these.
type GapError struct {
	Session   string
	Last, Got uint64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("session %s: frame %d does not follow %d", e.Session, e.Got, e.Last)
}

// errOverflow is why a stream whose consumer fell behind dropped its
// connection.
var errOverflow = errors.New("the consumer fell behind: the stream resumes from the last frame it holds")

// AttachOptions choose where a Stream starts.
type AttachOptions struct {
	// Since resumes after that seq; nil starts with a STATE_SNAPSHOT and a
	// MESSAGES_SNAPSHOT of seq 0, then live frames.
	Since *uint64
	// Coalesce asks the server to merge runs of text and argument deltas
	// in the replayed part (frames with merged_from).
	Coalesce bool
}

// Stream follows one session's frames in seq order. Next returns each frame
// once: a frame whose seq it already returned is dropped, and one that
// skips a seq makes it resume. After a dropped connection, a slow close
// (4008) or a server restart it reconnects with backoff and resumes after
// the last seq it received. Seq-0 frames (snapshots, and the end of a run
// the server could not log) pass through as received.
// A Stream is read by one goroutine; Close may be called from any.
type Stream struct {
	c        *Client
	session  string
	coalesce bool
	ready    chan struct{} // signalled when queue grows or the stream is lost or closed
	done     chan struct{} // closed by Close

	mu         sync.Mutex // guards the fields below
	queue      []queued
	head       int    // index of the next frame in queue
	tail       uint64 // seq of the last frame taken in, when haveTail
	haveTail   bool
	conn       any    // the *wire or *sseConn whose frames are taken in, or nil
	w          *wire  // the wire the stream is registered on, over WS and pipe
	attachID   string // the session.attach in flight
	lostErr    error  // set when conn was lost: Next reconnects
	fatal      error  // set when reconnecting failed for good
	closed     bool
	reconnects int
	gaps       int
	// unlogged is set by a seq-0 RUN_ERROR outside a snapshot: the end of a
	// run the server's store could not log. When the store works again
	// the server logs those frames and does not send them again, so the
	// next frame may skip their seqs.
	unlogged bool
}

type queued struct {
	data json.RawMessage
	meta frameMeta
}

// Attach follows session's frames: after since when given (a resume), or
// from a seq-0 snapshot when nil. It returns once the server accepted the
// attach; a refusal is a *RequestError.
func (c *Client) Attach(ctx context.Context, session string, since *uint64) (*Stream, error) {
	return c.AttachWith(ctx, session, AttachOptions{Since: since})
}

// AttachWith is Attach with options.
func (c *Client) AttachWith(ctx context.Context, session string, opts AttachOptions) (*Stream, error) {
	if session == "" {
		return nil, errors.New("attach: name the session")
	}
	s := &Stream{c: c, session: session, coalesce: opts.Coalesce, ready: make(chan struct{}, 1), done: make(chan struct{})}
	if opts.Since != nil {
		s.tail, s.haveTail = *opts.Since, true
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("attach %s: %w", session, ErrClosed)
	}
	if c.transport != TransportHTTP {
		for o := range c.streams {
			if o.session == session {
				c.mu.Unlock()
				return nil, fmt.Errorf("attach %s: the session is already attached on this client: read its Stream, or Close it first", session)
			}
		}
	}
	c.streams[s] = struct{}{}
	c.mu.Unlock()
	if err := s.connect(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Session returns the session the stream follows.
func (s *Stream) Session() string { return s.session }

// Last returns the seq of the last frame the stream took in, and whether
// it has one (a stream that started from a snapshot has none until its
// first live frame).
func (s *Stream) Last() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tail, s.haveTail
}

// Reconnects returns how many times the stream got its connection back.
func (s *Stream) Reconnects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reconnects
}

// Gaps returns how many times the stream received a frame that skipped a
// seq and resumed instead. A correct server never causes one.
func (s *Stream) Gaps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gaps
}

// Next returns the next frame, waiting for it until ctx ends. It
// reconnects as needed; it fails when the stream is closed (ErrClosed),
// when ctx ends, or when reconnecting failed for good (then every later
// call fails the same way).
func (s *Stream) Next(ctx context.Context) (Frame, error) {
	for {
		s.mu.Lock()
		if s.head < len(s.queue) {
			q := s.queue[s.head]
			s.queue[s.head] = queued{}
			s.head++
			if s.head == len(s.queue) {
				s.queue, s.head = s.queue[:0], 0
			}
			s.mu.Unlock()
			return s.frame(q), nil
		}
		closed, fatal, lost := s.closed, s.fatal, s.lostErr
		s.mu.Unlock()
		switch {
		case closed:
			return Frame{}, fmt.Errorf("session %s: %w", s.session, ErrClosed)
		case fatal != nil:
			return Frame{}, fatal
		case lost != nil:
			s.c.reconnecting(s.session, lost)
			if err := s.reconnect(ctx, lost); err != nil {
				if ctx.Err() != nil {
					return Frame{}, ctx.Err()
				}
				if errors.Is(err, ErrClosed) {
					return Frame{}, fmt.Errorf("session %s: %w", s.session, ErrClosed)
				}
				s.mu.Lock()
				s.fatal = err
				s.mu.Unlock()
				return Frame{}, err
			}
			s.c.reconnecting(s.session, nil)
			continue
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return Frame{}, ctx.Err()
		}
	}
}

func (s *Stream) frame(q queued) Frame {
	f := Frame{Seq: q.meta.seq, MergedFrom: q.meta.mergedFrom, Session: s.session, Type: q.meta.typ, Data: q.data}
	if q.meta.session != "" {
		f.Session = q.meta.session
	}
	ev, err := protocol.DecodeEvent(q.data)
	if err != nil {
		s.c.log.Debug("frame does not decode; passing it on without an event", "session", s.session, "seq", f.Seq, "err", err)
	} else {
		f.Event = ev
	}
	return f
}

func (s *Stream) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// deliver takes in one frame received on from; it reports false once the
// stream wants nothing more from it.
func (s *Stream) deliver(from any, data []byte) bool {
	meta, err := parseMeta(data)
	if err != nil {
		s.c.log.Warn("skipping a frame", "session", s.session, "err", err)
		return true
	}
	return s.deliverMeta(from, data, meta)
}

func (s *Stream) deliverMeta(from any, data []byte, meta frameMeta) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.conn != from {
		return false
	}
	if meta.seq > 0 && s.haveTail {
		if meta.seq <= s.tail {
			return true // a frame already taken in
		}
		first := meta.seq
		if meta.mergedFrom > 0 && meta.mergedFrom <= meta.seq {
			first = meta.mergedFrom
		}
		if first != s.tail+1 && !(s.unlogged && first > s.tail) {
			s.gaps++
			s.dropLocked(&GapError{Session: s.session, Last: s.tail, Got: first})
			return false
		}
	}
	if len(s.queue)-s.head >= s.c.opts.MaxQueue {
		s.dropLocked(errOverflow)
		return false
	}
	switch {
	case meta.seq > 0:
		s.tail, s.haveTail, s.unlogged = meta.seq, true, false
	case meta.typ == protocol.TypeRunError:
		s.unlogged = true
	}
	s.queue = append(s.queue, queued{data: data, meta: meta})
	s.signal()
	return true
}

// dropLocked stops taking in frames from the current connection; Next
// resumes after the last frame taken in. s.mu must be held.
func (s *Stream) dropLocked(why error) {
	// An SSE response is closed; on a wire the session stays attached until
	// the stream attaches again, which restarts it (a detach sent now could
	// arrive after that attach).
	if conn, ok := s.conn.(*sseConn); ok {
		go conn.close()
	}
	s.conn = nil
	s.lostErr = why
	s.signal()
}

// lost tells the stream that from, its connection, ended with err.
func (s *Stream) lost(from any, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.conn != from {
		return
	}
	s.conn = nil
	s.lostErr = err
	s.signal()
}

// reconnect gets the stream's connection back, with backoff, bounded by
// Options.MaxReconnects.
func (s *Stream) reconnect(ctx context.Context, cause error) error {
	opts := s.c.opts
	if opts.MaxReconnects < 0 {
		return fmt.Errorf("session %s: %w (reconnecting is off)", s.session, cause)
	}
	if !retryable(cause) {
		return fmt.Errorf("session %s: %w", s.session, cause)
	}
	delay := opts.ReconnectDelay
	last := cause
	for attempt := 1; attempt <= opts.MaxReconnects; attempt++ {
		if attempt > 1 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-s.done:
				t.Stop()
				return ErrClosed
			}
			delay = min(delay*2, maxReconnectDelay)
		}
		since, ok := s.Last()
		s.c.log.Info("reconnecting", "session", s.session, "attempt", attempt, "since", since, "resume", ok, "cause", last)
		err := s.connect(ctx)
		if err == nil {
			s.mu.Lock()
			s.reconnects++
			s.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retryable(err) {
			return fmt.Errorf("resume session %s: %w", s.session, err)
		}
		last = err
	}
	return fmt.Errorf("resume session %s: gave up after %d attempts: %w", s.session, opts.MaxReconnects, last)
}

// attemptTimeout bounds one attempt to connect a stream.
const attemptTimeout = 30 * time.Second

// connect attaches the stream once, after the last frame it holds.
func (s *Stream) connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	var since *uint64
	if s.haveTail {
		v := s.tail
		since = &v
	}
	s.mu.Unlock()

	if s.c.transport == TransportHTTP {
		conn, err := s.c.openEvents(ctx, s, since)
		if err != nil {
			return err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.close()
			return ErrClosed
		}
		s.conn, s.lostErr = conn, nil
		s.mu.Unlock()
		go s.c.readSSE(s, conn)
		return nil
	}

	w, err := s.c.wire(ctx)
	if err != nil {
		return fmt.Errorf("attach %s: %w", s.session, err)
	}
	if err := w.register(s.session, s); err != nil {
		return fmt.Errorf("attach %s: %w", s.session, err)
	}
	id := s.c.nextID()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		w.unregister(s.session, s)
		return ErrClosed
	}
	if s.w != nil && s.w != w {
		s.w.unregister(s.session, s)
	}
	s.w, s.attachID, s.conn = w, id, nil
	s.mu.Unlock()
	body, err := json.Marshal(protocol.SessionAttach{
		Envelope: protocol.Envelope{T: "session.attach", ID: id},
		Session:  s.session, Since: since, Coalesce: s.coalesce,
	})
	if err != nil {
		return fmt.Errorf("attach %s: %w", s.session, err)
	}
	_, err = w.call(ctx, "session.attach", id, body, func(r protocol.Reply) {
		// On the reader goroutine, before the session's first frame.
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.attachID != id {
			return
		}
		s.attachID = ""
		if r.OK && !s.closed {
			s.conn, s.lostErr = w, nil
		}
	})
	if err != nil {
		return fmt.Errorf("attach %s: %w", s.session, err)
	}
	return nil
}

// Close stops the stream and detaches its session. It is safe to call
// more than once and from any goroutine.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	conn, w := s.conn, s.w
	s.conn, s.w = nil, nil
	s.queue, s.head = nil, 0
	s.signal()
	s.mu.Unlock()

	if sc, ok := conn.(*sseConn); ok {
		sc.close()
	}
	if w != nil {
		w.unregister(s.session, s)
		if w.cause() == nil {
			body, _ := json.Marshal(protocol.SessionDetach{Envelope: protocol.Envelope{T: "session.detach", ID: s.c.nextID()}, Session: s.session})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			w.send(ctx, body)
			cancel()
		}
	}
	s.c.mu.Lock()
	delete(s.c.streams, s)
	s.c.mu.Unlock()
	return nil
}
