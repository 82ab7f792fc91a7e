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
	"github.com/getorrery/orrery/ui/component"
)

// ciData builds CI-like data of about size bytes: a failed counter and a
// list of runs. Variant v flips the status of run v and sets failed to v,
// so consecutive variants differ in two places.
func ciData(size, v int) json.RawMessage {
	type run struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		MS     int    `json:"ms"`
	}
	const per = 48 // bytes a run takes, about
	n := max(1, (size-40)/per)
	runs := make([]run, n)
	for i := range runs {
		runs[i] = run{Name: fmt.Sprintf("job-%05d", i), Status: "ok", MS: 1000 + i}
	}
	runs[v%n].Status = "failed"
	b, err := json.Marshal(map[string]any{"failed": v, "title": "CI", "runs": runs})
	if err != nil {
		panic(err)
	}
	return b
}

// dataSizes are the sizes the ui.data benchmarks run at; the largest stays
// under limits.dataBytes (256 KiB).
var dataSizes = []struct {
	name  string
	bytes int
}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"256KiB", 250 << 10}}

const ciStructure = `{"type":"stack","children":[
	{"type":"text","value":"${/failed|count:failure} in ${/title}"},
	{"type":"button","label":"Retry","on":{"press":"retry"},"when":"${/failed > 0}"}]}`

// BenchmarkDataSet measures ui.data {set} through a session: checking and
// diffing the whole object, pacing, applying the change to the state
// document, encoding and logging the STATE_DELTA (durable before the
// benchmark ends). The pace is lifted so every update is published. It
// reports the logged delta's bytes beside the data's.
func BenchmarkDataSet(b *testing.B) {
	for _, size := range dataSizes {
		b.Run(size.name, func(b *testing.B) {
			st, err := sqlite.Open(filepath.Join(b.TempDir(), "orrery.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			k := kernel.New(kernel.Config{Store: st, Logger: quiet, DefaultModel: "bench",
				Models: func(string) (agent.Provider, error) { return &feed{}, nil },
				Limits: component.Limits{DataUpdatesPerSec: 1e9}})
			if err := k.Open(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer k.Close(context.Background())
			ctx := context.Background()
			s, err := k.CreateSession(ctx, kernel.SessionOptions{ID: "ui"})
			if err != nil {
				b.Fatal(err)
			}
			owner, _ := ui.ExtOwner("ci")
			const variants = 16
			data := make([]json.RawMessage, variants)
			for i := range data {
				data[i] = ciData(size.bytes, i)
			}
			if err := s.Show(ctx, owner, kernel.ShowInput{ID: "ci", Placement: "pane.right", Structure: json.RawMessage(ciStructure), Data: data[0]}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(data[0])))
			b.ResetTimer()
			for i := range b.N {
				if err := s.Data(ctx, owner, "ci", kernel.DataUpdate{Set: data[(i+1)%variants]}); err != nil {
					b.Fatal(err)
				}
			}
			// Durable before the clock stops, as a client would see it.
			info, err := s.Info(ctx)
			if err != nil {
				b.Fatal(err)
			}
			for s.Head() < info.Head {
				time.Sleep(50 * time.Microsecond)
			}
			b.StopTimer()
			frames, _, err := s.Read(ctx, s.Head()-1, 0)
			if err != nil || len(frames) != 1 {
				b.Fatalf("Read() = %d frames, %v", len(frames), err)
			}
			b.ReportMetric(float64(len(frames[0].Data)), "delta-B")
			b.ReportMetric(float64(len(data[0])), "data-B")
		})
	}
}

// BenchmarkDataSetBaseline is the same updates through the component
// library alone (ui/component Data.Set, then Publish as the kernel does),
// with no session, state document or log: the ratio is what the kernel
// adds.
func BenchmarkDataSetBaseline(b *testing.B) {
	for _, size := range dataSizes {
		b.Run(size.name, func(b *testing.B) {
			const variants = 16
			data := make([]json.RawMessage, variants)
			for i := range data {
				data[i] = ciData(size.bytes, i)
			}
			d, err := component.NewData(data[0], component.Options{Structure: component.MustParse(ciStructure)})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(data[0])))
			var delta int
			b.ResetTimer()
			for i := range b.N {
				if _, err := d.Set(data[(i+1)%variants]); err != nil {
					b.Fatal(err)
				}
				ops, err := d.Publish()
				if err != nil {
					b.Fatal(err)
				}
				js, _ := json.Marshal(ops)
				delta = len(js)
			}
			b.ReportMetric(float64(delta), "ops-B")
			b.ReportMetric(float64(len(data[0])), "data-B")
		})
	}
}
