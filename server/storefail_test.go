package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/internal/logbuf"
	"github.com/getorrery/orrery/internal/testdisk"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
)

// failTimeout bounds the streams of the store-failure tests; it only guards
// against a hang.
const failTimeout = 90 * time.Second

// failRig is a kernel on an SQLite file in dir, whose default model is m,
// behind a real listener and a pipe.
type failRig struct {
	h    *harness
	sock string
}

func startFailRig(t *testing.T, dir string, m *testdisk.Flood) *failRig {
	t.Helper()
	logs := &logbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	})
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatalf("sqlite.Open() = %v, want nil", err)
	}
	k := kernel.New(kernel.Config{Store: st, DefaultModel: "flood", DebugActor: true, Logger: log, Models: m.Models(models.Resolve)})
	if err := k.Open(context.Background()); err != nil {
		st.Close()
		t.Fatalf("kernel.Open() = %v, want nil", err)
	}
	srv := server.New(server.Config{Kernel: k, KeepAlive: testKeepAlive, Logger: log})
	ts := httptest.NewServer(srv)
	sockDir, err := os.MkdirTemp("", "orr")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "p.sock")
	ln, err := server.ListenPipe(sock)
	if err != nil {
		t.Fatal(err)
	}
	pipeCtx, stopPipe := context.WithCancel(context.Background())
	pipeDone := make(chan error, 1)
	go func() { pipeDone <- srv.ServePipeListener(pipeCtx, ln) }()
	h := &harness{url: ts.URL, client: ts.Client(), dbPath: st.Path()}
	h.shut = func(ctx context.Context) error {
		err := srv.Close(ctx)
		stopPipe()
		<-pipeDone
		ts.Close()
		err = errors.Join(err, k.Close(ctx), st.Close())
		os.RemoveAll(sockDir)
		return err
	}
	t.Cleanup(func() {
		if err := h.shutdown(10 * time.Second); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &failRig{h: h, sock: sock}
}

// openStream opens GET path as an SSE stream that lives failTimeout.
func (r *failRig) openStream(t *testing.T, path string) *sse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.h.url+path, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	resp, err := r.h.client.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET %s = %v, %v, want a stream", path, resp, err)
	}
	s := &sse{t: t, resp: resp, br: bufio.NewReaderSize(resp.Body, 1<<20), cancel: cancel}
	t.Cleanup(s.close)
	return s
}

// runResult is what a POST /run client got: every SSE block, once the
// response ended.
type runResult struct {
	status int
	events []sseEvent
	err    error
}

// postRun starts POST /run for a new run of session and returns the channel
// its whole response arrives on.
func (r *failRig) postRun(session, runID, text string) <-chan runResult {
	out := make(chan runResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), failTimeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.h.url+"/run", strings.NewReader(runInput(session, runID, "msg-"+runID, text)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := r.h.client.Do(req)
		if err != nil {
			out <- runResult{err: err}
			return
		}
		defer resp.Body.Close()
		res := runResult{status: resp.StatusCode}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			res.err = fmt.Errorf("POST /run = %d %s", resp.StatusCode, body)
			out <- res
			return
		}
		s := &sse{resp: resp, br: bufio.NewReaderSize(resp.Body, 1<<20), cancel: cancel}
		for {
			ev, err := s.next()
			if err != nil {
				if !strings.Contains(err.Error(), io.EOF.Error()) {
					res.err = err
				}
				out <- res
				return
			}
			res.events = append(res.events, ev)
		}
	}()
	return out
}

// peerFrames reads a WS or pipe connection's frames of session until a
// RUN_ERROR or RUN_FINISHED, skipping replies.
func peerFrames(t *testing.T, p *txPeer, session string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for {
		m, raw, err := p.next(failTimeout)
		if err != nil {
			t.Fatalf("%s: after %d frames: %v", p.kind, len(out), err)
		}
		if m["t"] != nil {
			continue
		}
		meta, _ := m["metadata"].(map[string]any)
		orr, _ := meta["orrery"].(map[string]any)
		if orr["session"] != session {
			t.Fatalf("%s: frame %.200s lacks metadata.orrery.session %s", p.kind, raw, session)
		}
		out = append(out, m)
		if m["type"] == "RUN_ERROR" || m["type"] == "RUN_FINISHED" {
			return out
		}
	}
}

