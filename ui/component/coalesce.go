package component

import (
	"time"
)

// Clock tells the time. The kernel passes the system clock; tests pass a
// clock they move by hand.
type Clock interface {
	Now() time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Coalescer paces one instance's data updates to limits.dataUpdatesPerSec.
// An update that comes sooner than 1/rate after the last one published is
// held, and at the next allowed moment the data as it then stands goes out:
// the last value wins, nothing is dropped, but a fast value is drawn late.
// It starts no goroutine and holds no timer: it tells its caller when to
// publish and how long to wait, so the session actor stays the one writer.
//
// The caller's loop is: after an accepted update call Update; if it says
// publish, send Data.Publish() now; if it returns a wait, start one timer
// for it, and when the timer fires call Flush, which says publish or
// returns a further wait. The zero Coalescer is not usable; use
// NewCoalescer. It is not safe for concurrent use.
type Coalescer struct {
	interval time.Duration
	clock    Clock
	last     time.Time // when the last publish went out
	sent     bool      // something was published
	pending  bool      // an update is held
}

// NewCoalescer returns a Coalescer allowing perSec publishes a second (the
// default, 10, when perSec is not positive), reading the time from clock
// (the system clock when nil).
func NewCoalescer(perSec float64, clock Clock) *Coalescer {
	if perSec <= 0 {
		perSec = DefaultDataUpdatesPerSec
	}
	if clock == nil {
		clock = SystemClock{}
	}
	return &Coalescer{interval: time.Duration(float64(time.Second) / perSec), clock: clock}
}

// Interval is the least time between two publishes.
func (c *Coalescer) Interval() time.Duration { return c.interval }

// Update records an accepted update. publish is true when it may go out
// now: publish Data.Publish() at once. Otherwise the update is held; wait
// is how long until the next allowed moment when the caller must start a
// timer, and zero when a timer for an earlier held update already runs.
func (c *Coalescer) Update() (publish bool, wait time.Duration) {
	if c.pending {
		return false, 0
	}
	now := c.clock.Now()
	if !c.sent || !now.Before(c.last.Add(c.interval)) {
		c.last, c.sent = now, true
		return true, 0
	}
	c.pending = true
	return false, c.last.Add(c.interval).Sub(now)
}

// Flush is called when the timer Update asked for fires. publish is true
// when the held update may go out now: publish Data.Publish(). When the
// timer fired early, publish is false and wait is how long to wait again.
// With nothing held it returns false and zero.
func (c *Coalescer) Flush() (publish bool, wait time.Duration) {
	if !c.pending {
		return false, 0
	}
	now := c.clock.Now()
	if due := c.last.Add(c.interval); now.Before(due) {
		return false, due.Sub(now)
	}
	c.pending = false
	c.last = now
	return true, 0
}

// Pending reports whether an update is held, waiting for Flush.
func (c *Coalescer) Pending() bool { return c.pending }
