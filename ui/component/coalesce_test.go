package component_test

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/getorrery/orrery/ui/component"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

// publish is one value a coalescer let out: the index of the update it
// stands for, and when.
type publish struct {
	at    time.Time
	index int
}

// simulate drives a Coalescer the way the session actor does: updates at
// the given offsets, one timer at a time, and a timer that sometimes fires
// early. It returns what was published, in order.
func simulate(t *testing.T, c *component.Coalescer, clock *fakeClock, offsets []time.Duration, r *rand.Rand) []publish {
	t.Helper()
	start := clock.now
	var out []publish
	current := -1
	var timer time.Time // zero: no timer running
	fire := func() {
		publishNow, wait := c.Flush()
		switch {
		case publishNow:
			out = append(out, publish{at: clock.now, index: current})
			timer = time.Time{}
		case wait > 0:
			timer = clock.now.Add(wait)
		default:
			timer = time.Time{}
		}
	}
	for i, off := range offsets {
		at := start.Add(off)
		for !timer.IsZero() && !timer.After(at) {
			clock.now = timer
			if r != nil && r.IntN(4) == 0 {
				// The timer fires early: Flush must say wait again.
				clock.now = timer.Add(-time.Millisecond)
				if ok, wait := c.Flush(); ok || wait != time.Millisecond {
					t.Fatalf("Flush() 1ms early = %v, %v; want false, 1ms", ok, wait)
				}
				clock.now = timer
			}
			fire()
		}
		clock.now = at
		current = i
		publishNow, wait := c.Update()
		switch {
		case publishNow:
			if !timer.IsZero() {
				t.Fatalf("update %d published at once while a timer runs", i)
			}
			out = append(out, publish{at: clock.now, index: i})
		case wait > 0:
			if !timer.IsZero() {
				t.Fatalf("update %d asked for a second timer", i)
			}
			timer = clock.now.Add(wait)
		}
	}
	for !timer.IsZero() {
		clock.now = timer
		fire()
	}
	if c.Pending() {
		t.Fatal("Pending() = true after the last timer fired")
	}
	return out
}

// TestCoalescerNothingLost runs random bursts of updates through a
// coalescer on a fake clock and checks that publishes are at least one
// interval apart, that each publishes the newest value, that a held value
// goes out exactly when allowed, and that the final value is always
// published.
func TestCoalescerNothingLost(t *testing.T) {
	for seed := range uint64(50) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			c := component.NewCoalescer(10, clock)
			if c.Interval() != 100*time.Millisecond {
				t.Fatalf("Interval() = %v, want 100ms", c.Interval())
			}
			var offsets []time.Duration
			var at time.Duration
			for range 200 {
				at += time.Duration(r.IntN(60)) * time.Millisecond
				if r.IntN(10) == 0 {
					at += time.Duration(r.IntN(500)) * time.Millisecond
				}
				offsets = append(offsets, at)
			}
			start := clock.now
			pubs := simulate(t, c, clock, offsets, r)
			if len(pubs) == 0 || pubs[len(pubs)-1].index != len(offsets)-1 {
				t.Fatalf("last publish = %+v, want the last update (%d)", pubs[len(pubs)-1], len(offsets)-1)
			}
			for i, p := range pubs {
				// What is published is no older than any update made
				// before that moment (one made at the same instant may
				// come just after it).
				newest := -1
				for j, off := range offsets {
					if start.Add(off).Before(p.at) {
						newest = j
					}
				}
				if p.index < newest {
					t.Errorf("publish %d at %v = update %d, want update %d or newer", i, p.at.Sub(start), p.index, newest)
				}
				if i == 0 {
					continue
				}
				gap := p.at.Sub(pubs[i-1].at)
				if gap < c.Interval() {
					t.Errorf("publishes %d and %d are %v apart, want at least %v", i-1, i, gap, c.Interval())
				}
				// A held value goes out at the first allowed moment: one
				// interval after the last publish, or at once.
				held := start.Add(offsets[p.index]).Before(p.at)
				if held && gap != c.Interval() {
					t.Errorf("publish %d of a held update came %v after the last, want exactly %v", i, gap, c.Interval())
				}
			}
			// Every update is covered by a publish at or after it.
			for j, off := range offsets {
				covered := false
				for _, p := range pubs {
					if p.index >= j && !p.at.Before(start.Add(off)) {
						covered = true
						break
					}
				}
				if !covered {
					t.Errorf("update %d at %v was never published or superseded", j, off)
				}
			}
		})
	}
}

// TestCoalescerSlowUpdates checks that updates slower than the rate all go
// out at once, and that a burst is coalesced into one publish.
func TestCoalescerSlowUpdates(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	c := component.NewCoalescer(10, clock)
	offsets := []time.Duration{0, 100 * time.Millisecond, 250 * time.Millisecond, time.Second}
	pubs := simulate(t, c, clock, offsets, nil)
	if len(pubs) != len(offsets) {
		t.Fatalf("published %d of %d slow updates, want all: %+v", len(pubs), len(offsets), pubs)
	}
	clock = &fakeClock{now: time.Unix(1_700_000_000, 0)}
	c = component.NewCoalescer(10, clock)
	burst := make([]time.Duration, 50)
	for i := range burst {
		burst[i] = time.Duration(i) * time.Millisecond
	}
	pubs = simulate(t, c, clock, burst, nil)
	if len(pubs) != 2 || pubs[0].index != 0 || pubs[1].index != 49 || pubs[1].at.Sub(pubs[0].at) != 100*time.Millisecond {
		t.Errorf("a 50-update burst in 49ms published %+v, want update 0 at once and update 49 100ms later", pubs)
	}
}

func TestCoalescerDefaults(t *testing.T) {
	if got := component.NewCoalescer(0, nil).Interval(); got != 100*time.Millisecond {
		t.Errorf("NewCoalescer(0, nil).Interval() = %v, want 100ms", got)
	}
	if got := component.NewCoalescer(4, nil).Interval(); got != 250*time.Millisecond {
		t.Errorf("NewCoalescer(4, nil).Interval() = %v, want 250ms", got)
	}
	c := component.NewCoalescer(10, &fakeClock{})
	if ok, wait := c.Flush(); ok || wait != 0 {
		t.Errorf("Flush() with nothing held = %v, %v; want false, 0", ok, wait)
	}
}
