package kernel

import (
	"context"
	"sync"

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
}

// committer is a session's second goroutine. The actor queues frames here
// and goes on; the committer takes everything queued while its previous
// commit was in flight, commits it in one Append, and only then publishes it
// to the hub. So a frame is never visible before it is durable, and a busy
// session commits many frames at once without any timer.
type committer struct {
	s    *Session
	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex // guards queue and cost
	queue []commitItem
	cost  int64
}

func newCommitter(s *Session) *committer {
	return &committer{s: s, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

func (c *committer) push(it commitItem) {
	c.mu.Lock()
	c.queue = append(c.queue, it)
	c.mu.Unlock()
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
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// register queues sub's registration with the hub at the current end of the
// queue: it then receives initial, followed by every frame queued after
// this point.
func (c *committer) register(sub *Subscription, initial []Frame) {
	c.push(commitItem{then: func() { c.s.hub.add(sub, initial) }})
}

// flushed returns a channel closed once everything queued so far is
// committed and published.
func (c *committer) flushed() <-chan struct{} {
	ch := make(chan struct{})
	c.push(commitItem{then: func() { close(ch) }})
	return ch
}

func (c *committer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.wake:
			if !c.commitQueued() {
				return
			}
		case <-c.stop:
			c.commitQueued()
			return
		}
	}
}

// commitQueued commits and publishes what is queued. It returns false when
// the store failed, after which the session is broken.
func (c *committer) commitQueued() bool {
	c.mu.Lock()
	items, cost := c.queue, c.cost
	c.queue, c.cost = nil, 0
	c.mu.Unlock()
	if len(items) == 0 && cost == 0 {
		return true
	}
	frames := make([]Frame, 0, len(items))
	for _, it := range items {
		if it.then == nil {
			frames = append(frames, it.frame)
		}
	}
	if len(frames) > 0 || cost != 0 {
		err := c.s.k.cfg.Store.Append(context.Background(), store.Batch{Session: c.s.id, Frames: frames, CostDelta: cost})
		if err != nil {
			c.s.fail(err)
			for _, it := range items {
				if it.then != nil {
					it.then()
				}
			}
			return false
		}
	}
	c.s.hub.publish(items)
	return true
}
