package kernel_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// codingEnv is a kernel with the coding tools, the offline model and every
// ask allowed, working in a fresh directory.
func codingEnv(t *testing.T, mode storeMode) (*kernel.Session, string) {
	t.Helper()
	dir := t.TempDir()
	e := mode.newEnv(t, "offline", func(c *kernel.Config) {
		c.Tools = tool.NewSet(tool.Coding(tool.Shell{})...)
		c.Workspace = tool.Workspace{Root: dir}
		c.AutoApprove = true
	})
	return e.session(t), dir
}

func TestShellStreamsOntoItsSurface(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		s, _ := codingEnv(t, mode)
		evs, _ := send(t, s, kernel.SendInput{Text: "run `echo one; sleep 0.1; echo two`"})
		var chunks []string
		var surfacePath string
		for _, ev := range evs {
			d, ok := ev.(*protocol.StateDelta)
			if !ok {
				continue
			}
			for _, op := range d.Delta {
				switch {
				case strings.HasSuffix(op.Path, "/kind/chunks"):
					var first []string
					if err := json.Unmarshal(op.Value, &first); err != nil {
						t.Fatal(err)
					}
					chunks = append(chunks, first...)
					surfacePath = strings.TrimSuffix(op.Path, "/kind/chunks")
				case strings.HasSuffix(op.Path, "/kind/chunks/-"):
					var c string
					if err := json.Unmarshal(op.Value, &c); err != nil {
						t.Fatal(err)
					}
					chunks = append(chunks, c)
				case surfacePath != "" && op.Path == surfacePath:
					t.Errorf("the streamed surface was replaced by %s", op.Value)
				}
			}
		}
		if got := strings.Join(chunks, ""); got != "one\ntwo\n" {
			t.Errorf("streamed chunks join to %q, want the command's output", got)
		}
		if len(chunks) < 2 {
			t.Errorf("output arrived in %d chunk(s), want one per line written apart in time", len(chunks))
		}
		o := toolOutcome(t, evs)
		if o["status"] != "ok" || "/surfaces/"+o["surface"] != surfacePath || !strings.Contains(o["rule"], "--yes") {
			t.Errorf("outcome = %v, want ok, the streamed surface %s, and the rule that allowed it", o, surfacePath)
		}
	})
}

func TestCancelKillsTheShell(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		s, dir := codingEnv(t, mode)
		marker := filepath.Join(dir, "finished")
		pidFile := filepath.Join(dir, "sleep.pid")
		w := watch(t, s, kernel.Caller{})
		res, err := s.Send(context.Background(), kernel.SendInput{Text: "run `sleep 30 & echo $! > " + pidFile + "; echo started; wait; touch " + marker + "`"})
		if err != nil {
			t.Fatal(err)
		}
		// Cancel once the command has written its first line.
		w.until(func(ev protocol.Event) bool {
			d, ok := ev.(*protocol.StateDelta)
			return ok && strings.HasSuffix(d.Delta[len(d.Delta)-1].Path, "/kind/chunks")
		})
		cancelled := time.Now()
		if err := s.Cancel(context.Background(), res.RunID); err != nil {
			t.Fatal(err)
		}
		end := w.until(terminal)
		// Logged, not asserted: the "within 1 s" is a figure to report.
		t.Logf("cancel to terminal frame: %v", time.Since(cancelled))
		if f, ok := end.(*protocol.RunFinished); !ok || f.Outcome.Type != protocol.OutcomeCancelled {
			t.Fatalf("terminal = %#v, want RUN_FINISHED cancelled", end)
		}
		// The command's child, in its process group, is killed too.
		pid, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		stat := "/proc/" + strings.TrimSpace(string(pid)) + "/stat"
		deadline := time.Now().Add(10 * time.Second)
		for alive(stat) {
			if time.Now().After(deadline) {
				t.Fatalf("the command's child %s still runs after the cancel", strings.TrimSpace(string(pid)))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the command ran to its end after the cancel")
		}
	})
}

func TestEditShowsADiff(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		s, dir := codingEnv(t, mode)
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("Hello world\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		evs, _ := send(t, s, kernel.SendInput{Text: "edit notes.txt replace Hello with Goodbye"})
		var surface string
		for _, ev := range evs {
			if d, ok := ev.(*protocol.StateDelta); ok && strings.HasPrefix(d.Delta[0].Path, "/surfaces/") {
				surface = string(d.Delta[0].Value)
			}
		}
		if !strings.Contains(surface, `"t":"diff"`) || !strings.Contains(surface, `-Hello world`) || !strings.Contains(surface, `+Goodbye world`) {
			t.Errorf("result surface = %s, want a diff of the edit", surface)
		}
		got, err := os.ReadFile(filepath.Join(dir, "notes.txt"))
		if err != nil || string(got) != "Goodbye world\n" {
			t.Errorf("file = %q, %v; want the edit applied", got, err)
		}
	})
}

// TestReadmeWriteThenEdit runs the README's demo as written: the offline
// model writes notes.md, and the edit it suggests then applies (the file
// once held "Hello" twice, and the edit failed on its own suggestion).
func TestReadmeWriteThenEdit(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		s, dir := codingEnv(t, mode)
		send(t, s, kernel.SendInput{Text: "write a file notes.md"})
		evs, _ := send(t, s, kernel.SendInput{Text: "edit notes.md replace Hello with Goodbye"})
		for _, ev := range evs {
			if r, ok := ev.(*protocol.ToolCallResult); ok && !strings.Contains(r.Content.String(), "notes.md") {
				t.Errorf("edit result = %q, want the edit of notes.md reported", r.Content.String())
			}
		}
		got, err := os.ReadFile(filepath.Join(dir, "notes.md"))
		if err != nil || !strings.HasPrefix(string(got), "Goodbye from") || strings.Contains(string(got), "Hello") {
			t.Errorf("notes.md = %q, %v; want Hello replaced with Goodbye", got, err)
		}
	})
}

// alive reports whether the process whose /proc stat file is stat runs: it
// exists and is not a zombie (an orphan nobody has reaped yet).
func alive(stat string) bool {
	b, err := os.ReadFile(stat)
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

func TestSessionCwdIsChecked(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, "offline")
		dir := t.TempDir()
		tests := []struct {
			cwd, want string
		}{
			{"relative/dir", "not an absolute path"},
			{filepath.Join(dir, "missing"), "not a directory"},
			{dir, ""},
		}
		for _, tt := range tests {
			_, err := e.k.CreateSession(context.Background(), kernel.SessionOptions{Cwd: tt.cwd})
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("CreateSession(cwd %q) = %v, want %q", tt.cwd, err, tt.want)
			}
		}
	})
}
