package bench_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/sqlite"
)

// burst is a provider that streams n text deltas as fast as the loop takes
// them: a model with no latency, so that the kernel and the store are all
// that is measured.
type burst struct{ n int }

func (p burst) Name() string  { return "bench" }
func (p burst) Model() string { return "burst" }
func (p burst) Stream(ctx context.Context, _ agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	for range p.n {
		if err := emit(agent.Delta{Kind: agent.DeltaText, Text: "tok "}); err != nil {
			return agent.Usage{}, err
		}
	}
	return agent.Usage{}, ctx.Err()
}

// BenchmarkIngest measures frames made durable and published per second
// when S sessions stream at once, for the same total number of deltas:
// one session alone is the baseline of the same run. Sessions share the
// store's commits and the machine's cores, so many at once should take in
// at least as much as one.
//
// Reproduce: go test -run '^$' -bench Ingest -benchtime 1x -count 5 ./bench/
func BenchmarkIngest(b *testing.B) {
	const total = 100_000
	for _, sessions := range []int{1, 10, 100, 500} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			per := total / sessions
			var rate, cores float64
			for range b.N {
				rate, cores = ingest(b, sessions, per)
			}
			b.ReportMetric(rate, "frames/s")
			b.ReportMetric(cores, "cores")
		})
	}
}

// ingest runs one run of per deltas in each of n new sessions at once on a
// fresh kernel and store, and returns the frames per second from the first
// send to the last terminal frame published, and the cores the process
// kept busy meanwhile (CPU time over that time).
func ingest(b *testing.B, n, per int) (rate, cores float64) {
	b.StopTimer()
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "orrery.db"))
	if err != nil {
		b.Fatal(err)
	}
	k := kernel.New(kernel.Config{
		Store: st, Models: func(string) (agent.Provider, error) { return burst{n: per}, nil },
		DefaultModel: "burst", QueueFrames: 1 << 20, Logger: quiet,
	})
	ctx := context.Background()
	if err := k.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		k.Close(cctx)
		st.Close()
	}()
	sessions := make([]*kernel.Session, n)
	for i := range sessions {
		if sessions[i], err = k.CreateSession(ctx, kernel.SessionOptions{ID: fmt.Sprintf("s%d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	frames := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	b.StartTimer()
	cpu0 := cpuTime()
	t0 := time.Now()
	for i, s := range sessions {
		wg.Go(func() {
			<-start
			res, err := s.Send(ctx, kernel.SendInput{Text: "go", Subscribe: true})
			if err != nil {
				b.Error(err)
				return
			}
			defer res.Sub.Close()
			var buf []kernel.Frame
			for {
				<-res.Sub.Ready()
				buf = res.Sub.Take(buf[:0])
				frames[i] += len(buf)
				for _, f := range buf {
					if protocol.EventType(f.Type).Terminal() {
						return
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	cpu := cpuTime() - cpu0
	sum := 0
	for _, f := range frames {
		sum += f
	}
	if sum < n*per {
		b.StartTimer()
		b.Fatalf("published %d frames, want at least %d", sum, n*per)
		return 0, 0
	}
	b.StopTimer()
	return float64(sum) / elapsed.Seconds(), cpu.Seconds() / elapsed.Seconds()
}
