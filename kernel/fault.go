package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/getorrery/orrery/protocol"
)

// A session whose store fails (a full disk, a read-only or failing data
// dir) is broken until an append succeeds again:
//
//   - The committer drops what it could not append, and everything queued
//     after it, unpublished, and reports the failure (storeFailed). Nothing
//     the store did not take was ever sent with a seq, so no seq a client
//     saw is reused.
//   - The actor, as soon as it learns of it (failed), ends the run in
//     flight, reloads the session from the log, so that its head, state and
//     transcript are what was durable, and delivers to every subscriber,
//     with seq 0, the closers of what the log's open run left open and
//     RUN_ERROR {code: "store_failed"} (the hub keeps them for subscribers
//     that attach later, hub.ended).
//   - While broken, everything that would append (a prompt, a steer, an
//     intent, a layout change, an extension's write) first retries the
//     store by logging what the log lacks: those same closers and
//     RUN_ERROR, and a notice (retryStore). If that fails the request is
//     refused with a *StoreError; if it works the session is writable again
//     and the request goes on. Reads keep working throughout.

// StoreError refuses a request that would write to a session whose store
// fails; Err is the store's error. Nothing was written.
type StoreError struct {
	Session string
	Err     error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("session %s cannot be written: %v; %s, then retry", e.Session, e.Err, storeHint(e.Err))
}

func (e *StoreError) Unwrap() error { return e.Err }

// CodeStoreFailed is the RUN_ERROR code of a run ended because the store
// could not take its frames.
const CodeStoreFailed = "store_failed"

// storeHint says what a person can do about err.
func storeHint(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "free disk space where the data dir is"
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "make the data dir and its database writable again"
	case errors.Is(err, syscall.EIO):
		return "check the disk the data dir is on (is it full, read-only or failing?)"
	}
	return "check the data dir's disk space and permissions"
}

// failure is a store error the committer reported.
type failure struct{ err error }

// storeFailed records that an append failed and has the actor deal with
// it. Runs on the committer, which must not wait for the actor.
func (s *Session) storeFailed(err error) {
	s.k.log.Error("session store failed; the session refuses writes until the store takes an append again", "session", s.id, "err", err)
	s.failed.Store(&failure{err})
	s.lastFault.Store(&failure{err})
	s.broken.Store(true)
	go func() { _ = s.do(context.Background(), func() { s.takeFailure() }) }()
}

// takeFailure deals with a failure the committer reported, once; it
// reports whether there was one. Runs on the actor.
func (s *Session) takeFailure() bool {
	f := s.failed.Swap(nil)
	if f == nil {
		return false
	}
	s.handleFailure(f.err)
	return true
}

// writable is emit's way in while the session is broken: it deals with a
// failure just reported (refusing the write), or retries the store. Runs on
// the actor.
func (s *Session) writable() error {
	if s.handling {
		return &StoreError{Session: s.id, Err: s.fault}
	}
	if s.takeFailure() {
		return &StoreError{Session: s.id, Err: s.fault}
	}
	if s.fault == nil {
		return nil
	}
	return s.retryStore()
}

// handleFailure makes the session broken after err: the run in flight ends,
// the session is reloaded from the log, and, the first time, every
// subscriber gets, with seq 0, the end of each run whose end the log lacks.
// Runs on the actor.
func (s *Session) handleFailure(err error) {
	s.assertActor()
	first := s.fault == nil
	s.fault = err
	// What this does emits nothing: the store is not retried from here.
	s.handling = true
	defer func() { s.handling = false }()
	// The runs whose terminal event the log may lack: the one in flight,
	// and those that ended since the last commit that went through.
	lost := s.ended
	s.ended = nil
	r := s.run
	if r != nil {
		// Its terminal event could not be logged either: what clients get
		// instead is below.
		r.cancel()
		s.resolveAllConsent(ConsentCancelled)
		cost := r.usage.cost(s.k.cfg.Prices)
		s.lostCost += cost
		s.info.MicroUSD += cost
		s.running.Store(false)
		s.run = nil
		lost = append(lost, r)
	}
	// A run whose terminal event was published needs nothing more.
	published := s.hub.head()
	lost = slices.DeleteFunc(lost, func(lr *run) bool { return lr.endSeq != 0 && lr.endSeq <= published })
	rerr := s.reloadFromLog(context.Background())
	if s.stale = rerr != nil; s.stale {
		s.k.log.Error("reload session after its store failed", "session", s.id, "err", rerr)
	}
	// From here on what the actor queues follows what the log holds.
	s.commits.reset()
	if !s.stale {
		s.endingRun = nil
		for _, lr := range lost {
			if lr.id == s.info.OpenRun {
				s.endingRun = lr
			}
		}
		s.ending = s.endingEvents(err)
	}
	if !first {
		return // the subscribers were told at the first failure
	}
	var frames []Frame
	keep := false
	if len(s.ending) > 0 {
		frames = s.encodeOutOfOrder(s.info.OpenRun, s.ending)
		keep, s.endingSent = true, true
	}
	for _, lr := range lost {
		if s.stale || lr.id != s.info.OpenRun {
			// The run's RUN_STARTED never reached the log, or what the
			// log holds is unknown: its clients still learn that it ended.
			frames = append(frames, s.encodeOutOfOrder(lr.id, []protocol.Event{s.failedTerminal(lr, err)})...)
		}
	}
	if len(frames) == 0 {
		value, _ := json.Marshal(Notice{Level: "error", Text: (&StoreError{Session: s.id, Err: err}).Error()})
		frames = s.encodeOutOfOrder("", []protocol.Event{&protocol.Custom{Name: NoticeEvent, Value: value}})
	}
	s.commits.push(commitItem{then: func() { s.hub.deliver(frames, keep) }})
	if r != nil {
		s.changed(SessionEnded)
	}
}

