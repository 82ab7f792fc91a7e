package kernel

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"weak"
)

// Hold keeps the session loaded, however long it stays quiet, until the
// returned release is called; calling release again does nothing. The
// extension host holds a session while one of its extension processes
// runs.
func (s *Session) Hold() (release func()) {
	s.holds.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.touch()
			s.holds.Add(-1)
		})
	}
}

// armIdle starts the idle check of actor a, due after d; d <= 0 arms none.
// It runs before a starts, or on a.
func (s *Session) armIdle(a *actor, d time.Duration) {
	if s.k.cfg.IdleUnload <= 0 || d <= 0 {
		return
	}
	s.idleStop = s.k.cfg.AfterFunc(d, func() { s.post(a, func() { s.idleCheck(a) }) })
}

// idle reports whether nothing keeps the session loaded: no run, no store
// failure waiting to be logged (fault.go), no subscriber, no hold, no question waiting and no data update held back by
// pacing. Runs on the actor.
func (s *Session) idle() bool {
	s.assertActor()
	if s.run != nil || s.fault != nil || s.holds.Load() > 0 || len(s.consents) > 0 || len(s.inputs) > 0 || s.hub.subscribers() > 0 {
		return false
	}
	for _, inst := range s.comps {
		if inst.stop != nil {
			return false
		}
	}
	return true
}

// idleCheck unloads the session when it has been idle for
// Config.IdleUnload, and otherwise checks again when that time could have
// passed. Runs on the actor a.
func (s *Session) idleCheck(a *actor) {
	s.assertActor()
	s.idleStop = nil
	limit := s.k.cfg.IdleUnload
	quiet := time.Duration(s.k.now().UnixNano() - s.activeAt.Load())
	switch {
	case !s.idle():
		s.armIdle(a, limit)
	case quiet < limit:
		s.armIdle(a, limit-quiet)
	case !s.beginUnload(a):
		s.armIdle(a, limit)
	}
}

// beginUnload takes the session out of the kernel's loaded sessions and
// marks it unloaded, unless a request is being handed to it right now; the
// actor then stops after this work (serve, finishUnload). Runs on the
// actor a.
func (s *Session) beginUnload(a *actor) bool {
	if !s.lifeMu.TryLock() {
		return false // a do is handing work over: the session is in use
	}
	defer s.lifeMu.Unlock()
	if len(a.inbox) > 0 {
		return false
	}
	k := s.k
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || k.sessions[s.id] != s {
		return false
	}
	delete(k.sessions, s.id)
	k.dormantLocked(s)
	s.unloaded = true
	a.unloading = true
	return true
}

// finishUnload stops the session's goroutines after beginUnload: the last
// frames are committed and a checkpoint written when frames were logged
// since the last, so the next load reads little; then the state is
// dropped. It runs on the actor's goroutine as it stops.
func (s *Session) finishUnload(a *actor) {
	following := s.Following()
	if s.ckptFrames > 0 && s.k.checkpointEvery() > 0 {
		s.checkpointNow()
	}
	a.stop.Do(func() { close(a.quit) })
	// The feed's pending frame sees the actor quit; stopping it waits for
	// that, so off the actor.
	if stop := s.takeFollowStop(); stop != nil {
		go stop()
	}
	close(s.commits.stop)
	<-s.commits.done
	s.ckpt.wait()
	if c := s.k.cfg.Cluster; c != nil && !following {
		// Everything is written: another node may write the session now.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := c.Release(ctx, s.id); err != nil {
			s.k.log.Warn("give up the lease of an unloaded session (it lapses after the lease TTL)", "session", s.id, "err", err)
		}
		cancel()
	}
	s.reset()
	s.hub.setHead(s.hub.head(), nil)
	s.ext.clear()
	s.k.log.Debug("session unloaded after a quiet spell", "session", s.id)
	if s.k.cfg.SessionUnloaded != nil {
		s.k.cfg.SessionUnloaded(s)
	}
	// Last: a reload, and Kernel.Close, wait for this.
	close(a.exited)
}

// dormantLocked remembers s, just unloaded, without keeping it alive: while
// anyone still holds s, Kernel.Session returns it (and reloads it) rather
// than a second Session for the same id. k.mu is held.
func (k *Kernel) dormantLocked(s *Session) {
	if k.dormant == nil {
		k.dormant = make(map[string]weak.Pointer[Session])
	}
	if !s.cleanup {
		// The entry goes once s is collected, so the map holds only the
		// unloaded sessions something still refers to.
		runtime.AddCleanup(s, k.dropDormant, s.id)
		s.cleanup = true
	}
	k.dormant[s.id] = weak.Make(s)
}

func (k *Kernel) dropDormant(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if w, ok := k.dormant[id]; ok && w.Value() == nil {
		delete(k.dormant, id)
	}
}

