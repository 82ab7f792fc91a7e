package kernel

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Errors a subscription ends with.
var (
	// ErrSlow means the subscriber fell too far behind and was dropped; it
	// resumes from the last seq it received.
	ErrSlow = errors.New("subscriber fell too far behind; resume from the last seq received")
	// ErrSessionClosed means the session stopped (the kernel is shutting
	// down).
	ErrSessionClosed = errors.New("session closed")
	// ErrResubscribe means the subscription started from a snapshot that
	// showed frames the store then failed to write: subscribe again for a
	// snapshot of what the log holds.
	ErrResubscribe = errors.New("the session's store failed after this subscription's snapshot was taken; subscribe again")
)

// DefaultQueueFrames bounds a subscriber's queue when Config.QueueFrames is 0.
const DefaultQueueFrames = 16384

// hub fans a session's published frames out to its subscribers. The
// committer publishes; a publisher never blocks on a subscriber.
type hub struct {
	// onSlow, when set, is told of each subscriber dropped as too slow.
	// Set once, before the session has subscribers.
	onSlow func()

	mu        sync.Mutex // guards everything below
	subs      map[*Subscription]struct{}
	published uint64 // seq of the last frame published
	// state is the shared state document right after the last frame
	// published, for encoders that read it (StateEncoder). Documents are
	// never changed in place, so holding one costs no copy.
	state  []byte
	closed error
	// ended holds, while the session's store fails, the seq-0 frames that
	// ended the run the log leaves open (its closers and RUN_ERROR). They
	// were delivered to every subscriber then; one that attaches later gets
	// them after its backlog. Publishing frames again clears it: the store
	// works, and the first frames it took were those, logged.
	ended []Frame

	// now and left, set when the session is made, record when a
	// subscriber leaves: the session's idle clock starts then.
	now  func() time.Time
	left *atomic.Int64
}

// subscribers counts the live subscriptions.
func (h *hub) subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

func (h *hub) add(sub *Subscription, initial []Frame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed != nil {
		sub.end(h.closed)
		return
	}
	if sub.ended() {
		// Closed before its registration came round on the committer:
		// adding it now would keep it (and the session) forever, since
		// its Close already left the hub.
		return
	}
	if h.subs == nil {
		h.subs = make(map[*Subscription]struct{})
	}
	h.subs[sub] = struct{}{}
	if len(initial) > 0 {
		var states [][]byte
		if wantsState(sub.enc) {
			// The initial frames (seq-0 snapshots) reflect the state as it
			// stands now: every frame queued before them is published.
			states = make([][]byte, len(initial))
			for i := range states {
				states[i] = h.state
			}
		}
		sub.push(sub.shape(initial, states)...)
	}
}

// attachAt registers sub at the current published head and returns that
// head, so the caller can read the log up to it and lose nothing, and the
// seq-0 frames that end the run the log leaves open (hub.ended), which the
// caller sends after the log.
func (h *hub) attachAt(sub *Subscription) (uint64, []Frame, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed != nil {
		return 0, nil, h.closed
	}
	if h.subs == nil {
		h.subs = make(map[*Subscription]struct{})
	}
	h.subs[sub] = struct{}{}
	return h.published, h.ended, nil
}

// setHead sets the published head and the state right after it, as a load
// rebuilt them.
func (h *hub) setHead(published uint64, state []byte) {
	h.mu.Lock()
	h.published, h.state = published, state
	h.mu.Unlock()
}

func (h *hub) head() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.published
}

func (h *hub) remove(sub *Subscription) {
	h.mu.Lock()
	delete(h.subs, sub)
	h.mu.Unlock()
	if h.left != nil {
		h.left.Store(h.now().UnixNano())
	}
}

// publish hands committed frames to every subscriber, running each queued
// action at its place in the order. A frame marked seen moves the head and
// the state without being sent again.
func (h *hub) publish(items []commitItem) {
	h.mu.Lock()
	start := 0
	flush := func(end int) {
		if start == end {
			return
		}
		frames := make([]Frame, 0, end-start)
		seen := false
		for _, it := range items[start:end] {
			if it.seen {
				seen = true
				continue
			}
			frames = append(frames, it.frame)
		}
		if seen {
			// Every subscriber holds these frames from seq 0; they are
			// in the log now.
			h.ended = nil
		}
		// The state after each frame, worked out only when a subscriber's
		// encoder reads it.
		before := h.state
		h.fanOutLocked(frames, func() [][]byte {
			out := make([][]byte, 0, len(frames))
			cur := before
			for _, it := range items[start:end] {
				if it.state != nil {
					cur = it.state
				}
				if !it.seen {
					out = append(out, cur)
				}
			}
			return out
		})
		for _, it := range items[start:end] {
			if it.state != nil {
				h.state = it.state
			}
		}
		h.published = items[end-1].frame.Seq
	}
	for i, it := range items {
		if !it.action() {
			continue
		}
		flush(i)
		start = i + 1
		h.mu.Unlock()
		if it.then != nil {
			it.then()
		}
		h.mu.Lock()
	}
	flush(len(items))
	h.mu.Unlock()
}

// fanOutLocked pushes frames to every subscriber, encoding them once per
// face (dialect, tagged with the session or not) and sharing the bytes
// among every subscriber that shows it; states gives the state after each
// frame, for encoders that read it. h.mu is held.
func (h *hub) fanOutLocked(frames []Frame, states func() [][]byte) {
	if len(frames) == 0 {
		return
	}
	var after [][]byte
	var shaped map[face][]Frame
	for sub := range h.subs {
		batch := frames
		if f := sub.face(); f != (face{}) {
			var ok bool
			if batch, ok = shaped[f]; !ok {
				if shaped == nil {
					shaped = make(map[face][]Frame)
				}
				var st [][]byte
				if wantsState(sub.enc) {
					if after == nil {
						after = states()
					}
					st = after
				}
				batch = sub.shape(frames, st)
				shaped[f] = batch
			}
		}
		if len(batch) == 0 {
			continue
		}
		if !sub.push(batch...) {
			delete(h.subs, sub)
		}
	}
}

