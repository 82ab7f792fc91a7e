package bench_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getorrery/orrery/cluster/embed"
	"github.com/getorrery/orrery/kernel"
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
