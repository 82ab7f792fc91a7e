package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/getorrery/orrery/store"
	jsstore "github.com/getorrery/orrery/store/jetstream"
	"github.com/nats-io/nats.go"
)

// Member is this node's part in a cluster: the log it shares, its leases,
// and the subject other nodes send it the requests for its sessions on.
// It is the kernel's Cluster (who owns a session, the feed of one another
// node writes) and the server's Forwarder.
type Member struct {
	NC     *nats.Conn
	Log    *jsstore.Log
	Leases *Leases
	Logger *slog.Logger

	consenters *consenters // set by Start
}

func (m *Member) logger() *slog.Logger {
	if m.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Logger
}

// owner returns the live node other than this one that holds the
// session's lease, or nil. A holder that has missed its heartbeats for
// half a lease is taken for dead: this node waits its lease out and takes
// the session.
func (m *Member) owner(ctx context.Context, session string) (*Node, error) {
	if _, ok := m.Leases.Held(session); ok {
		return nil, nil
	}
	n, err := m.Leases.Owner(ctx, session)
	if err != nil || n == nil || n.ID == m.Leases.Node().ID {
		return nil, err
	}
	age, ok := m.Leases.heartbeatAge(ctx, n.ID)
	if !ok || age > m.Leases.TTL()/2 {
		return nil, nil
	}
	return n, nil
}

// Claim takes the session for this node as it loads when it holds the
// lease already, when the lease is this node's own from before it
// restarted, or when nobody holds it and the log shows a run left open
// (which the recover step then closes); otherwise the session is followed.
func (m *Member) Claim(ctx context.Context, session string, openRun bool) (bool, error) {
	if _, ok := m.Leases.Held(session); ok {
		return true, nil
	}
	n, err := m.Leases.Owner(ctx, session)
	if err != nil {
		return false, err
	}
	if n == nil && !openRun || n != nil && n.ID != m.Leases.Node().ID {
		return false, nil
	}
	if _, err := m.Leases.Acquire(ctx, session); err != nil {
		var held *HeldError
		if errors.As(err, &held) {
			return false, nil // another node was quicker
		}
		return false, err
	}
	return true, nil
}

// Owner is the id of the live node to forward a write of the session to,
// or "" once this node holds the session's lease, taking it if nobody
// alive does (waiting out a dead owner's, at most a TTL and a second).
// The lease is taken here, before the write, so that a node whose view of
// the owner is wrong forwards to the real one instead of writing.
func (m *Member) Owner(ctx context.Context, session string) (string, error) {
	n, err := m.owner(ctx, session)
	if err != nil {
		return "", err
	}
	if n != nil {
		return n.ID, nil
	}
	if _, ok := m.Leases.Held(session); ok {
		return "", nil
	}
	_, err = m.Leases.AcquireWait(ctx, session)
	var held *HeldError
	if errors.As(err, &held) {
		return held.Owner.ID, nil
	}
	return "", err
}

// Follow starts a feed of the frames another node writes to the session,
// and a watch on its owner: gone is called each quarter lease while no
// live node owns the session.
func (m *Member) Follow(session string, after uint64, fn func(store.Frame), gone func()) (func(), error) {
	f, err := Follow(m.NC, m.Log, session, after, fn, m.logger())
	if err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(m.Leases.TTL() / 4)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), m.Leases.TTL()/4)
			n, err := m.owner(ctx, session)
			cancel()
			if err == nil && n == nil {
				gone()
			}
		}
	}()
	return func() {
		close(stop)
		<-watched
		f.Stop()
	}, nil
}

// Acquire takes the session's lease, waiting out a dead holder's.
func (m *Member) Acquire(ctx context.Context, session string) error {
	_, err := m.Leases.AcquireWait(ctx, session)
	return err
}

// Release gives up this node's lease of the session.
func (m *Member) Release(ctx context.Context, session string) error {
	return m.Leases.Release(ctx, session)
}

// requestSubject is where a node takes the requests others forward to it.
func (m *Member) requestSubject(node string) string {
	return m.Log.Prefix() + ".node." + jsstore.Token(node) + ".do"
}

// Forward sends a request for the session to the node and returns its
// answer. When nobody answers on the node's subject (its process is gone:
// it died since its last heartbeat), it waits the node's lease out and
// takes the session, and reports taken: the caller runs the request here.
func (m *Member) Forward(ctx context.Context, node, session string, payload []byte) (answer []byte, taken bool, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Minute)
		defer cancel()
	}
	reply, err := m.NC.RequestWithContext(ctx, m.requestSubject(node), payload)
	if errors.Is(err, nats.ErrNoResponders) {
		if _, aerr := m.Leases.AcquireWait(ctx, session); aerr == nil {
			m.logger().Info("the session's owner answers no more: this node took the session", "session", session, "owner", node)
			return nil, true, nil
		}
	}
	if err != nil {
		return nil, false, err
	}
	return reply.Data, false, nil
}

// Serve answers the requests other nodes forward to this one with handle,
// until the returned stop is called. Each runs on its own goroutine.
func (m *Member) Serve(handle func(ctx context.Context, payload []byte) []byte) (func(), error) {
	sub, err := m.NC.Subscribe(m.requestSubject(m.Leases.Node().ID), func(msg *nats.Msg) {
		go func() {
			if err := msg.Respond(handle(context.Background(), msg.Data)); err != nil {
				m.logger().Warn("answer a forwarded request", "err", err)
			}
		}()
	})
	if err != nil {
		return nil, fmt.Errorf("take forwarded requests: %w", err)
	}
	return func() { sub.Unsubscribe() }, nil
}
