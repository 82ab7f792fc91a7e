package ext_test

import (
	"context"
	"testing"
	"time"

	"github.com/getorrery/orrery/ext"
	"github.com/getorrery/orrery/internal/fakeclock"
	"github.com/getorrery/orrery/kernel"
)

// TestRunningExtensionKeepsSession: a session whose extension process runs
// stays loaded however long it is quiet; once the process is gone the
// session unloads, its extensions are dropped, and the next use loads it
// and starts them again.
func TestRunningExtensionKeepsSession(t *testing.T) {
	const idle = 10 * time.Minute
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	unloaded := make(chan string, 16)
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{rogue(t, "plain", "")}}, func(c *kernel.Config) {
		c.Now, c.AfterFunc, c.IdleUnload = clock.Now, clock.AfterFunc, idle
		hostUnloaded := c.SessionUnloaded
		c.SessionUnloaded = func(s *kernel.Session) {
			hostUnloaded(s)
			unloaded <- s.ID()
		}
	})
	ctx := context.Background()
	waitState(t, w, ext.StateRunning)
	w.w.sub.Close() // the world's own subscriber would keep the session too
	clock.Advance(2 * idle)
	if _, err := w.s.Info(ctx); err != nil { // after the idle check
		t.Fatal(err)
	}
	if n := w.k.Loaded(); n != 1 {
		t.Fatalf("Loaded() = %d with the extension running, want 1", n)
	}
	// The process stops for good: the session may go.
	for _, in := range w.h.List(w.s.ID()) {
		if in.State != ext.StateRunning {
			t.Fatalf("extension state %s, want running", in.State)
		}
	}
	if err := w.h.Unload(ctx, w.s.ID(), "rogue"); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case id := <-unloaded:
			if id != w.s.ID() {
				t.Fatalf("unloaded %s, want %s", id, w.s.ID())
			}
			done = true
		case <-deadline:
			t.Fatal("the session did not unload once its extension stopped")
		case <-time.After(10 * time.Millisecond):
			clock.Advance(idle)
		}
	}
	if got := w.h.List(w.s.ID()); len(got) != 0 {
		t.Errorf("List() after the session unloaded = %+v, want none", got)
	}
	// The next use loads it, and the host starts its extensions again.
	if _, err := w.k.Session(ctx, w.s.ID()); err != nil {
		t.Fatal(err)
	}
	waitState(t, w, ext.StateRunning)
}
