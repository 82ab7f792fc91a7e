package kernel

import (
	"errors"
	"fmt"
	"time"

	"github.com/getorrery/orrery/agent"
)

// Observer is told of a kernel's work as it happens, for metrics (package
// metrics implements it). Appended is called on a session's committer,
// on the write path, so it must be quick and never block.
type Observer interface {
	// Appended is one append of session's frames (none for an append of
	// cost only): how long the store took to take it, and its error.
	Appended(session string, frames []Frame, took time.Duration, err error)
	// ModelCalled is one model call of a run of the built-in agent loop,
	// once it ended. It is called on the run's goroutine.
	ModelCalled(session string, call agent.ModelCall)
	// Resumed is a subscription that resumed from a seq, with the frames
	// of its backlog (from that seq to the head).
	Resumed(backlog uint64)
	// DroppedSlow is a subscriber dropped because it fell too far behind.
	DroppedSlow()
}

// Stats is what a kernel holds at one moment.
type Stats struct {
	// Loaded counts the sessions in memory; Running those with a run in
	// flight; Broken those refusing writes since their store failed.
	Loaded, Running, Broken int
}

// Stats returns what the kernel holds now. It visits every session in
// memory: call it for a scrape, not per frame.
func (k *Kernel) Stats() Stats {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := Stats{Loaded: len(k.sessions)}
	for _, s := range k.sessions {
		if s.Running() {
			st.Running++
		}
		if s.broken.Load() {
			st.Broken++
		}
	}
	return st
}

// ErrNotReady is wrapped by Ready's error.
var ErrNotReady = errors.New("not ready")

// Ready reports whether the kernel can take work: nil, or an error that
// says why not and what to do. A kernel is not ready while a session's
// store refuses appends (a full disk, an I/O error, a read-only dir) or
// once it is closing.
func (k *Kernel) Ready() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return fmt.Errorf("%w: the kernel is shutting down", ErrNotReady)
	}
	broken, example := 0, (*Session)(nil)
	for _, s := range k.sessions {
		if s.broken.Load() {
			broken++
			if example == nil || s.id < example.id {
				example = s
			}
		}
	}
	if broken == 0 {
		return nil
	}
	var err error = errors.New("an append failed")
	if f := example.lastFault.Load(); f != nil {
		err = f.err
	}
	return fmt.Errorf("%w: the store refuses appends for %d session(s) (%s: %v): %s", ErrNotReady, broken, example.id, err, storeHint(err))
}