// dormantSessionLocked returns the unloaded Session of id that something
// still holds, or nil. k.mu is held.
func (k *Kernel) dormantSessionLocked(id string) *Session {
	if w, ok := k.dormant[id]; ok {
		return w.Value()
	}
	return nil
}

// reload loads an unloaded session again, in place: what do does when it
// finds s unloaded.
func (k *Kernel) reload(ctx context.Context, s *Session) error {
	k.loadMu.Lock()
	defer k.loadMu.Unlock()
	return k.reloadLocked(ctx, s)
}

// reloadLocked is reload with k.loadMu held.
func (k *Kernel) reloadLocked(ctx context.Context, s *Session) error {
	s.lifeMu.RLock()
	old, unloaded := s.act, s.unloaded
	s.lifeMu.RUnlock()
	if !unloaded {
		return nil // loaded again meanwhile
	}
	// The last life wrote its checkpoint and dropped its state.
	select {
	case <-old.exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	info, err := k.cfg.Store.Session(ctx, s.id)
	if err != nil {
		return fmt.Errorf("load session %s: %w", s.id, err)
	}
	s.info = info
	return k.bringUp(ctx, s)
}

// bringUp loads s from its checkpoint and log, starts its goroutines, takes
// the recover step and publishes it in k.sessions. k.loadMu is held.
func (k *Kernel) bringUp(ctx context.Context, s *Session) error {
	k.mu.Lock()
	closed := k.closed
	k.mu.Unlock()
	if closed {
		return ErrSessionClosed
	}
	s.reset()
	if err := s.load(ctx); err != nil {
		s.reset()
		var d *DamagedError
		if errors.As(err, &d) {
			k.markDamaged(d)
		}
		return err
	}
	s.start()
	following, err := s.startFollowing(ctx)
	if err == nil && !following {
		err = s.recover(ctx)
	}
	if err != nil {
		_ = s.close(ctx)
		return err
	}
	// A follower writes nothing, so it starts nothing that would (its
	// extensions): the node that owns the session runs them, and a
	// follower made the owner starts them then (Promote).
	if k.cfg.SessionLoaded != nil && !following {
		k.cfg.SessionLoaded(s)
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		_ = s.close(ctx)
		return ErrSessionClosed
	}
	k.sessions[s.id] = s
	delete(k.dormant, s.id)
	k.mu.Unlock()
	return nil
}

// recover is the recover step whoever comes to own a session takes when it
// loads it: a run the log shows open that no live run owns (the process
// that ran it stopped) gets its closers and exactly one RUN_ERROR
// interrupted, with the next seqs. It returns once they are committed.
func (s *Session) recover(ctx context.Context) error {
	runID := s.info.OpenRun
	if runID == "" {
		return nil
	}
	var ierr error
	if err := s.doCommitted(ctx, func() {
		if s.run == nil && s.info.OpenRun == runID {
			ierr = s.interrupt(runID, s.interruptedWhy())
		}
	}); err != nil {
		return fmt.Errorf("recover session %s: %w", s.id, err)
	}
	if ierr != nil {
		return fmt.Errorf("recover session %s: %w", s.id, ierr)
	}
	if s.broken.Load() {
		// The store refused the run's end: the session serves reads and
		// ends the run for its clients with seq-0 frames until the store
		// takes it (fault.go). Those frames are the hub's before the
		// session is anyone's, so every subscriber gets them.
		if err := s.doCommitted(ctx, func() { s.takeFailure() }); err != nil {
			return fmt.Errorf("recover session %s: %w", s.id, err)
		}
		s.k.log.Error("could not close interrupted run: the session's store fails", "session", s.id, "run", runID)
		return nil
	}
	s.k.log.Info("closed interrupted run", "session", s.id, "run", runID)
	return nil
}

// doCommitted runs fn on the actor, then waits until everything queued up
// to its end is committed and published (or dropped after a store
// failure).
func (s *Session) doCommitted(ctx context.Context, fn func()) error {
	var flushed <-chan struct{}
	if err := s.do(ctx, func() { fn(); flushed = s.commits.flushed() }); err != nil {
		return err
	}
	select {
	case <-flushed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// interruptedWhy is the message of the RUN_ERROR interrupted that closes a
// run a stopped process left open.
func (s *Session) interruptedWhy() string {
	if s.k.cfg.Interrupted != nil {
		if why := s.k.cfg.Interrupted(s.id); why != "" {
			return why
		}
	}
	return "the server stopped while this run was in flight; its output up to here is kept: send the prompt again to retry"
}

// clear drops every extension tool.
func (x *extTools) clear() {
	x.mu.Lock()
	x.byName, x.hidden = nil, nil
	x.mu.Unlock()
}
