//go:build unix

package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/getorrery/orrery/tool"
)

// shellArgs returns shell arguments for command.
func shellArgs(command string, extra ...string) json.RawMessage {
	b, _ := json.Marshal(command)
	return json.RawMessage(`{"command":` + string(b) + strings.Join(extra, "") + `}`)
}

func TestShell(t *testing.T) {
	ws, _ := newWorkspace(t, map[string]string{"sub/x.txt": "x"})
	tests := []struct {
		name    string
		shell   tool.Shell
		args    json.RawMessage
		want    string
		wantErr bool
	}{
		{"stdout and status", tool.Shell{}, shellArgs("echo hello"), "hello\nexit status 0", false},
		{"runs in root", tool.Shell{}, shellArgs("ls sub"), "x.txt\nexit status 0", false},
		{"stderr interleaved", tool.Shell{}, shellArgs("echo out; echo err >&2; echo out2"), "out\nerr\nout2\nexit status 0", false},
		{"no output", tool.Shell{}, shellArgs("true"), "exit status 0", false},
		{"no final newline", tool.Shell{}, shellArgs("printf abc"), "abc\nexit status 0", false},
		{"non-zero exit", tool.Shell{}, shellArgs("echo failing; exit 3"), "failing\nexit status 3", true},
		{"killed by signal", tool.Shell{}, shellArgs("kill -TERM $$"), "killed by signal 15 (terminated)", true},
		{"timeout", tool.Shell{Timeout: 50 * time.Millisecond}, shellArgs("echo started; sleep 1000"),
			"started\ntimed out after 50ms; pass timeout_ms up to 600000 or run it in the background", true},
		{"timeout_ms", tool.Shell{}, shellArgs("sleep 1000", `,"timeout_ms":50`),
			"timed out after 50ms; pass timeout_ms up to 600000 or run it in the background", true},
		{"timeout_ms over max", tool.Shell{MaxTimeout: time.Second}, shellArgs("true", `,"timeout_ms":5000`),
			`shell needs arguments {"command": "…", "timeout_ms"?: 120000}: timeout_ms 5000 is out of range; pass from 1 to 1000`, true},
		{"timeout_ms zero", tool.Shell{}, shellArgs("true", `,"timeout_ms":0`), "timeout_ms 0 is out of range", true},
		{"empty command", tool.Shell{}, shellArgs("  "), "command is empty", true},
		{"missing command", tool.Shell{}, json.RawMessage(`{}`), `shell needs arguments {"command": "…", "timeout_ms"?: 120000}: command is missing`, true},
		{"wrong type", tool.Shell{}, json.RawMessage(`{"command":["ls"]}`), "command must be a string, not a JSON array", true},
		{"float timeout", tool.Shell{}, shellArgs("true", `,"timeout_ms":1.5`), "timeout_ms must be an integer, not a JSON number", true},
		{"unknown argument", tool.Shell{}, json.RawMessage(`{"command":"ls","cwd":"/"}`), `there is no argument "cwd"`, true},
		{"not json", tool.Shell{}, json.RawMessage(`ls -l`), "the arguments must be a JSON object", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.shell.Call(context.Background(), tool.Call{Args: tt.args, Workspace: ws})
			if err != nil {
				t.Fatalf("Call() error = %v", err)
			}
			if res.Error != tt.wantErr || !strings.Contains(res.Text, tt.want) {
				t.Errorf("Call() = %q (error %v), want text containing %q, error %v", res.Text, res.Error, tt.want, tt.wantErr)
			}
		})
	}
}

