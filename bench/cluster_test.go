package bench_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/cluster"
	"github.com/getorrery/orrery/cluster/embed"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/jetstream"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// A three-server JetStream cluster for the cluster benchmarks, started
// once per process and left to the process's exit.
var (
	clusterOnce sync.Once
	clusterURLs string
	clusterErr  error
	clusterRuns atomic.Int64
)

func benchCluster(b *testing.B) string {
	b.Helper()
	clusterOnce.Do(func() {
		const n = 3
		ports := make([]int, n)
		routes := make([]string, n)
		for i := range ports {
			ports[i] = 24000 + os.Getpid()%20000 + i // fixed per process, free in practice
			routes[i] = "nats://127.0.0.1:" + strconv.Itoa(ports[i])
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		srvs := make([]*embed.Server, n)
		errs := make([]error, n)
		for i := range n {
			dir, err := os.MkdirTemp("", "orrery-bench-nats-")
			if err != nil {
				clusterErr = err
				return
			}
			wg.Go(func() {
				srvs[i], errs[i] = embed.Start(ctx, embed.Config{Dir: dir, Name: fmt.Sprintf("n%d", i), Listen: "127.0.0.1:0",
					Cluster: "bench", ClusterListen: "127.0.0.1:" + strconv.Itoa(ports[i]), Routes: routes})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				clusterErr = err
				return
			}
			if i > 0 {
				clusterURLs += ","
			}
			clusterURLs += srvs[i].ClientURL()
		}
	})
	if clusterErr != nil {
		b.Fatal(clusterErr)
	}
	return clusterURLs
}

// BenchmarkAppendJetStream is BenchmarkAppend with the log in a
// three-server JetStream cluster, three replicas: a model streaming text
// as fast as it can, each delta sequenced, encoded, committed (one fenced
// atomic batch a commit) and published. One op is one frame.
func BenchmarkAppendJetStream(b *testing.B) {
	nc, err := nats.Connect(benchCluster(b))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	l, err := jetstream.Open(context.Background(), nc, jetstream.Config{Prefix: fmt.Sprintf("bk%d", clusterRuns.Add(1)), Replicas: 3})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	benchAppend(b, func(c *kernel.Config) { c.Store = l })
}

// BenchmarkAppendJetStreamBaseline publishes the same number of frames'
// bytes to a three-replica stream on the same cluster with JetStream's own
// async publish, up to 4096 in flight: the best a writer could do through
// this client, for the ratio.
func BenchmarkAppendJetStreamBaseline(b *testing.B) {
	nc, err := nats.Connect(benchCluster(b))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc, natsjs.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	name := fmt.Sprintf("RAW%d", clusterRuns.Add(1))
	if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: natsjs.FileStorage, Replicas: 3}); err != nil {
		b.Fatal(err)
	}
	data := []byte(`{"type":"TEXT_MESSAGE_CONTENT","timestamp":1796008138744,"metadata":{"orrery":{"seq":12}},"messageId":"msg_yuksvctb2u4akie4","delta":"tok "}`)
	subject := name + ".s"
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := js.PublishAsync(subject, data); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("the async publishes were not all acknowledged within a minute")
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// clusterNode starts one node of an in-process cluster on the servers at
// url: a kernel on the log named by prefix, writing only under its leases,
// as orrery serve --store jetstream runs it. The returned func closes it
// all.
func clusterNode(b *testing.B, url, prefix string, i int, p agent.Provider) (*kernel.Kernel, *cluster.Member, func()) {
	b.Helper()
	ctx := context.Background()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	l, err := jetstream.Open(ctx, nc, jetstream.Config{Prefix: prefix, Replicas: 3, Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	leases, err := cluster.OpenLeases(ctx, js, cluster.Node{ID: fmt.Sprintf("%s-n%d", prefix, i), Name: fmt.Sprintf("n%d", i)},
		cluster.LeaseConfig{Bucket: prefix + "_leases", Replicas: 3})
	if err != nil {
		b.Fatal(err)
	}
	m := &cluster.Member{NC: nc, Log: l, Leases: leases}
	if err := m.Start(); err != nil {
		b.Fatal(err)
	}
	k := kernel.New(kernel.Config{
		Store:        &cluster.OwnedLog{Log: l, Leases: leases},
		Cluster:      m,
		Models:       func(string) (agent.Provider, error) { return p, nil },
		DefaultModel: "bench",
		QueueFrames:  1 << 20,
		Logger:       quiet,
	})
	if err := k.Open(ctx); err != nil {
		b.Fatal(err)
	}
	return k, m, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		k.Close(ctx)
		m.Stop()
		leases.Close(ctx)
		l.Close()
		nc.Close()
	}
}

// BenchmarkFanoutCluster streams one session's text deltas, as fast as
// its owner logs them into a three-replica JetStream log, to
// ORRERY_BENCH_SUBS subscribers (default 1000) spread over three nodes,
// and to the same number all on the owner, in one run: three kernels in
// this process, each on its own connection to its own server of a
// three-server cluster, whose servers run in this process too. A
// subscriber on another node is fed by its node's follower of the session
// (the frames JetStream republishes, gap-checked by seq). It reports
// deliveries (frames handed to subscribers) per CPU-second of the process
// for each leg, and their ratio, spread over one: the target is at
// least 0.7. ORRERY_BENCH_FRAMES (default 2000) sets the deltas a leg.
//
//	go test -run='^$' -bench=FanoutCluster -benchtime=3x -timeout=30m ./bench/
func BenchmarkFanoutCluster(b *testing.B) {
	subs := envInt("ORRERY_BENCH_SUBS", 1000)
	frames := envInt("ORRERY_BENCH_FRAMES", 2000)
	var per [2]float64 // deliveries per CPU-second: on one node, over three
	for i := 0; i < b.N; i++ {
		for leg, spread := range []int{1, 3} {
			b.StopTimer()
			d, cpu := fanoutClusterLeg(b, subs, frames, spread)
			b.StartTimer()
			per[leg] += float64(d) / cpu.Seconds()
		}
	}
	one, three := per[0]/float64(b.N), per[1]/float64(b.N)
	b.ReportMetric(one, "one-node-deliveries/cpu-s")
	b.ReportMetric(three, "three-node-deliveries/cpu-s")
	b.ReportMetric(three/one, "ratio")
}

// fanoutClusterLeg runs one leg: frames deltas to subs subscribers on the
// first spread of three nodes, round robin. It returns the frames
// delivered and the process CPU time from the run's start until every
// subscriber has its terminal frame.
func fanoutClusterLeg(b *testing.B, subs, frames, spread int) (int64, time.Duration) {
	urls := strings.Split(benchCluster(b), ",")
	prefix := fmt.Sprintf("fan%d", clusterRuns.Add(1))
	f := &feed{deltas: make(chan string, 1024)}
	ctx := context.Background()
	nodes := make([]*kernel.Kernel, 3)
	var owner *cluster.Member
	for i := range nodes {
		var m *cluster.Member
		var stop func()
		nodes[i], m, stop = clusterNode(b, urls[i], prefix, i, f)
		defer stop()
		if i == 0 {
			owner = m
		}
	}
	s, err := nodes[0].CreateSession(ctx, kernel.SessionOptions{ID: "fan"})
	if err != nil {
		b.Fatal(err)
	}
	if err := owner.Acquire(ctx, "fan"); err != nil {
		b.Fatal(err)
	}
	if err := s.Promote(ctx); err != nil {
		b.Fatal(err)
	}
	var delivered atomic.Int64
	var wg sync.WaitGroup
	for i := range subs {
		sess, err := nodes[i%spread].Session(ctx, "fan")
		if err != nil {
			b.Fatal(err)
		}
		since := sess.Head()
		sub, err := sess.Subscribe(ctx, &since)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer sub.Close()
			var got []kernel.Frame
			for {
				select {
				case <-sub.Ready():
				case <-sub.Done():
					b.Errorf("a subscriber's stream ended early: %v", sub.Err())
					return
				}
				got = sub.Take(got[:0])
				delivered.Add(int64(len(got)))
				for _, fr := range got {
					if protocol.EventType(fr.Type).Terminal() {
						return
					}
				}
			}
		})
	}
	cpu0 := cpuTime()
	if _, err := s.Send(ctx, kernel.SendInput{Text: "go"}); err != nil {
		b.Fatal(err)
	}
	for range frames {
		f.deltas <- "tok "
	}
	f.deltas <- ""
	wg.Wait()
	return delivered.Load(), cpuTime() - cpu0
}

// envInt is the integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
