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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/internal/logbuf"
)

const waitLimit = 20 * time.Second

// TestBinary builds orrery once and runs every test of the built binary
// against it.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "orrery")
	build := exec.Command("go", "build", "-o", bin, "github.com/getorrery/orrery/cmd/orrery")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build = %v\n%s", err, out)
	}
	t.Run("Crash", func(t *testing.T) { t.Parallel(); testCrash(t, bin) })
	t.Run("CrashJetStream", func(t *testing.T) { t.Parallel(); testCrashJetStream(t, bin) })
	t.Run("Run", func(t *testing.T) { t.Parallel(); testRun(t, bin) })
	t.Run("Usage", func(t *testing.T) { t.Parallel(); testUsage(t, bin) })
	t.Run("ServeAgentTools", func(t *testing.T) { t.Parallel(); testServeAgentTools(t, bin) })
	t.Run("Ext", func(t *testing.T) { t.Parallel(); testExt(t, bin) })
	t.Run("TwoServes", func(t *testing.T) { t.Parallel(); testTwoServes(t, bin) })
	t.Run("ClientsOfServe", func(t *testing.T) { t.Parallel(); testClientsOfServe(t, bin) })
	t.Run("RunHolds", func(t *testing.T) { t.Parallel(); testRunHolds(t, bin) })
	t.Run("RunWaits", func(t *testing.T) { t.Parallel(); testRunWaits(t, bin) })
	t.Run("ClientFullDisk", func(t *testing.T) { t.Parallel(); testClientFullDisk(t, bin) })
	t.Run("DeepDataDir", func(t *testing.T) { t.Parallel(); testDeepDataDir(t, bin) })
	t.Run("Readme", func(t *testing.T) { t.Parallel(); testReadme(t, bin) })
	t.Run("Docs", func(t *testing.T) { t.Parallel(); testDocs(t, bin) })
	t.Run("Metrics", func(t *testing.T) { t.Parallel(); testMetrics(t, bin) })
	t.Run("Traces", func(t *testing.T) { t.Parallel(); testTraces(t, bin) })
	t.Run("TracesFromConfig", func(t *testing.T) { t.Parallel(); testTracesFromConfig(t, bin) })
	t.Run("ReadyzLostLock", func(t *testing.T) { t.Parallel(); testReadyzLostLock(t, bin) })
	t.Run("ReadyzNoLeases", func(t *testing.T) { t.Parallel(); testReadyzNoLeases(t, bin) })
	t.Run("Failover", func(t *testing.T) { t.Parallel(); testFailover(t, bin) })
	t.Run("AnyNode", func(t *testing.T) { t.Parallel(); testAnyNode(t, bin) })
	t.Run("ConsentElsewhere", func(t *testing.T) { t.Parallel(); testConsentElsewhere(t, bin) })
	t.Run("KillOwnerTenTimes", func(t *testing.T) { t.Parallel(); testKillOwnerTenTimes(t, bin) })
	t.Run("Partition", func(t *testing.T) { t.Parallel(); testPartition(t, bin) })
	t.Run("TokensAcrossNodes", func(t *testing.T) { t.Parallel(); testTokensAcrossNodes(t, bin) })
	t.Run("IdleMoves", func(t *testing.T) { t.Parallel(); testIdleMoves(t, bin) })
	t.Run("EmbeddedCluster", func(t *testing.T) { t.Parallel(); testEmbeddedCluster(t, bin) })
	t.Run("ExtOnOwner", func(t *testing.T) { t.Parallel(); testExtOnOwner(t, bin) })
}

// environ is the environment for the binary: the test's, without any
// ORRERY_ variable and with a home of its own, so no user config is read.
func environ(t *testing.T) []string {
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "ORRERY_"), name == "HOME", strings.HasPrefix(name, "XDG_"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_DATA_HOME="+filepath.Join(home, "data"))
}

// writeScript writes a script model file at path and returns its spec.
func writeScript(t *testing.T, path string, turns ...map[string]any) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"turns": turns})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return "script:" + path
}

// result is how one run of the binary ended.
type result struct {
	code           int
	stdout, stderr string
}

