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
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/agent/provider/script"
	"github.com/getorrery/orrery/internal/logbuf"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// Limits the tests configure.
const (
	testMaxBody   = 64 << 10
	testKeepAlive = 30 * time.Millisecond
	streamTimeout = 15 * time.Second
)

// harness is a kernel on a real SQLite file behind a real listener.
type harness struct {
	url    string
	client *http.Client
	dbPath string

	shutOnce sync.Once
	shut     func(ctx context.Context) error
}

// allowScripts lets the tests' requests name any spec, scripted models
// (script:PATH) among them; the default policy is tested on its own.
var allowScripts = models.RequestPolicy{AllowCommands: true}.Check

// newHarness starts a kernel (default model offline) and its server.
func newHarness(t *testing.T) *harness {
	t.Helper()
	logs := &logbuf.Buffer{}
	// Registered first, so it runs last: after shutdown, with every log.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	})
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dbPath := filepath.Join(t.TempDir(), "orrery.db")
	st, err := sqlite.Open(dbPath)
	if err != nil {
		t.Fatalf("sqlite.Open() = %v, want nil", err)
	}
	k := kernel.New(kernel.Config{
		Store: st, Models: models.Resolve, DefaultModel: "offline",
		Tools: tool.Builtins(), DebugActor: true, Logger: log,
	})
	if err := k.Open(context.Background()); err != nil {
		st.Close()
		t.Fatalf("kernel.Open() = %v, want nil", err)
	}
	// The tests name scripted models (script:PATH) in their requests.
	srv := server.New(server.Config{Kernel: k, MaxBodyBytes: testMaxBody, KeepAlive: testKeepAlive, Logger: log, CheckSpec: allowScripts})
	ts := httptest.NewServer(srv)
	h := &harness{url: ts.URL, client: ts.Client(), dbPath: dbPath}
	h.shut = func(ctx context.Context) error {
		var errs []error
		if err := srv.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("server.Close() = %w", err))
		}
		ts.Close()
		if err := k.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("kernel.Close() = %w", err))
		}
		if err := st.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store.Close() = %w", err))
		}
		return errors.Join(errs...)
	}
	t.Cleanup(func() {
		if err := h.shutdown(10 * time.Second); err != nil {
			t.Errorf("shutdown: %v, want nil", err)
		}
	})
	return h
}

// shutdown stops the server, the kernel and the store, once, waiting at
// most timeout.
// A second call does nothing and returns nil.
func (h *harness) shutdown(timeout time.Duration) error {
	var err error
	h.shutOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err = h.shut(ctx)
	})
	return err
}

// writeScript writes a script model file and returns its model spec.
func writeScript(t *testing.T, turns ...script.Turn) string {
	t.Helper()
	data, err := json.Marshal(script.File{Turns: turns})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return "script:" + path
}

// chunks returns n text chunks "w0 ", "w1 " ….
func chunks(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("w%d ", i)
	}
	return out
}

// send makes one request and returns its status, headers and whole body.
func (h *harness) send(t *testing.T, method, path string, hdr http.Header, body string) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		// A program sends its JSON as JSON; a test of other types says so.
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, data
}

// control sends one request to POST /control and decodes its 200 reply
// into out.
func (h *harness) control(t *testing.T, req map[string]any, out any) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	status, _, data := h.send(t, http.MethodPost, "/control", nil, string(body))
	if status != http.StatusOK {
		t.Fatalf("POST /control %s = %d %s, want 200", body, status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("POST /control %s: decode reply %s: %v", body, data, err)
		}
	}
}

// controlStatus sends one request to POST /control and returns the status
// and body, whatever they are.
func (h *harness) controlStatus(t *testing.T, req map[string]any) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	status, _, data := h.send(t, http.MethodPost, "/control", nil, string(body))
	return status, data
}

func (h *harness) newSession(t *testing.T, model string) string {
	t.Helper()
	req := map[string]any{"t": "session.new", "id": "n"}
	if model != "" {
		req["model"] = model
	}
	var reply struct {
		Session string `json:"session"`
	}
	h.control(t, req, &reply)
	if reply.Session == "" {
		t.Fatalf("session.new reply has no session")
	}
	return reply.Session
}

type readReply struct {
	Frames []json.RawMessage `json:"frames"`
	Head   uint64            `json:"head"`
}

// read returns every logged frame of session after since, paging as needed.
func (h *harness) read(t *testing.T, session string, since uint64) readReply {
	t.Helper()
	var all readReply
	for {
		var r readReply
		h.control(t, map[string]any{"t": "session.read", "id": "r", "session": session, "since": since}, &r)
		all.Head = r.Head
		all.Frames = append(all.Frames, r.Frames...)
		if len(r.Frames) == 0 || since+uint64(len(r.Frames)) >= r.Head {
			return all
		}
		since += uint64(len(r.Frames))
	}
}

type summary struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Created  string `json:"created"`
	Head     uint64 `json:"head"`
	Running  bool   `json:"running"`
	MicroUSD int64  `json:"micro_usd"`
	Model    string `json:"model,omitempty"`
}

func (h *harness) sessions(t *testing.T) []summary {
	t.Helper()
	var reply struct {
		Sessions []summary `json:"sessions"`
	}
	h.control(t, map[string]any{"t": "session.list", "id": "l"}, &reply)
	return reply.Sessions
}

