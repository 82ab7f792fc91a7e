package bench_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/internal/fakeclock"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
)

// The sessions of BenchmarkOpen: the same conversation and the same state,
// one log 1,000 times longer.
const (
	openSmall = 1_000
	openBig   = 1_000_000
)

var (
	openOnce    sync.Once
	openDir     string
	openRebuild time.Duration // the first load of the big session, from seq 0
)

// conversationFrames are ten runs of a conversation: a prompt, RUN_STARTED,
// the turn's STATE_SNAPSHOT and an answer streamed in 40 deltas; 460
// frames.
func conversationFrames() []store.Frame {
	var out []store.Frame
	add := func(run, typ, data string) {
		seq := uint64(len(out) + 1)
		out = append(out, store.Frame{Seq: seq, Type: typ, Run: run,
			Data: fmt.Appendf(nil, `{"type":"%s","timestamp":1796008138744,"metadata":{"orrery":{"seq":%d}},%s}`, typ, seq, data)})
	}
	for i := range 10 {
		run, user, msg := fmt.Sprintf("run_%02d", i), fmt.Sprintf("user_%02d", i), fmt.Sprintf("msg_%02d", i)
		add("", "CUSTOM", fmt.Sprintf(`"name":"orrery.user.message","value":{"id":%q,"role":"user","content":"question %d","runId":%q}`, user, i, run))
		add(run, "RUN_STARTED", fmt.Sprintf(`"threadId":"s","runId":%q,"input":{"threadId":"s","runId":%q,"messages":[{"id":%q,"role":"user","content":"question %d"}],"tools":[],"context":[]}`, run, run, user, i))
		add(run, "STATE_SNAPSHOT", `"snapshot":{"ui":{"nodes":{},"components":{}},"surfaces":{}}`)
		add(run, "TEXT_MESSAGE_START", fmt.Sprintf(`"messageId":%q,"role":"assistant"`, msg))
		for range 40 {
			add(run, "TEXT_MESSAGE_CONTENT", fmt.Sprintf(`"messageId":%q,"delta":"token "`, msg))
		}
		add(run, "TEXT_MESSAGE_END", fmt.Sprintf(`"messageId":%q`, msg))
		add(run, "RUN_FINISHED", fmt.Sprintf(`"threadId":"s","runId":%q,"outcome":{"type":"success"}`, run))
	}
	return out
}

// writeOpenSession logs a session of n frames: the conversation, then a
// live chart's data updated n-461 times (a STATE_DELTA replacing one
// value, as an extension streaming a chart logs), so its state is the
// same whatever n.
func writeOpenSession(b *testing.B, st store.Log, id string, n int) {
	ctx := context.Background()
	if err := st.CreateSession(ctx, store.Session{ID: id}); err != nil {
		b.Fatal(err)
	}
	frames := conversationFrames()
	seq := uint64(len(frames))
	next := func(data string) store.Frame {
		seq++
		return store.Frame{Seq: seq, Type: "STATE_DELTA",
			Data: fmt.Appendf(nil, `{"type":"STATE_DELTA","timestamp":1796008138744,"metadata":{"orrery":{"seq":%d}},"delta":%s}`, seq, data)}
	}
	frames = append(frames, next(`[{"op":"add","path":"/data","value":{"ext:chart":{"live":{"v":0}}}}]`))
	for int(seq) < n {
		if len(frames) == 10_000 {
			if err := st.Append(ctx, store.Batch{Session: id, Frames: frames}); err != nil {
				b.Fatal(err)
			}
			frames = frames[:0]
		}
		frames = append(frames, next(fmt.Sprintf(`[{"op":"replace","path":"/data/ext:chart/live/v","value":%d}]`, seq%1000)))
	}
	if err := st.Append(ctx, store.Batch{Session: id, Frames: frames}); err != nil {
		b.Fatal(err)
	}
}

func openKernel(b *testing.B, st store.Log, every int) *kernel.Kernel {
	k := kernel.New(kernel.Config{Store: st, Logger: quiet, CheckpointEvery: every,
		Models: func(string) (agent.Provider, error) { return &feed{}, nil }, DefaultModel: "bench"})
	if err := k.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	return k
}