// orrery runs the binary to completion.
func orrery(t *testing.T, bin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
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

// server is a running orrery serve.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	stderr *logbuf.Buffer
	waited chan struct{}
	err    error // from Wait, once waited is closed
	// metrics is the address of --metrics-listen, when it said one
	// before "listening on".
	metrics string
}

// serve starts orrery serve and waits for its "listening on" line.
func serve(t *testing.T, bin string, env []string, args ...string) *server {
	t.Helper()
	return serveIn(t, bin, env, "", args...)
}

// serveIn is serve in the directory dir ("" for the test's own).
func serveIn(t *testing.T, bin string, env []string, dir string, args ...string) *server {
	t.Helper()
	s, wait := startOrrery(t, bin, env, dir, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	wait()
	return s
}

// startOrrery starts orrery with args (a serve or node command) in dir, and
// returns it with the func that waits for its "listening on" line: a
// node of a cluster of embedded NATS servers waits for the others before
// it listens, so they must all be started before any is waited for.
func startOrrery(t *testing.T, bin string, env []string, dir string, args ...string) (*server, func()) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = env, dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, stderr: &logbuf.Buffer{}, waited: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start orrery %s: %v", args[0], err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "metrics on "); ok {
				s.metrics = addr // written before "listening on" is sent
			}
			if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				lines <- addr
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() { s.err = cmd.Wait(); close(s.waited) }()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("orrery %s stderr:\n%s", args[0], s.stderr.String())
		}
	})
	return s, func() {
		t.Helper()
		select {
		case s.url = <-lines:
		case <-s.waited:
			t.Fatalf("orrery %s exited (%v) before listening:\n%s", args[0], s.err, s.stderr.String())
		case <-time.After(waitLimit):
			t.Fatalf("orrery %s did not print \"listening on http://ADDR\":\n%s", args[0], s.stderr.String())
		}
		if !strings.HasPrefix(s.url, "http://127.0.0.1:") {
			t.Fatalf("orrery %s listens on %q, want http://127.0.0.1:PORT", args[0], s.url)
		}
	}
}

// kill ends the process with SIGKILL and waits for it.
func (s *server) kill() {
	select {
	case <-s.waited:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	<-s.waited
}

// stop ends the process with SIGINT and returns its exit code.
func (s *server) stop() int {
	s.t.Helper()
	return s.stopWith(os.Interrupt)
}

// stopWith ends the process with sig and returns its exit code.
func (s *server) stopWith(sig os.Signal) int {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal orrery serve: %v", err)
	}
	select {
	case <-s.waited:
	case <-time.After(waitLimit):
		s.t.Errorf("orrery serve did not exit within %v of %v", waitLimit, sig)
		s.kill()
	}
	var ee *exec.ExitError
	if errors.As(s.err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// control sends one request to POST /control and decodes the 200 reply.
func (s *server) control(req map[string]any, out any) {
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
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("POST /control %s = %d %s, want 200", body, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			s.t.Fatalf("POST /control %s: reply %s: %v", body, data, err)
		}
	}
}

type readReply struct {
	Frames []json.RawMessage `json:"frames"`
	Head   uint64            `json:"head"`
}

func (s *server) read(session string) readReply {
	s.t.Helper()
	var r readReply
	s.control(map[string]any{"t": "session.read", "id": "r", "session": session, "since": 0, "limit": 10000}, &r)
	return r
}

// seen is one frame received on GET /events.
type seen struct {
	seq  uint64
	typ  string
	data []byte
}

type frameHead struct {
	Type     string `json:"type"`
	RunID    string `json:"runId"`
	Code     string `json:"code"`
	Metadata struct {
		Orrery struct {
			Seq uint64 `json:"seq"`
		} `json:"orrery"`
	} `json:"metadata"`
}

func decode(t *testing.T, data []byte) frameHead {
	t.Helper()
	var f frameHead
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("frame %s: %v", data, err)
	}
	return f
}

