package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/datadir"
	"github.com/getorrery/orrery/internal/logbuf"
	"github.com/getorrery/orrery/internal/testdisk"
	"github.com/getorrery/orrery/protocol"
)

// proc is a running orrery whose output lines the test reads as they come.
type proc struct {
	t        *testing.T
	cmd      *exec.Cmd
	stdout   *logbuf.Buffer
	stderr   *logbuf.Buffer
	outLines chan string
	errLines chan string
	waited   chan struct{}
	err      error // from Wait, once waited is closed
}

// start runs orrery with args in the background.
func start(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	return startIn(t, bin, env, "", args...)
}

// startIn is start in dir.
func startIn(t *testing.T, bin string, env []string, dir string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdin = strings.NewReader("")
	p := &proc{t: t, cmd: cmd, stdout: &logbuf.Buffer{}, stderr: &logbuf.Buffer{},
		outLines: make(chan string, 1024), errLines: make(chan string, 1024), waited: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start orrery %q: %v", args, err)
	}
	read := func(r io.Reader, buf *logbuf.Buffer, lines chan string) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer close(lines)
			br := bufio.NewReader(r)
			for {
				line, err := br.ReadString('\n')
				buf.Write([]byte(line))
				if line != "" {
					select {
					case lines <- strings.TrimSuffix(line, "\n"):
					default: // nobody reads them: the buffer has them
					}
				}
				if err != nil {
					return
				}
			}
		}()
		return done
	}
	outDone, errDone := read(stdout, p.stdout, p.outLines), read(stderr, p.stderr, p.errLines)
	go func() {
		<-outDone
		<-errDone
		p.err = cmd.Wait()
		close(p.waited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.waited:
		default:
			_ = cmd.Process.Kill()
			<-p.waited
		}
		if t.Failed() {
			t.Logf("orrery %q stdout:\n%s\nstderr:\n%s", args, p.stdout, p.stderr)
		}
	})
	return p
}

// waitLine reads lines until one contains sub, and returns it.
func (p *proc) waitLine(lines chan string, what, sub string) string {
	p.t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				p.t.Fatalf("orrery %s ended without printing %q", what, sub)
			}
			if strings.Contains(l, sub) {
				return l
			}
		case <-timeout:
			p.t.Fatalf("orrery %s did not print %q within %v", what, sub, waitLimit)
		}
	}
}

// exit waits for the process to end and returns its exit code.
func (p *proc) exit() int {
	p.t.Helper()
	select {
	case <-p.waited:
	case <-time.After(waitLimit):
		p.t.Fatalf("orrery did not exit within %v", waitLimit)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		p.t.Fatalf("orrery: %v", p.err)
	}
	return 0
}

// running reports whether the process is still running.
func (p *proc) running() bool {
	select {
	case <-p.waited:
		return false
	default:
		return true
	}
}

