package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runPrompt runs orrery run in a fresh workspace (the current directory) and
// data dir, with the offline model, and returns its exit code and output.
func runPrompt(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	if err := os.WriteFile(filepath.Join(dir, "none.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e := &env{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
	args = append([]string{"run", "--data", filepath.Join(dir, ".data"), "--config", filepath.Join(dir, "none.toml")}, args...)
	code := run(context.Background(), e, args)
	return code, stdout.String(), stderr.String()
}

func TestRunConsentFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantFile   bool
		wantStderr string
	}{
		{"nobody to ask: denied", nil, false, "denied"},
		{"--allow a matching rule", []string{"--allow", "write_file(notes/*.md)"}, true, ""},
		{"--allow a rule that does not match", []string{"--allow", "write_file(src/**)"}, false, "denied"},
		{"--yes", []string{"--yes"}, true, ""},
		{"--deny beats --yes", []string{"--yes", "--deny", "write_file"}, false, `deny = ["write_file"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			args := append(tt.args, "-p", "write a file notes/todo.md")
			code, stdout, stderr := runPrompt(t, dir, args...)
			if code != 0 {
				t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			_, err := os.Stat(filepath.Join(dir, "notes", "todo.md"))
			if got := err == nil; got != tt.wantFile {
				t.Errorf("file written = %v, want %v\nstdout:\n%s\nstderr:\n%s", got, tt.wantFile, stdout, stderr)
			}
			if tt.wantStderr != "" && !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stderr = %q, want it to name %q", stderr, tt.wantStderr)
			}
			if !tt.wantFile && !strings.Contains(stderr, "--allow") && !strings.Contains(stderr, "remove it") {
				t.Errorf("stderr = %q, want the fix (--allow or --yes)", stderr)
			}
		})
	}
}

func TestRunBadRule(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runPrompt(t, dir, "--allow", "shell(git", "-p", "hi")
	if code != 2 || !strings.Contains(stderr, "not closed") {
		t.Errorf("exit %d, stderr %q; want 2 and the rule's problem", code, stderr)
	}
}
