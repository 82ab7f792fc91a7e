package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	jsstore "github.com/getorrery/orrery/store/jetstream"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotOwner means this node does not hold the session's lease: another
// node owns the session, or this node lost the lease (it could not renew
// it in time) and must not write.
var ErrNotOwner = errors.New("this node does not own the session")

// Node is who a lease names.
type Node struct {
	// ID is unique to one run of one node process.
	ID string `json:"id"`
	// Name is the node's host name or --nats-name, for people.
	Name string `json:"name"`
	// Addr is the node's HTTP address, for people and status.
	Addr string `json:"addr,omitempty"`
}

// HeldError is an Acquire refused because another node holds the lease.
type HeldError struct {
	Session string
	Owner   Node
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("session %s is owned by node %s (%s)", e.Session, e.Owner.Name, e.Owner.ID)
}

// Unwrap makes a HeldError an ErrNotOwner.
func (e *HeldError) Unwrap() error { return ErrNotOwner }

// LeaseConfig lays out the leases bucket.
type LeaseConfig struct {
	// Bucket is the KV bucket, "orrery_leases" when empty.
	Bucket string
	// TTL is how long a lease lasts unrenewed: 10 s when zero. A dead
	// node's sessions move after it.
	TTL time.Duration
	// Replicas is the bucket's replica count, 1 when zero.
	Replicas int
	// Logger hears of lost leases.
	Logger *slog.Logger
}

// Leases are this node's session leases, kept in a JetStream KV bucket
// whose TTL is the lease length: acquiring creates a session's key (which
// fails while another node's lives), renewing updates it at the revision
// last written (a compare-and-set, so a lease another node took since is
// never renewed), and the revision is the fencing token. Leases renew on
// their own every third of the TTL while the node lives.
type Leases struct {
	nc    *nats.Conn
	kv    jetstream.KeyValue
	nodes jetstream.KeyValue // who is alive: each node's record, renewed with its leases
	node  Node
	addr  atomic.Pointer[string] // where it serves clients, once it does
	ttl   time.Duration
	log   *slog.Logger
	now   func() time.Time

	// renewMu keeps a renewal and a release of a lease from crossing: a
	// release that read the revision a renewal then moved would fail to
	// delete the key and leave the lease held.
	renewMu sync.Mutex

	mu   sync.Mutex
	held map[string]*Lease
	stop chan struct{}
	done chan struct{}
}

// Lease is one session's lease, held by this node.
type Lease struct {
	Session string
	key     string

	mu       sync.Mutex
	revision uint64    // the fencing token
	valid    time.Time // the lease is this node's until then at least
	lost     bool
}

// Revision is the lease's current fencing token.
func (l *Lease) Revision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.revision
}

// OpenLeases makes sure the bucket exists and starts renewing.
func OpenLeases(ctx context.Context, js jetstream.JetStream, node Node, c LeaseConfig) (*Leases, error) {
	if c.Bucket == "" {
		c.Bucket = "orrery_leases"
	}
	if c.TTL <= 0 {
		c.TTL = 10 * time.Second
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	kv, err := jsstore.UntilAnswered(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: c.Bucket, Description: "Orrery session owners", History: 1, TTL: c.TTL,
			Storage: jetstream.FileStorage, Replicas: c.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("leases bucket %s: %w", c.Bucket, err)
	}
	nodes, err := jsstore.UntilAnswered(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: c.Bucket + "_nodes", Description: "Orrery nodes alive", History: 1, TTL: c.TTL,
			Storage: jetstream.FileStorage, Replicas: c.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("nodes bucket %s_nodes: %w", c.Bucket, err)
	}
	l := &Leases{nc: js.Conn(), kv: kv, nodes: nodes, node: node, ttl: c.TTL, log: c.Logger, now: time.Now,
		held: make(map[string]*Lease), stop: make(chan struct{}), done: make(chan struct{})}
	if _, err := jsstore.UntilAnswered(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, l.heartbeat(ctx) }); err != nil {
		return nil, err
	}
	go l.renewLoop()
	return l, nil
}

// heartbeat says this node is alive, for as long as a lease lasts.
func (l *Leases) heartbeat(ctx context.Context) error {
	n := l.node
	if a := l.addr.Load(); a != nil {
		n.Addr = *a
	}
	value, err := json.Marshal(n)
	if err != nil {
		return err
	}
	if _, err := l.nodes.Put(ctx, jsstore.Token(l.node.ID), value); err != nil {
		return fmt.Errorf("say this node is alive (NATS KV %s): %w", l.nodes.Bucket(), err)
	}
	return nil
}

// SetAddr says where the node serves clients, for orrery node status: its
// heartbeats carry it from the next on, which it sends at once.
func (l *Leases) SetAddr(ctx context.Context, addr string) error {
	l.addr.Store(&addr)
	return l.heartbeat(ctx)
}

