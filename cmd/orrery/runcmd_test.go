package main

import (
	"context"
	"encoding/json"
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

// TestRunStreamMode: orrery run --json --stream-mode prints the run in the
// chosen dialect, one object a line, each with its seq; an unknown mode is
// a usage error that lists the valid ones.
func TestRunStreamMode(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		check func(t *testing.T, line map[string]any) uint64
	}{
		{"openai", func(t *testing.T, l map[string]any) uint64 {
			if l["object"] != "chat.completion.chunk" {
				t.Errorf("line %v is not a chat.completion.chunk", l)
			}
			o, _ := l["orrery"].(map[string]any)
			seq, _ := o["seq"].(float64)
			return uint64(seq)
		}},
		{"agui", func(t *testing.T, l map[string]any) uint64 {
			if typ, _ := l["type"].(string); !strings.HasPrefix(typ, "agui.") {
				t.Errorf("line %v is not a legacy agui.* event", l)
			}
			seq, _ := l["seq"].(float64)
			return uint64(seq)
		}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			code, stdout, stderr := runPrompt(t, dir, "--json", "--stream-mode", tc.mode, "-p", "hello")
			if code != 0 {
				t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			var prev uint64
			for _, line := range lines {
				var l map[string]any
				if err := json.Unmarshal([]byte(line), &l); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				seq := tc.check(t, l)
				if seq != prev+1 && prev != 0 {
					t.Errorf("seq %d after %d, want consecutive", seq, prev)
				}
				prev = seq
			}
			if len(lines) < 4 {
				t.Errorf("%d lines, want the whole run", len(lines))
			}
		})
	}
	dir := t.TempDir()
	t.Chdir(dir)
	code, _, stderr := runPrompt(t, dir, "--json", "--stream-mode", "xml", "-p", "hello")
	if code == 0 || !strings.Contains(stderr, "agui_spec, agui, openai, dual") {
		t.Errorf("--stream-mode xml: exit %d, stderr %q; want a usage error listing the modes", code, stderr)
	}
}
