package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/ui"
)

// table64K returns a table surface of about 64 KiB (1,300 rows × 4
// columns) whose cell (0,0) says v.
func table64K(v string) json.RawMessage {
	rows := make([][]string, 0, 1300)
	for i := 0; i < 1300; i++ {
		rows = append(rows, []string{fmt.Sprintf("row %04d", i), "build-and-test", fmt.Sprintf("%d ms", i*7), "passed"})
	}
	rows[0][0] = v
	data, _ := json.Marshal(map[string]any{"kind": map[string]any{"t": "table", "columns": []string{"name", "job", "time", "state"}, "rows": rows}})
	return data
}

// BenchmarkShowReplace64K measures replacing a placed 64 KiB table in which
// one cell changed: validation, text form, diff, and the logged delta. It
// reports the delta's size beside the surface's, and time per update.
func BenchmarkShowReplace64K(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "orrery.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	k := kernel.New(kernel.Config{Store: st, Logger: quiet, Models: func(string) (agent.Provider, error) { return &feed{}, nil }, DefaultModel: "bench"})
	if err := k.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer k.Close(context.Background())
	ctx := context.Background()
	s, err := k.CreateSession(ctx, kernel.SessionOptions{ID: "ui"})
	if err != nil {
		b.Fatal(err)
	}
	surfaces := [2]json.RawMessage{table64K("build 1"), table64K("build 2")}
	show := func(i int) {
		if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "ci", Placement: "pane.right", Surface: surfaces[i%2]}); err != nil {
			b.Fatal(err)
		}
	}
	show(1)
	for s.Head() == 0 {
		time.Sleep(time.Millisecond)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		show(i)
	}
	b.StopTimer()
	// The size of the last update's delta as logged.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if info, _ := s.Info(ctx); info.Head == s.Head() {
			break
		}
	}
	frames, _, err := s.Read(ctx, s.Head()-2, 0)
	if err != nil || len(frames) != 2 {
		b.Fatalf("Read() = %d frames, %v", len(frames), err)
	}
	b.ReportMetric(float64(len(frames[0].Data)), "delta-B")
	b.ReportMetric(float64(len(surfaces[0])), "surface-B")
}

// BenchmarkShowReplace64KBaseline is what an update costs the cheapest
// way: only validating and encoding the whole surface, as a server that
// resent it would, for the ratio.
func BenchmarkShowReplace64KBaseline(b *testing.B) {
	surface := table64K("build 1")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := ui.Validate(surface); err != nil {
			b.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(surface, &v); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(surface)), "delta-B")
}
