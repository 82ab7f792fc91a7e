package kernel

import (
	"context"
	"sync"
	"sync/atomic"
)

// DefaultUnsavedFrames bounds the frames the kernel holds queued and not
// yet durable, across all sessions, when Config.UnsavedFrames is 0.
const DefaultUnsavedFrames = 65536

// backlog counts the frames queued for the store and not yet committed,
// across every session of the kernel, and makes agent loops wait while
// there are more than max. Frames are made faster than a store commits
// them when many sessions stream at once, and without a bound they pile
// up in memory while the loops making them take the CPU the store's
// writer needs to commit them: with 500 sessions streaming, the writer
// sat runnable behind hundreds of goroutines for most of a run, and
// commits began only once every loop had finished. A loop that waits
// here is not runnable, so the writer runs; the loops go on once a
// commit has brought the count down to half of max, so they wake
// together and fill the next commit.
//
// Only agent loops wait (turn.Emit); a session's actor never does, so a
// client's request is never held up by another session's output.
type backlog struct {
	max int64
	n   atomic.Int64

	waiting atomic.Bool // someone waits on wake
	mu      sync.Mutex  // guards wake
	wake    chan struct{}
}

func newBacklog(max int) *backlog {
	if max <= 0 {
		max = DefaultUnsavedFrames
	}
	return &backlog{max: int64(max)}
}

// add counts n frames queued.
func (b *backlog) add(n int) {
	if n != 0 {
		b.n.Add(int64(n))
	}
}

// done counts n frames committed, or dropped, and wakes the waiting loops
// once no more than half of max are left.
func (b *backlog) done(n int) {
	if n == 0 {
		return
	}
	if b.n.Add(-int64(n)) > b.max/2 || !b.waiting.Load() {
		return
	}
	b.mu.Lock()
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
	b.waiting.Store(false)
	b.mu.Unlock()
}

// admit returns at once while no more than max frames are unsaved, and
// otherwise waits until a commit brings them down to half of max, or
// until ctx or the run (runCtx) ends: a run that has ended emits only the
// closers the session drops, and they must not wait for a stalled store.
func (b *backlog) admit(ctx, runCtx context.Context) error {
	for b.n.Load() > b.max {
		b.mu.Lock()
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		wake := b.wake
		b.waiting.Store(true)
		b.mu.Unlock()
		// A commit that ended before waiting was set did not look for
		// waiters: look at the count again now that it will.
		if b.n.Load() <= b.max/2 {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-runCtx.Done():
			return nil
		}
	}
	return nil
}