// events streams GET /events?session=…&since=… and calls fn for each
// frame until fn returns false. It returns the frames seen.
func (s *server) events(session string, since uint64, fn func(seen) bool) []seen {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/events?session=%s&since=%d", s.url, session, since), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("GET /events: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("GET /events = %d %s, want 200", resp.StatusCode, body)
	}
	br := bufio.NewReader(resp.Body)
	var out []seen
	var id string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			s.t.Fatalf("GET /events after %d frames: %v", len(out), err)
		}
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id: "))
		case strings.HasPrefix(line, "data: "):
			data := []byte(strings.TrimSuffix(strings.TrimPrefix(line, "data: "), "\n"))
			f := decode(s.t, data)
			if id != strconv.FormatUint(f.Metadata.Orrery.Seq, 10) {
				s.t.Errorf("frame %s has id %q, want its seq", data, id)
			}
			id = ""
			sn := seen{seq: f.Metadata.Orrery.Seq, typ: f.Type, data: data}
			out = append(out, sn)
			if !fn(sn) {
				return out
			}
		}
	}
}

// testCrash kills orrery serve with SIGKILL in the middle of a run and
// checks what the restarted server makes of the log.
func testCrash(t *testing.T, bin string) { testCrashWith(t, bin) }

// testCrashJetStream is testCrash with the log in the NATS server the
// process runs inside itself: killed with it, restarted with it.
func testCrashJetStream(t *testing.T, bin string) {
	testCrashWith(t, bin, "--store", "jetstream", "--nats-embed", t.TempDir())
}

func testCrashWith(t *testing.T, bin string, storeArgs ...string) {
	env := environ(t)
	data := t.TempDir()
	scriptPath := filepath.Join(t.TempDir(), "script.json")
	chunks := make([]string, 200)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("chunk%d ", i)
	}
	model := writeScript(t, scriptPath, map[string]any{"text": chunks, "delay_ms": 50})

	s := serve(t, bin, env, append([]string{"--data", data, "--model", model}, storeArgs...)...)
	var created struct{ Session string }
	s.control(map[string]any{"t": "session.new", "id": "1"}, &created)
	sess := created.Session
	var sent struct {
		RunID  string `json:"runId"`
		Target string `json:"target"`
	}
	s.control(map[string]any{"t": "run.send", "id": "2", "session": sess, "input": map[string]any{"text": "write a lot"}}, &sent)
	if sent.RunID == "" || sent.Target != "run" {
		t.Fatalf("run.send reply = %+v, want a runId and target run", sent)
	}
	texts := 0
	before := s.events(sess, 0, func(f seen) bool {
		if f.typ == "TEXT_MESSAGE_CONTENT" {
			texts++
		}
		return texts < 5
	})
	s.kill()

	// The restarted server serves the fast turn that follows.
	writeScript(t, scriptPath, map[string]any{"text": []string{"fresh ", "answer"}})
	s = serve(t, bin, env, append([]string{"--data", data, "--model", model}, storeArgs...)...)
	log := s.read(sess)
	t.Logf("saw %d frames before the kill; the restarted server logs %d", len(before), len(log.Frames))

	// Every frame seen before the kill is in the log, byte for byte.
	for i, f := range before {
		if f.seq != uint64(i+1) {
			t.Fatalf("frame %d seen before the kill has seq %d, want %d", i, f.seq, i+1)
		}
		if f.seq > uint64(len(log.Frames)) || !bytes.Equal(log.Frames[f.seq-1], f.data) {
			t.Errorf("frame seq %d seen before the kill = %s, want it in the log unchanged", f.seq, f.data)
		}
	}
	// Seqs are 1..head.
	if log.Head != uint64(len(log.Frames)) {
		t.Errorf("session.read head = %d with %d frames, want equal", log.Head, len(log.Frames))
	}
	for i, d := range log.Frames {
		if seq := decode(t, d).Metadata.Orrery.Seq; seq != uint64(i+1) {
			t.Fatalf("logged frame %d has seq %d, want %d (gap or duplicate)", i, seq, i+1)
		}
	}
	// The run ends with one RUN_ERROR interrupted, its last frame.
	started := -1
	var terminals []frameHead
	for i, d := range log.Frames {
		f := decode(t, d)
		if f.Type == "RUN_STARTED" && f.RunID == sent.RunID {
			started = i
		}
		if started >= 0 && (f.Type == "RUN_ERROR" || f.Type == "RUN_FINISHED") {
			terminals = append(terminals, f)
		}
	}
	last := decode(t, log.Frames[len(log.Frames)-1])
	switch {
	case started < 0:
		t.Fatalf("the log has no RUN_STARTED of run %s", sent.RunID)
	case len(terminals) != 1 || last.Type != "RUN_ERROR" || last.Code != "interrupted":
		t.Errorf("run %s ends with %+v (last frame %s %q), want exactly one RUN_ERROR interrupted, last", sent.RunID, terminals, last.Type, last.Code)
	case len(log.Frames) <= len(before):
		t.Errorf("the log has %d frames, want more than the %d seen before the kill", len(log.Frames), len(before))
	}
	var list struct {
		Sessions []struct {
			ID      string `json:"id"`
			Head    uint64 `json:"head"`
			Running bool   `json:"running"`
		} `json:"sessions"`
	}
	s.control(map[string]any{"t": "session.list", "id": "3"}, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != sess || list.Sessions[0].Running || list.Sessions[0].Head != log.Head {
		t.Errorf("session.list = %+v, want %s idle at head %d", list.Sessions, sess, log.Head)
	}

	// A new run works and its seqs continue after the RUN_ERROR.
	var again struct {
		RunID string `json:"runId"`
	}
	s.control(map[string]any{"t": "run.send", "id": "4", "session": sess, "input": map[string]any{"text": "again"}}, &again)
	after := s.events(sess, log.Head, func(f seen) bool { return f.typ != "RUN_FINISHED" && f.typ != "RUN_ERROR" })
	if len(after) == 0 || after[0].seq != log.Head+1 {
		t.Fatalf("the new run's first frame = %+v, want seq %d", after, log.Head+1)
	}
	if f := decode(t, after[len(after)-1].data); f.Type != "RUN_FINISHED" || f.RunID != again.RunID {
		t.Errorf("the new run ended with %s of run %s, want RUN_FINISHED of %s", f.Type, f.RunID, again.RunID)
	}
	final := s.read(sess)
	for i, d := range final.Frames {
		if seq := decode(t, d).Metadata.Orrery.Seq; seq != uint64(i+1) {
			t.Fatalf("logged frame %d has seq %d after the new run, want %d", i, seq, i+1)
		}
		if i < len(log.Frames) && !bytes.Equal(d, log.Frames[i]) {
			t.Errorf("frame seq %d changed after the new run: %s, want %s", i+1, d, log.Frames[i])
		}
	}

	if code := s.stop(); code != 130 {
		t.Errorf("orrery serve exit code after SIGINT = %d, want 130 (interrupted)", code)
	}
}

