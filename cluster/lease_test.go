package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/getorrery/orrery/cluster"
	"github.com/getorrery/orrery/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func leases(t *testing.T, nc *nats.Conn, id string, ttl time.Duration) *cluster.Leases {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	l, err := cluster.OpenLeases(t.Context(), js, cluster.Node{ID: id, Name: id}, cluster.LeaseConfig{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// One node holds a session's lease while it lives; another is refused,
// told who holds it, until the holder releases it, and then takes it at
// once with a newer fencing token.
func TestLeaseHeldAndReleased(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	const ttl = 900 * time.Millisecond
	a := leases(t, natstest.Connect(t, srv), "a", ttl)
	b := leases(t, natstest.Connect(t, srv), "b", ttl)
	ctx := t.Context()
	la, err := a.Acquire(ctx, "s/1")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := a.Acquire(ctx, "s/1"); err != nil || again != la {
		t.Fatalf("a.Acquire of its own lease = %v, %v; want the same lease", again, err)
	}
	// Past three TTLs a is still the owner: it renews.
	end := time.Now().Add(3 * ttl)
	for time.Now().Before(end) {
		_, err := b.Acquire(ctx, "s/1")
		var held *cluster.HeldError
		if !errors.As(err, &held) || held.Owner.ID != "a" || !errors.Is(err, cluster.ErrNotOwner) {
			t.Fatalf("b.Acquire while a holds the lease = %v, want a HeldError naming a", err)
		}
		if !la.Valid() {
			t.Fatal("a's lease went invalid while a renews it")
		}
		time.Sleep(100 * time.Millisecond)
	}
	first := la.Revision()
	if err := a.Release(ctx, "s/1"); err != nil {
		t.Fatal(err)
	}
	if la.Valid() {
		t.Error("a released lease is still valid")
	}
	lb, err := b.Acquire(ctx, "s/1")
	if err != nil {
		t.Fatalf("b.Acquire after a released = %v", err)
	}
	if lb.Revision() <= first {
		t.Errorf("b's fencing token %d is not after a's %d", lb.Revision(), first)
	}
	if owner, err := a.Owner(ctx, "s/1"); err != nil || owner == nil || owner.ID != "b" {
		t.Errorf("Owner = %+v, %v; want b", owner, err)
	}
}

// A node cut off from NATS stops counting on its leases within the TTL,
// before the server lets another node take them; the other node takes
// them once they expire.
func TestLeaseLostOnPartition(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	const ttl = 900 * time.Millisecond
	nca, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	a := leases(t, nca, "a", ttl)
	b := leases(t, natstest.Connect(t, srv), "b", ttl)
	ctx := t.Context()
	la, err := a.Acquire(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	nca.Close() // a can no longer renew
	// b tries from the moment a is cut off. Never two writers: whenever b
	// gets the lease, a has stopped counting on it.
	var lb *cluster.Lease
	var invalidAfter time.Duration
	eventually(t, 3*ttl, "b takes the expired lease", func() bool {
		if invalidAfter == 0 && !la.Valid() {
			invalidAfter = time.Since(cut)
		}
		lb, err = b.Acquire(ctx, "s")
		if err == nil && la.Valid() {
			t.Fatal("b took the lease while a still counted on it")
		}
		return err == nil
	})
	if invalidAfter == 0 || invalidAfter > ttl {
		t.Errorf("a counted on its lease %v after it last could renew, want at most the TTL %v", invalidAfter, ttl)
	}
	if _, ok := a.Held("s"); ok {
		t.Error("a still holds the lease after it went invalid")
	}
	if !lb.Valid() {
		t.Error("b's new lease is not valid")
	}
}
