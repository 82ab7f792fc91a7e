package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/auth"
	"github.com/getorrery/orrery/cluster"
	"github.com/getorrery/orrery/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func tokens(t *testing.T, nc *nats.Conn, replicas int) *auth.Store {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cluster.OpenTokens(t.Context(), js, "test_tokens", replicas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	s, err := auth.OpenBackend(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The nodes of a cluster share their tokens: one made through any node's
// connection admits on every other at once (it is read afresh on a miss),
// a revoke is seen by every node's watch without waiting for its tick, and
// creates racing from several nodes are all kept (each save is a
// compare-and-set on the list's revision).
func TestTokensAcrossNodes(t *testing.T) {
	t.Parallel()
	srvs := natstest.Cluster(t, 3)
	stores := make([]*auth.Store, len(srvs))
	for i, srv := range srvs {
		stores[i] = tokens(t, natstest.Connect(t, srv), 3)
	}
	a, b, c := stores[0], stores[1], stores[2]
	if n, err := b.Len(); err != nil || n != 0 {
		t.Fatalf("a new cluster's tokens: %d, %v; want none", n, err)
	}

	secret, made, err := a.Create("ops")
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range stores {
		if got, ok := s.Lookup(secret); !ok || got.ID != made.ID {
			t.Fatalf("node %d: Lookup of the token just made on node 0 = %+v, %v; want token %s", i, got, ok, made.ID)
		}
	}
	if _, _, err := c.Create("ops"); err == nil {
		t.Errorf("a second token named ops, made on another node, was accepted; want it refused as existing")
	}

	// Each node's Watch hears of the revoke made on another within the
	// test's wait though its tick is an hour.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	revoked := make([]chan struct{}, len(stores))
	for i, s := range stores {
		revoked[i] = make(chan struct{})
		wg.Go(func() {
			once := sync.Once{}
			s.Watch(ctx, time.Hour, func(current []auth.Token) {
				for _, tk := range current {
					if tk.ID == made.ID {
						return
					}
				}
				once.Do(func() { close(revoked[i]) })
			})
		})
	}
	if _, err := b.Revoke("ops"); err != nil {
		t.Fatal(err)
	}
	for i := range stores {
		select {
		case <-revoked[i]:
		case <-time.After(30 * time.Second):
			t.Fatalf("node %d's watch did not report the revoke made on node 1", i)
		}
		if _, ok := stores[i].Lookup(secret); ok {
			t.Errorf("node %d still admits the revoked token", i)
		}
	}
	cancel()
	wg.Wait()

	// Racing creates on all three nodes: none is lost.
	const each = 10
	var mu sync.Mutex
	secrets := map[string]string{}
	var race sync.WaitGroup
	for i, s := range stores {
		race.Go(func() {
			for j := range each {
				sec, tk, err := s.Create(fmt.Sprintf("n%d-%d", i, j))
				if err != nil {
					t.Errorf("node %d: Create = %v", i, err)
					return
				}
				mu.Lock()
				secrets[tk.ID] = sec
				mu.Unlock()
			}
		})
	}
	race.Wait()
	list, err := c.List()
	if err != nil || len(list) != 3*each {
		t.Fatalf("after %d racing creates the list has %d tokens (%v); want all of them", 3*each, len(list), err)
	}
	for id, sec := range secrets {
		if got, ok := a.Lookup(sec); !ok || got.ID != id {
			t.Errorf("token %s made in the race does not admit on node 0", id)
		}
	}
}