// healthy checks that the server still answers GET /healthz.
func (h *harness) healthy(t *testing.T) {
	t.Helper()
	status, _, body := h.send(t, http.MethodGet, "/healthz", nil, "")
	if status != http.StatusOK {
		t.Fatalf("GET /healthz = %d %s, want 200", status, body)
	}
}

// frame is the part of an AG-UI frame the tests look at.
type frame struct {
	Type      string          `json:"type"`
	Name      string          `json:"name"`
	Value     json.RawMessage `json:"value"`
	RunID     string          `json:"runId"`
	MessageID string          `json:"messageId"`
	ToolCall  string          `json:"toolCallId"`
	Delta     json.RawMessage `json:"delta"`
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	Outcome   *struct {
		Type string `json:"type"`
	} `json:"outcome"`
	Metadata *struct {
		Orrery *struct {
			Seq *uint64 `json:"seq"`
		} `json:"orrery"`
	} `json:"metadata"`
	T *string `json:"t"`
}

func decodeFrame(t *testing.T, data []byte) frame {
	t.Helper()
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("frame %s is not JSON: %v", data, err)
	}
	if f.T != nil {
		t.Errorf("frame %s has a t field, want none", data)
	}
	return f
}

// seq returns the frame's metadata.orrery.seq; ok is false when it is absent.
func (f frame) seq() (uint64, bool) {
	if f.Metadata == nil || f.Metadata.Orrery == nil || f.Metadata.Orrery.Seq == nil {
		return 0, false
	}
	return *f.Metadata.Orrery.Seq, true
}

func (f frame) terminal() bool { return f.Type == "RUN_FINISHED" || f.Type == "RUN_ERROR" }

// sseEvent is one SSE block: a comment, or an event with an optional id.
type sseEvent struct {
	comment string
	hasID   bool
	id      string
	data    []byte
}

// sse reads an SSE response block by block, checking the framing Orrery
// promises: LF only, one optional id line then one data line, or one comment.
type sse struct {
	t      *testing.T
	resp   *http.Response
	br     *bufio.Reader
	cancel context.CancelFunc
}

// openEvents opens GET /events with query and header and checks it streams.
func (h *harness) openEvents(t *testing.T, query string, hdr http.Header) *sse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url+"/events?"+query, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := h.client.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /events?%s: %v", query, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET /events?%s = %d %s, want 200", query, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("GET /events Content-Type = %q, want text/event-stream", ct)
	}
	s := &sse{t: t, resp: resp, br: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s
}

func (s *sse) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next block. It reports an error (and does not fail the
// test) so that it can be used from other goroutines.
func (s *sse) next() (sseEvent, error) {
	var lines []string
	for {
		line, err := s.br.ReadString('\n')
		if err != nil {
			return sseEvent{}, fmt.Errorf("read SSE: %w (after %q)", err, lines)
		}
		if strings.Contains(line, "\r") {
			return sseEvent{}, fmt.Errorf("SSE line %q has a CR, want LF only", line)
		}
		if line == "\n" {
			break
		}
		lines = append(lines, strings.TrimSuffix(line, "\n"))
	}
	switch {
	case len(lines) == 1 && strings.HasPrefix(lines[0], ":"):
		return sseEvent{comment: lines[0]}, nil
	case len(lines) == 1 && strings.HasPrefix(lines[0], "data: "):
		return sseEvent{data: []byte(strings.TrimPrefix(lines[0], "data: "))}, nil
	case len(lines) == 2 && strings.HasPrefix(lines[0], "id: ") && strings.HasPrefix(lines[1], "data: "):
		return sseEvent{hasID: true, id: strings.TrimPrefix(lines[0], "id: "), data: []byte(strings.TrimPrefix(lines[1], "data: "))}, nil
	}
	return sseEvent{}, fmt.Errorf("SSE block %q, want [id: N] data: JSON, or one comment", lines)
}

// nextFrame returns the next event that is not a comment, checking that its
// id line matches its seq.
func (s *sse) nextFrame() (sseEvent, frame, error) {
	for {
		ev, err := s.next()
		if err != nil {
			return ev, frame{}, err
		}
		if ev.comment != "" {
			if ev.comment != ": keepalive" {
				return ev, frame{}, fmt.Errorf("SSE comment %q, want \": keepalive\"", ev.comment)
			}
			continue
		}
		var f frame
		if err := json.Unmarshal(ev.data, &f); err != nil {
			return ev, f, fmt.Errorf("SSE data %s is not JSON: %w", ev.data, err)
		}
		seq, ok := f.seq()
		if !ok {
			return ev, f, fmt.Errorf("frame %s has no metadata.orrery.seq", ev.data)
		}
		switch {
		case seq == 0 && ev.hasID:
			return ev, f, fmt.Errorf("seq-0 frame %s has an id line %q, want none", ev.data, ev.id)
		case seq > 0 && (!ev.hasID || ev.id != strconv.FormatUint(seq, 10)):
			return ev, f, fmt.Errorf("frame of seq %d has id line %q (present %v), want %d", seq, ev.id, ev.hasID, seq)
		}
		return ev, f, nil
	}
}

// must is nextFrame that fails the test on error; only for the test goroutine.
func (s *sse) must() (sseEvent, frame) {
	s.t.Helper()
	ev, f, err := s.nextFrame()
	if err != nil {
		s.t.Fatal(err)
	}
	return ev, f
}

// until reads frames until one satisfies stop, returning all of them.
func (s *sse) until(stop func(frame) bool) ([]sseEvent, []frame) {
	s.t.Helper()
	var evs []sseEvent
	var fs []frame
	for {
		ev, f := s.must()
		evs = append(evs, ev)
		fs = append(fs, f)
		if stop(f) {
			return evs, fs
		}
	}
}

// postRun sends a RunAgentInput and returns the whole SSE response.
func (h *harness) postRun(t *testing.T, body string) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/run", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("POST /run: %v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST /run: read body: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /run %s = %d %s, want 200", body, resp.StatusCode, data)
	}
	return resp, data
}

