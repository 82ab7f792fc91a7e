package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/getorrery/orrery/store"
)

// Log is a store.Log that keeps checkpoints, as the JetStream log does.
type Log interface {
	store.Log
	store.Checkpointer
}

// OwnedLog writes a session only while this node holds its lease, taking
// the lease at the session's first write. A write to a session another
// node owns, or whose lease this node lost, fails with an error wrapping
// ErrNotOwner and writes nothing; the log's own fence refuses a second
// writer besides, should two nodes ever both believe they hold a lease.
type OwnedLog struct {
	Log
	Leases *Leases
}

// Append appends the batches of the sessions this node owns; a batch of
// one it does not own fails alone.
func (o *OwnedLog) Append(ctx context.Context, batches ...store.Batch) error {
	var errs []error
	owned := batches[:0:0]
	for _, b := range batches {
		if err := o.own(ctx, b.Session); err != nil {
			errs = append(errs, err)
			continue
		}
		owned = append(owned, b)
	}
	if len(owned) > 0 {
		errs = append(errs, o.Log.Append(ctx, owned...))
	}
	return errors.Join(errs...)
}

// SaveCheckpoint saves a checkpoint of a session this node owns.
func (o *OwnedLog) SaveCheckpoint(ctx context.Context, session string, c store.Checkpoint) error {
	if err := o.own(ctx, session); err != nil {
		return err
	}
	return o.Log.SaveCheckpoint(ctx, session, c)
}

func (o *OwnedLog) own(ctx context.Context, session string) error {
	if _, ok := o.Leases.Held(session); ok {
		return nil
	}
	if _, err := o.Leases.AcquireWait(ctx, session); err != nil {
		return fmt.Errorf("write session %s: %w", session, err)
	}
	return nil
}

// Close releases the leases, then closes the log.
func (o *OwnedLog) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), o.Leases.TTL())
	defer cancel()
	return errors.Join(o.Leases.Close(ctx), o.Log.Close())
}

// Ready fails while this node cannot reach its leases.
func (o *OwnedLog) Ready() error { return o.Leases.Check() }
