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
