package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// nodeScript runs node with args (a script of this directory first) and
// returns what it printed on stdout; a failure shows its stderr.
func nodeScript(t *testing.T, args ...string) []byte {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	node := requireNode(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes()
}

// scriptModel writes a script model of turns in dir and returns its spec.
func scriptModel(t *testing.T, dir string, turns ...map[string]any) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"turns": turns})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "script.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return "script:" + path
}
