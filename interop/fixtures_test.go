package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestFixtures replays every conformance fixture in protocol/fixtures with
// fixtures.mjs: each frame must pass @ag-ui/core's EventSchemas and follow
// the seq order, and the state fast-json-patch rebuilds must equal the
// fixture's expected state.
func TestFixtures(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	node := requireNode(t, dir)
	fixtures := filepath.Join(dir, "..", "protocol", "fixtures")
	names, err := filepath.Glob(filepath.Join(fixtures, "*.jsonl"))
	if err != nil || len(names) == 0 {
		t.Fatalf("fixtures in %s = %v (%v), want some: run go run ./protocol/fixtures/gen", fixtures, names, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "fixtures.mjs", "--dir", fixtures)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var res struct {
		OK       bool `json:"ok"`
		Fixtures []struct {
			Name   string `json:"name"`
			OK     bool   `json:"ok"`
			Frames int    `json:"frames"`
			Error  string `json:"error"`
		} `json:"fixtures"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("node fixtures.mjs = %v, printed %q (stderr %q), want one JSON line", runErr, stdout.Bytes(), stderr.Bytes())
	}
	if len(res.Fixtures) != len(names) {
		t.Errorf("fixtures.mjs replayed %d fixtures, want %d", len(res.Fixtures), len(names))
	}
	for _, f := range res.Fixtures {
		if !f.OK {
			t.Errorf("fixture %s: %s", f.Name, f.Error)
		} else if f.Frames == 0 {
			t.Errorf("fixture %s has no frames", f.Name)
		}
	}
	if !res.OK || runErr != nil {
		t.Errorf("node fixtures.mjs = %v, ok %v, want success", runErr, res.OK)
	}
}