// Node is the node these leases name.
func (l *Leases) Node() Node { return l.node }

// TTL is the lease length.
func (l *Leases) TTL() time.Duration { return l.ttl }

// Acquire takes the session's lease for this node, or returns the one it
// holds. A lease another node holds is a *HeldError.
func (l *Leases) Acquire(ctx context.Context, session string) (*Lease, error) {
	l.mu.Lock()
	if ls, ok := l.held[session]; ok {
		l.mu.Unlock()
		if ls.Valid() {
			return ls, nil
		}
		l.drop(ls)
	} else {
		l.mu.Unlock()
	}
	key := leaseKey(session)
	value, err := json.Marshal(l.node)
	if err != nil {
		return nil, err
	}
	sent := l.now()
	rev, err := l.kv.Create(ctx, key, value)
	if errors.Is(err, jetstream.ErrKeyExists) {
		owner, oerr := l.Owner(ctx, session)
		if oerr != nil {
			return nil, oerr
		}
		switch {
		case owner == nil:
			// It expired between the two calls: try once more.
			sent = l.now()
			rev, err = l.kv.Create(ctx, key, value)
		case owner.ID == l.node.ID:
			// This node's, from before it restarted (its id is its data
			// dir's, which one process holds at a time): take it over at
			// the revision it has.
			sent = l.now()
			rev, err = l.takeOver(ctx, key, value)
		default:
			return nil, &HeldError{Session: session, Owner: *owner}
		}
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("session %s: another node took its lease first: %w", session, ErrNotOwner)
		}
		return nil, fmt.Errorf("take the lease of session %s: %w", session, err)
	}
	ls := &Lease{Session: session, key: key, revision: rev, valid: sent.Add(l.validFor())}
	l.mu.Lock()
	l.held[session] = ls
	l.mu.Unlock()
	return ls, nil
}

func (l *Leases) takeOver(ctx context.Context, key string, value []byte) (uint64, error) {
	e, err := l.kv.Get(ctx, key)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return l.kv.Create(ctx, key, value)
		}
		return 0, err
	}
	return l.kv.Update(ctx, key, value, e.Revision())
}

// AcquireWait is Acquire that, when another node holds the lease, waits
// for it to expire (at most a TTL and a second) and takes it: how a node
// takes over the sessions of one that died. It gives up at once when the
// holder shows it is alive, by beating again while this node waits.
func (l *Leases) AcquireWait(ctx context.Context, session string) (*Lease, error) {
	ls, err := l.Acquire(ctx, session)
	var held *HeldError
	if !errors.As(err, &held) {
		return ls, err
	}
	beat := l.beatOf(ctx, held.Owner.ID)
	l.log.Info("waiting for another node's lease to expire", "session", session, "owner", held.Owner.Name, "ttl", l.ttl)
	wait, cancel := context.WithTimeout(ctx, l.ttl+time.Second)
	defer cancel()
	tick := time.NewTicker(l.ttl / 20)
	defer tick.Stop()
	for {
		select {
		case <-wait.Done():
			return nil, err
		case <-tick.C:
		}
		if now := l.beatOf(ctx, held.Owner.ID); now != 0 && now != beat {
			return nil, err // alive: it beat again
		}
		ls, err = l.Acquire(ctx, session)
		if !errors.As(err, &held) {
			return ls, err
		}
	}
}

// leaderGet reads a key of kv as the bucket's leader has it: a node's
// judgement of who owns a session, and whether that node lives, must not
// come from a replica that is behind. It returns nil for no key.
func (l *Leases) leaderGet(ctx context.Context, kv jetstream.KeyValue, key string) (*jsstore.LastMessage, error) {
	return jsstore.LeaderEntry(ctx, l.nc, kv.Bucket(), key)
}

// heartbeatAge is how long ago the node last said it was alive, by the
// server's clock against this one's; ok is false when it has not within a
// lease.
func (l *Leases) heartbeatAge(ctx context.Context, id string) (time.Duration, bool) {
	m, err := l.leaderGet(ctx, l.nodes, jsstore.Token(id))
	if err != nil || m == nil {
		return 0, false
	}
	return max(0, l.now().Sub(m.Time)), true
}

// beatOf is the revision of a node's latest heartbeat, 0 when it has none.
func (l *Leases) beatOf(ctx context.Context, id string) uint64 {
	m, err := l.leaderGet(ctx, l.nodes, jsstore.Token(id))
	if err != nil || m == nil {
		return 0
	}
	return m.Seq
}

// validFor is how long after sending a renewal this node counts on the
// lease: the server starts the TTL when it stores the renewal, which is
// after it was sent, and a tenth is left for the two clocks' rates.
func (l *Leases) validFor() time.Duration { return l.ttl - l.ttl/10 }

