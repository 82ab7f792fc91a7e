package kernel

import (
	"sync"
	"time"

	"github.com/getorrery/orrery/protocol"
)

// The kinds of SessionChange.
const (
	SessionCreated = "created" // a session was created
	SessionTitle   = "title"   // its title changed
	SessionCost    = "cost"    // its micro_usd changed
	SessionRunning = "running" // a run started
	SessionEnded   = "ended"   // its run ended
	SessionDeleted = "deleted" // it was deleted (nothing deletes sessions yet)
)

// SessionChange is one mutation of the session list: its kind and the
// session's summary after it. Seq numbers the changes of one kernel from 1;
// it restarts with the process, so it orders changes but resumes nothing.
type SessionChange struct {
	Seq     uint64
	Kind    string
	Session protocol.SessionSummary
}

// DefaultWatchQueue bounds a session watch's queue when Config.QueueFrames
// is 0.
const DefaultWatchQueue = 4096

// liveHub fans session-list changes out to watchers. It is not durable: a
// watcher that reconnects reads the list again (Kernel.Sessions), then
// watches.
type liveHub struct {
	mu       sync.Mutex // guards seq and watchers
	seq      uint64
	watchers map[*SessionWatch]struct{}
}

// notify hands a change to every watcher; a watcher whose queue is full is
// dropped with ErrSlow, never waited for.
func (h *liveHub) notify(kind string, sum protocol.SessionSummary) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	c := SessionChange{Seq: h.seq, Kind: kind, Session: sum}
	for w := range h.watchers {
		if !w.push(c) {
			delete(h.watchers, w)
		}
	}
}

// WatchSessions returns a watch that receives every later change to the
// session list. A caller that wants the whole projection watches first,
// then reads Sessions, so that it misses nothing (a change may then arrive
// twice; applying it again is harmless).
//
// A watch whose queue passes Config.QueueFrames changes (DefaultWatchQueue
// when 0) ends with ErrSlow; its owner reads the list again.
func (k *Kernel) WatchSessions() *SessionWatch {
	max := k.cfg.QueueFrames
	if max <= 0 {
		max = DefaultWatchQueue
	}
	w := &SessionWatch{h: &k.live, ready: make(chan struct{}, 1), done: make(chan struct{}), max: max}
	k.live.mu.Lock()
	if k.live.watchers == nil {
		k.live.watchers = make(map[*SessionWatch]struct{})
	}
	k.live.watchers[w] = struct{}{}
	k.live.mu.Unlock()
	return w
}

// SessionWatch receives session-list changes in order: wait on Ready, then
// Take everything queued.
type SessionWatch struct {
	h     *liveHub
	ready chan struct{}
	done  chan struct{}
	max   int

	mu     sync.Mutex // guards queue, err and closed
	queue  []SessionChange
	err    error
	closed bool
}

func (w *SessionWatch) push(c SessionChange) bool {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false
	}
	if len(w.queue) >= w.max {
		w.closed, w.err = true, ErrSlow
		close(w.done)
		w.mu.Unlock()
		return false
	}
	w.queue = append(w.queue, c)
	w.mu.Unlock()
	select {
	case w.ready <- struct{}{}:
	default:
	}
	return true
}

// Ready is signalled when changes are queued.
func (w *SessionWatch) Ready() <-chan struct{} { return w.ready }

// Done is closed when the watch ends; Err says why.
func (w *SessionWatch) Done() <-chan struct{} { return w.done }

// Err is ErrSlow when the watch fell too far behind, else nil.
func (w *SessionWatch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Take appends every queued change to dst and returns it.
func (w *SessionWatch) Take(dst []SessionChange) []SessionChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	dst = append(dst, w.queue...)
	w.queue = w.queue[:0]
	return dst
}

// Close ends the watch; it is safe to call more than once.
func (w *SessionWatch) Close() {
	w.h.mu.Lock()
	delete(w.h.watchers, w)
	w.h.mu.Unlock()
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.done)
	}
	w.mu.Unlock()
}

// summary is the session's list entry as the actor holds it. Runs on the
// actor.
func (s *Session) summary() protocol.SessionSummary {
	s.assertActor()
	return protocol.SessionSummary{
		ID: s.id, Title: s.info.Title, Created: s.info.Created.UTC().Format(time.RFC3339),
		Head: s.head, Running: s.run != nil, MicroUSD: s.info.MicroUSD, Model: s.info.Model,
	}
}

// changed tells session watchers about a change, those of the other
// nodes of a cluster too. Runs on the actor.
func (s *Session) changed(kind string) {
	sum := s.summary()
	s.k.live.notify(kind, sum)
	if c := s.k.cfg.Cluster; c != nil {
		c.SessionChanged(kind, sum)
	}
}