// waitOwner reads dir's owner file until it names a pipe, and returns it.
func waitOwner(t *testing.T, dir string) *datadir.Owner {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		o, err := datadir.ReadOwner(dir)
		if err == nil && o != nil && o.Pipe != "" {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("the owner file of %s never named a pipe: %+v, %v", dir, o, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dialPipe is the test's own client of the holder of dir, over its pipe.
func dialPipe(t *testing.T, dir string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cl, err := client.Dial(ctx, "pipe:"+pipePath(t, dir), client.Options{Client: "test"})
	if err != nil {
		t.Fatalf("dial the pipe of %s: %v", dir, err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// waitRunning waits until the holder lists n sessions with a run in
// flight, and returns them.
func waitRunning(t *testing.T, cl *client.Client, n int) []protocol.SessionSummary {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		list, err := cl.Sessions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var running []protocol.SessionSummary
		for _, s := range list {
			if s.Running {
				running = append(running, s)
			}
		}
		if len(running) == n {
			return running
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions = %+v, want %d running", list, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLogged waits until session's log holds text in a frame: a run that
// is running may not have streamed its answer yet.
func waitLogged(t *testing.T, cl *client.Client, session, text string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		page, err := cl.Read(context.Background(), session, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range page.Frames {
			if strings.Contains(string(f), text) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s never logged %q", session, text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// post sends one request to POST /control and returns the status and body.
func (s *server) post(req map[string]any) (int, []byte) {
	s.t.Helper()
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/control", bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		s.t.Fatalf("POST /control %s: %v", body, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// checkLog checks a session's log: seqs 1..head with no gap, wantRuns
// RUN_STARTED, each run with exactly one terminal frame, its last of the run.
func checkLog(t *testing.T, frames []json.RawMessage, wantRuns int) {
	t.Helper()
	open := ""
	runs := 0
	for i, d := range frames {
		f := decode(t, d)
		if f.Metadata.Orrery.Seq != uint64(i+1) {
			t.Fatalf("logged frame %d has seq %d, want %d (a gap or a duplicate)", i, f.Metadata.Orrery.Seq, i+1)
		}
		switch f.Type {
		case "RUN_STARTED":
			if open != "" {
				t.Errorf("seq %d: run %s starts while %s is open", i+1, f.RunID, open)
			}
			open = f.RunID
			runs++
		case "RUN_FINISHED", "RUN_ERROR":
			if open == "" {
				t.Errorf("seq %d: a %s outside any run", i+1, f.Type)
			}
			open = ""
		}
	}
	if runs != wantRuns || open != "" {
		t.Errorf("the log has %d runs (open: %q), want %d, all ended", runs, open, wantRuns)
	}
}

// testTwoServes: a second orrery serve on a held data dir exits 1 naming
// the first (pid, address, pipe) and the choices; the first keeps serving.
// Killed with SIGKILL, the first leaves its owner file, and the next serve
// takes the dir and replaces it.
func testTwoServes(t *testing.T, bin string) {
	env := environ(t)
	data := t.TempDir()
	first := serve(t, bin, env, "--data", data)
	o := waitOwner(t, data)
	if o.PID != first.cmd.Process.Pid || o.Command != "orrery serve" || o.Listen != first.url || o.Pipe != pipePath(t, data) {
		t.Errorf("owner file = %+v, want orrery serve pid %d at %s with pipe %s", o, first.cmd.Process.Pid, first.url, pipePath(t, data))
	}
	if st, err := os.Stat(filepath.Join(data, datadir.OwnerFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the owner file: %v, mode %v; want 0600", err, st.Mode())
	}
	// A node would be refused without a token first.
	if r := orrery(t, bin, env, "node", "token", "create", "--name", "ci", "--data", data); r.code != 0 {
		t.Fatalf("orrery node token create on a held dir = %d, stderr %q, want 0", r.code, r.stderr)
	}
	for _, cmd := range []string{"serve", "node"} {
		r := orrery(t, bin, env, cmd, "--listen", "127.0.0.1:0", "--data", data)
		for _, want := range []string{"in use by orrery serve", "pid " + strconv.Itoa(first.cmd.Process.Pid), first.url, pipePath(t, data), "--connect", "another --data"} {
			if r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Errorf("a second orrery %s = %d, stderr %q; want 1 and %q", cmd, r.code, r.stderr, want)
			}
		}
		if strings.Contains(r.stdout, "listening on") {
			t.Errorf("a second orrery %s printed %q, want it never to listen", cmd, r.stdout)
		}
	}
	var list struct{ Sessions []any }
	first.control(map[string]any{"t": "session.list", "id": "1"}, &list)
	if strings.Contains(first.stderr.String(), "UNIQUE constraint") {
		t.Errorf("the first server logged a UNIQUE constraint failure:\n%s", first.stderr)
	}

	first.kill()
	if stale, _ := datadir.ReadOwner(data); stale == nil || stale.PID != first.cmd.Process.Pid {
		t.Fatalf("owner file after SIGKILL = %+v, want the dead server's, left behind", stale)
	}
	next := serve(t, bin, env, "--data", data)
	if o := waitOwner(t, data); o.PID != next.cmd.Process.Pid || o.Listen != next.url {
		t.Errorf("owner file after the restart = %+v, want the new server (pid %d)", o, next.cmd.Process.Pid)
	}
	if code := next.stop(); code != 130 {
		t.Errorf("orrery serve exit code after SIGINT = %d, want 130 (interrupted)", code)
	}
	if o, _ := datadir.ReadOwner(data); o != nil {
		t.Errorf("owner file after a clean exit = %+v, want none", o)
	}
}

// testClientsOfServe: on a data dir orrery serve holds, orrery run (text,
// --json, --session, a crew, a failing run), orrery sessions and orrery watch are
// the server's clients over its pipe and print what they print on their
// own kernel; a run.send and an orrery run --session for the same session
// at once get a clear busy answer, never a lost run.
func testClientsOfServe(t *testing.T, bin string) {
	env := environ(t)
	data := t.TempDir()
	ws := t.TempDir()
	model := writeScript(t, filepath.Join(t.TempDir(), "script.json"),
		map[string]any{"text": []string{"waiting"}, "hang": true}, // run.send's run, in flight
		map[string]any{"text": []string{"waiting too"}, "hang": true},
		map[string]any{"text": []string{"second ", "answer"}},
		map[string]any{"text": []string{"partial "}, "error": "the scripted provider failed"},
	)
	s := serveIn(t, bin, env, ws, "--data", data, "--model", model)
	waitOwner(t, data)
	run := func(args ...string) result {
		t.Helper()
		return orreryIn(t, bin, env, ws, append([]string{"run", "--data", data}, args...)...)
	}

	// orrery run: the offline answer, in this directory's workspace.
	r := run("--model", "offline", "-p", "hello")
	if r.code != 0 || !strings.Contains(r.stdout, `You said: "hello"`) {
		t.Errorf("orrery run -p hello on a held dir = %d, stdout %q, stderr %q; want 0 and the offline answer", r.code, r.stdout, r.stderr)
	}
	r = run("--model", "offline", "--yes", "-p", "write a file notes/todo.md")
	if _, err := os.Stat(filepath.Join(ws, "notes", "todo.md")); r.code != 0 || err != nil {
		t.Errorf("orrery run --yes -p \"write a file …\" = %d (%v), stderr %q; want 0 and the file in the run's directory", r.code, err, r.stderr)
	}
	r = run("--model", "offline", "-p", "write a file notes/other.md")
	if _, err := os.Stat(filepath.Join(ws, "notes", "other.md")); r.code != 0 || err == nil || !strings.Contains(r.stderr, "--allow") {
		t.Errorf("orrery run without --yes = %d (file: %v), stderr %q; want 0, no file, and the fix (--allow or --yes)", r.code, err, r.stderr)
	}

	// --json: every frame as logged, one a line, seqs from 1.
	r = run("--model", "offline", "--json", "-p", "echo hi")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	var thread string
	for i, line := range lines {
		f := decode(t, []byte(line))
		if f.Metadata.Orrery.Seq != uint64(i+1) || strings.Contains(line, `"session":"ses_`) {
			t.Errorf("orrery run --json line %d = %s, want seq %d and no session tag (as logged)", i, line, i+1)
		}
		if f.Type == "RUN_STARTED" {
			var rs struct{ ThreadID string }
			_ = json.Unmarshal([]byte(line), &rs)
			thread = rs.ThreadID
		}
	}
	if r.code != 0 || thread == "" || decode(t, []byte(lines[len(lines)-1])).Type != "RUN_FINISHED" {
		t.Fatalf("orrery run --json = %d, stdout %q, stderr %q; want 0 and a whole run", r.code, r.stdout, r.stderr)
	}
	logged := s.read(thread)
	for i, line := range lines {
		if i >= len(logged.Frames) || line != string(logged.Frames[i]) {
			t.Errorf("orrery run --json line %d = %s, want the logged frame byte for byte", i, line)
			break
		}
	}

	// A run from a directory the server's workspace does not take is
	// refused (serve does not end by itself to wait for), naming why.
	r = orreryIn(t, bin, env, t.TempDir(), "run", "--data", data, "--model", "offline", "-p", "hi")
	if r.code != 1 || !strings.Contains(r.stderr, "does not take this directory") || !strings.Contains(r.stderr, "[workspace] roots") || !strings.Contains(r.stderr, "--data DIR") {
		t.Errorf("orrery run outside the server's workspace = %d, stderr %q; want 1, why, and the choices", r.code, r.stderr)
	}

	// The run event bus works as a client too (cmd/orrery's bus tests
	// run every bus case both ways): events on stdout, one a line.
	r = run("--events", "jsonl", "--model", "offline", "-p", "hi")
	if bus := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || !strings.Contains(bus[0], `"kind":"run.started"`) ||
		!strings.Contains(bus[len(bus)-1], `"kind":"run.finished"`) || !strings.Contains(bus[len(bus)-1], `"success":true`) {
		t.Errorf("orrery run --events jsonl on a held dir = %d, stdout %q, stderr %q; want 0, run.started … run.finished success", r.code, r.stdout, r.stderr)
	}
	// A script model named relative to the run's directory (below the
	// server's) runs on the server: the pipe may name a script, and the
	// path goes from the root.
	sub := filepath.Join(ws, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	writeScript(t, filepath.Join(sub, "hi.json"), map[string]any{"text": []string{"scripted hi"}})
	if r = orreryIn(t, bin, env, sub, "run", "--data", data, "--model", "script:hi.json", "-p", "x"); r.code != 0 || !strings.Contains(r.stdout, "scripted hi") {
		t.Errorf("orrery run --model script:hi.json on a held dir = %d, stdout %q, stderr %q; want 0 and the script's answer", r.code, r.stdout, r.stderr)
	}

	// A crew runs on the server too: the server reads the file (named
	// relative to the run's directory) and seats the crew on its hub for
	// the run, so the same crew runs again, as edited. Its task that
	// declared human input runs unasked, since nobody can be asked.
	crewFile := filepath.Join(ws, "crew.toml")
	writeCrew := func(task string) {
		text := "name = \"mini\"\nmodel = \"offline\"\n[[agents]]\nid = \"a\"\nrole = \"A\"\n[[tasks]]\nid = \"t\"\ndescription = \"" + task + "\"\nagent = \"a\"\nhuman_input = true\n"
		if err := os.WriteFile(crewFile, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCrew("Say plum.")
	if r = run("crew.toml"); r.code != 0 || !strings.Contains(r.stdout, "plum") {
		t.Errorf("orrery run crew.toml on a held dir = %d, stdout %q, stderr %q; want 0 and the crew's answer", r.code, r.stdout, r.stderr)
	}
	writeCrew("Say quince.")
	if r = run(crewFile); r.code != 0 || !strings.Contains(r.stdout, "quince") {
		t.Errorf("orrery run CREW.toml again, edited, on a held dir = %d, stdout %q, stderr %q; want 0 and the edited crew's answer", r.code, r.stdout, r.stderr)
	}
	if err := os.WriteFile(crewFile, []byte("name = \"mini\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r = run("crew.toml"); r.code != 2 || !strings.Contains(r.stderr, "crew.toml:1: the crew has no tasks") || !strings.Contains(r.stderr, "nothing ran") {
		t.Errorf("orrery run of a crew with no tasks on a held dir = %d, stderr %q; want 2 and the line that is wrong", r.code, r.stderr)
	}

	// --stream-mode encodes here, with each frame's run as the store has it.
	r = run("--model", "offline", "--json", "--stream-mode", "openai", "-p", "hello")
	if r.code != 0 || !strings.Contains(r.stdout, `"id":"chatcmpl-run_`) || !strings.Contains(r.stdout, `"object":"chat.completion.chunk"`) {
		t.Errorf("orrery run --json --stream-mode openai on a held dir = %d, stdout %q, stderr %q; want chunks named after the run", r.code, r.stdout, r.stderr)
	}

	// orrery ext list --session asks the server, found by the data dir.
	r = orrery(t, bin, env, "ext", "list", "--session", thread, "--json", "--data", data)
	if r.code != 0 || strings.TrimSpace(r.stdout) != `[]` {
		t.Errorf("orrery ext list --session on a held dir = %d, stdout %q, stderr %q; want 0 and the server's (empty) list", r.code, r.stdout, r.stderr)
	}

	// orrery sessions asks the server.
	r = orrery(t, bin, env, "sessions", "--json", "--data", data)
	if r.code != 0 || !strings.Contains(r.stdout, `"id":"`+thread+`"`) {
		t.Errorf("orrery sessions --json on a held dir = %d, stdout %q, stderr %q; want 0 and %s listed", r.code, r.stdout, r.stderr, thread)
	}

	// The reproduction: a run.send reaches the server while orrery run
	// --session sends to the same session. The one that comes second is
	// told the session is busy and how to steer; neither run is lost.
	var created struct{ Session string }
	s.control(map[string]any{"t": "session.new", "id": "n"}, &created)
	sess := created.Session
	var sent struct{ RunID string }
	s.control(map[string]any{"t": "run.send", "id": "s", "session": sess, "input": map[string]any{"text": "wait"}}, &sent)
	r = run("--session", sess, "-p", "me too")
	if r.code != 1 || !strings.Contains(r.stderr, "busy with run "+sent.RunID) || !strings.Contains(r.stderr, "steer") {
		t.Errorf("orrery run --session while a run is in flight = %d, stderr %q; want 1 and the busy answer naming steer", r.code, r.stderr)
	}
	// Cancelled once it has called the model (its text is logged), so it
	// takes its turn of the script.
	s.events(sess, 0, func(f seen) bool { return f.typ != "TEXT_MESSAGE_CONTENT" })
	s.control(map[string]any{"t": "run.cancel", "id": "c", "session": sess}, nil)
	// The other order: orrery run's run is in flight when run.send comes.
	bg := startIn(t, bin, env, ws, "run", "--data", data, "--session", sess, "-p", "hold on")
	// Its run has called the model (its text is logged) before anything
	// cancels it: a run cancelled before that takes no turn of the
	// script, and the turns after it would shift.
	started := 0
	s.events(sess, 0, func(f seen) bool {
		if f.typ == "RUN_STARTED" {
			started++
		}
		return started < 2 || f.typ != "TEXT_MESSAGE_CONTENT"
	})
	status, body := s.post(map[string]any{"t": "run.send", "id": "s2", "session": sess, "input": map[string]any{"text": "and me"}})
	if status != http.StatusConflict || !strings.Contains(string(body), "steer") {
		t.Errorf("run.send while orrery run's run is in flight = %d %s, want 409 naming steer", status, body)
	}
	s.control(map[string]any{"t": "run.cancel", "id": "c2", "session": sess}, nil)
	if code := bg.exit(); code != 0 {
		t.Errorf("orrery run whose run another client cancelled exited %d, want 0", code)
	}
	// Serialized, both get their run.
	r = run("--session", sess, "-p", "again")
	if r.code != 0 || !strings.Contains(r.stdout, "second answer") {
		t.Errorf("orrery run --session on the idle session = %d, stdout %q, stderr %q; want 0 and the answer", r.code, r.stdout, r.stderr)
	}
	r = run("--session", sess, "-p", "fail please")
	if r.code != 3 || !strings.Contains(r.stderr, "the scripted provider failed") {
		t.Errorf("orrery run with a failing model on a held dir = %d, stderr %q; want 3 and the error", r.code, r.stderr)
	}
	log := s.read(sess)
	checkLog(t, log.Frames, 4)

	// orrery watch follows the session over the pipe, frames as logged.
	w := start(t, bin, env, "watch", sess, "--since", "0", "--json", "--data", data)
	for i := range log.Frames {
		line := w.waitLine(w.outLines, "watch", "")
		if line != string(log.Frames[i]) {
			t.Errorf("orrery watch --json line %d = %s, want the logged frame %s", i, line, log.Frames[i])
		}
	}
	if err := w.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := w.exit(); code != 130 {
		t.Errorf("orrery watch exit code after SIGINT = %d, want 130 (interrupted)", code)
	}

	// A session that is not there is named in the CLI's words.
	r = orreryIn(t, bin, env, ws, "watch", "ses_nosuch", "--data", data)
	if r.code != 1 || !strings.Contains(r.stderr, "no session ses_nosuch on "+data+": list them with orrery sessions") || strings.Contains(r.stderr, "session.new") {
		t.Errorf("orrery watch ses_nosuch = %d, stderr %q; want 1 naming the session and orrery sessions, no protocol request", r.code, r.stderr)
	}

	if strings.Contains(s.stderr.String(), "UNIQUE constraint") {
		t.Errorf("the server logged a UNIQUE constraint failure:\n%s", s.stderr)
	}
	if code := s.stop(); code != 130 {
		t.Errorf("orrery serve exit code after SIGINT = %d, want 130 (interrupted)", code)
	}
}

// testRunHolds: orrery run holds a free data dir while it runs; a second
// orrery run on it is its client, and orrery serve is refused naming it.
// When its own run ends first, the holder waits for its client's run,
// saying so, and only then exits; both runs are in the log.
func testRunHolds(t *testing.T, bin string) {
	env := environ(t)
	data := t.TempDir()
	ws := t.TempDir()
	model := writeScript(t, filepath.Join(t.TempDir(), "script.json"),
		map[string]any{"text": []string{"first"}, "hang": true},
		map[string]any{"text": []string{"second"}, "hang": true},
	)
	cfgPath := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("[agent]\nmodel = %q\n", model)), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startIn(t, bin, env, ws, "run", "--config", cfgPath, "--data", data, "-p", "first")
	o := waitOwner(t, data)
	if o.PID != a.cmd.Process.Pid || o.Command != "orrery run" {
		t.Errorf("owner file = %+v, want orrery run (pid %d)", o, a.cmd.Process.Pid)
	}
	r := orrery(t, bin, env, "serve", "--listen", "127.0.0.1:0", "--data", data)
	if r.code != 1 || !strings.Contains(r.stderr, "in use by orrery run (pid "+strconv.Itoa(a.cmd.Process.Pid)) || !strings.Contains(r.stderr, pipePath(t, data)) {
		t.Errorf("orrery serve on a dir orrery run holds = %d, stderr %q; want 1 naming orrery run and its pipe", r.code, r.stderr)
	}
	cl := dialPipe(t, data)
	first := waitRunning(t, cl, 1)[0]

	b := startIn(t, bin, env, ws, "run", "--config", cfgPath, "--data", data, "-p", "second")
	var second protocol.SessionSummary
	for _, s := range waitRunning(t, cl, 2) {
		if s.ID != first.ID {
			second = s
		}
	}
	// Each run streamed its text before it is cancelled (running is not
	// enough: a run cancelled before its first delta prints nothing).
	waitLogged(t, cl, first.ID, `"delta":"first"`)
	waitLogged(t, cl, second.ID, `"delta":"second"`)
	// The holder's own run ends; its client's goes on, so it waits.
	if err := cl.Cancel(context.Background(), first.ID, ""); err != nil {
		t.Fatal(err)
	}
	a.waitLine(a.errLines, "run (the holder)", "waiting for")
	cl.Close() // the test's own client: only b keeps the holder now
	if !a.running() {
		t.Fatal("the holder exited while its client's run was in flight")
	}
	cl2, err := client.Dial(context.Background(), "pipe:"+pipePath(t, data), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl2.Cancel(context.Background(), second.ID, ""); err != nil {
		t.Fatal(err)
	}
	if code := b.exit(); code != 0 {
		t.Errorf("the client orrery run exited %d, want 0", code)
	}
	cl2.Close()
	if code := a.exit(); code != 0 {
		t.Errorf("the holding orrery run exited %d, want 0", code)
	}
	for name, p := range map[string]*proc{"holder": a, "client": b} {
		if !strings.Contains(p.stdout.String(), map[string]string{"holder": "first", "client": "second"}[name]) {
			t.Errorf("the %s printed %q, want its own run's text", name, p.stdout)
		}
	}
	if o, _ := datadir.ReadOwner(data); o != nil {
		t.Errorf("owner file after both exited = %+v, want none", o)
	}
	// Both runs are in the log: the dir is free now, and sessions takes it.
	r = orrery(t, bin, env, "sessions", "--json", "--data", data)
	for _, id := range []string{first.ID, second.ID} {
		if r.code != 0 || !strings.Contains(r.stdout, `"id":"`+id+`"`) {
			t.Errorf("orrery sessions --json = %d %q (stderr %q), want %s listed", r.code, r.stdout, r.stderr, id)
		}
	}
}

// testRunWaits: an orrery run in a directory another orrery run's kernel
// does not take as a workspace waits for that run to end, saying so, then
// holds the dir and runs.
func testRunWaits(t *testing.T, bin string) {
	env := environ(t)
	data := t.TempDir()
	model := writeScript(t, filepath.Join(t.TempDir(), "script.json"),
		map[string]any{"text": []string{"first"}, "hang": true},
	)
	a := startIn(t, bin, env, t.TempDir(), "run", "--model", model, "--data", data, "-p", "first")
	waitOwner(t, data)
	b := startIn(t, bin, env, t.TempDir(), "run", "--model", "offline", "--data", data, "-p", "later")
	b.waitLine(b.errLines, "run (waiting)", "this run starts when that one ends")
	cl := dialPipe(t, data)
	first := waitRunning(t, cl, 1)[0]
	if err := cl.Cancel(context.Background(), first.ID, ""); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if code := a.exit(); code != 0 {
		t.Errorf("the first orrery run exited %d, want 0", code)
	}
	if code := b.exit(); code != 0 || !strings.Contains(b.stdout.String(), `You said: "later"`) {
		t.Errorf("the waiting orrery run = %d, stdout %q; want 0 and its answer once the dir was free", code, b.stdout)
	}
}

// orreryIn runs the binary to completion in dir.
func orreryIn(t *testing.T, bin string, env []string, dir string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdin = strings.NewReader("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("orrery %q: %v", args, err)
	}
	return r
}

// testClientFullDisk: orrery serve holds a data dir on a small tmpfs that
// fills up. An orrery run that is its client, whose run cannot be logged,
// ends with the run's seq-0 RUN_ERROR store_failed (exit 3, saying to free
// space) rather than waiting forever; the next one is refused naming the
// fix (exit 1); orrery sessions still lists the session; once there is
// room the session runs again.
func testClientFullDisk(t *testing.T, bin string) {
	env := environ(t)
	mnt := testdisk.Tmpfs(t, 8<<20)
	data := filepath.Join(mnt, "data")
	ws := t.TempDir()
	srv := serveIn(t, bin, env, ws, "--data", data, "--model", "offline")
	waitOwner(t, data)
	run := func(args ...string) result {
		t.Helper()
		return orreryIn(t, bin, env, ws, append([]string{"run", "--data", data}, args...)...)
	}
	if code, body := httpGet(t, srv.url+"/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz with room = %d %s; want 200", code, body)
	}
	if r := run("-p", "hello"); r.code != 0 {
		t.Fatalf("orrery run -p hello = %d, stderr %q; want 0", r.code, r.stderr)
	}
	list, err := dialPipe(t, data).Sessions(context.Background())
	if err != nil || len(list) != 1 {
		t.Fatalf("Sessions() = %v, %v; want the one session", list, err)
	}
	id := list[0].ID

	fill := testdisk.Fill(t, mnt)
	// Room for the prompt's commit, not for the answer, which echoes the
	// prompt word by word: the run starts, then its frames fail.
	fill.Leave(400 << 10)
	big := strings.Repeat("word ", 20_000)
	r := run("--session", id, "-p", big)
	if r.code != 3 || !strings.Contains(r.stderr, "store_failed") || !strings.Contains(r.stderr, "free disk space") {
		t.Errorf("orrery run on a full disk = %d, stderr %q; want 3 (the run failed), store_failed and the fix", r.code, r.stderr)
	}
	r = run("--session", id, "-p", "again")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot be written") || !strings.Contains(r.stderr, "free disk space") {
		t.Errorf("orrery run after the failure = %d, stderr %q; want 1, refused naming the fix", r.code, r.stderr)
	}
	if code, body := httpGet(t, srv.url+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, id) || !strings.Contains(body, "free disk space") {
		t.Errorf("GET /readyz on the full disk = %d %s; want 503 naming the session and the fix", code, body)
	}
	if _, body := httpGet(t, srv.url+"/metrics"); !regexp.MustCompile(`(?m)^orrery_store_errors_total [1-9]`).MatchString(body) || !regexp.MustCompile(`(?m)^orrery_sessions_broken 1$`).MatchString(body) {
		t.Errorf("GET /metrics on the full disk counts no store error or broken session:\n%s", grepLines(body, "orrery_store_errors_total", "orrery_sessions_broken"))
	}
	r = orreryIn(t, bin, env, ws, "sessions", "--data", data)
	if r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Errorf("orrery sessions on the full disk = %d, stdout %q, stderr %q; want 0 and the session", r.code, r.stdout, r.stderr)
	}

	fill.Free()
	if r := run("--session", id, "-p", "back"); r.code != 0 || !strings.Contains(r.stdout, `You said: "back"`) {
		t.Errorf("orrery run with room again = %d, stdout %q, stderr %q; want 0 and the answer", r.code, r.stdout, r.stderr)
	}
	if code, body := httpGet(t, srv.url+"/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz once the store takes appends again = %d %s; want 200", code, body)
	}
}

// httpGet is one GET from this machine: its status and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// grepLines are the lines of s that start with one of prefixes.
func grepLines(s string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

// pipePath is datadir.PipePath, failing the test on an error.
func pipePath(t testing.TB, dir string) string {
	t.Helper()
	p, err := datadir.PipePath(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testDeepDataDir serves a data dir too deep for a Unix socket inside it:
// the pipe goes in the user's private directory under /tmp instead, and
// orrery run and orrery sessions on that dir find the holder there.
func testDeepDataDir(t *testing.T, bin string) {
	env := environ(t)
	ws := t.TempDir()
	data := filepath.Join(t.TempDir(), strings.Repeat("deep", 15), strings.Repeat("er", 20), "data")
	s := serveIn(t, bin, env, ws, "--data", data, "--model", "offline")
	o := waitOwner(t, data)
	if want := pipePath(t, data); o.Pipe != want || strings.HasPrefix(o.Pipe, data) {
		t.Errorf("owner file's pipe = %q, want %q, outside the data dir", o.Pipe, want)
	}
	r := orreryIn(t, bin, env, ws, "run", "--data", data, "--model", "offline", "-p", "hello")
	if r.code != 0 || !strings.Contains(r.stdout, `You said: "hello"`) {
		t.Errorf("orrery run on the deep data dir = %d, stdout %q, stderr %q; want the holder's answer", r.code, r.stdout, r.stderr)
	}
	r = orreryIn(t, bin, env, ws, "sessions", "--data", data, "--json")
	if r.code != 0 || !strings.Contains(r.stdout, "ses_") {
		t.Errorf("orrery sessions on the deep data dir = %d, stdout %q, stderr %q; want the run's session", r.code, r.stdout, r.stderr)
	}
	// SIGTERM, how a service manager stops a server, is a clean stop.
	if code := s.stopWith(syscall.SIGTERM); code != 0 {
		t.Errorf("orrery serve exit code after SIGTERM = %d, want 0", code)
	}
	if _, err := os.Stat(o.Pipe); err == nil {
		t.Errorf("the pipe %s is left after serve stopped", o.Pipe)
	}
}
