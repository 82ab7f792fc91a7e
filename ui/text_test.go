package ui_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/getorrery/orrery/ui"
)

var update = flag.Bool("update", false, "rewrite ui/testdata/<kind>/*.golden from Text")

// goldenInputs returns every testdata/<kind>/*.json surface.
func goldenInputs(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/<kind>/*.json inputs")
	}
	return files
}

// TestTextGolden checks the text form of every testdata/<kind>/*.json
// against the .golden file beside it. go test ./ui -update rewrites them.
func TestTextGolden(t *testing.T) {
	for _, in := range goldenInputs(t) {
		t.Run(strings.TrimSuffix(filepath.ToSlash(in), ".json"), func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ui.Text(raw)
			if err != nil {
				t.Fatalf("Text() error: %v", err)
			}
			golden := strings.TrimSuffix(in, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./ui -update to write it)", err)
			}
			if got+"\n" != string(want) {
				t.Errorf("Text() =\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestGoldenCoverage checks that the golden inputs cover every kind and
// every chart kind, each in its own directory.
func TestGoldenCoverage(t *testing.T) {
	seen := map[string]bool{}
	charts := map[string]bool{}
	for _, in := range goldenInputs(t) {
		raw, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Kind struct {
				T    string `json:"t"`
				Kind string `json:"kind"`
			} `json:"kind"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		seen[filepath.Base(filepath.Dir(in))] = true
		if s.Kind.T == ui.KindChart {
			charts[s.Kind.Kind] = true
		}
	}
	for _, k := range ui.Kinds() {
		if !seen[k] {
			t.Errorf("no golden input in testdata/%s/", k)
		}
	}
	for _, k := range ui.ChartKinds() {
		if !charts[k] {
			t.Errorf("no golden input in testdata/chart/ for the %s chart", k)
		}
	}
}

// TestTextStable checks that the text form depends on the surface only:
// the same input gives the same output, and so do the same surface with
// its keys in another order or other whitespace.
func TestTextStable(t *testing.T) {
	for _, in := range goldenInputs(t) {
		raw, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		first, err := ui.Text(raw)
		if err != nil {
			t.Fatalf("%s: Text() error: %v", in, err)
		}
		for range 3 {
			if again, _ := ui.Text(raw); again != first {
				t.Fatalf("%s: Text() = %q, then %q", in, first, again)
			}
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		sorted, _ := json.Marshal(v) // sorted keys, no whitespace
		var indented bytes.Buffer
		_ = json.Indent(&indented, sorted, "", "\t")
		for _, variant := range [][]byte{sorted, indented.Bytes()} {
			if got, err := ui.Text(variant); err != nil || got != first {
				t.Errorf("%s: Text(reformatted) = %q, %v, want %q", in, got, err, first)
			}
		}
	}
}

// TestTextSafe checks that no text form carries a control character other
// than newline, or trailing spaces, or a final newline.
func TestTextSafe(t *testing.T) {
	for _, in := range goldenInputs(t) {
		raw, _ := os.ReadFile(in)
		got, err := ui.Text(raw)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(got, "\n") {
			if strings.TrimRight(line, " \t") != line {
				t.Errorf("%s: line %d has trailing space: %q", in, i, line)
			}
			for _, r := range line {
				if r < 0x20 && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
					t.Errorf("%s: line %d has control %U: %q", in, i, r, line)
				}
			}
		}
		if strings.HasSuffix(got, "\n") {
			t.Errorf("%s: text form ends with a newline", in)
		}
	}
}

// TestTextRefuses checks that Text refuses what Validate refuses, with the
// same error.
func TestTextRefuses(t *testing.T) {
	raw := json.RawMessage(`{"kind": {"t": "table", "columns": ["a"], "rows": [[1]]}}`)
	verr := ui.Validate(raw)
	_, terr := ui.Text(raw)
	if verr == nil || terr == nil || verr.Error() != terr.Error() {
		t.Errorf("Text() error = %v, want Validate's %v", terr, verr)
	}
}

// TestTextExtremes checks that charts and meters at the edges of float64
// (sums that overflow, ranges wider than the largest float, the smallest
// values) still give a text form, the same every time.
func TestTextExtremes(t *testing.T) {
	const huge, tiny = "1.7e308", "5e-324"
	for _, s := range []string{
		`{"kind": {"t": "chart", "kind": "stacked", "labels": ["a", "b"], "series": [{"label": "x", "values": [` + huge + `, 1]}, {"label": "y", "values": [` + huge + `, 0]}]}}`,
		`{"kind": {"t": "chart", "kind": "donut", "labels": ["a", "b"], "series": [{"values": [` + huge + `, ` + huge + `]}]}}`,
		`{"kind": {"t": "chart", "kind": "donut", "labels": ["a", "b"], "series": [{"values": [0, 0]}]}}`,
		`{"kind": {"t": "chart", "kind": "line", "series": [{"values": [-` + huge + `, ` + huge + `, 0]}]}}`,
		`{"kind": {"t": "chart", "kind": "area", "series": [{"values": [` + tiny + `, 0, -` + tiny + `]}]}}`,
		`{"kind": {"t": "chart", "kind": "scatter", "series": [{"values": [[-` + huge + `, ` + huge + `], [` + huge + `, -` + huge + `]]}]}}`,
		`{"kind": {"t": "chart", "kind": "sparkline", "series": [{"values": [` + huge + `, ` + huge + `, -` + huge + `]}]}}`,
		`{"kind": {"t": "chart", "kind": "bars", "labels": ["a", "b"], "series": [{"values": [-` + huge + `, ` + tiny + `]}]}}`,
		`{"kind": {"t": "chart", "kind": "columns", "labels": ["a"], "series": [{"values": [0]}]}}`,
		`{"kind": {"t": "chart", "kind": "gauge", "series": [{"values": [` + huge + `, ` + tiny + `]}]}}`,
		`{"kind": {"t": "chart", "kind": "gauge", "series": [{"values": [-5]}]}}`,
		`{"kind": {"t": "chart", "kind": "line", "series": [{"values": []}]}}`,
		`{"kind": {"t": "chart", "kind": "bars", "labels": [], "series": [{"values": []}]}}`,
		`{"kind": {"t": "progress", "value": ` + huge + `, "max": ` + huge + `}}`,
		`{"kind": {"t": "progress", "value": ` + tiny + `, "max": ` + huge + `}}`,
	} {
		first, err := ui.Text(json.RawMessage(s))
		if err != nil {
			t.Errorf("Text(%s) error: %v", s, err)
			continue
		}
		if again, _ := ui.Text(json.RawMessage(s)); again != first {
			t.Errorf("Text(%s) = %q, then %q", s, first, again)
		}
	}
}

// TestTextLong checks that a line or sparkline of many points stays within
// its width.
func TestTextLong(t *testing.T) {
	vals := make([]string, 256)
	for i := range vals {
		vals[i] = strconv.Itoa(i * i % 97)
	}
	for _, kind := range []string{"line", "area", "sparkline"} {
		s := `{"kind": {"t": "chart", "kind": "` + kind + `", "series": [{"values": [` + strings.Join(vals, ",") + `]}]}}`
		got, err := ui.Text(json.RawMessage(s))
		if err != nil {
			t.Fatalf("Text(%s) error: %v", kind, err)
		}
		for _, line := range strings.Split(got, "\n") {
			if n := utf8.RuneCountInString(line); n > 80 {
				t.Errorf("Text(%s) has a line of %d characters: %q", kind, n, line)
			}
		}
	}
}
