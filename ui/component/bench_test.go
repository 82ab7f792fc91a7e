package component_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/getorrery/orrery/ui/component"
)

// runsData builds CI-like data of about size bytes: a failed counter and a
// list of runs. variant v flips the status of run v and sets failed to v, so
// consecutive variants differ in two places.
func runsData(size, v int) []byte {
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

// BenchmarkSet measures Data.Set on data of 1 KiB, 64 KiB and 256 KiB where
// each update changes two values: the time per update and the bytes of the
// change it hands out (delta-B/op, the JSON of the ops).
func BenchmarkSet(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"256KiB", 250 << 10}} {
		b.Run(size.name, func(b *testing.B) {
			const variants = 16
			data := make([][]byte, variants)
			for i := range data {
				data[i] = runsData(size.bytes, i)
			}
			d, err := component.NewData(data[0], component.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(data[0])))
			var delta int
			b.ResetTimer()
			for i := range b.N {
				ops, err := d.Set(data[(i+1)%variants])
				if err != nil {
					b.Fatal(err)
				}
				js, _ := json.Marshal(ops)
				delta += len(js)
			}
			b.ReportMetric(float64(delta)/float64(b.N), "delta-B/op")
			b.ReportMetric(float64(len(data[0])), "data-B")
		})
	}
}

// BenchmarkBind measures binding 64 KiB of data into a structure with a
// table, a summary and a button.
func BenchmarkBind(b *testing.B) {
	s := component.MustParse(`{"type":"stack","children":[
		{"type":"text","value":"${/failed|count:failure} in ${/title}"},
		{"type":"table","columns":["Run","Status","Time"],"rows":"${/rows}"},
		{"type":"button","label":"Retry","on":{"press":"retry"},"when":"${/failed > 0}"}]}`)
	rows := make([][]string, 1200)
	for i := range rows {
		rows[i] = []string{fmt.Sprintf("job-%05d", i), "ok", fmt.Sprintf("%dms", 1000+i)}
	}
	data, err := json.Marshal(map[string]any{"failed": 2, "title": "CI", "rows": rows})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := s.Bind(data); err != nil {
			b.Fatal(err)
		}
	}
}
