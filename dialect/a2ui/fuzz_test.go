package a2ui_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/getorrery/orrery/dialect/a2ui"
	"github.com/getorrery/orrery/ui"
)

// FuzzValidate feeds arbitrary bytes to Validate: it never panics, and a
// list it accepts passes the official schema message by message and lifts
// to valid orrery surfaces.
func FuzzValidate(f *testing.F) {
	files, _ := filepath.Glob("testdata/examples/*.json")
	for _, p := range files[:min(len(files), 8)] {
		raw, _ := os.ReadFile(p)
		var ex struct {
			Messages json.RawMessage `json:"messages"`
		}
		if json.Unmarshal(raw, &ex) == nil {
			f.Add([]byte(ex.Messages))
		}
	}
	for _, s := range []string{``, `[]`, `{}`, `[{}]`, `[{"version":"v0.9"}]`, `[{"version":"v0.9","deleteSurface":{"surfaceId":"s"}}]`,
		`[{"version":"v0.9","updateComponents":{"surfaceId":"s","components":[{"id":"root","component":"Column","children":{"componentId":"root","path":"/x"}}]}}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := a2ui.Validate(data)
		if err != nil {
			return
		}
		for i, m := range msgs {
			raw, err := json.Marshal(m)
			if err != nil {
				t.Fatalf("message %d does not encode: %v", i, err)
			}
			if err := a2ui.CheckSchema(raw); err != nil {
				t.Fatalf("Validate accepted message %d, which re-encoded as %s fails the schema: %v", i, raw, err)
			}
		}
		surfaces, err := a2ui.Lift(msgs)
		if err != nil {
			t.Fatalf("Lift(accepted list) = %v", err)
		}
		for id, s := range surfaces {
			if err := ui.Validate(s); err != nil {
				t.Fatalf("lifted surface %s = %s: %v", id, s, err)
			}
		}
	})
}

// FuzzParseAction: ParseAction never panics, and an action it accepts has a
// name and a surface.
func FuzzParseAction(f *testing.F) {
	for _, s := range []string{
		`{"version":"v0.9","action":{"name":"go","surfaceId":"s","sourceComponentId":"b","timestamp":"2026-01-15T12:00:00Z","context":{}}}`,
		`{"name":"go","surfaceId":"s","context":{"orrery.value":1}}`, `{}`, `[]`, `null`, `{"version":"v0.9"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := a2ui.ParseAction(data)
		if err != nil {
			return
		}
		if a.Name == "" || a.SurfaceID == "" {
			t.Fatalf("ParseAction(%q) = %+v with no name or surface", data, a)
		}
		_, _ = a2ui.ToIntent(a, func(string) ([]string, bool) { return []string{a.Name}, true })
	})
}
