package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/agent/provider/script"
	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// watchKernel is a kernel behind a real listener and a pipe named "watch"
// in dir, for orrery watch to follow.
type watchKernel struct {
	url, dir, config string
	c                *client.Client
}

func startWatchKernel(t *testing.T) *watchKernel {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "offline", Tools: tool.Builtins(), DebugActor: true})
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The tests name scripted models (script:PATH) in their requests.
	srv := server.New(server.Config{Kernel: k, CheckSpec: models.RequestPolicy{AllowCommands: true}.Check})
	hs := httptest.NewServer(srv)
	ln, err := server.ListenPipe(filepath.Join(dir, "watch.sock"))
	if err != nil {
		t.Fatal(err)
	}
	pipeDone := make(chan error, 1)
	go func() { pipeDone <- srv.ServePipeListener(context.Background(), ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close(ctx)
		hs.Close()
		<-pipeDone
		k.Close(ctx)
		st.Close()
	})
	config := filepath.Join(dir, "config.toml")
	// The config names this server, as orrery watch's default --connect.
	if err := os.WriteFile(config, []byte("[server]\nlisten = \""+hs.Listener.Addr().String()+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(context.Background(), hs.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &watchKernel{url: hs.URL, dir: dir, config: config, c: c}
}

// session creates a session on a script of turns.
func (w *watchKernel) session(t *testing.T, turns ...script.Turn) string {
	t.Helper()
	data, _ := json.Marshal(script.File{Turns: turns})
	f, err := os.CreateTemp(w.dir, "script-*.json")
	if err != nil {
		t.Fatal(err)
	}
	f.Write(data)
	f.Close()
	id, err := w.c.NewSession(context.Background(), protocol.SessionNew{Model: "script:" + f.Name()})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// prompt runs text on session to its end.
func (w *watchKernel) prompt(t *testing.T, session, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	page, err := w.c.Read(ctx, session, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := w.c.Attach(ctx, session, &page.Head)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := w.c.Send(ctx, session, protocol.RunInput{Text: text}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type.Terminal() {
			return
		}
	}
}

type lockedBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// watching runs orrery watch with args until stop reports true for its
// output, then interrupts it as Ctrl-C would, and returns its exit code
// and output.
func (w *watchKernel) watching(t *testing.T, stop func(stdout, stderr string) bool, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr lockedBuffer
	e := &env{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, e, append(args, "--config", w.config, "--data", w.dir)) }()
	deadline := time.After(20 * time.Second)
	for !stop(stdout.String(), stderr.String()) {
		select {
		case code := <-done:
			t.Fatalf("orrery watch exited %d before it was interrupted\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
		case <-deadline:
			t.Fatalf("orrery watch did not print what was expected in time\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	select {
	case code := <-done:
		return code, stdout.String(), stderr.String()
	case <-time.After(10 * time.Second):
		t.Fatal("orrery watch did not stop when interrupted")
		return 0, "", ""
	}
}

var watchTurns = []script.Turn{
	{Reasoning: "The person wants an echo.", Text: []string{"Let me ", "echo that."}, ToolCalls: []script.ToolCall{{Name: "echo", Args: json.RawMessage(`{"text":"hi"}`)}}},
	{Text: []string{"The echo ", "said hi."}},
}

func TestWatchPlain(t *testing.T) {
	w := startWatchKernel(t)
	for _, connect := range []string{"default", "http", "pipe:watch", "ws"} {
		t.Run(connect, func(t *testing.T) {
			id := w.session(t, append([]script.Turn{{Text: []string{"Earlier ", "answer."}}}, watchTurns...)...)
			w.prompt(t, id, "earlier prompt")
			args := []string{"watch", id}
			switch connect {
			case "default":
			case "http":
				args = append(args, "--connect", w.url)
			case "ws":
				args = append(args, "--connect", "ws"+strings.TrimPrefix(w.url, "http"))
			default:
				args = append(args, "--connect", connect)
			}
			sent := false
			code, stdout, stderr := w.watching(t, func(stdout, _ string) bool {
				// The history comes first, as a snapshot; then the live run.
				if !sent && strings.Contains(stdout, "Earlier answer.\n") {
					sent = true
					if _, err := w.c.Send(context.Background(), id, protocol.RunInput{Text: "echo hi"}); err != nil {
						t.Errorf("Send() = %v", err)
					}
				}
				return strings.Contains(stdout, "finished")
			}, args...)
			if code != exitOK {
				t.Errorf("exit code = %d, want %d (interrupted)\nstderr:\n%s", code, exitOK, stderr)
			}
			for _, want := range []string{
				"> earlier prompt\nEarlier answer.\n", "> echo hi\n", "── run run_", " started\n", "thinking: The person wants an echo.\n",
				"Let me echo that.\n", "→ echo {\"text\":\"hi\"}\n", "← hi\n", "The echo said hi.\n", "finished · ",
			} {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
		})
	}
}

func TestWatchJSONAndErrors(t *testing.T) {
	w := startWatchKernel(t)
	id := w.session(t, script.Turn{Text: []string{"Half an ", "answer"}, Error: "the model is overloaded"})
	if _, err := w.c.Send(context.Background(), id, protocol.RunInput{Text: "go"}); err != nil {
		t.Fatal(err)
	}
	var head uint64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		page, err := w.c.Read(context.Background(), id, 0, 1)
		if err == nil && page.Head > 0 {
			last, _ := w.c.Read(context.Background(), id, page.Head-1, 1)
			if len(last.Frames) == 1 && bytes.Contains(last.Frames[0], []byte("RUN_ERROR")) {
				head = page.Head
				break
			}
		}
	}
	if head == 0 {
		t.Fatal("the run did not fail in time")
	}
	log, err := w.c.ReadAll(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}

	code, stdout, _ := w.watching(t, func(stdout, _ string) bool {
		return strings.Count(stdout, "\n") >= int(head)-2
	}, "watch", id, "--connect", w.url, "--since", "2", "--json")
	if code != exitOK {
		t.Errorf("--json exit code = %d, want 0", code)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != len(log)-2 {
		t.Fatalf("--json --since 2 printed %d lines, want %d", len(lines), len(log)-2)
	}
	for i, line := range lines {
		if line != string(log[i+2]) {
			t.Errorf("line %d = %s, want the logged frame %s", i, line, log[i+2])
		}
	}

	code, stdout, stderr := w.watching(t, func(_, stderr string) bool {
		return strings.Contains(stderr, "run failed")
	}, "watch", "--since=0", "--connect", w.url, id)
	if code != exitOK {
		t.Errorf("exit code = %d, want 0", code)
	}
	if !strings.Contains(stderr, "run failed (provider_error): the model is overloaded") || !strings.Contains(stdout, "Half an answer") {
		t.Errorf("stdout:\n%s\nstderr:\n%s\nwant the partial answer, and the failure on stderr", stdout, stderr)
	}
}

func TestWatchUsage(t *testing.T) {
	w := startWatchKernel(t)
	for _, tt := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"watch"}, exitUsage, "watch needs a session"},
		{[]string{"watch", "a", "b"}, exitUsage, "unexpected argument \"b\""},
		{[]string{"watch", "a", "--since", "x"}, exitUsage, "--since"},
		{[]string{"watch", "a", "--bogus"}, exitUsage, "flag provided but not defined"},
		{[]string{"watch", "--help"}, exitOK, "Usage: orrery watch SESSION"},
		{[]string{"watch", "ses_nope", "--connect", w.url, "--config", w.config}, exitError, "no session ses_nope on " + w.url + ": list them with orrery sessions"},
		{[]string{"watch", "ses_nope", "--connect", "pipe:nope", "--config", w.config, "--data", w.dir}, exitError, "nope.sock"},
	} {
		var stdout, stderr bytes.Buffer
		e := &env{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
		code := run(context.Background(), e, tt.args)
		if code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
			t.Errorf("orrery %s = exit %d, stderr %q, want exit %d with %q", strings.Join(tt.args, " "), code, stderr.String(), tt.code, tt.stderr)
		}
	}
}
