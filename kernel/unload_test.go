package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/internal/fakeclock"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

const idle = 10 * time.Minute

// unloads counts the kernel's unloads and loads of its sessions.
type unloads struct {
	loaded, unloaded atomic.Int64
	ch               chan string
}

func withIdle(c *fakeclock.Clock, u *unloads) option {
	return func(cfg *kernel.Config) {
		withClock(c)(cfg)
		cfg.IdleUnload = idle
		cfg.SessionLoaded = func(*kernel.Session) { u.loaded.Add(1) }
		cfg.SessionUnloaded = func(s *kernel.Session) {
			u.unloaded.Add(1)
			u.ch <- s.ID()
		}
	}
}

func newUnloads() *unloads { return &unloads{ch: make(chan string, 1024)} }

// wait waits for the unload of id, moving c on by idle_unload while it
// has not come: a request that raced the idle check put it off by one
// more spell.
func (u *unloads) wait(t *testing.T, c *fakeclock.Clock, id string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case got := <-u.ch:
			if got != id {
				t.Fatalf("unloaded %s, want %s", got, id)
			}
			return
		case <-deadline:
			t.Fatalf("session %s was not unloaded", id)
		case <-time.After(10 * time.Millisecond):
			c.Advance(idle)
		}
	}
}

// settle makes sure whatever the clock's timers posted to s has run: a
// request queued behind it returns only after.
func settle(t *testing.T, s *kernel.Session) {
	t.Helper()
	if _, err := s.Info(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// blocking is a provider whose answer streams one delta, then waits until
// released or cancelled.
type blocking struct{ release chan struct{} }

func (b *blocking) Name() string  { return "blocking" }
func (b *blocking) Model() string { return "blocking" }
func (b *blocking) Stream(ctx context.Context, _ agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	if err := emit(agent.Delta{Kind: agent.DeltaText, Text: "wait"}); err != nil {
		return agent.Usage{}, err
	}
	select {
	case <-b.release:
	case <-ctx.Done():
		return agent.Usage{}, ctx.Err()
	}
	return agent.Usage{}, nil
}

func withBlocking(b *blocking) option {
	return func(cfg *kernel.Config) {
		cfg.Models = func(spec string) (agent.Provider, error) {
			if spec == "blocking" {
				return b, nil
			}
			return models.Resolve(spec)
		}
	}
}

// whole is what a client attaching without since starts with: the seq-0
// STATE_SNAPSHOT and MESSAGES_SNAPSHOT, byte for byte, and the head.
func whole(t *testing.T, s *kernel.Session) string {
	t.Helper()
	sub, err := s.Subscribe(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	<-sub.Ready()
	frames := sub.Take(nil)
	if len(frames) != 2 {
		t.Fatalf("got %d snapshot frames, want 2", len(frames))
	}
	return string(frames[0].Data) + "\n" + string(frames[1].Data)
}

// TestIdleUnload: a session with nothing to keep it unloads after
// idle_unload and loads again on the next request, the same Session, with
// the same state; a subscriber, a run or a hold (an extension process)
// keeps it loaded.
func TestIdleUnload(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		c := newFakeClock()
		u := newUnloads()
		b := &blocking{release: make(chan struct{})}
		e := mode.newEnv(t, "offline", withIdle(c, u), withBlocking(b))
		ctx := context.Background()
		s := e.session(t)
		send(t, s, kernel.SendInput{Text: "hello"})
		if err := s.SetState(ctx, "ext:ci", "failed", json.RawMessage(`3`)); err != nil {
			t.Fatal(err)
		}
		before, head := whole(t, s), s.Head()

		// A subscriber keeps it.
		sub, err := s.Subscribe(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Advance(2 * idle)
		settle(t, s)
		if n := u.unloaded.Load(); n != 0 || e.k.Loaded() != 1 {
			t.Fatalf("with a subscriber: %d unloads, %d loaded; want 0, 1", n, e.k.Loaded())
		}
		sub.Close()

		// A hold keeps it.
		release := s.Hold()
		c.Advance(2 * idle)
		settle(t, s)
		if n := u.unloaded.Load(); n != 0 {
			t.Fatalf("with a hold: %d unloads, want 0", n)
		}
		release()

		// Quiet for less than idle_unload after the hold ended: it stays.
		c.Advance(idle / 2)
		settle(t, s)
		if n := u.unloaded.Load(); n != 0 {
			t.Fatalf("half an idle spell after the hold: %d unloads, want 0", n)
		}
		c.Advance(idle)
		u.wait(t, c, s.ID())
		if e.k.Loaded() != 0 {
			t.Fatalf("Loaded() = %d after the unload, want 0", e.k.Loaded())
		}

		// The next request loads it again: the same Session, the same state.
		again, err := e.k.Session(ctx, s.ID())
		if err != nil {
			t.Fatal(err)
		}
		if again != s {
			t.Errorf("Kernel.Session after an unload returned another Session for %s", s.ID())
		}
		if got := whole(t, s); got != before || s.Head() != head {
			t.Errorf("after a reload: head %d, snapshots\n%s\nwant head %d,\n%s", s.Head(), got, head, before)
		}
		if v, ok, err := s.State(ctx, "ext:ci", "failed"); err != nil || !ok || string(v) != "3" {
			t.Errorf("State(failed) after a reload = %s, %v, %v; want 3", v, ok, err)
		}
		if n := u.loaded.Load(); n != 2 {
			t.Errorf("SessionLoaded called %d times, want 2 (the load and the reload)", n)
		}
		// A used run id is still refused after the reload.
		if _, err := s.Send(ctx, kernel.SendInput{Text: "again", RunID: firstRun(t, e, s)}); err == nil {
			t.Errorf("Send with a used runId after a reload = nil, want a refusal")
		}

	})
}

// TestRunKeepsSession: a session stays loaded while a run is in flight,
// and unloads once it ended and idle_unload passed.
func TestRunKeepsSession(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		c := newFakeClock()
		u := newUnloads()
		b := &blocking{release: make(chan struct{})}
		e := mode.newEnv(t, "offline", withIdle(c, u), withBlocking(b))
		ctx := context.Background()
		s, err := e.k.CreateSession(ctx, kernel.SessionOptions{Model: "blocking"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Send(ctx, kernel.SendInput{Text: "wait"})
		if err != nil {
			t.Fatal(err)
		}
		c.Advance(2 * idle)
		settle(t, s)
		if n := u.unloaded.Load(); n != 0 || !s.Running() {
			t.Fatalf("with a run in flight: %d unloads, running %v; want 0, true", n, s.Running())
		}
		if err := s.Cancel(ctx, res.RunID); err != nil {
			t.Fatal(err)
		}
		c.Advance(2 * idle)
		u.wait(t, c, s.ID())
	})
}

// firstRun returns the id of the session's first run, read from its log.
func firstRun(t *testing.T, e *env, s *kernel.Session) string {
	t.Helper()
	frames, _, err := s.Read(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if f.Type == string(protocol.TypeRunStarted) {
			return f.Run
		}
	}
	t.Fatal("no run in the log")
	return ""
}

// TestUnloadRace: requests that race the unload, through Kernel.Session
// or on a Session held from before, are all served, never refused as
// closed; the frames they log are all there, in order.
func TestUnloadRace(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		c := newFakeClock()
		u := newUnloads()
		e := mode.newEnv(t, "offline", withIdle(c, u))
		ctx := context.Background()
		id := e.session(t).ID()
		held, err := e.k.Session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		const n = 300
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.Advance(2 * idle)
			}
		})
		var errs atomic.Int64
		for w := range 2 {
			wg.Go(func() {
				for i := range n {
					s := held
					if w == 0 {
						var err error
						if s, err = e.k.Session(ctx, id); err != nil {
							t.Errorf("Session() = %v", err)
							errs.Add(1)
							return
						}
					}
					if err := s.Notify(ctx, "", "info", "tick"); err != nil {
						t.Errorf("Notify #%d (worker %d) = %v, want nil", i, w, err)
						errs.Add(1)
						return
					}
				}
			})
		}
		for errs.Load() == 0 && held.Head() < 2*n {
			time.Sleep(time.Millisecond)
		}
		close(stop)
		wg.Wait()
		frames, head, err := held.Read(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if head != 2*n || len(frames) != 2*n {
			t.Fatalf("head %d, %d frames; want %d", head, len(frames), 2*n)
		}
		for i, f := range frames {
			if f.Seq != uint64(i+1) {
				t.Fatalf("frame %d has seq %d", i, f.Seq)
			}
		}
		t.Logf("%d unloads and %d loads during the race", u.unloaded.Load(), u.loaded.Load())
	})
}