func runInput(thread, run, msgID, text string) string {
	b, _ := json.Marshal(map[string]any{
		"threadId": thread, "runId": run, "state": map[string]any{},
		"messages": []map[string]any{{"id": msgID, "role": "user", "content": text}},
		"tools":    []any{}, "context": []any{}, "forwardedProps": map[string]any{},
	})
	return string(b)
}

// checkClosed reports, for frames from one RUN_STARTED to its terminal,
// anything the run opened and did not close before the terminal event.
func checkClosed(t *testing.T, fs []frame) {
	t.Helper()
	open := map[string]string{}
	for _, f := range fs {
		switch f.Type {
		case "TEXT_MESSAGE_START", "REASONING_MESSAGE_START", "REASONING_START":
			open[f.Type+" "+f.MessageID] = f.Type
		case "TEXT_MESSAGE_END":
			delete(open, "TEXT_MESSAGE_START "+f.MessageID)
		case "REASONING_MESSAGE_END":
			delete(open, "REASONING_MESSAGE_START "+f.MessageID)
		case "REASONING_END":
			delete(open, "REASONING_START "+f.MessageID)
		case "TOOL_CALL_START":
			open["TOOL_CALL_START "+f.ToolCall] = f.Type
		case "TOOL_CALL_END":
			delete(open, "TOOL_CALL_START "+f.ToolCall)
		case "RUN_FINISHED":
			if len(open) > 0 {
				t.Errorf("RUN_FINISHED with %v still open, want everything closed before it", open)
			}
		}
	}
}

