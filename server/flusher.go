package server

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// flusher writes live frames for every stream and connection on a few
// goroutines, instead of one goroutine per subscriber woken for each
// published batch.
//
// Why: under fan-out to a thousand subscribers the Go scheduler's run queue
// holds a thousand woken writers, and every hop of a frame's way to the
// hub (provider, session actor, committer, store) waits behind all of
// them. With a handful of workers the queue stays short, so those hops run
// promptly, and a worker that finds the queue full moves from one sink to
// the next without parking.
//
// A sink is scheduled when it has something to write; a scheduled sink is
// queued once however often it is scheduled, and never drained by two
// workers at once.
//
// When the flusher is busy (as many other sinks wait, in the queue or
// aside, as it has workers), a sink drained less than every ago waits,
// aside, until that much time has passed, so its frames go out together:
// the cost of fan-out is mostly one syscall per write, and this cuts the
// writes several times exactly when they are the bottleneck. A flusher
// that keeps up writes every frame at once, and the first frame after a
// quiet spell is never held.
//
// A drain may block on a peer that reads slowly: when a worker has been
// draining one sink for stallAfter, another worker starts, so one slow
// peer holds up no one else. Workers above the minimum exit when the
// queue is empty.
type flusher struct {
	min   int           // workers kept while idle
	every time.Duration // shortest time between two drains of a sink

	mu      sync.Mutex // guards everything below
	cond    *sync.Cond // signalled when queue grows
	queue   []*sink    // sinks waiting for a worker, in order, from head
	head    int
	idle    int                  // workers waiting on cond
	workers map[*worker]struct{} // every worker running
	closed  bool
	// aside holds sinks drained less than every ago, in the order they
	// were set aside; wake moves them back to the queue when due.
	aside []*sink
	wake  *time.Timer
	armed bool // wake is set
}

// stallAfter is how long one drain may run before another worker starts.
const stallAfter = 2 * time.Millisecond

// Sink states.
const (
	sinkIdle    = iota // nothing to write, not queued
	sinkQueued         // in the queue
	sinkRunning        // being drained
	sinkDirty          // being drained, and scheduled again meanwhile
)

// sink is one writer served by a flusher: a stream or a connection. drain
// writes whatever it has; it is never called concurrently with itself.
type sink struct {
	state atomic.Int32
	drain func()
	last  time.Time // when its last drain began; guarded by flusher.mu
}

// newFlusher returns a flusher keeping min workers that drains a sink at
// most once per every (0: as often as it is scheduled).
func newFlusher(min int, every time.Duration) *flusher {
	if min < 1 {
		min = 1
	}
	f := &flusher{min: min, every: max(every, 0), workers: make(map[*worker]struct{})}
	f.cond = sync.NewCond(&f.mu)
	f.wake = time.AfterFunc(time.Hour, f.due)
	f.wake.Stop()
	return f
}

// minWake is the finest grain of the wake timer, so that sinks due a few
// microseconds apart share one wake-up.
const minWake = time.Millisecond

// setAside puts s aside until it is due; f.mu is held.
func (f *flusher) setAside(s *sink, now time.Time) {
	f.aside = append(f.aside, s)
	if !f.armed {
		f.armed = true
		f.wake.Reset(max(s.last.Add(f.every).Sub(now), minWake))
	}
}

// due moves the sinks set aside that are due back to the queue.
func (f *flusher) due() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = false
	if f.closed {
		return
	}
	now := time.Now()
	keep := f.aside[:0]
	var next time.Duration
	for _, s := range f.aside {
		wait := s.last.Add(f.every).Sub(now)
		if wait > 0 {
			keep = append(keep, s)
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		f.queue = append(f.queue, s)
	}
	clear(f.aside[len(keep):])
	f.aside = keep
	if len(keep) > 0 {
		f.armed = true
		f.wake.Reset(max(next, minWake))
	}
	f.startWorkers()
}

// startWorkers wakes or starts workers for a grown queue: an idle worker
// per waiting sink, or a new one while there are fewer than min; f.mu is
// held.
func (f *flusher) startWorkers() {
	waiting := len(f.queue) - f.head
	for range min(waiting, f.idle) {
		f.cond.Signal()
	}
	if waiting > f.idle && len(f.workers) < f.min {
		f.spawn()
	}
}

// schedule queues s to be drained, unless it is queued already. It never
// blocks, so a publisher may call it.
func (f *flusher) schedule(s *sink) {
	for {
		switch st := s.state.Load(); st {
		case sinkIdle:
			if !s.state.CompareAndSwap(sinkIdle, sinkQueued) {
				continue
			}
			f.enqueue(s)
			return
		case sinkRunning:
			if !s.state.CompareAndSwap(sinkRunning, sinkDirty) {
				continue
			}
			return
		default: // queued, or already due another drain
			return
		}
	}
}

func (f *flusher) enqueue(s *sink) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.queue = append(f.queue, s)
	f.startWorkers()
}

// worker is one of a flusher's goroutines; its fields are guarded by
// flusher.mu.
type worker struct {
	draining bool      // in a drain, since started
	started  time.Time // when the drain began
}

// spawn starts a worker; f.mu is held.
func (f *flusher) spawn() {
	w := &worker{}
	f.workers[w] = struct{}{}
	go f.work(w)
}

// check runs while w drains, every stallAfter: if sinks wait, no worker
// is free and too few are making progress, it starts one more. It reports
// whether w is still draining.
func (f *flusher) check(w *worker) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !w.draining {
		return false
	}
	if f.closed || f.head == len(f.queue) || f.idle > 0 {
		return true
	}
	now := time.Now()
	moving := 0
	for o := range f.workers {
		if !o.draining || now.Sub(o.started) < stallAfter {
			moving++
		}
	}
	if moving < f.min {
		f.spawn()
	}
	return true
}

func (f *flusher) work(w *worker) {
	var stall *time.Timer
	stall = time.AfterFunc(time.Hour, func() {
		if f.check(w) {
			stall.Reset(stallAfter)
		}
	})
	stall.Stop()
	f.mu.Lock()
	for {
		for f.head == len(f.queue) {
			if f.closed || len(f.workers) > f.min {
				delete(f.workers, w)
				f.mu.Unlock()
				stall.Stop()
				return
			}
			f.idle++
			f.cond.Wait()
			f.idle--
		}
		s := f.queue[f.head]
		f.queue[f.head] = nil
		if f.head++; f.head == len(f.queue) {
			f.queue, f.head = f.queue[:0], 0
		}
		now := time.Now()
		if f.every > 0 && now.Sub(s.last) < f.every && len(f.queue)-f.head+len(f.aside) >= f.min {
			f.setAside(s, now)
			continue
		}
		s.last = now
		w.draining, w.started = true, now
		f.mu.Unlock()

		s.state.Store(sinkRunning)
		stall.Reset(stallAfter)
		s.drain()
		stall.Stop()
		if !s.state.CompareAndSwap(sinkRunning, sinkIdle) {
			// Scheduled again while it drained: back of the queue.
			s.state.Store(sinkQueued)
			f.enqueue(s)
		}
		// Let goroutines this drain woke, and the session goroutines that
		// feed the hub, run before the next sink: a worker with a full
		// queue would otherwise keep its processor for a whole time slice.
		runtime.Gosched()
		f.mu.Lock()
		w.draining = false
	}
}

// close drops what is queued and stops the workers; later schedules do
// nothing.
func (f *flusher) close() {
	f.mu.Lock()
	f.closed = true
	f.queue, f.head = nil, 0
	f.aside = nil
	f.wake.Stop()
	f.cond.Broadcast()
	f.mu.Unlock()
}