// deliver hands every subscriber frames that could not be logged (seq 0),
// after everything published; with keep, later subscribers get them after
// their backlog too (hub.ended).
func (h *hub) deliver(frames []Frame, keep bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if keep {
		h.ended = frames
	}
	state := h.state
	h.fanOutLocked(frames, func() [][]byte {
		out := make([][]byte, len(frames))
		for i := range out {
			out[i] = state
		}
		return out
	})
}

// close ends every subscription with err; later subscriptions end at once.
func (h *hub) close(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed != nil {
		return
	}
	h.closed = err
	for sub := range h.subs {
		sub.end(err)
	}
	h.subs = nil
}

// Subscription receives a session's frames in seq order. A subscriber
// first replays its backlog (Backlog), then repeatedly waits on Ready and
// takes everything queued with Take, writing it in one go. It never blocks
// the session: when its queue overflows it ends with ErrSlow.
type Subscription struct {
	hub   *hub
	max   int
	ready chan struct{}
	done  chan struct{}

	mu sync.Mutex // guards batches, pending, err and closed
	// batches are the published batches not yet taken. They are shared
	// with every other subscriber (read-only), so publishing costs no copy
	// per subscriber; pending counts their frames.
	batches [][]Frame
	pending int
	oldest  time.Time // when the oldest queued batch arrived
	err     error
	closed  bool

	// backlog is the stored range (since, head] to replay before live frames.
	backlog func(ctx context.Context, fn func(Frame) error) error
	// head is the last seq before the subscription's live frames: the head
	// its backlog ends at, or the seq its snapshot reflects.
	head uint64
	// tag is the session id to add to each frame, or "" for plain frames.
	tag string
	// enc encodes frames into another dialect; nil sends them as logged.
	enc Encoder
	// onEnd, when set, runs once when the subscription ends.
	onEnd func()
	// notify, when set (Notify), runs after frames are queued and when the
	// subscription ends; guarded by mu.
	notify func()
}

// Head is the last seq before the subscription's live frames: where its
// backlog ends, or the seq its starting snapshot reflects.
func (s *Subscription) Head() uint64 { return s.head }

// SlowAfter is how long a subscriber over its queue bound may take to
// start draining before it is dropped as too slow.
const SlowAfter = time.Second

func newSubscription(h *hub, max int) *Subscription {
	if max <= 0 {
		max = DefaultQueueFrames
	}
	return &Subscription{hub: h, max: max, ready: make(chan struct{}, 1), done: make(chan struct{})}
}

// push queues frames, keeping the slice itself (the caller must not change
// it); it reports false when the subscription is over.
func (s *Subscription) push(frames ...Frame) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	// A subscriber that has taken everything is never dropped, however
	// large one commit is; one that would pass its bound is dropped only
	// once its oldest queued frame has waited SlowAfter, so a burst of
	// commits that arrives before its writer runs (a loaded machine, a
	// store that held its lock) is not mistaken for a slow reader.
	if s.pending > 0 && s.pending+len(frames) > s.max && time.Since(s.oldest) > SlowAfter {
		s.mu.Unlock()
		s.end(ErrSlow)
		if s.hub.onSlow != nil {
			s.hub.onSlow()
		}
		return false
	}
	if s.pending == 0 {
		s.oldest = time.Now()
	}
	s.batches = append(s.batches, frames)
	s.pending += len(frames)
	notify := s.notify
	s.mu.Unlock()
	if notify != nil {
		notify()
		return true
	}
	select {
	case s.ready <- struct{}{}:
	default:
	}
	return true
}

// Notify has fn called, instead of Ready being signalled, each time frames
// are queued and once when the subscription ends, so that one goroutine
// can serve many subscriptions without waiting on each. fn runs on the
// publishing goroutine and must not block or call back into the
// subscription's session. If frames are already queued, or the
// subscription has ended, fn is called at once. Notify(nil) goes back to
// Ready.
func (s *Subscription) Notify(fn func()) {
	s.mu.Lock()
	s.notify = fn
	now := fn != nil && (s.pending > 0 || s.closed)
	s.mu.Unlock()
	if now {
		fn()
	}
}

func (s *Subscription) end(err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.err = err
	close(s.done)
	onEnd, notify := s.onEnd, s.notify
	s.mu.Unlock()
	if onEnd != nil {
		onEnd()
	}
	if notify != nil {
		notify()
	}
}

// ended reports whether the subscription has ended.
func (s *Subscription) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Ready is signalled when frames are queued.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Done is closed when the subscription ends; Err says why. Frames queued
// before it ended can still be taken.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err is why the subscription ended, or nil while it is live or after Close.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Take appends every queued frame to dst and returns it.
func (s *Subscription) Take(dst []Frame) []Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.batches {
		dst = append(dst, b...)
	}
	clear(s.batches)
	s.batches = s.batches[:0]
	s.pending = 0
	return dst
}

// Backlog replays, once, the stored frames the subscription starts with
// (those between its since and the head when it attached), calling fn for
// each in order. Data is valid only during fn. It is a no-op for
// subscriptions that start live.
func (s *Subscription) Backlog(ctx context.Context, fn func(Frame) error) error {
	b := s.backlog
	s.backlog = nil
	if b == nil {
		return nil
	}
	return b(ctx, fn)
}

// Close ends the subscription; it is safe to call more than once.
func (s *Subscription) Close() {
	s.end(nil)
	s.hub.remove(s)
}