// framesEqual reports whether a and b hold the same frames, byte for byte.
func framesEqual(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(streamTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBadInput sends requests the server must refuse, each with a specific
// 4xx status and a sentence, and checks that none wrote to the log.
func TestBadInput(t *testing.T) {
	h := newHarness(t)

	// An idle session with a finished run (run id "r-idle"), and a busy one
	// whose run is stalled before its first chunk, so its head is stable.
	_, _ = h.postRun(t, runInput("idle-thread", "r-idle", "u-idle", "hello"))
	busy := h.newSession(t, writeScript(t, script.Turn{Text: []string{"late"}, DelayMS: 120_000}))
	var sent struct{ RunID string }
	h.control(t, map[string]any{"t": "run.send", "id": "1", "session": busy, "input": map[string]any{"text": "stall"}}, &sent)
	waitFor(t, "the busy run's STATE_SNAPSHOT", func() bool {
		r := h.read(t, busy, 0)
		return len(r.Frames) > 0 && decodeFrame(t, r.Frames[len(r.Frames)-1]).Type == "STATE_SNAPSHOT"
	})
	t.Cleanup(func() {
		h.control(t, map[string]any{"t": "run.cancel", "id": "c", "session": busy, "runId": sent.RunID}, nil)
	})

	pad := strings.Repeat("x", testMaxBody+1024)
	type row struct {
		name     string
		method   string
		path     string
		hdr      map[string]string
		body     string
		status   int
		contains string // a word the error must contain, if any
	}
	rows := []row{
		// POST /run
		{name: "run/malformed JSON", method: "POST", path: "/run", body: `{"threadId":`, status: 400},
		{name: "run/syntax error", method: "POST", path: "/run", body: `{"threadId" "x"}`, status: 400},
		{name: "run/empty body", method: "POST", path: "/run", body: ``, status: 400},
		{name: "run/not an object", method: "POST", path: "/run", body: `[1,2]`, status: 400},
		{name: "run/threadId a number", method: "POST", path: "/run", body: `{"threadId":5,"runId":"r","messages":[]}`, status: 400, contains: "threadId"},
		{name: "run/messages a string", method: "POST", path: "/run", body: `{"threadId":"new-a","runId":"r","messages":"x"}`, status: 400, contains: "messages"},
		{name: "run/tools an object", method: "POST", path: "/run", body: `{"threadId":"new-a","runId":"r","messages":[],"tools":{}}`, status: 400, contains: "tools"},
		{name: "run/missing threadId", method: "POST", path: "/run", body: `{"runId":"r","messages":[]}`, status: 400, contains: "threadId"},
		{name: "run/missing runId", method: "POST", path: "/run", body: `{"threadId":"new-b","messages":[]}`, status: 400, contains: "runId"},
		{name: "run/message without role", method: "POST", path: "/run", body: `{"threadId":"new-c","runId":"r","messages":[{"id":"m","content":"hi"}]}`, status: 400, contains: "role"},
		{name: "run/message without id", method: "POST", path: "/run", body: `{"threadId":"new-c","runId":"r","messages":[{"role":"user","content":"hi"}]}`, status: 400, contains: "id"},
		{name: "run/threadId with a space", method: "POST", path: "/run", body: `{"threadId":"a b","runId":"r","messages":[]}`, status: 400},
		{name: "run/runId reused", method: "POST", path: "/run", body: runInput("idle-thread", "r-idle", "u-again", "again"), status: 400, contains: "runId"},
		{name: "run/body over the limit", method: "POST", path: "/run", body: `{"threadId":"new-d","runId":"r","messages":[],"forwardedProps":{"pad":"` + pad + `"}}`, status: 413},
		{name: "run/busy session", method: "POST", path: "/run", body: runInput(busy, "r-second", "u-second", "second"), status: 409, contains: "steer"},
		// POST /control
		{name: "control/malformed JSON", method: "POST", path: "/control", body: `{"t":"session.list"`, status: 400},
		{name: "control/empty body", method: "POST", path: "/control", body: ``, status: 400},
		{name: "control/not an object", method: "POST", path: "/control", body: `"session.list"`, status: 400},
		{name: "control/missing t", method: "POST", path: "/control", body: `{"id":"1"}`, status: 400, contains: "t"},
		{name: "control/unknown t", method: "POST", path: "/control", body: `{"t":"session.explode","id":"1"}`, status: 400, contains: "session.explode"},
		{name: "control/t a number", method: "POST", path: "/control", body: `{"t":7,"id":"1"}`, status: 400},
		{name: "control/since a string", method: "POST", path: "/control", body: `{"t":"session.read","id":"1","session":"idle-thread","since":"a"}`, status: 400, contains: "since"},
		{name: "control/since negative", method: "POST", path: "/control", body: `{"t":"session.read","id":"1","session":"idle-thread","since":-1}`, status: 400, contains: "since"},
		{name: "control/since beyond head", method: "POST", path: "/control", body: `{"t":"session.read","id":"1","session":"idle-thread","since":999}`, status: 400, contains: "since"},
		{name: "control/limit negative", method: "POST", path: "/control", body: `{"t":"session.read","id":"1","session":"idle-thread","limit":-1}`, status: 400, contains: "limit"},
		{name: "control/read missing session", method: "POST", path: "/control", body: `{"t":"session.read","id":"1"}`, status: 400, contains: "session"},
		{name: "control/read unknown session", method: "POST", path: "/control", body: `{"t":"session.read","id":"1","session":"nope"}`, status: 404},
		{name: "control/send unknown session", method: "POST", path: "/control", body: `{"t":"run.send","id":"1","session":"nope","input":{"text":"hi"}}`, status: 404},
		{name: "control/send missing session", method: "POST", path: "/control", body: `{"t":"run.send","id":"1","input":{"text":"hi"}}`, status: 400, contains: "session"},
		{name: "control/send empty text", method: "POST", path: "/control", body: `{"t":"run.send","id":"1","session":"idle-thread","input":{"text":"  "}}`, status: 400, contains: "text"},
		{name: "control/send input a string", method: "POST", path: "/control", body: `{"t":"run.send","id":"1","session":"idle-thread","input":"hi"}`, status: 400, contains: "input"},
		{name: "control/send unknown target", method: "POST", path: "/control", body: `{"t":"run.send","id":"1","session":"idle-thread","input":{"text":"hi"},"target":"nowhere"}`, status: 400, contains: "steer"},
		{name: "control/send busy without target", method: "POST", path: "/control", body: `{"t":"run.send","id":"1","session":"` + busy + `","input":{"text":"hi"}}`, status: 409, contains: "steer"},
		{name: "control/cancel unknown session", method: "POST", path: "/control", body: `{"t":"run.cancel","id":"1","session":"nope"}`, status: 404},
		{name: "control/ext.list unknown session", method: "POST", path: "/control", body: `{"t":"ext.list","id":"1","session":"nope"}`, status: 404},
		{name: "control/cancel idle session", method: "POST", path: "/control", body: `{"t":"run.cancel","id":"1","session":"idle-thread"}`, status: 400},
		{name: "control/cancel other run", method: "POST", path: "/control", body: `{"t":"run.cancel","id":"1","session":"` + busy + `","runId":"r-other"}`, status: 400, contains: "r-other"},
		{name: "control/new unknown model", method: "POST", path: "/control", body: `{"t":"session.new","id":"1","model":"nosuch:model"}`, status: 400, contains: "model"},
		{name: "control/new missing script", method: "POST", path: "/control", body: `{"t":"session.new","id":"1","model":"script:/nonexistent/script.json"}`, status: 400},
		{name: "control/body over the limit", method: "POST", path: "/control", body: `{"t":"session.list","id":"1","pad":"` + pad + `"}`, status: 413},
		// GET /events
		{name: "events/missing session", method: "GET", path: "/events", status: 400, contains: "session"},
		{name: "events/unknown session", method: "GET", path: "/events?session=nope", status: 404},
		{name: "events/since beyond head", method: "GET", path: "/events?session=idle-thread&since=999", status: 400, contains: "since"},
		{name: "events/since not a number", method: "GET", path: "/events?session=idle-thread&since=a", status: 400, contains: "since"},
		{name: "events/since negative", method: "GET", path: "/events?session=idle-thread&since=-1", status: 400, contains: "since"},
		{name: "events/Last-Event-ID beyond head", method: "GET", path: "/events?session=idle-thread", hdr: map[string]string{"Last-Event-ID": "999"}, status: 400},
		{name: "events/Last-Event-ID not a number", method: "GET", path: "/events?session=idle-thread", hdr: map[string]string{"Last-Event-ID": "x"}, status: 400, contains: "Last-Event-ID"},
		// Routes and methods
		{name: "method/GET /run", method: "GET", path: "/run", status: 405},
		{name: "method/PUT /run", method: "PUT", path: "/run", body: `{}`, status: 405},
		{name: "method/GET /control", method: "GET", path: "/control", status: 405},
		{name: "method/DELETE /control", method: "DELETE", path: "/control", status: 405},
		{name: "method/POST /events", method: "POST", path: "/events?session=idle-thread", body: `{}`, status: 405},
		{name: "method/POST /healthz", method: "POST", path: "/healthz", status: 405},
		{name: "route/unknown", method: "GET", path: "/nowhere", status: 404},
	}

	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			before := h.sessions(t)
			beforeIdle, beforeBusy := h.read(t, "idle-thread", 0), h.read(t, busy, 0)

			hdr := http.Header{}
			if tc.body != "" {
				hdr.Set("Content-Type", "application/json")
			}
			for k, v := range tc.hdr {
				hdr.Set(k, v)
			}
			status, rh, body := h.send(t, tc.method, tc.path, hdr, tc.body)
			if status != tc.status {
				t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, status, body, tc.status)
			}
			if ct := rh.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("%s %s Content-Type = %q, want application/json", tc.method, tc.path, ct)
			}
			var reply map[string]any
			if err := json.Unmarshal(body, &reply); err != nil {
				t.Errorf("%s %s body %q is not a JSON object: %v", tc.method, tc.path, body, err)
			}
			msg, _ := reply["error"].(string)
			if len(reply) != 1 || !strings.Contains(strings.TrimSpace(msg), " ") {
				t.Errorf("%s %s body = %s, want {\"error\": a sentence}", tc.method, tc.path, body)
			}
			if tc.contains != "" && !strings.Contains(msg, tc.contains) {
				t.Errorf("%s %s error = %q, want it to mention %q", tc.method, tc.path, msg, tc.contains)
			}

			h.healthy(t)
			if after := h.sessions(t); !reflect.DeepEqual(after, before) {
				t.Errorf("session.list after = %+v, want unchanged %+v", after, before)
			}
			afterIdle, afterBusy := h.read(t, "idle-thread", 0), h.read(t, busy, 0)
			if !reflect.DeepEqual(afterIdle, beforeIdle) || !reflect.DeepEqual(afterBusy, beforeBusy) {
				t.Errorf("session.read heads after = %d, %d, want unchanged %d, %d (frames changed)",
					afterIdle.Head, afterBusy.Head, beforeIdle.Head, beforeBusy.Head)
			}
		})
	}
}