// TestShellBackgroundChild checks a command that leaves a child holding its
// output open: the call returns after the command exits, saying so.
func TestShellBackgroundChild(t *testing.T) {
	ws, _ := newWorkspace(t, map[string]string{})
	res, err := tool.Shell{}.Call(context.Background(), tool.Call{Args: shellArgs("sleep 1000 & echo $!"), Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscanf(res.Text, "%d\n", &pid); err == nil && pid > 0 {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if want := "exit status 0; a background process kept the output open, so its later output is not shown: redirect its output to a file"; !strings.HasSuffix(res.Text, want) || res.Error {
		t.Errorf("Call() = %q, want it to end %q", res.Text, want)
	}
}

func TestShellNoWorkspace(t *testing.T) {
	res, err := tool.Shell{}.Call(context.Background(), tool.Call{Args: shellArgs("ls")})
	if err != nil || !res.Error || !strings.Contains(res.Text, "the session has no workspace") {
		t.Errorf("Call() = %+v, %v, want a refusal naming the missing workspace", res, err)
	}
}

// TestShellStreams checks that output reaches Stream while the command is
// still running: the command prints "a", then blocks on a FIFO until the
// test has seen "a", then prints "b".
func TestShellStreams(t *testing.T) {
	ws, _ := newWorkspace(t, map[string]string{})
	fifo := filepath.Join(ws.Root, "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		pieces []string
	)
	sawA := make(chan struct{})
	stream := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		pieces = append(pieces, s)
		if strings.Contains(strings.Join(pieces, ""), "a\n") && sawA != nil {
			close(sawA)
			sawA = nil
		}
	}
	done := make(chan tool.Result)
	go func() {
		res, err := tool.Shell{}.Call(context.Background(), tool.Call{Args: shellArgs("echo a; read x < gate; echo b"), Workspace: ws, Stream: stream})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	mu.Lock()
	wait := sawA
	mu.Unlock()
	select {
	case <-wait:
	case res := <-done:
		t.Fatalf("Call() returned %q before Stream received \"a\"", res.Text)
	}
	select {
	case res := <-done:
		t.Fatalf("Call() returned %q while the command was blocked", res.Text)
	default:
	}
	// Let the command go on: open the FIFO for writing and send a line.
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Text != "a\nb\nexit status 0" || res.Error {
		t.Errorf("Call() = %q, want a, b and exit status 0", res.Text)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(pieces, ""); got != "a\nb\n" {
		t.Errorf("Stream received %q, want %q", got, "a\nb\n")
	}
}

func TestShellTruncates(t *testing.T) {
	ws, _ := newWorkspace(t, map[string]string{})
	// seq 1 100000 prints 588895 bytes.
	const total = 588895
	var streamed strings.Builder
	res, err := tool.Shell{MaxOutput: 1000}.Call(context.Background(), tool.Call{
		Args: shellArgs("seq 1 100000"), Workspace: ws, Stream: func(s string) { streamed.WriteString(s) },
	})
	if err != nil || res.Error {
		t.Fatalf("Call() = %+v, %v", res, err)
	}
	if streamed.Len() != total {
		t.Errorf("Stream received %d bytes, want all %d", streamed.Len(), total)
	}
	head, rest, ok := strings.Cut(res.Text, "… ")
	if !ok {
		t.Fatalf("Call() = %q, want a cut line", res.Text)
	}
	cut, tail, _ := strings.Cut(rest, " bytes cut …\n")
	if !strings.HasPrefix(head, "1\n2\n3\n") || !strings.HasSuffix(tail, "99999\n100000\nexit status 0") {
		t.Errorf("Call() = %q, want the head and the tail of the output", res.Text)
	}
	kept := len(head) + len(strings.TrimSuffix(tail, "exit status 0"))
	if want := fmt.Sprint(total - kept); cut != want {
		t.Errorf("cut line says %s bytes, want %s (kept %d)", cut, want, kept)
	}
	if kept > 1000 {
		t.Errorf("kept %d bytes, want at most 1000", kept)
	}
}

// TestShellTruncatesUTF8 checks that a cut never splits a character.
func TestShellTruncatesUTF8(t *testing.T) {
	ws, _ := newWorkspace(t, map[string]string{})
	res, err := tool.Shell{MaxOutput: 101}.Call(context.Background(), tool.Call{
		Args: shellArgs(`i=0; while [ $i -lt 200 ]; do printf 'é'; i=$((i+1)); done`), Workspace: ws,
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(res.Text, '\uFFFD') || !strings.Contains(res.Text, "bytes cut") {
		t.Errorf("Call() = %q, want whole characters around a cut", res.Text)
	}
}

func TestShellCancelled(t *testing.T) {
	ws, _ := newWorkspace(t, map[string]string{})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var once sync.Once
	errc := make(chan error)
	go func() {
		_, err := tool.Shell{}.Call(ctx, tool.Call{
			Args: shellArgs("echo started; sleep 1000"), Workspace: ws,
			Stream: func(string) { once.Do(func() { close(started) }) },
		})
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Call() error = %v, want context.Canceled", err)
	}
}

func TestShellSubject(t *testing.T) {
	got, err := tool.Shell{}.Subject(shellArgs("git status --short"))
	if err != nil || got != "git status --short" {
		t.Errorf("Subject() = %q, %v, want the command", got, err)
	}
	if _, err := (tool.Shell{}).Subject(json.RawMessage(`{}`)); err == nil {
		t.Error("Subject({}) = nil error, want the missing command")
	}
}
