package dialect_test

import (
	"path/filepath"
	"testing"

	"github.com/getorrery/orrery/dialect"
	"github.com/getorrery/orrery/kernel"
)

// benchFrames are every frame of the conformance fixtures.
func benchFrames(b *testing.B) []kernel.Frame {
	files, _ := filepath.Glob("../protocol/fixtures/*.jsonl")
	t := &testing.T{}
	var all []kernel.Frame
	for _, f := range files {
		all = append(all, fixtureFrames(t, f)...)
	}
	if len(all) == 0 {
		b.Fatal("no fixture frames")
	}
	return all
}

// BenchmarkEncode encodes every fixture frame in each mode, once per
// frame as the hub does for all the subscribers of a mode. The baseline is
// what the hub already does per frame for WebSocket and pipe subscribers:
// kernel.TagSession. Read the modes as ratios to it:
//
//	go test -run='^$' -bench=Encode -benchmem ./dialect/
func BenchmarkEncode(b *testing.B) {
	frames := benchFrames(b)
	b.Run("baseline-tag", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, f := range frames {
				_ = kernel.TagSession(f.Data, "ses_benchmark")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(frames)), "ns/frame")
	})
	for _, m := range []dialect.Mode{dialect.AGUI, dialect.OpenAI, dialect.Dual} {
		enc := dialect.Encoder(m, dialect.Options{})
		b.Run(string(m), func(b *testing.B) {
			b.ReportAllocs()
			var out []kernel.Frame
			for b.Loop() {
				for _, f := range frames {
					out = enc.Encode(out[:0], f)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(frames)), "ns/frame")
		})
	}
	a2 := dialect.WithA2UI(nil)
	b.Run("a2ui-face", func(b *testing.B) {
		b.ReportAllocs()
		var out []kernel.Frame
		for b.Loop() {
			for _, f := range frames {
				out = a2.Encode(out[:0], f)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(frames)), "ns/frame")
	})
}

// BenchmarkA2UIDataUpdate encodes, on the A2UI face, the STATE_DELTA of one
// data update of a placed component (the stack of a text, a progress and a
// button) with the state after it: the face reads the component's
// structure and data from the state and projects it whole. The baseline is
// kernel.TagSession of the same frame, and the legacy encoder is beside it
// for scale:
//
//	go test -run='^$' -bench=A2UIDataUpdate -benchmem ./dialect/
func BenchmarkA2UIDataUpdate(b *testing.B) {
	structure := `{"type":"stack","children":[{"type":"text","value":"${/left} tasks left"},{"type":"progress","value":"${/done}","max":5,"label":"tests"},{"type":"button","label":"Deploy ${/env}","on":{"press":"deploy"}}]}`
	state := []byte(`{"ui":{"nodes":{"placed:agent:deploy":{"placement":"pane.right","title":"","owner":"agent","component":"agent#deploy","data":"/data/agent/deploy"}},"components":{"agent#deploy":` + structure + `}},"surfaces":{},"data":{"agent":{"deploy":{"left":2,"done":4,"env":"prod"}}}}`)
	f := kernel.Frame{Seq: 42, Type: "STATE_DELTA", Data: []byte(`{"type":"STATE_DELTA","timestamp":1796009850299,"delta":[{"op":"replace","path":"/data/agent/deploy/left","value":2}],"metadata":{"orrery":{"seq":42}}}`)}
	a2 := dialect.WithA2UI(nil).(kernel.StateEncoder)
	if out := a2.EncodeState(nil, f, state); len(out) != 2 {
		b.Fatalf("EncodeState() = %d frames, want the snapshot and the delta", len(out))
	}
	b.Run("baseline-tag", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = kernel.TagSession(f.Data, "ses_benchmark")
		}
	})
	legacy := dialect.Encoder(dialect.AGUI, dialect.Options{})
	b.Run("agui", func(b *testing.B) {
		b.ReportAllocs()
		var out []kernel.Frame
		for b.Loop() {
			out = legacy.Encode(out[:0], f)
		}
	})
	b.Run("a2ui-face", func(b *testing.B) {
		b.ReportAllocs()
		var out []kernel.Frame
		for b.Loop() {
			out = a2.EncodeState(out[:0], f, state)
		}
	})
}
