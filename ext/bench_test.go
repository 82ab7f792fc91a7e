package ext_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/ext"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

func benchKernel(b *testing.B, h *ext.Host) *kernel.Kernel {
	b.Helper()
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "orrery.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	// Data updates are not paced here: the benchmark measures the path,
	// not the 10-a-second limit.
	cfg := kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "offline", Tools: tool.Builtins(),
		Limits: component.Limits{DataUpdatesPerSec: 1e9}}
	if h != nil {
		h.Wire(&cfg)
	}
	k := kernel.New(cfg)
	if h != nil {
		if err := h.Attach(k); err != nil {
			b.Fatal(err)
		}
	}
	if err := k.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if h != nil {
			h.Close(context.Background())
		}
		k.Close(context.Background())
	})
	return k
}

// placedText waits for the next orrery.placed of id on sub and returns its
// text and when it arrived.
func placedText(b *testing.B, sub *kernel.Subscription, id string) (string, time.Time) {
	for {
		select {
		case <-sub.Ready():
		case <-sub.Done():
			b.Fatal(sub.Err())
		}
		now := time.Now()
		for _, f := range sub.Take(nil) {
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				b.Fatal(err)
			}
			if c, ok := ev.(*protocol.Custom); ok && c.Name == kernel.PlacedEvent {
				var p kernel.Placed
				_ = json.Unmarshal(c.Value, &p)
				if p.ID == id {
					return p.Text, now
				}
			}
		}
	}
}

// dataValue waits for the next STATE_DELTA that sets field of the data of
// owner's id on sub and returns the value and when it arrived.
func dataValue(b *testing.B, sub *kernel.Subscription, owner ui.Owner, id, field string) (string, time.Time) {
	path := "/data/" + string(owner) + "/" + id + "/" + field
	for {
		select {
		case <-sub.Ready():
		case <-sub.Done():
			b.Fatal(sub.Err())
		}
		now := time.Now()
		for _, f := range sub.Take(nil) {
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				b.Fatal(err)
			}
			if d, ok := ev.(*protocol.StateDelta); ok {
				for _, op := range d.Delta {
					if op.Path == path {
						var v string
						_ = json.Unmarshal(op.Value, &v)
						return v, now
					}
				}
			}
		}
	}
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(d)
	return d[len(d)/2], d[len(d)*99/100]
}

// BenchmarkDataToFrame measures the time from an extension process writing
// ui/data (its own clock reading, carried in the data) to the frame
// reaching a kernel subscriber as a STATE_DELTA, p50 and p99. The
// baseline, measured in the same run, is Session.Data of the same small
// component from Go: the kernel path without the process, JSON-RPC and the
// extension's queue. Pacing is off (dataUpdatesPerSec very high).
func BenchmarkDataToFrame(b *testing.B) {
	m := rogue(nil, "bench", "")
	h := ext.New(ext.Config{Extensions: []*ext.Manifest{m}, Logger: slog.New(slog.DiscardHandler), Heartbeat: time.Hour})
	k := benchKernel(b, h)
	s, err := k.CreateSession(context.Background(), kernel.SessionOptions{})
	if err != nil {
		b.Fatal(err)
	}
	sub, err := s.Subscribe(context.Background(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	owner, _ := ui.ExtOwner("rogue")
	for {
		if text, _ := placedText(b, sub, "b"); text == "0" {
			break
		}
	}
	if err := s.Show(context.Background(), owner, kernel.ShowInput{ID: "base", Placement: "band", Structure: json.RawMessage(`{"type":"text","value":"${/t}"}`), Data: json.RawMessage(`{"t":"0"}`)}); err != nil {
		b.Fatal(err)
	}
	press := kernel.Intent{Session: s.ID(), Owner: owner, ID: "b", Action: "press"}
	ext := make([]time.Duration, 0, b.N)
	base := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := h.Intent(context.Background(), press); err != nil {
			b.Fatal(err)
		}
		text, at := dataValue(b, sub, owner, "b", "t")
		sent, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			b.Fatalf("placed text %q: %v", text, err)
		}
		ext = append(ext, at.Sub(time.Unix(0, sent)))

		start := time.Now()
		if err := s.Data(context.Background(), owner, "base", kernel.DataUpdate{Set: json.RawMessage(`{"t":"` + strconv.Itoa(i+1) + `"}`)}); err != nil {
			b.Fatal(err)
		}
		_, at = dataValue(b, sub, owner, "base", "t")
		base = append(base, at.Sub(start))
	}
	b.StopTimer()
	p50, p99 := percentiles(ext)
	b50, b99 := percentiles(base)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(b50.Microseconds()), "base-p50-µs")
	b.ReportMetric(float64(b99.Microseconds()), "base-p99-µs")
	b.ReportMetric(float64(p50)/float64(b50), "p50-ratio")
	b.ReportMetric(float64(p99)/float64(b99), "p99-ratio")
}

// BenchmarkIdleHostMemory reports the host's own heap per idle running
// extension (goroutines' stacks excluded from the heap are counted through
// StackInuse), against the baseline of a session with no extension.
func BenchmarkIdleHostMemory(b *testing.B) {
	const n = 20
	measure := func(with bool) uint64 {
		var ms []*ext.Manifest
		if with {
			ms = []*ext.Manifest{rogue(nil, "plain", "")}
		}
		h := ext.New(ext.Config{Extensions: ms, Logger: slog.New(slog.DiscardHandler), Heartbeat: time.Hour})
		k := benchKernel(b, h)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range n {
			s, err := k.CreateSession(context.Background(), kernel.SessionOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if with {
				for {
					if st := h.List(s.ID()); len(st) == 1 && st[0].State == ext.StateRunning {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		return (after.HeapInuse + after.StackInuse) - (before.HeapInuse + before.StackInuse)
	}
	for i := 0; i < b.N; i++ {
		base := measure(false)
		with := measure(true)
		b.ReportMetric(float64(with-base)/n/1024, "KiB/ext")
		b.ReportMetric(float64(base)/n/1024, "base-KiB/session")
	}
}
