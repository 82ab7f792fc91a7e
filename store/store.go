// Package store defines the durable event log every session is written to.
//
// A Log holds, per session, an ordered list of frames numbered by seq
// (1, 2, 3 … with no gaps), plus a small record about the session. The kernel
// is the only writer of a session; implementations live in subpackages named
// for what they are built on (store/sqlite).
package store

import (
	"context"
	"errors"
	"time"
)

// Errors a caller branches on.
var (
	// ErrUnknownSession means the session was never created.
	ErrUnknownSession = errors.New("unknown session")
	// ErrSessionExists means CreateSession was given an id already in use.
	ErrSessionExists = errors.New("session already exists")
	// ErrSeqConflict means an append's first seq is not the session's head+1:
	// another writer got there first, or the caller lost count.
	ErrSeqConflict = errors.New("seq conflict")
	// ErrClosed means the log was closed.
	ErrClosed = errors.New("store closed")
	// ErrNoCheckpoint means a session has no checkpoint (LoadCheckpoint).
	ErrNoCheckpoint = errors.New("no checkpoint")
	// ErrCheckpointAhead means SaveCheckpoint was given a checkpoint whose
	// Head is beyond the session's last logged frame.
	ErrCheckpointAhead = errors.New("checkpoint ahead of the log")
)

// Frame is one logged event. Data is the frame's AG-UI JSON exactly as it
// is sent, metadata.orrery.seq included.
type Frame struct {
	Seq uint64
	// Type is the AG-UI event type. RUN_STARTED opens Run; RUN_FINISHED and
	// RUN_ERROR close it, which is how a Log knows the run in flight.
	Type string
	// Run is the id of the run the frame belongs to, or "" outside runs.
	Run  string
	Data []byte
}

// Session is what a Log keeps about a session besides its frames.
type Session struct {
	ID      string
	Title   string
	Model   string
	Cwd     string
	Created time.Time
	// Head is the seq of the session's last frame, 0 when it has none.
	Head uint64
	// OpenRun is the id of a run whose RUN_STARTED is logged and whose
	// terminal event is not, or "".
	OpenRun string
	// MicroUSD is the session's total cost so far.
	MicroUSD int64
}

// Batch is the frames of one session appended together.
type Batch struct {
	Session string
	Frames  []Frame
	// CostDelta is added to the session's MicroUSD in the same commit.
	CostDelta int64
}

// Log is a durable, ordered, per-session event log.
//
// Append is safe for concurrent use across sessions; for any one session the
// caller is the single writer. Implementations group concurrent appends into
// one commit. When Append returns nil every frame of every batch is durable
// against a crash of the process.
type Log interface {
	// CreateSession records a new, empty session.
	CreateSession(ctx context.Context, s Session) error
	// Session returns the record of one session, or ErrUnknownSession.
	Session(ctx context.Context, id string) (Session, error)
	// Sessions lists every session, newest first.
	Sessions(ctx context.Context) ([]Session, error)
	// UpdateSession stores a session's title and model.
	UpdateSession(ctx context.Context, s Session) error
	// Append logs the batches atomically per batch. Each batch's first seq
	// must be its session's head+1 and its seqs consecutive, or Append
	// fails with ErrSeqConflict and writes nothing for that batch. A batch
	// that fails to write (a conflict, a row another writer took) fails
	// alone: the other batches are still written. An error that comes from
	// the disk wraps
	// syscall.ENOSPC (full), syscall.EROFS or syscall.EACCES (not
	// writable) or syscall.EIO (failing) where the implementation can tell.
	Append(ctx context.Context, batches ...Batch) error
	// Read returns up to limit frames of a session with seq > since, in
	// order. limit <= 0 means no limit.
	Read(ctx context.Context, session string, since uint64, limit int) ([]Frame, error)
	// Scan calls fn for each frame with seq > since, in order, without
	// holding them all in memory. The Data slice is valid only during fn.
	Scan(ctx context.Context, session string, since uint64, fn func(Frame) error) error
	// Close releases the log. It is safe after a partial open.
	Close() error
}

// Checkpoint is a session's reduced state as it stood after one frame, so
// that loading the session reads it and only the frames after it instead of
// the whole log. It is an optimization: the log stays the truth, and a
// reader ignores a checkpoint it cannot use.
type Checkpoint struct {
	// Head is the seq of the last frame the checkpoint reflects.
	Head uint64
	// Data is the kernel's encoding of the state (its format, version and
	// checksum included); the store keeps it byte for byte.
	Data []byte
}

// Checkpointer is implemented by a Log that keeps one checkpoint per
// session. It is optional: a kernel on a Log without it rebuilds every
// session from seq 0.
type Checkpointer interface {
	// SaveCheckpoint replaces the session's checkpoint with c atomically: a
	// crash during the call leaves the old checkpoint or c, never part of
	// either. A c whose Head is beyond the session's head fails with
	// ErrCheckpointAhead and changes nothing; it is durable like a frame
	// when SaveCheckpoint returns nil.
	SaveCheckpoint(ctx context.Context, session string, c Checkpoint) error
	// LoadCheckpoint returns the session's checkpoint, or ErrNoCheckpoint.
	// An unknown session gives ErrUnknownSession.
	LoadCheckpoint(ctx context.Context, session string) (Checkpoint, error)
}

// Commit is one transaction of a Log that gathers appends (group commit):
// how many appends and frames it took, how long it took, and its error.
type Commit struct {
	Appends, Frames int
	Took            time.Duration
	Err             error
}

// CommitObserver is a Log that tells of each of its commits (for
// metrics). OnCommit sets the function, before the Log takes appends; it
// is called on the Log's writer, so it must be quick.
type CommitObserver interface {
	OnCommit(func(Commit))
}
