package ui_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/getorrery/orrery/ui"
)

func benchSurface(b *testing.B, name string) json.RawMessage {
	b.Helper()
	raw, err := os.ReadFile("testdata/" + name + ".json")
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

func BenchmarkValidate(b *testing.B) {
	for _, name := range []string{"text/plain", "table/basic", "stack/mixed", "chart/line"} {
		raw := benchSurface(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := ui.Validate(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkText(b *testing.B) {
	for _, name := range []string{"text/plain", "stream/chunks", "table/basic", "chart/line"} {
		raw := benchSurface(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ui.Text(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
