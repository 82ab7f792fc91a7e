package server

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor fails t unless cond holds within 10 s (a bound for a broken
// flusher, not a speed figure).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFlusherDrainsEachScheduleOnceAtATime(t *testing.T) {
	f := newFlusher(2, 0)
	defer f.close()
	var (
		running, overlaps, drains atomic.Int64
		pending                   atomic.Int64 // schedules not yet covered by a drain
	)
	s := &sink{}
	s.drain = func() {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		pending.Store(0)
		drains.Add(1)
		time.Sleep(50 * time.Microsecond) // widen the window for a second drain
		running.Add(-1)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				pending.Add(1)
				f.schedule(s)
			}
		}()
	}
	wg.Wait()
	// Every schedule is followed by a drain: none is lost.
	waitFor(t, "a drain after the last schedule", func() bool { return pending.Load() == 0 && s.state.Load() == sinkIdle })
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d drains ran while another drain of the same sink was running", n)
	}
	if n := drains.Load(); n >= 8000 {
		t.Errorf("%d drains for 8000 schedules: schedules of a queued sink were not merged", n)
	}
}

func TestFlusherSlowDrainHoldsNoOneElse(t *testing.T) {
	f := newFlusher(1, 0)
	defer f.close()
	release := make(chan struct{})
	blocked := make(chan struct{})
	slow := &sink{drain: func() {
		close(blocked)
		<-release // a peer that reads nothing
	}}
	f.schedule(slow)
	<-blocked
	// The only worker is stuck; other sinks are still drained, by a worker
	// started for them.
	const n = 50
	var done atomic.Int64
	others := make([]*sink, n)
	for i := range others {
		others[i] = &sink{drain: func() { done.Add(1) }}
		f.schedule(others[i])
	}
	waitFor(t, "the other sinks to drain while one drain is blocked", func() bool { return done.Load() == n })
	close(release)
	// The extra worker leaves once the queue is empty.
	waitFor(t, "the flusher to shrink back to its minimum", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.workers) == f.min
	})
}

func TestFlusherClosed(t *testing.T) {
	f := newFlusher(2, 0)
	var drained atomic.Int64
	s := &sink{drain: func() { drained.Add(1) }}
	f.schedule(s)
	waitFor(t, "the first drain", func() bool { return drained.Load() == 1 })
	f.close()
	waitFor(t, "the workers to stop", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.workers) == 0
	})
	s.state.Store(sinkIdle)
	f.schedule(s)
	time.Sleep(10 * time.Millisecond)
	if n := drained.Load(); n != 1 {
		t.Errorf("drained %d times, want 1: a closed flusher drained a sink", n)
	}
}

func TestFlusherPacesBusySinks(t *testing.T) {
	// One worker and many sinks scheduled over and over: the flusher is
	// busy, so no sink is drained more often than every.
	const every = 20 * time.Millisecond
	f := newFlusher(1, every)
	defer f.close()
	sinks := make([]*sink, 20)
	drains := make([]atomic.Int64, len(sinks))
	pending := make([]atomic.Int64, len(sinks))
	for i := range sinks {
		sinks[i] = &sink{drain: func() {
			pending[i].Store(0)
			drains[i].Add(1)
		}}
	}
	start := time.Now()
	for time.Since(start) < 300*time.Millisecond {
		for i, s := range sinks {
			pending[i].Add(1)
			f.schedule(s)
		}
		time.Sleep(100 * time.Microsecond)
	}
	waitFor(t, "a drain of every sink after its last schedule", func() bool {
		for i, s := range sinks {
			if pending[i].Load() != 0 || s.state.Load() != sinkIdle {
				return false
			}
		}
		return true
	})
	elapsed := time.Since(start)
	// About one drain per interval per sink; the flusher is not busy at
	// the very start and end, and then writes at once, so allow twice
	// that. Unpaced, each sink would be drained on most of its schedules
	// (thousands).
	limit := 2 * (int64(elapsed/every) + 2) * int64(len(sinks))
	var total int64
	for i := range sinks {
		n := drains[i].Load()
		total += n
		if n < 2 {
			t.Errorf("sink %d: %d drains in %v: it was not drained again once due", i, n, elapsed)
		}
	}
	t.Logf("%d drains of %d sinks in %v (limit %d)", total, len(sinks), elapsed, limit)
	if total > limit {
		t.Errorf("%d drains of %d sinks in %v, want at most %d: a busy flusher did not pace them to one drain per %v", total, len(sinks), elapsed, limit, every)
	}
}

func TestFlusherKeepingUpIsNotPaced(t *testing.T) {
	// One sink on a flusher with nothing else to do: each schedule drains
	// at once, however long the interval.
	f := newFlusher(1, time.Hour)
	defer f.close()
	var drains atomic.Int64
	s := &sink{drain: func() { drains.Add(1) }}
	for i := int64(1); i <= 3; i++ {
		f.schedule(s)
		waitFor(t, "a drain of a sink the flusher keeps up with", func() bool { return drains.Load() == i })
		waitFor(t, "the sink to go idle", func() bool { return s.state.Load() == sinkIdle })
	}
}