// openFixture writes the two sessions once per process, then loads each
// once through a kernel, which rebuilds it from seq 0 and checkpoints it.
func openFixture(b *testing.B) string {
	openOnce.Do(func() {
		dir, err := os.MkdirTemp("", "orrery-bench-open-")
		if err != nil {
			b.Fatal(err)
		}
		st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
		if err != nil {
			b.Fatal(err)
		}
		writeOpenSession(b, st, "small", openSmall)
		writeOpenSession(b, st, "big", openBig)
		k := openKernel(b, st, 0)
		for _, id := range []string{"small", "big"} {
			start := time.Now()
			if _, err := k.Session(context.Background(), id); err != nil {
				b.Fatal(err)
			}
			if id == "big" {
				openRebuild = time.Since(start)
			}
		}
		if err := k.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		st.Close()
		openDir = dir
	})
	return openDir
}

// BenchmarkOpen measures Kernel.Session on a kernel just started on the
// file (a restart): the 1,000,000-frame session against the 1,000-frame one
// with the same state, both from their checkpoint; and, as the cost of at
// most CheckpointEvery frames read after a checkpoint (a crash), the
// 1,000-frame one rebuilt from seq 0, which is what every load did before
// checkpoints. One op is one load.
func BenchmarkOpen(b *testing.B) {
	dir := openFixture(b)
	b.Logf("the first load of the %d-frame session, from seq 0: %v", openBig, openRebuild)
	for _, leg := range []struct {
		name  string
		id    string
		every int
	}{
		{"frames=1000", "small", 0},
		{"frames=1000000", "big", 0},
		{"frames=1000/rebuild", "small", -1},
	} {
		b.Run(leg.name, func(b *testing.B) {
			st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				k := openKernel(b, st, leg.every)
				b.StartTimer()
				if _, err := k.Session(context.Background(), leg.id); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				// Nothing was logged, so the close writes no checkpoint.
				if err := k.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// heapInuse is the heap in use after two collections, once the cleanups
// they queue have run.
func heapInuse() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkIdleMemory measures the heap a kernel holds after touching n
// sessions once each (created, one notice logged), with idle_unload on a
// clock the benchmark moves: the sessions unload as they go quiet. The
// resident legs keep every session loaded (idle_unload off), which is what
// every kernel did before. Run with -benchtime=1x.
func BenchmarkIdleMemory(b *testing.B) {
	const idle = 10 * time.Minute
	for _, leg := range []struct {
		n      int
		unload bool
	}{{100, true}, {10_000, true}, {100, false}, {2_000, false}} {
		name := fmt.Sprintf("sessions=%d", leg.n)
		if !leg.unload {
			name += "/resident"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				before := heapInuse()
				st, err := sqlite.Open(filepath.Join(b.TempDir(), "orrery.db"))
				if err != nil {
					b.Fatal(err)
				}
				clock := fakeclock.New(time.Unix(1_800_000_000, 0))
				var unloaded atomic.Int64
				cfg := kernel.Config{Store: st, Logger: quiet, Now: clock.Now, AfterFunc: clock.AfterFunc,
					Models: func(string) (agent.Provider, error) { return &feed{}, nil }, DefaultModel: "bench",
					SessionUnloaded: func(*kernel.Session) { unloaded.Add(1) }}
				if leg.unload {
					cfg.IdleUnload = idle
				}
				k := kernel.New(cfg)
				if err := k.Open(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				ctx := context.Background()
				for i := range leg.n {
					s, err := k.CreateSession(ctx, kernel.SessionOptions{ID: fmt.Sprintf("s%05d", i)})
					if err != nil {
						b.Fatal(err)
					}
					if err := s.Notify(ctx, "", "info", "touched"); err != nil {
						b.Fatal(err)
					}
					if leg.unload && i%100 == 99 {
						clock.Advance(idle + time.Second)
					}
				}
				for leg.unload && k.Loaded() > 0 {
					clock.Advance(idle + time.Second)
					time.Sleep(time.Millisecond)
				}
				b.StopTimer()
				after := heapInuse()
				b.ReportMetric(float64(after)/(1<<20), "heap-MB")
				b.ReportMetric((float64(after)-float64(before))/(1<<20), "grown-MB")
				b.ReportMetric(float64(k.Loaded()), "loaded")
				if err := k.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				st.Close()
				b.StartTimer()
			}
		})
	}
}