// TestSSEFraming checks the bytes of POST /run and GET /events.
func TestSSEFraming(t *testing.T) {
	h := newHarness(t)

	resp, body := h.postRun(t, runInput("frames", "r1", "u1", "echo hi"))
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("POST /run Content-Type = %q, want text/event-stream", ct)
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" {
		t.Errorf("POST /run Content-Encoding = %q, want none", ce)
	}
	if bytes.Contains(body, []byte("\r")) {
		t.Errorf("POST /run body has a CR, want LF only")
	}
	if !bytes.HasSuffix(body, []byte("\n\n")) {
		t.Fatalf("POST /run body ends %q, want a blank line", body[max(0, len(body)-40):])
	}
	var runFrames []json.RawMessage
	var types []string
	for _, block := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		if block == ": keepalive" {
			continue
		}
		lines := strings.Split(block, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "id: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("POST /run block %q, want \"id: N\\ndata: {json}\"", block)
		}
		data := []byte(strings.TrimPrefix(lines[1], "data: "))
		f := decodeFrame(t, data)
		seq, ok := f.seq()
		if !ok || strings.TrimPrefix(lines[0], "id: ") != strconv.FormatUint(seq, 10) {
			t.Errorf("POST /run block %q: id does not match metadata.orrery.seq", block)
		}
		runFrames = append(runFrames, data)
		types = append(types, f.Type)
	}
	if len(types) < 3 || types[0] != "RUN_STARTED" || types[1] != "STATE_SNAPSHOT" || types[len(types)-1] != "RUN_FINISHED" {
		t.Fatalf("POST /run types = %v, want RUN_STARTED, STATE_SNAPSHOT … RUN_FINISHED", types)
	}
	if f := decodeFrame(t, runFrames[0]); f.RunID != "r1" {
		t.Errorf("RUN_STARTED runId = %q, want r1", f.RunID)
	}
	// The stream is the log from RUN_STARTED on, byte for byte.
	first, _ := decodeFrame(t, runFrames[0]).seq()
	logged := h.read(t, "frames", first-1)
	if len(logged.Frames) != len(runFrames) {
		t.Fatalf("session.read after %d = %d frames, want the %d POST /run sent", first-1, len(logged.Frames), len(runFrames))
	}
	for i := range runFrames {
		if !bytes.Equal(runFrames[i], logged.Frames[i]) {
			t.Errorf("POST /run frame %d = %s, want the logged %s", i, runFrames[i], logged.Frames[i])
		}
	}
	var fs []frame
	for _, d := range runFrames {
		fs = append(fs, decodeFrame(t, d))
	}
	checkClosed(t, fs)

	// GET /events without since: two seq-0 snapshots without an id line,
	// then, the session being idle, a keepalive.
	ev := h.openEvents(t, "session=frames", nil)
	for _, want := range []string{"STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"} {
		e, err := ev.next()
		if err != nil {
			t.Fatal(err)
		}
		if e.hasID || e.comment != "" {
			t.Errorf("GET /events %s block has id %q / comment %q, want a bare data line", want, e.id, e.comment)
		}
		f := decodeFrame(t, e.data)
		if seq, ok := f.seq(); f.Type != want || !ok || seq != 0 {
			t.Errorf("GET /events first frames: got %s seq %d (present %v), want %s with seq 0", f.Type, seq, ok, want)
		}
		if want == "MESSAGES_SNAPSHOT" {
			var snap struct {
				Messages []struct {
					ID string `json:"id"`
				} `json:"messages"`
			}
			_ = json.Unmarshal(e.data, &snap)
			if len(snap.Messages) == 0 || snap.Messages[0].ID != "u1" {
				t.Errorf("MESSAGES_SNAPSHOT = %s, want the conversation starting with u1", e.data)
			}
		}
	}
	e, err := ev.next()
	if err != nil {
		t.Fatal(err)
	}
	if e.comment != ": keepalive" {
		t.Errorf("idle GET /events next block = %+v, want a \": keepalive\" comment", e)
	}
}