// endingEvents returns what the log lacks to end the run it leaves open
// (info.OpenRun): the closers of what that run left open, then its
// RUN_ERROR; nil when no run is open. A run of this process (endingRun)
// ends as store_failed; one left by a process that stopped (the failure
// came as Open closed it) as interrupted. Runs on the actor.
func (s *Session) endingEvents(err error) []protocol.Event {
	if s.info.OpenRun == "" {
		return nil
	}
	var terminal *protocol.RunError
	if s.endingRun != nil {
		terminal = s.failedTerminal(s.endingRun, err)
	} else {
		terminal = errorTerminal("interrupted", s.interruptedWhy())
		terminal.Orrery().Result = &protocol.RunResult{}
	}
	return append(s.orphan.closers(terminal), terminal)
}

// failedTerminal is the RUN_ERROR store_failed of r, with its usage.
func (s *Session) failedTerminal(r *run, err error) *protocol.RunError {
	kept := "nothing of this session was saved yet"
	if s.head > 0 {
		kept = fmt.Sprintf("what was shown up to seq %d is kept", s.head)
	}
	ev := errorTerminal(CodeStoreFailed, fmt.Sprintf(
		"this run's output could not be saved (%v): %s, then send the prompt again; %s",
		err, storeHint(err), kept))
	result, usage := s.runResult(r)
	ev.Usage = usage
	ev.Orrery().Result = &result
	return ev
}

// encodeOutOfOrder encodes events as frames of run with seq 0, outside the
// session's order: they are delivered, never logged.
func (s *Session) encodeOutOfOrder(runID string, events []protocol.Event) []Frame {
	frames := make([]Frame, 0, len(events))
	for _, ev := range events {
		ev.Header().Timestamp = s.k.now().UnixMilli()
		ev.Header().Orrery().Run = runID
		f, err := encodeSnapshot(ev)
		if err != nil {
			s.k.log.Error("encode frame", "session", s.id, "type", ev.EventType(), "err", err)
			continue
		}
		f.Run = runID
		frames = append(frames, f)
	}
	return frames
}

// retryStore retries the store while the session is broken: it logs the end
// of the run the failure left open (which every subscriber already has,
// with seq 0, so it is not sent again) and a notice, and waits for the
// commit. It returns nil once the session is writable again, or a
// *StoreError. Runs on the actor, which waits for the disk here: a broken
// session has nothing else to commit.
func (s *Session) retryStore() error {
	s.assertActor()
	if s.stale {
		if err := s.reloadFromLog(context.Background()); err != nil {
			return &StoreError{Session: s.id, Err: err}
		}
		s.stale = false
		s.ending = s.endingEvents(s.fault)
	}
	fault := s.fault
	value, _ := json.Marshal(Notice{Level: NoticeInfo, Text: fmt.Sprintf(
		"session %s can be written again; writing had failed (%v), and what was not saved then is not in its log", s.id, fault)})
	runID := s.info.OpenRun
	var items []commitItem
	for i, ev := range append(slices.Clip(s.ending), &protocol.Custom{Name: NoticeEvent, Value: value}) {
		if i == len(s.ending) {
			runID = ""
		}
		it, err := s.sequence(runID, ev)
		if err != nil {
			// What was sequenced is not queued: the next try starts
			// again from the log.
			s.k.log.Error("sequence a frame to retry the store", "session", s.id, "err", err)
			s.stale = true
			return &StoreError{Session: s.id, Err: fault}
		}
		it.seen = i < len(s.ending) && s.endingSent
		items = append(items, it)
	}
	done := make(chan struct{})
	items = append(items, commitItem{then: func() { close(done) }})
	s.commits.pushWithCost(items, s.lostCost)
	<-done
	if s.takeFailure() {
		return &StoreError{Session: s.id, Err: s.fault}
	}
	s.k.log.Info("session store works again", "session", s.id)
	s.fault, s.ending, s.endingRun, s.endingSent, s.lostCost = nil, nil, nil, false, 0
	s.info.OpenRun = ""
	s.orphan = openSet{}
	s.broken.Store(false)
	return nil
}

// reloadFromLog rebuilds the session from what its log holds, as after a
// restart: its head, state, transcript and the log's open run, from its
// latest checkpoint that fits the log and the frames after it. The cost
// charged so far, the run ids used, the grants and the questions waiting
// stay as the actor knows them. Runs on the actor.
func (s *Session) reloadFromLog(ctx context.Context) error {
	s.assertActor()
	info, err := s.k.cfg.Store.Session(ctx, s.id)
	if err != nil {
		return fmt.Errorf("reload session %s: %w", s.id, err)
	}
	info.MicroUSD = s.info.MicroUSD
	for _, inst := range s.comps {
		inst.stopTimer()
	}
	runIDs := s.runIDs
	s.info, s.head, s.lastData = info, 0, nil
	s.transcript, s.state, s.orphan = transcript{}, newStateDoc(), openSet{}
	s.snapshotted, s.extState = false, nil
	s.comps = make(map[string]*instance)
	s.runIDs = make(runSet)
	s.ckptFrames, s.ckptBytes = 0, 0
	err = s.load(ctx)
	for h := range runIDs {
		s.runIDs[h] = struct{}{}
	}
	return err
}

// charge adds cost to the session's total, in the next commit, or, while
// the session is broken, in the append that ends the failure. Runs on the
// actor.
func (s *Session) charge(cost int64) {
	if cost == 0 {
		return
	}
	s.info.MicroUSD += cost
	if s.fault != nil {
		s.lostCost += cost
		return
	}
	s.commits.addCost(cost)
}
