package cluster_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/cluster"
	"github.com/getorrery/orrery/internal/natstest"
	"github.com/getorrery/orrery/internal/race"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/jetstream"
	"github.com/nats-io/nats.go"
)

// 50 followers (10 under the race detector) spread over the three
// servers of a cluster follow one
// session while a writer appends to it; each is cut off at random times
// and follows again from its last seq through a random server. Each ends
// with exactly the log: every frame once, in order, byte for byte.
func TestFollowersEndWithTheLog(t *testing.T) {
	t.Parallel()
	srvs := natstest.Cluster(t, 3)
	ctx := t.Context()
	open := func(i int) (*nats.Conn, *jetstream.Log) {
		nc, err := nats.Connect(srvs[i%3].ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		l, err := jetstream.Open(ctx, nc, jetstream.Config{Prefix: "follow", Replicas: 3, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return nc, l
	}
	wnc, w := open(0)
	defer wnc.Close()
	if err := w.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	total, followers := uint64(1500), 50
	if race.Enabled {
		// The servers run in this process, instrumented too: a tenth of
		// the load keeps the test about its point, not the detector.
		total, followers = 300, 10
	}
	frame := func(seq uint64) store.Frame {
		return store.Frame{Seq: seq, Type: "TEXT_MESSAGE_CONTENT", Run: "r", Data: fmt.Appendf(nil, `{"delta":"d%d"}`, seq)}
	}
	conns := make([]*nats.Conn, 3)
	logs := make([]*jetstream.Log, 3)
	for i := range conns {
		conns[i], logs[i] = open(i)
		defer conns[i].Close()
	}
	type got struct {
		mu     sync.Mutex
		frames []store.Frame
		done   chan struct{}
	}
	results := make([]*got, followers)
	var wg sync.WaitGroup
	for i := range followers {
		g := &got{done: make(chan struct{})}
		results[i] = g
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for {
				g.mu.Lock()
				after := uint64(len(g.frames))
				g.mu.Unlock()
				if after == total {
					return
				}
				node := r.IntN(3)
				fl, err := cluster.Follow(conns[node], logs[node], "s", after, func(f store.Frame) {
					g.mu.Lock()
					g.frames = append(g.frames, f)
					n := len(g.frames)
					g.mu.Unlock()
					if uint64(n) == total {
						close(g.done)
					}
				}, nil)
				if err != nil {
					t.Error(err)
					return
				}
				select {
				case <-g.done:
					fl.Stop()
					return
				case <-time.After(time.Duration(50+r.IntN(400)) * time.Millisecond):
					fl.Stop() // a disconnect
				}
			}
		})
	}
	wstart := time.Now()
	for seq, k := uint64(1), 0; seq <= total; k++ {
		n := min(uint64(1+k%5), total-seq+1)
		batch := make([]store.Frame, 0, n)
		for j := range n {
			batch = append(batch, frame(seq+j))
		}
		if err := w.Append(ctx, store.Batch{Session: "s", Frames: batch}); err != nil {
			t.Fatal(err)
		}
		seq += n
	}
	t.Logf("writer done after %v", time.Since(wstart))
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(60 * time.Second):
		var counts []int
		for _, g := range results {
			g.mu.Lock()
			counts = append(counts, len(g.frames))
			g.mu.Unlock()
		}
		t.Fatalf("followers did not all reach the head within 60s: they hold %v", counts)
	}
	for i, g := range results {
		if uint64(len(g.frames)) != total {
			t.Fatalf("follower %d got %d frames, want %d", i, len(g.frames), total)
		}
		for j, f := range g.frames {
			want := frame(uint64(j + 1))
			if f.Seq != want.Seq || string(f.Data) != string(want.Data) || f.Type != want.Type || f.Run != want.Run {
				t.Fatalf("follower %d frame %d = %d %s, want %d %s", i, j, f.Seq, f.Data, want.Seq, want.Data)
			}
		}
	}
}