// TestResume checks that GET /events?since=k, for every k, replays exactly
// the logged frames after k, and that a stream started mid-run has no gap
// and no duplicate at the seam.
func TestResume(t *testing.T) {
	h := newHarness(t)
	for i, prompt := range []string{"hello there", "echo hi", "what time is it", "echo <b>&amp;\u2028</b>"} {
		_, _ = h.postRun(t, runInput("resume", fmt.Sprintf("r%d", i), fmt.Sprintf("u%d", i), prompt))
	}
	all := h.read(t, "resume", 0)
	n := uint64(len(all.Frames))
	if n != all.Head || n < 50 {
		t.Fatalf("session.read = %d frames, head %d, want head frames and at least 50", n, all.Head)
	}
	for i, d := range all.Frames {
		if seq, _ := decodeFrame(t, d).seq(); seq != uint64(i+1) {
			t.Fatalf("logged frame %d has seq %d, want %d", i, seq, i+1)
		}
	}

	for k := uint64(0); k <= n; k++ {
		if r := h.read(t, "resume", k); r.Head != n || !framesEqual(r.Frames, all.Frames[k:]) {
			t.Fatalf("session.read since %d = %d frames, head %d, want the last %d of the log, head %d", k, len(r.Frames), r.Head, n-k, n)
		}
	}

	check := func(k uint64, s *sse) error {
		for i := k; i < n; i++ {
			ev, f, err := s.nextFrame()
			if err != nil {
				return fmt.Errorf("since %d: %w", k, err)
			}
			if seq, _ := f.seq(); seq != i+1 || !bytes.Equal(ev.data, all.Frames[i]) {
				return fmt.Errorf("since %d: frame %d = %s, want %s", k, i+1, ev.data, all.Frames[i])
			}
		}
		// Nothing more: the next block is a keepalive.
		ev, err := s.next()
		if err != nil {
			return fmt.Errorf("since %d: %w", k, err)
		}
		if ev.comment == "" {
			return fmt.Errorf("since %d: after the head got %s, want only a keepalive", k, ev.data)
		}
		return nil
	}

	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for k := uint64(0); k <= n; k++ {
		s := h.openEvents(t, fmt.Sprintf("session=resume&since=%d", k), nil)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer s.close()
			if err := check(k, s); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()

	for _, k := range []uint64{0, 1, n / 2, n - 1, n} {
		s := h.openEvents(t, "session=resume", http.Header{"Last-Event-ID": {strconv.FormatUint(k, 10)}})
		if err := check(k, s); err != nil {
			t.Errorf("Last-Event-ID: %v", err)
		}
		s.close()
	}
	// since wins over Last-Event-ID when both are sent.
	s := h.openEvents(t, fmt.Sprintf("session=resume&since=%d", n-2), http.Header{"Last-Event-ID": {"3"}})
	if err := check(n-2, s); err != nil {
		t.Errorf("since with Last-Event-ID: %v", err)
	}
	s.close()
}

// TestResumeLive starts GET /events?since=k at many points while a slow
// run streams and checks each stream is k+1 … terminal without a gap or a
// duplicate, and equals the log.
func TestResumeLive(t *testing.T) {
	h := newHarness(t)
	sess := h.newSession(t, writeScript(t, script.Turn{Text: chunks(250), DelayMS: 2}))
	var sent struct{ RunID string }
	h.control(t, map[string]any{"t": "run.send", "id": "1", "session": sess, "input": map[string]any{"text": "go"}}, &sent)

	type result struct {
		since uint64
		seqs  []uint64
		data  [][]byte
		err   error
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	for i := 0; i < 24; i++ {
		now := h.read(t, sess, 0)
		if i > 0 && len(now.Frames) > 0 && decodeFrame(t, now.Frames[len(now.Frames)-1]).terminal() {
			break // the run is over: a stream from its head would wait forever
		}
		head := now.Head
		since := head - min(head, uint64(i%4))
		s := h.openEvents(t, fmt.Sprintf("session=%s&since=%d", sess, since), nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.close()
			r := result{since: since}
			for {
				ev, f, err := s.nextFrame()
				if err != nil {
					r.err = err
					break
				}
				seq, _ := f.seq()
				r.seqs = append(r.seqs, seq)
				r.data = append(r.data, ev.data)
				if f.terminal() {
					break
				}
			}
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		}()
		time.Sleep(15 * time.Millisecond)
	}
	wg.Wait()
	if len(results) < 8 {
		t.Errorf("only %d streams started while the run was in flight, want at least 8", len(results))
	}

	all := h.read(t, sess, 0)
	last := decodeFrame(t, all.Frames[len(all.Frames)-1])
	if last.Type != "RUN_FINISHED" {
		t.Fatalf("last logged frame = %s, want RUN_FINISHED", last.Type)
	}
	for _, r := range results {
		if r.err != nil {
			t.Errorf("since %d: %v", r.since, r.err)
			continue
		}
		for i, seq := range r.seqs {
			if want := r.since + uint64(i) + 1; seq != want {
				t.Errorf("since %d: frame %d has seq %d, want %d (gap or duplicate at the seam)", r.since, i, seq, want)
				break
			}
			if !bytes.Equal(r.data[i], all.Frames[seq-1]) {
				t.Errorf("since %d: frame seq %d = %s, want the logged %s", r.since, seq, r.data[i], all.Frames[seq-1])
				break
			}
		}
		if got := r.since + uint64(len(r.seqs)); got != all.Head {
			t.Errorf("since %d: stream ended at seq %d, want the terminal %d", r.since, got, all.Head)
		}
	}
}

// TestControl walks the happy paths of POST /control: session.new,
// session.list, run.send, a refused send, a steer and a cancel.
func TestControl(t *testing.T) {
	h := newHarness(t)
	model := writeScript(t,
		script.Turn{Text: chunks(40), DelayMS: 25},     // the first run
		script.Turn{Text: []string{"after steer"}},     // the step the steer adds
		script.Turn{Text: chunks(400), DelayMS: 20},    // the run to cancel
		script.Turn{Text: []string{"must not stream"}}, // a step after the cancel would stream it at once
	)
	sess := h.newSession(t, model)
	found := false
	for _, s := range h.sessions(t) {
		if s.ID == sess {
			found = true
			if s.Head != 0 || s.Running {
				t.Errorf("session.list %s = head %d running %v, want head 0, idle", sess, s.Head, s.Running)
			}
		}
	}
	if !found {
		t.Fatalf("session.list does not show the new session %s", sess)
	}

	events := h.openEvents(t, "session="+sess+"&since=0", nil)

	var sent struct {
		RunID  string `json:"runId"`
		Target string `json:"target"`
	}
	h.control(t, map[string]any{"t": "run.send", "id": "1", "session": sess, "input": map[string]any{"text": "first"}}, &sent)
	if sent.RunID == "" || sent.Target != "run" {
		t.Fatalf("run.send reply = %+v, want a runId and target run", sent)
	}
	events.until(func(f frame) bool { return f.Type == "TEXT_MESSAGE_CONTENT" })

	status, body := h.controlStatus(t, map[string]any{"t": "run.send", "id": "2", "session": sess, "input": map[string]any{"text": "second"}})
	if status != http.StatusConflict || !strings.Contains(string(body), "steer") {
		t.Errorf("run.send while in flight = %d %s, want 409 naming steer", status, body)
	}
	var steered struct {
		RunID  string `json:"runId"`
		Target string `json:"target"`
	}
	h.control(t, map[string]any{"t": "run.send", "id": "3", "session": sess, "input": map[string]any{"text": "steer this"}, "target": "steer"}, &steered)
	if steered.RunID != sent.RunID || steered.Target != "steer" {
		t.Errorf("steer reply = %+v, want runId %s, target steer", steered, sent.RunID)
	}

	_, fs := events.until(func(f frame) bool { return f.terminal() })
	steerAt, afterAt := -1, -1
	for i, f := range fs {
		if f.Type == "CUSTOM" && f.Name == "orrery.user.message" {
			var um struct {
				Content string `json:"content"`
				RunID   string `json:"runId"`
				Steer   bool   `json:"steer"`
			}
			_ = json.Unmarshal(f.Value, &um)
			if um.Content == "steer this" {
				if !um.Steer || um.RunID != sent.RunID {
					t.Errorf("steer message = %s, want steer true and runId %s", f.Value, sent.RunID)
				}
				steerAt = i
			}
		}
		if f.Type == "TEXT_MESSAGE_CONTENT" && string(f.Delta) == `"after steer"` {
			afterAt = i
		}
	}
	term := fs[len(fs)-1]
	switch {
	case term.Type != "RUN_FINISHED" || term.Outcome == nil || term.Outcome.Type != "success":
		t.Errorf("first run ended with %s %+v, want RUN_FINISHED success", term.Type, term.Outcome)
	case steerAt < 0:
		t.Errorf("the steer is not in the log before the terminal event")
	case afterAt < steerAt:
		t.Errorf("the model step after the steer (turn 2) came at %d, want after the steer at %d", afterAt, steerAt)
	}
	checkClosed(t, fs)

	// A cancelled run: RUN_FINISHED cancelled, with every message closed.
	var second struct {
		RunID string `json:"runId"`
	}
	h.control(t, map[string]any{"t": "run.send", "id": "4", "session": sess, "input": map[string]any{"text": "long one"}}, &second)
	_, fs = events.until(func(f frame) bool { return f.Type == "TEXT_MESSAGE_CONTENT" })
	h.control(t, map[string]any{"t": "run.cancel", "id": "5", "session": sess, "runId": second.RunID}, nil)
	_, more := events.until(func(f frame) bool { return f.terminal() })
	fs = append(fs, more...)
	term = fs[len(fs)-1]
	if term.Type != "RUN_FINISHED" || term.RunID != second.RunID || term.Outcome == nil || term.Outcome.Type != "cancelled" {
		t.Errorf("cancelled run ended with %s run %s outcome %+v, want RUN_FINISHED %s outcome cancelled", term.Type, term.RunID, term.Outcome, second.RunID)
	}
	checkClosed(t, fs)
	termSeq, _ := term.seq()

	// Nothing of the run follows its terminal event, and the session is idle.
	time.Sleep(150 * time.Millisecond)
	if r := h.read(t, sess, 0); r.Head != termSeq {
		t.Errorf("head after the cancel = %d, want the terminal %d (frames after it: %s)", r.Head, termSeq, r.Frames[termSeq:])
	}
	for _, s := range h.sessions(t) {
		if s.ID == sess && (s.Running || s.Head != termSeq) {
			t.Errorf("session.list %s = running %v head %d, want idle at %d", sess, s.Running, s.Head, termSeq)
		}
	}
}

// TestRunClientLeaves checks that a stock client leaving POST /run cancels
// its run, since for it the request is the run.
func TestRunClientLeaves(t *testing.T) {
	h := newHarness(t)
	sess := h.newSession(t, writeScript(t, script.Turn{Text: chunks(400), DelayMS: 20}))
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/run", strings.NewReader(runInput(sess, "r-leave", "u-leave", "go")))
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"TEXT_MESSAGE_CONTENT"`) {
			break
		}
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "the run to end after the client left", func() bool {
		r := h.read(t, sess, 0)
		return decodeFrame(t, r.Frames[len(r.Frames)-1]).terminal()
	})
	r := h.read(t, sess, 0)
	last := decodeFrame(t, r.Frames[len(r.Frames)-1])
	if last.Type != "RUN_FINISHED" || last.Outcome == nil || last.Outcome.Type != "cancelled" {
		t.Errorf("run ended with %s %+v, want RUN_FINISHED cancelled", last.Type, last.Outcome)
	}
}

// TestShutdownInFlight stops the server and the kernel while runs are in
// flight: Close must return promptly, and each run must end in the log with
// one RUN_ERROR interrupted.
func TestShutdownInFlight(t *testing.T) {
	h := newHarness(t)
	var sessions []string
	for range 4 {
		sess := h.newSession(t, writeScript(t, script.Turn{Text: []string{"a", "b"}, DelayMS: 60_000}))
		h.control(t, map[string]any{"t": "run.send", "id": "1", "session": sess, "input": map[string]any{"text": "go"}}, nil)
		sessions = append(sessions, sess)
	}
	time.Sleep(50 * time.Millisecond) // let every loop reach its model call
	start := time.Now()
	if err := h.shutdown(3 * time.Second); err != nil {
		t.Errorf("shutdown with runs in flight = %v after %v, want nil", err, time.Since(start).Round(time.Millisecond))
	}

	st, err := sqlite.Open(h.dbPath)
	if err != nil {
		t.Fatalf("sqlite.Open() = %v, want nil", err)
	}
	defer st.Close()
	for _, sess := range sessions {
		frames, err := st.Read(context.Background(), sess, 0, 0)
		if err != nil {
			t.Fatalf("Read(%s) = %v, want nil", sess, err)
		}
		var fs []frame
		for _, f := range frames {
			fs = append(fs, decodeFrame(t, f.Data))
		}
		terminals := 0
		for _, f := range fs {
			if f.terminal() {
				terminals++
			}
		}
		last := fs[len(fs)-1]
		if terminals != 1 || last.Type != "RUN_ERROR" || last.Code != "interrupted" {
			t.Errorf("session %s ends with %s %q after %d terminal events, want exactly one RUN_ERROR interrupted, last", sess, last.Type, last.Code, terminals)
		}
	}
}