// TestResumeAcrossUnload: a client attached with since=N that reconnects
// after the session unloaded (and while it reloads) gets every later
// frame once: no gap, no duplicate; one attached to the unloaded session
// gets the frames of its reload.
func TestResumeAcrossUnload(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		c := newFakeClock()
		u := newUnloads()
		e := mode.newEnv(t, "offline", withIdle(c, u))
		ctx := context.Background()
		s := e.session(t)
		var zero uint64
		sub, err := s.Subscribe(ctx, &zero)
		if err != nil {
			t.Fatal(err)
		}
		_, res := send(t, s, kernel.SendInput{Text: "one"})
		runID := res.RunID
		seen := drain(t, sub, runID)
		sub.Close()
		last := seen[len(seen)-1]

		c.Advance(2 * idle)
		u.wait(t, c, s.ID())

		// Attach to the unloaded session; the attach loads it.
		sub, err = s.Subscribe(ctx, &last)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		// Log from another handle (Kernel.Session) while attached.
		s2, err := e.k.Session(ctx, s.ID())
		if err != nil || s2 != s {
			t.Fatalf("Session() = %p, %v; want the same Session %p", s2, err, s)
		}
		_, res = send(t, s2, kernel.SendInput{Text: "two"})
		runID = res.RunID
		seen = append(seen, drain(t, sub, runID)...)
		for i, seq := range seen {
			if seq != uint64(i+1) {
				t.Fatalf("seqs received %v: at %d got %d, want %d (a gap or a duplicate)", seen, i, seq, i+1)
			}
		}
		if u.loaded.Load() != 2 {
			t.Errorf("SessionLoaded called %d times, want 2", u.loaded.Load())
		}
	})
}

// drain reads sub's backlog and live frames until runID's terminal frame,
// returning their seqs.
func drain(t *testing.T, sub *kernel.Subscription, runID string) []uint64 {
	t.Helper()
	var seqs []uint64
	if err := sub.Backlog(context.Background(), func(f kernel.Frame) error {
		seqs = append(seqs, f.Seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(20 * time.Second)
	for {
		for _, f := range sub.Take(nil) {
			seqs = append(seqs, f.Seq)
			if f.Run == runID && protocol.EventType(f.Type).Terminal() {
				return seqs
			}
		}
		select {
		case <-sub.Ready():
		case <-sub.Done():
			if err := sub.Err(); err != nil && !errors.Is(err, kernel.ErrSessionClosed) {
				t.Fatalf("subscription ended: %v", err)
			}
		case <-timeout:
			t.Fatalf("no terminal frame of %s; got seqs %v", runID, seqs)
		}
	}
}