func seqOf(m map[string]any) float64 {
	meta, _ := m["metadata"].(map[string]any)
	orr, _ := meta["orrery"].(map[string]any)
	seq, _ := orr["seq"].(float64)
	return seq
}

// checkFailedFrames checks what one client saw of a run whose store
// failed: logged frames with seqs, then with seq 0 the TEXT_MESSAGE_END of
// its open message and one RUN_ERROR store_failed, last.
func checkFailedFrames(t *testing.T, who string, types []string, seqs []float64, codes []string) {
	t.Helper()
	n := len(types)
	if n < 3 || types[n-1] != "RUN_ERROR" || types[n-2] != "TEXT_MESSAGE_END" {
		t.Errorf("%s got %v, want the run's frames then TEXT_MESSAGE_END and RUN_ERROR", who, types[max(0, n-4):])
		return
	}
	if seqs[n-1] != 0 || seqs[n-2] != 0 {
		t.Errorf("%s: the closer and RUN_ERROR have seqs %v, %v, want 0: they could not be logged", who, seqs[n-2], seqs[n-1])
	}
	if codes[n-1] != kernel.CodeStoreFailed {
		t.Errorf("%s: RUN_ERROR code %q, want %q", who, codes[n-1], kernel.CodeStoreFailed)
	}
	terminals := 0
	for i, typ := range types {
		if typ == "RUN_ERROR" || typ == "RUN_FINISHED" {
			terminals++
		}
		if i < n-2 && seqs[i] == 0 {
			t.Errorf("%s: %s at %d has seq 0, want only the run's end out of order", who, typ, i)
		}
	}
	if terminals != 1 {
		t.Errorf("%s got %d terminal events, want exactly 1", who, terminals)
	}
}

// breakDisk is how a test breaks the disk under the log; fix undoes it
// while the server runs, or is nil when only a restart after repair can.
type breakDisk struct {
	dir   string
	fail  func()
	fix   func()
	hint  string
	after func(t *testing.T) // repairs the disk while nothing runs (read-only case)
}

// TestStoreFailureTransports breaks the disk under a session's log during
// a run that an SSE client, a WebSocket client, a pipe client, an ACP
// browser (/acp/ws), an OpenAI-chunks stream and the run's own POST /run
// follow: each gets exactly one terminal, RUN_ERROR store_failed with seq 0
// (and no SSE id), and the POST /run stream closes after it; the session is
// not running, run.send and POST /run are refused naming the fix, reads
// work. On a full disk, freeing space lets the next run.send run; on a
// read-only one, a restart after repair closes the run as interrupted. The
// log never reuses a seq a client saw.
func TestStoreFailureTransports(t *testing.T) {
	t.Run("full", func(t *testing.T) {
		dir := testdisk.Tmpfs(t, 24<<20)
		var fill *testdisk.Filler
		testStoreFailure(t, breakDisk{dir: dir, hint: "free disk space",
			fail: func() { fill = testdisk.Fill(t, dir); fill.Leave(1 << 20) },
			fix:  func() { fill.Free() }})
	})
	t.Run("read-only", func(t *testing.T) {
		disk := testdisk.NewExt4(t, 64<<20)
		testStoreFailure(t, breakDisk{dir: disk.Dir, hint: "check the disk",
			fail:  disk.Fail,
			after: func(t *testing.T) { disk.Repair() }})
	})
}