// Valid reports whether the lease is still surely this node's.
func (ls *Lease) Valid() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return !ls.lost && time.Now().Before(ls.valid)
}

// Held returns this node's lease of the session if it is still valid.
func (l *Leases) Held(session string) (*Lease, bool) {
	l.mu.Lock()
	ls, ok := l.held[session]
	l.mu.Unlock()
	if !ok || !ls.Valid() {
		return nil, false
	}
	return ls, true
}

// Owner returns the node holding the session's lease, or nil when none
// does.
func (l *Leases) Owner(ctx context.Context, session string) (*Node, error) {
	m, err := l.leaderGet(ctx, l.kv, leaseKey(session))
	if err != nil {
		return nil, fmt.Errorf("read the lease of session %s: %w", session, err)
	}
	if m == nil {
		return nil, nil
	}
	var n Node
	if err := json.Unmarshal(m.Data, &n); err != nil {
		return nil, fmt.Errorf("the lease of session %s does not decode: %w", session, err)
	}
	return &n, nil
}

// Release gives the session's lease up, so another node may take it at
// once. It deletes the key only at the revision this node wrote.
func (l *Leases) Release(ctx context.Context, session string) error {
	l.renewMu.Lock()
	defer l.renewMu.Unlock()
	l.mu.Lock()
	ls, ok := l.held[session]
	delete(l.held, session)
	l.mu.Unlock()
	if !ok {
		return nil
	}
	ls.mu.Lock()
	rev, lost := ls.revision, ls.lost
	ls.lost = true
	ls.mu.Unlock()
	if lost {
		return nil
	}
	if err := l.kv.Delete(ctx, ls.key, jetstream.LastRevision(rev)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("release the lease of session %s: %w", session, err)
	}
	return nil
}

// drop forgets a lease that is no longer valid.
func (l *Leases) drop(ls *Lease) {
	ls.mu.Lock()
	ls.lost = true
	ls.mu.Unlock()
	l.mu.Lock()
	if l.held[ls.Session] == ls {
		delete(l.held, ls.Session)
	}
	l.mu.Unlock()
}

func (l *Leases) renewLoop() {
	defer close(l.done)
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
			if err := l.heartbeat(ctx); err != nil {
				l.log.Warn("could not say this node is alive", "err", err)
			}
			cancel()
			l.renewAll()
		}
	}
}

// renewAll renews every held lease. One that fails because another node
// wrote the key is lost at once; one that fails because NATS does not
// answer stays until its validity runs out, and is tried again.
func (l *Leases) renewAll() {
	l.renewMu.Lock()
	defer l.renewMu.Unlock()
	l.mu.Lock()
	leases := make([]*Lease, 0, len(l.held))
	for _, ls := range l.held {
		leases = append(leases, ls)
	}
	l.mu.Unlock()
	value, _ := json.Marshal(l.node)
	for _, ls := range leases {
		ls.mu.Lock()
		rev, lost := ls.revision, ls.lost
		ls.mu.Unlock()
		if lost {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
		sent := l.now()
		next, err := l.kv.Update(ctx, ls.key, value, rev)
		cancel()
		switch {
		case err == nil:
			ls.mu.Lock()
			ls.revision, ls.valid = next, sent.Add(l.validFor())
			ls.mu.Unlock()
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyNotFound):
			l.log.Warn("lost a session's lease to another node or to expiry; no longer writing it", "session", ls.Session, "err", err)
			l.drop(ls)
		default:
			if !ls.Valid() {
				l.log.Warn("could not renew a session's lease in time; no longer writing it", "session", ls.Session, "err", err)
				l.drop(ls)
			}
		}
	}
}

// Close stops renewing and releases every lease.
func (l *Leases) Close(ctx context.Context) error {
	select {
	case <-l.stop:
		return nil
	default:
	}
	close(l.stop)
	<-l.done
	l.mu.Lock()
	sessions := make([]string, 0, len(l.held))
	for s := range l.held {
		sessions = append(sessions, s)
	}
	l.mu.Unlock()
	var errs []error
	for _, s := range sessions {
		errs = append(errs, l.Release(ctx, s))
	}
	if err := l.nodes.Delete(ctx, jsstore.Token(l.node.ID)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Check fails when this node cannot reach the leases bucket, so that
// /readyz takes a node that could not own a session out of a load
// balancer.
func (l *Leases) Check() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := l.kv.Status(ctx); err != nil {
		return fmt.Errorf("the session leases (NATS KV %s) are out of reach: %w", l.kv.Bucket(), err)
	}
	return nil
}

// leaseKey is the KV key of a session's lease.
func leaseKey(session string) string { return jsstore.Token(session) }
