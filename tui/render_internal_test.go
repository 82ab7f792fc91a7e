package tui

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/termtext"
)

var updateRender = flag.Bool("update-render", false, "rewrite the renderer golden files")

// TestRenderKinds draws every example surface of ui/testdata natively at 48
// cells and compares the drawing (escape sequences removed) with its golden
// file. Each line fits the width, and each chart kind uses its own glyphs:
// block characters for bars, columns and stacked, braille for line, area
// and scatter, ▁…█ for a sparkline, a legend with shares for a donut, the
// max for a gauge.
func TestRenderKinds(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "ui", "testdata", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example surfaces in ../ui/testdata: %v", err)
	}
	const w = 48
	md := &markdown{}
	for _, f := range files {
		kind := filepath.Base(filepath.Dir(f))
		name := kind + "-" + strings.TrimSuffix(filepath.Base(f), ".json")
		if kind == "fuzz" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			lines := renderSurface(raw, renderOpts{width: w, cursor: -1, md: md})
			for i, l := range lines {
				if n := width(l); n > w {
					t.Errorf("line %d is %d cells wide, over %d: %q", i, n, w, l)
				}
			}
			got := termtext.Strip(strings.Join(lines, "\n"))
			if strings.TrimSpace(got) == "" && !strings.HasSuffix(name, "-empty") {
				t.Fatal("renderSurface drew nothing")
			}
			want := map[string]string{
				"chart-bars": "█", "chart-columns": "█", "chart-stacked": "▓",
				"chart-sparkline": "▁", "chart-donut": "%)", "chart-gauge": " / ",
			}
			for prefix, glyph := range want {
				if strings.HasPrefix(name, prefix) && !strings.Contains(got, glyph) {
					t.Errorf("%s has no %q:\n%s", name, glyph, got)
				}
			}
			for _, prefix := range []string{"chart-line", "chart-area", "chart-scatter"} {
				if strings.HasPrefix(name, prefix) && !strings.ContainsAny(got, "⠁⠂⠄⡀⠈⠐⠠⢀⣀⣿") {
					t.Errorf("%s has no braille:\n%s", name, got)
				}
			}
			path := filepath.Join("testdata", "render", name+".golden")
			if *updateRender {
				if err := os.WriteFile(path, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			exp, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read %s: %v (run go test -run TestRenderKinds -update-render)", path, err)
			}
			if got+"\n" != string(exp) {
				t.Errorf("renderSurface(%s) differs from %s:\n--- got\n%s\n--- want\n%s", f, path, got, exp)
			}
		})
	}
}

// TestToolMark: a call's mark says how it ended, in words as well as a
// glyph, and a call that a finished run left without a result says so rather
// than looking in flight forever.
func TestToolMark(t *testing.T) {
	s := &screen{toolStatus: map[string]string{"ok": "ok", "denied": "denied", "error": "error", "cancelled": "cancelled", "interrupted": "interrupted"}}
	for _, tc := range []struct {
		id      string
		done    bool
		running bool
		want    string
	}{
		{"ok", true, false, "✓"},
		{"denied", true, false, "⊘ denied"},
		{"cancelled", true, false, "⊘ cancelled"},
		{"interrupted", true, false, "✗ interrupted"},
		{"error", true, true, "✗ error"},
		{"old", true, false, "✓"},
		{"pending", false, true, "⋯"},
		{"pending", false, false, "– no result"},
	} {
		s.running = tc.running
		if got := s.toolMark(tc.id, tc.done); got != tc.want {
			t.Errorf("toolMark(%q, done %v, running %v) = %q, want %q", tc.id, tc.done, tc.running, got, tc.want)
		}
	}
}
