package kernel

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/getorrery/orrery/store"
)

// Frame is one sequenced event as logged and as sent: Data is its AG-UI
// JSON, encoded once and shared by every subscriber, which must not modify
// it.
type Frame = store.Frame

// commitItem is one entry of a session's commit queue: a frame to log, or
// an action to take once every frame queued before it is published.
type commitItem struct {
	frame Frame
	// state is the shared state document right after frame, when frame
	// changed it (nil otherwise).
	state []byte
	then  func()
	// seen marks a frame every subscriber already received with seq 0 (the
	// end of a run whose store failed, logged once the store works again):
	// it moves the published head without being sent again.
	seen bool
	// reset ends a failure (committer.reset).
	reset bool
	// logged marks a frame another node logged (a follower's): it is
	// published in its place in the queue, and not appended.
	logged bool
}

// action reports whether the item is something to do rather than a frame.
func (it *commitItem) action() bool { return it.then != nil || it.reset }

// committer is a session's second goroutine. The actor queues frames here
// and goes on; the committer takes everything queued while its previous
// commit was in flight, commits it in one Append, and only then publishes it
// to the hub. So a frame is never visible before it is durable, and a busy
// session commits many frames at once without any timer.
//
// When an Append fails, the committer reports it to the session and from
// then on drops every frame queued, unappended and unpublished (their seqs
// follow the failed ones), up to the reset the actor queues once it knows
// of the failure. Actions still run in order, but a snapshot registration
// queued after a dropped frame ends instead (ErrResubscribe), since its
// snapshot shows that frame. The cost of what was dropped goes with the
// next Append that succeeds.
type committer struct {
	s    *Session
	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex // guards queue and cost
	queue []commitItem
	cost  int64

	// trace is the span of the run in flight while a tracer records it:
	// each Append is then a child span of the run (commitSpan). Set by
	// the actor at the run's start, cleared by an action queued after its
	// terminal frame.
	trace atomic.Pointer[trace.SpanContext]

	// Owned by the committer goroutine.
	failed  bool  // an Append failed and no reset was reached since
	tainted bool  // a frame was dropped since the failure
	carry   int64 // cost dropped, added to the next Append
}

func newCommitter(s *Session) *committer {
	return &committer{s: s, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

func (c *committer) push(its ...commitItem) {
	c.s.k.unsaved.add(countFrames(its))
	c.mu.Lock()
	c.queue = append(c.queue, its...)
	c.mu.Unlock()
	c.signal()
}

// publishFollowed queues a frame another node logged, to be published
// after everything queued before it and not appended.
func (c *committer) publishFollowed(it commitItem) {
	it.logged = true
	c.push(it)
}

// countFrames is how many of its are frames.
func countFrames(its []commitItem) int {
	n := 0
	for i := range its {
		if !its[i].action() {
			n++
		}
	}
	return n
}

func (c *committer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *committer) addCost(d int64) {
	if d == 0 {
		return
	}
	c.mu.Lock()
	c.cost += d
	c.mu.Unlock()
	c.signal()
}

// pushWithCost queues its and adds d to the cost in one step, so that they
// go in the same Append.
func (c *committer) pushWithCost(its []commitItem, d int64) {
	c.s.k.unsaved.add(countFrames(its))
	c.mu.Lock()
	c.queue = append(c.queue, its...)
	c.cost += d
	c.mu.Unlock()
	c.signal()
}

// register queues sub's registration with the hub at the current end of the
// queue: it then receives initial, followed by every frame queued after
// this point. If a frame queued before it is dropped after a failure,
// initial (a snapshot) shows that frame, so sub ends instead. The action
// runs on the committer goroutine.
func (c *committer) register(sub *Subscription, initial []Frame) {
	c.push(commitItem{then: func() {
		if c.tainted && initial != nil {
			sub.end(ErrResubscribe)
			return
		}
		c.s.hub.add(sub, initial)
	}})
}

// flushed returns a channel closed once everything queued so far is
// committed and published, or dropped after a failure.
func (c *committer) flushed() <-chan struct{} {
	ch := make(chan struct{})
	c.push(commitItem{then: func() { close(ch) }})
	return ch
}

// reset queues the end of a failure: frames queued after it are appended
// again. The actor queues it once it has learnt of the failure and reloaded
// the session from the log.
func (c *committer) reset() {
	c.push(commitItem{reset: true})
}

func (c *committer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.wake:
			c.commitQueued()
		case <-c.stop:
			c.commitQueued()
			return
		}
	}
}

// commitQueued commits and publishes what is queued, or, after a failure,
// drops it up to the reset.
func (c *committer) commitQueued() {
	c.mu.Lock()
	items, cost := c.queue, c.cost
	c.queue, c.cost = nil, 0
	c.mu.Unlock()
	defer c.s.k.unsaved.done(countFrames(items))
	for c.failed {
		c.carry += cost
		cost = 0
		i := slices.IndexFunc(items, func(it commitItem) bool { return it.reset })
		if i < 0 {
			c.drop(items)
			return
		}
		c.drop(items[:i])
		items = items[i+1:]
		c.failed, c.tainted = false, false
	}
	if len(items) == 0 && cost == 0 {
		return
	}
	frames := make([]Frame, 0, len(items))
	for _, it := range items {
		if !it.action() && !it.logged {
			frames = append(frames, it.frame)
		}
	}
	if len(frames) > 0 {
		// What a failure dropped goes with the next frames, never alone:
		// an append of cost only would probe a store the session knows is
		// failing.
		cost += c.carry
		c.carry = 0
	}
	if len(frames) > 0 || cost != 0 {
		var start time.Time
		obs, sc := c.s.k.cfg.Observer, c.trace.Load()
		if obs != nil || sc != nil {
			start = time.Now()
		}
		err := c.s.k.cfg.Store.Append(context.Background(), store.Batch{Session: c.s.id, Frames: frames, CostDelta: cost})
		if obs != nil {
			obs.Appended(c.s.id, frames, time.Since(start), err)
		}
		if sc != nil {
			commitSpan(*sc, start, frames, err)
		}
		if err != nil {
			c.failed = true
			c.carry += cost
			c.s.storeFailed(err)
			c.drop(items)
			return
		}
	}
	c.s.hub.publish(items)
}

// drop takes items that will never be appended: frames are dropped and
// actions run, in order.
func (c *committer) drop(items []commitItem) {
	for _, it := range items {
		switch {
		case !it.action():
			c.tainted = true
		case it.then != nil:
			it.then()
		}
	}
}