// testRun drives orrery run and orrery sessions on one data dir.
func testRun(t *testing.T, bin string) {
	env := environ(t)
	data := t.TempDir()

	r := orrery(t, bin, env, "run", "-p", "hello", "--data", data)
	if r.code != 0 || !strings.Contains(r.stdout, `You said: "hello"`) {
		t.Errorf("orrery run -p hello = %d, stdout %q, stderr %q; want 0 and the offline answer", r.code, r.stdout, r.stderr)
	}

	r = orrery(t, bin, env, "run", "--json", "-p", "echo hi", "--data", data)
	if r.code != 0 {
		t.Fatalf("orrery run --json = %d, stderr %q, want 0", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	var thread string
	var echoed bool
	for i, line := range lines {
		f := decode(t, []byte(line))
		if f.Metadata.Orrery.Seq != uint64(i+1) {
			t.Errorf("orrery run --json line %d has seq %d, want %d", i, f.Metadata.Orrery.Seq, i+1)
		}
		if f.Type == "RUN_STARTED" {
			var rs struct {
				ThreadID string `json:"threadId"`
			}
			_ = json.Unmarshal([]byte(line), &rs)
			thread = rs.ThreadID
		}
		if f.Type == "TOOL_CALL_RESULT" && strings.Contains(line, `"content":"hi"`) {
			echoed = true
		}
	}
	if last := decode(t, []byte(lines[len(lines)-1])); last.Type != "RUN_FINISHED" {
		t.Errorf("orrery run --json last line is %s, want RUN_FINISHED", last.Type)
	}
	if !echoed || thread == "" {
		t.Errorf("orrery run --json -p \"echo hi\" printed no echo result %q or no RUN_STARTED", r.stdout)
	}

	model := writeScript(t, filepath.Join(t.TempDir(), "script.json"),
		map[string]any{"text": []string{"partial "}, "error": "the scripted provider failed"})
	r = orrery(t, bin, env, "run", "--model", model, "-p", "fail please", "--data", data)
	if r.code != 3 || !strings.Contains(r.stderr, "the scripted provider failed") {
		t.Errorf("orrery run with a failing model = %d, stderr %q; want 3 and the error on stderr", r.code, r.stderr)
	}

	r = orrery(t, bin, env, "sessions", "--json", "--data", data)
	if r.code != 0 {
		t.Fatalf("orrery sessions --json = %d, stderr %q, want 0", r.code, r.stderr)
	}
	var list struct {
		Sessions []struct {
			ID      string `json:"id"`
			Head    uint64 `json:"head"`
			Running bool   `json:"running"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("orrery sessions --json printed %q: %v", r.stdout, err)
	}
	found := false
	for _, s := range list.Sessions {
		if s.Running {
			t.Errorf("orrery sessions --json: %s is running, want every session idle", s.ID)
		}
		if s.ID == thread {
			found = true
			if s.Head != uint64(len(lines)) {
				t.Errorf("orrery sessions --json: %s head %d, want %d", s.ID, s.Head, len(lines))
			}
		}
	}
	if len(list.Sessions) != 3 || !found {
		t.Errorf("orrery sessions --json = %s, want the 3 sessions of the runs, %s among them", r.stdout, thread)
	}

	// --session continues a session.
	r = orrery(t, bin, env, "run", "--json", "--session", thread, "-p", "hello again", "--data", data)
	more := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if first := decode(t, []byte(more[0])); r.code != 0 || first.Metadata.Orrery.Seq != uint64(len(lines)+1) {
		t.Errorf("orrery run --session = %d, first seq %d, stderr %q; want 0 and seq %d", r.code, first.Metadata.Orrery.Seq, r.stderr, len(lines)+1)
	}
}

// testUsage checks help and command-line mistakes.
func testUsage(t *testing.T, bin string) {
	env := environ(t)
	data := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string // in stdout or stderr
	}{
		{[]string{"--help"}, 0, "Usage: orrery COMMAND"},
		{[]string{"help"}, 0, "Usage: orrery COMMAND"},
		{[]string{"help", "run"}, 0, "Usage: orrery run"},
		{[]string{"serve", "--help"}, 0, "Usage: orrery serve"},
		{[]string{"run", "--help"}, 0, "Usage: orrery run"},
		{[]string{"sessions", "--help"}, 0, "Usage: orrery sessions"},
		{[]string{"explode"}, 2, "explode"},
		{[]string{"run", "--data", data}, 2, "prompt"},
		{[]string{"run", "--no-such-flag"}, 2, "no-such-flag"},
		{[]string{"sessions", "extra", "--data", data}, 2, "extra"},
		{[]string{"run", "-p", "hi", "--model", "nosuch:model", "--data", data}, 2, "nosuch"},
	} {
		r := orrery(t, bin, env, tc.args...)
		out := r.stdout + r.stderr
		if r.code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("orrery %q = %d, output %q; want %d and %q", tc.args, r.code, out, tc.code, tc.want)
		}
		if tc.code == 0 && !strings.Contains(out, "--") && len(tc.args) > 1 {
			t.Errorf("orrery %q printed no flags: %q", tc.args, out)
		}
	}
	// Listing sessions of a data dir that is not there makes none: a typo
	// in --data is named, not hidden behind an empty new store.
	missing := filepath.Join(data, "typo")
	if r := orrery(t, bin, env, "sessions", "--data", missing); r.code != 1 || !strings.Contains(r.stderr, "no data dir at "+missing) {
		t.Errorf("orrery sessions --data MISSING = %d, stderr %q; want 1 naming the missing dir", r.code, r.stderr)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("orrery sessions made the data dir %s", missing)
	}
	// A flag mistake is named in a line, with where the usage is: not the
	// whole usage.
	r := orrery(t, bin, env, "run", "--no-such-flag")
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) > 2 || !strings.Contains(r.stderr, `Run "orrery run --help" for its usage.`) {
		t.Errorf("orrery run --no-such-flag printed %d lines: %q; want the mistake and where the usage is", len(lines), r.stderr)
	}
}