func testStoreFailure(t *testing.T, disk breakDisk) {
	m := testdisk.NewFlood(true)
	r := startFailRig(t, disk.dir, m)
	var created struct {
		Session string `json:"session"`
	}
	r.h.control(t, map[string]any{"t": "session.new", "id": "n"}, &created)
	id := created.Session

	events := r.openStream(t, "/events?session="+id+"&since=0")
	chunks := r.openStream(t, "/events?session="+id+"&since=0&stream_mode=openai")
	peers := map[string]*txPeer{"ws": txMustDialWS(t, r.h.url, "", nil), "pipe": txDialPipe(t, r.sock)}
	for kind, p := range peers {
		p.send(t, `{"t":"hello","id":"h","client":"test"}`)
		if m := p.replyTo(t, "h"); m["ok"] != true {
			t.Fatalf("%s: hello = %v", kind, m)
		}
		p.send(t, fmt.Sprintf(`{"t":"session.attach","id":"a","session":%q,"since":0}`, id))
		if m := p.replyTo(t, "a"); m["ok"] != true {
			t.Fatalf("%s: attach = %v", kind, m)
		}
	}
	browser := (&oriHarness{url: r.h.url}).browser(t, id)
	browser.next()

	run := r.postRun(id, "run-1", "flood")
	// Once the answer's first text is out, the disk breaks and the answer
	// floods the store.
	var seen []sseEvent
	var seenFrames []frame
	for {
		ev, f := events.must()
		seen, seenFrames = append(seen, ev), append(seenFrames, f)
		if f.Type == "TEXT_MESSAGE_CONTENT" {
			break
		}
	}
	disk.fail()
	m.Release()

	// GET /events.
	evs, fs := events.until(func(f frame) bool { return f.terminal() })
	seen, seenFrames = append(seen, evs...), append(seenFrames, fs...)
	var types, codes []string
	var seqs []float64
	for _, f := range seenFrames {
		seq, _ := f.seq()
		types, seqs, codes = append(types, f.Type), append(seqs, float64(seq)), append(codes, f.Code)
	}
	checkFailedFrames(t, "GET /events", types, seqs, codes)
	if last := seenFrames[len(seenFrames)-1]; !strings.Contains(last.Message, disk.hint) || !strings.Contains(last.Message, "send the prompt again") {
		t.Errorf("RUN_ERROR message %q, want it to say %q and to send the prompt again", last.Message, disk.hint)
	}

	// POST /run: the same end, then the response ends.
	res := <-run
	if res.err != nil {
		t.Fatalf("POST /run: %v", res.err)
	}
	types, seqs, codes = nil, nil, nil
	for _, ev := range res.events {
		if ev.comment != "" {
			continue
		}
		f := decodeFrame(t, ev.data)
		seq, _ := f.seq()
		if seq == 0 && ev.hasID {
			t.Errorf("POST /run: a seq-0 frame has id %q, want none", ev.id)
		}
		types, seqs, codes = append(types, f.Type), append(seqs, float64(seq)), append(codes, f.Code)
	}
	checkFailedFrames(t, "POST /run", types, seqs, codes)

	// WebSocket and pipe.
	for kind, p := range peers {
		got := peerFrames(t, p, id)
		types, seqs, codes = nil, nil, nil
		for _, m := range got {
			code, _ := m["code"].(string)
			types, seqs, codes = append(types, m["type"].(string)), append(seqs, seqOf(m)), append(codes, code)
		}
		checkFailedFrames(t, kind, types, seqs, codes)
	}

	// The OpenAI chunks face.
	for {
		ev, err := chunks.next()
		if err != nil {
			t.Fatalf("stream_mode=openai: %v", err)
		}
		if ev.comment != "" {
			continue
		}
		var c struct {
			Orrery struct {
				Seq  uint64 `json:"seq"`
				Type string `json:"type"`
			} `json:"orrery"`
		}
		if err := json.Unmarshal(ev.data, &c); err != nil {
			t.Fatalf("stream_mode=openai: chunk %s: %v", ev.data, err)
		}
		if c.Orrery.Type == "RUN_ERROR" {
			if c.Orrery.Seq != 0 || ev.hasID {
				t.Errorf("stream_mode=openai: RUN_ERROR chunk seq %d (id line %v), want seq 0 and no id", c.Orrery.Seq, ev.hasID)
			}
			break
		}
	}

	// The ACP browser.
	if msg := browser.until("error"); !strings.Contains(fmt.Sprint(msg["message"]), "could not be saved") {
		t.Errorf("/acp/ws error = %v, want the run's store failure", msg)
	}
	browser.until("turn_ended")

	// Not running; writes refused with the reason; reads served.
	for _, sum := range r.h.sessions(t) {
		if sum.ID == id && sum.Running {
			t.Errorf("session.list says session %s is running, want not: its run ended", id)
		}
	}
	status, body := r.h.controlStatus(t, map[string]any{"t": "run.send", "id": "s", "session": id, "input": map[string]any{"text": "again"}})
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "cannot be written") || !strings.Contains(string(body), "then retry") {
		t.Errorf("run.send while the store fails = %d %s, want 503 naming the failure and the fix", status, body)
	}
	if status, _, body := r.h.send(t, http.MethodPost, "/run", nil, runInput(id, "run-2", "msg-2", "again")); status != http.StatusServiceUnavailable || !strings.Contains(string(body), "cannot be written") {
		t.Errorf("POST /run while the store fails = %d %s, want 503 naming the failure", status, body)
	}
	if status, body := r.h.controlStatus(t, map[string]any{"t": "session.read", "id": "r", "session": id, "since": 0}); status != http.StatusOK {
		t.Errorf("session.read while the store fails = %d %s, want 200", status, body)
	}

	if disk.fix != nil {
		disk.fix()
		var sent struct {
			RunID string `json:"runId"`
		}
		r.h.control(t, map[string]any{"t": "run.send", "id": "s", "session": id, "input": map[string]any{"text": "back?"}}, &sent)
		evs, fs := events.until(func(f frame) bool { return f.terminal() })
		seen = append(seen, evs...)
		for _, f := range fs {
			if f.Type == "RUN_ERROR" || f.MessageID == seenFrames[len(seenFrames)-2].MessageID {
				t.Errorf("after the store works again GET /events got %s of the failed run again", f.Type)
			}
		}
		if last := fs[len(fs)-1]; last.Type != "RUN_FINISHED" {
			t.Errorf("the run after the disk has room ended with %s, want RUN_FINISHED", last.Type)
		}
	} else {
		if err := r.h.shutdown(10 * time.Second); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		disk.after(t)
		r = startFailRig(t, disk.dir, testdisk.NewFlood(false))
		logged := r.h.read(t, id, 0).Frames
		last := decodeFrame(t, logged[len(logged)-1])
		if last.Type != "RUN_ERROR" || last.Code != "interrupted" {
			t.Errorf("after the repair and a restart the log ends with %s %s, want RUN_ERROR interrupted", last.Type, last.Code)
		}
		sub := r.openStream(t, fmt.Sprintf("/events?session=%s&since=%d", id, len(logged)))
		r.h.control(t, map[string]any{"t": "run.send", "id": "s", "session": id, "input": map[string]any{"text": "back?"}}, nil)
		_, fs := sub.until(func(f frame) bool { return f.terminal() })
		if fs[len(fs)-1].Type != "RUN_FINISHED" {
			t.Errorf("the run after the repair ended with %s, want RUN_FINISHED", fs[len(fs)-1].Type)
		}
	}

	// The log: seqs 1, 2, 3 …, and every frame a client saw with a seq is
	// the logged frame of that seq.
	logged := r.h.read(t, id, 0).Frames
	for i, data := range logged {
		if seq, _ := decodeFrame(t, data).seq(); seq != uint64(i+1) {
			t.Fatalf("logged frame %d has seq %d, want %d", i, seq, i+1)
		}
	}
	for _, ev := range append(seen, res.events...) {
		if !ev.hasID {
			continue
		}
		var seq int
		fmt.Sscan(ev.id, &seq)
		if seq > len(logged) || !bytes.Equal(ev.data, logged[seq-1]) {
			t.Errorf("a client saw seq %d as %.120s, the log holds something else: a seq was reused", seq, ev.data)
		}
	}
}
