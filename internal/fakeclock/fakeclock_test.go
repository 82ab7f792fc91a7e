package fakeclock_test

import (
	"slices"
	"testing"
	"time"

	"github.com/getorrery/orrery/internal/fakeclock"
)

func TestAdvance(t *testing.T) {
	tests := []struct {
		name    string
		advance []time.Duration
		stop    bool // stop the 2s timer before advancing
		want    []string
		pending int
	}{
		{"nothing due", []time.Duration{time.Second / 2}, false, nil, 3},
		{"due timers fire earliest first", []time.Duration{5 * time.Second}, false, []string{"1s", "2s", "3s"}, 0},
		{"one step at a time", []time.Duration{time.Second, time.Second}, false, []string{"1s", "2s"}, 1},
		{"a stopped timer never fires", []time.Duration{5 * time.Second}, true, []string{"1s", "3s"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Unix(1_700_000_000, 0)
			c := fakeclock.New(start)
			var fired []string
			// Armed out of order: Advance runs them by their moment.
			c.AfterFunc(3*time.Second, func() { fired = append(fired, "3s") })
			stop := c.AfterFunc(2*time.Second, func() { fired = append(fired, "2s") })
			c.AfterFunc(time.Second, func() { fired = append(fired, "1s") })
			if tt.stop && !stop() {
				t.Fatal("stop() of a pending timer = false, want true")
			}
			var total time.Duration
			for _, d := range tt.advance {
				c.Advance(d)
				total += d
			}
			if !slices.Equal(fired, tt.want) {
				t.Errorf("fired %v, want %v", fired, tt.want)
			}
			if got := c.Pending(); got != tt.pending {
				t.Errorf("Pending() = %d, want %d", got, tt.pending)
			}
			if got := c.Now(); !got.Equal(start.Add(total)) {
				t.Errorf("Now() = %v, want %v", got, start.Add(total))
			}
			stop()
			if stop() {
				t.Error("stop() of a timer already stopped or fired = true, want false")
			}
		})
	}
}
