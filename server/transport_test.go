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
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/auth"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/internal/logbuf"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// txMaxMessage is the MaxMessageBytes of a rig: small, so that an
// oversized message is cheap to send.
const txMaxMessage = 4 << 10

// simulatedRemote is the address a rig's remote listener writes into
// r.RemoteAddr. It is TEST-NET-3 (RFC 5737) and is never dialled: it only
// makes the server see a request as coming from off loopback. The real
// network path is TestNetnsAuth.
const simulatedRemote = "203.0.113.7:40000"

// txOfflineOnly resolves the offline model and refuses every other spec, so
// that nothing a fuzzer sends can make the kernel read a file or reach a
// network.
func txOfflineOnly(spec string) (agent.Provider, error) {
	if spec != "" && spec != "offline" {
		return nil, fmt.Errorf("model %q is not served by this test: use offline", spec)
	}
	return models.Resolve("offline")
}

// txRig is a kernel on a real SQLite file behind three real listeners: one
// on loopback, one that looks off loopback, and a Unix-socket pipe. It
// has a token store with one good and one revoked token.
type txRig struct {
	k       *kernel.Kernel
	srv     *server.Server
	tokens  *auth.Store
	local   *httptest.Server // requests arrive from loopback
	remote  *httptest.Server // requests look as if from simulatedRemote
	sock    string
	good    string // a valid token
	revoked string // a token that was revoked (by a second Store, as the CLI does)
	logs    *logbuf.Buffer
}

// txRigOptions change what newTxRig builds.
type txRigOptions struct {
	// logs keeps the server's logs and prints them if the test fails.
	logs bool
	// wrapStore, if set, wraps the SQLite log the kernel uses.
	wrapStore func(store.Log) store.Log
	// tools, if set, are the kernel's tools, working in workspace.
	tools     *tool.Set
	workspace string
	// hub, if set, is the server's event hub.
	hub *hub.Hub
	// allowedHosts, allowedOrigins and roots are the server's boundary
	// settings (server.Config's).
	allowedHosts, allowedOrigins, roots []string
	// models, if set, resolves model specs instead of txOfflineOnly, and
	// checkSpec replaces the server's default spec policy.
	models    func(string) (agent.Provider, error)
	checkSpec func(string) error
	// scripts lets sessions name scripted models (script:PATH).
	scripts bool
	// config, if set, changes the server's config before it is built.
	config func(*server.Config)
}

// newTxRig starts a rig. The kernel has the offline model and no tools, so
// nothing a test (or a fuzzer) sends can run a command.
func newTxRig(tb testing.TB, opts txRigOptions) *txRig {
	tb.Helper()
	r := &txRig{logs: &logbuf.Buffer{}}
	var log *slog.Logger
	if opts.logs {
		tb.Cleanup(func() {
			if tb.Failed() {
				tb.Logf("server logs:\n%s", r.logs.String())
			}
		})
		log = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	} else {
		log = slog.New(slog.DiscardHandler)
	}
	dir := tb.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		tb.Fatalf("sqlite.Open() = %v, want nil", err)
	}
	var kst store.Log = st
	if opts.wrapStore != nil {
		kst = opts.wrapStore(st)
	}
	resolve := txOfflineOnly
	switch {
	case opts.models != nil:
		resolve = opts.models
	case opts.scripts:
		resolve = models.Resolve
	}
	r.k = kernel.New(kernel.Config{Store: kst, Models: resolve, DefaultModel: "offline", DebugActor: true, Logger: log,
		Tools: opts.tools, Workspace: tool.Workspace{Root: opts.workspace}})
	if err := r.k.Open(context.Background()); err != nil {
		st.Close()
		tb.Fatalf("kernel.Open() = %v, want nil", err)
	}
	tokensPath := filepath.Join(dir, "tokens.json")
	if r.tokens, err = auth.Open(tokensPath); err != nil {
		tb.Fatalf("auth.Open() = %v, want nil", err)
	}
	if r.good, _, err = r.tokens.Create("good"); err != nil {
		tb.Fatal(err)
	}
	if r.revoked, _, err = r.tokens.Create("gone"); err != nil {
		tb.Fatal(err)
	}
	// Revoke through another Store on the same file, as `orrery node token
	// revoke` does while the server runs.
	cli, err := auth.Open(tokensPath)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := cli.Revoke("gone"); err != nil {
		tb.Fatal(err)
	}

	cfg := server.Config{
		Kernel: r.k, Tokens: r.tokens, Logger: log, Node: "rig",
		MaxMessageBytes: txMaxMessage, PingInterval: -1, KeepAlive: time.Second, Hub: opts.hub,
		AllowedHosts: opts.allowedHosts, AllowedOrigins: opts.allowedOrigins, Roots: opts.roots, CheckSpec: opts.checkSpec,
	}
	if opts.scripts {
		cfg.CheckSpec = allowScripts
	}
	if opts.config != nil {
		opts.config(&cfg)
	}
	r.srv = server.New(cfg)
	r.local = httptest.NewServer(r.srv)
	r.remote = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.RemoteAddr = simulatedRemote
		r.srv.ServeHTTP(w, req)
	}))
	// A short directory: a Unix socket path must fit in 108 bytes.
	sockDir, err := os.MkdirTemp("", "orr")
	if err != nil {
		tb.Fatal(err)
	}
	r.sock = filepath.Join(sockDir, "p.sock")
	ln, err := server.ListenPipe(r.sock)
	if err != nil {
		tb.Fatalf("ListenPipe() = %v, want nil", err)
	}
	pipeCtx, stopPipe := context.WithCancel(context.Background())
	pipeDone := make(chan error, 1)
	go func() { pipeDone <- r.srv.ServePipeListener(pipeCtx, ln) }()

	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.srv.Close(ctx); err != nil {
			tb.Errorf("server.Close() = %v, want nil", err)
		}
		stopPipe()
		if err := <-pipeDone; err != nil {
			tb.Errorf("ServePipeListener() = %v, want nil", err)
		}
		r.local.Close()
		r.remote.Close()
		if err := r.k.Close(ctx); err != nil {
			tb.Errorf("kernel.Close() = %v, want nil", err)
		}
		st.Close()
		os.RemoveAll(sockDir)
	})
	return r
}

// post sends body to path on base (the loopback or the remote listener)
// and returns the status and body.
func (r *txRig) post(tb testing.TB, base *httptest.Server, method, path string, hdr map[string]string, body string) (int, http.Header, []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base.URL+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	if body != "" && method == http.MethodPost {
		// A program sends its JSON as JSON; a test of other types says so.
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := base.Client().Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A stream: its status is all a test wants.
		return resp.StatusCode, resp.Header, nil
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, data
}

// control sends one request to POST /control on loopback and returns the
// 200 body.
func (r *txRig) control(tb testing.TB, req string) []byte {
	tb.Helper()
	status, _, body := r.post(tb, r.local, http.MethodPost, "/control", nil, req)
	if status != http.StatusOK {
		tb.Fatalf("POST /control %s = %d %s, want 200", req, status, body)
	}
	return body
}

// newIdleSession makes a session whose one run has finished, and returns
// its id.
func (r *txRig) newIdleSession(tb testing.TB) string {
	tb.Helper()
	var created struct{ Session string }
	if err := json.Unmarshal(r.control(tb, `{"t":"session.new","id":"n","title":"idle"}`), &created); err != nil || created.Session == "" {
		tb.Fatalf("session.new: %v", err)
	}
	r.control(tb, `{"t":"run.send","id":"s","session":"`+created.Session+`","input":{"text":"hello there"}}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var read struct {
			Frames []struct {
				Type string `json:"type"`
			} `json:"frames"`
		}
		json.Unmarshal(r.control(tb, `{"t":"session.read","id":"r","session":"`+created.Session+`"}`), &read)
		if n := len(read.Frames); n > 0 && read.Frames[n-1].Type == "RUN_FINISHED" {
			return created.Session
		}
		if time.Now().After(deadline) {
			tb.Fatalf("session %s: no RUN_FINISHED after 10s", created.Session)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// snapshot returns everything a refused request must leave alone: the
// session list and every frame of session.
func (r *txRig) snapshot(tb testing.TB, session string) string {
	tb.Helper()
	list := r.control(tb, `{"t":"session.list","id":"l"}`)
	read := r.control(tb, `{"t":"session.read","id":"r","session":"`+session+`"}`)
	return string(list) + string(read)
}

// txPeer is a client connection over WS or a pipe, read message by message.
type txPeer struct {
	kind    string // "ws" or "pipe"
	ws      *websocket.Conn
	nc      net.Conn
	br      *bufio.Reader
	pending [][]byte
	skipped []string // ids of the replies untilCustom passed over
}

// txDialWS opens GET /ws on the server at baseURL (http://host:port) with
// query and the extra header hdr; it returns the HTTP response when the
// upgrade is refused.
func txDialWS(tb testing.TB, baseURL, query string, hdr http.Header) (*txPeer, *http.Response, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(baseURL, "http")+"/ws"+query, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(4 << 20)
	tb.Cleanup(func() { c.CloseNow() })
	return &txPeer{kind: "ws", ws: c}, resp, nil
}

func txMustDialWS(tb testing.TB, baseURL, query string, hdr http.Header) *txPeer {
	tb.Helper()
	p, resp, err := txDialWS(tb, baseURL, query, hdr)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		tb.Fatalf("dial /ws%s: %v (status %d)", query, err, status)
	}
	return p
}

func txDialPipe(tb testing.TB, sock string) *txPeer {
	tb.Helper()
	var nc net.Conn
	var err error
	for range 100 {
		if nc, err = net.Dial("unix", sock); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		tb.Fatalf("dial pipe %s: %v", sock, err)
	}
	tb.Cleanup(func() { nc.Close() })
	return &txPeer{kind: "pipe", nc: nc, br: bufio.NewReader(nc)}
}

// dial opens a connection of kind: "ws" (loopback), "remote" (WS off
// loopback) or "pipe".
func (r *txRig) dial(tb testing.TB, kind, query string) *txPeer {
	tb.Helper()
	switch kind {
	case "ws":
		return txMustDialWS(tb, r.local.URL, query, nil)
	case "remote":
		return txMustDialWS(tb, r.remote.URL, query, nil)
	case "pipe":
		return txDialPipe(tb, r.sock)
	}
	tb.Fatalf("unknown transport %q", kind)
	return nil
}

// sendRaw sends one message: a WebSocket message (binary or text), or a
// pipe line (data and a newline).
func (p *txPeer) sendRaw(tb testing.TB, binary bool, data []byte) {
	tb.Helper()
	var err error
	if p.kind == "ws" {
		typ := websocket.MessageText
		if binary {
			typ = websocket.MessageBinary
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = p.ws.Write(ctx, typ, data)
		cancel()
	} else {
		p.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err = p.nc.Write(append(append([]byte(nil), data...), '\n'))
	}
	if err != nil {
		tb.Fatalf("send %.80s: %v", data, err)
	}
}

func (p *txPeer) send(tb testing.TB, req string) {
	tb.Helper()
	p.sendRaw(tb, false, []byte(req))
}

// txClosed is what next returns once the peer closed the connection; code
// is the WebSocket close status, or the code of a pipe's last
// {"t":"close"} line (1000 when there is none).
type txClosed struct {
	code   int
	reason string
	err    error
}

func (e *txClosed) Error() string {
	return fmt.Sprintf("closed with %d %q (%v)", e.code, e.reason, e.err)
}

// next returns the next JSON message, or *txClosed when the connection
// ended, or another error (a timeout, a message that is not JSON).
func (p *txPeer) next(timeout time.Duration) (map[string]any, []byte, error) {
	for len(p.pending) == 0 {
		if p.kind == "ws" {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			_, data, err := p.ws.Read(ctx)
			cancel()
			if err != nil {
				var ce websocket.CloseError
				if errors.As(err, &ce) {
					return nil, nil, &txClosed{code: int(ce.Code), reason: ce.Reason, err: err}
				}
				return nil, nil, err
			}
			p.pending = bytes.Split(data, []byte("\n"))
			continue
		}
		p.nc.SetReadDeadline(time.Now().Add(timeout))
		line, err := p.br.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) == 0 {
				return nil, nil, &txClosed{code: 1000, err: err}
			}
			if errors.Is(err, io.EOF) {
				return nil, line, fmt.Errorf("last line %q has no newline", line)
			}
			return nil, nil, err
		}
		p.pending = [][]byte{bytes.TrimSuffix(line, []byte("\n"))}
	}
	raw := p.pending[0]
	p.pending = p.pending[1:]
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, raw, fmt.Errorf("message %q is not a JSON object: %w", raw, err)
	}
	if p.kind == "pipe" && m["t"] == "close" {
		code, _ := m["code"].(float64)
		reason, _ := m["reason"].(string)
		// The close line must be the last: the socket ends after it.
		p.nc.SetReadDeadline(time.Now().Add(timeout))
		if rest, err := p.br.ReadBytes('\n'); len(rest) > 0 || !(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
			return nil, rest, fmt.Errorf("after the close line: %q, %v; want the end of the stream", rest, err)
		}
		return nil, nil, &txClosed{code: int(code), reason: reason}
	}
	return m, raw, nil
}

// reply returns the next message, which must be a reply.
func (p *txPeer) reply(tb testing.TB) map[string]any {
	tb.Helper()
	m, raw, err := p.next(10 * time.Second)
	if err != nil {
		tb.Fatalf("%s: want a reply, got %v", p.kind, err)
	}
	if m["t"] != "reply" {
		tb.Fatalf("%s: want a reply, got %s", p.kind, raw)
	}
	return m
}

// replyTo skips frames until the reply to id, and returns it.
func (p *txPeer) replyTo(tb testing.TB, id string) map[string]any {
	tb.Helper()
	for {
		m, raw, err := p.next(10 * time.Second)
		if err != nil {
			tb.Fatalf("%s: waiting for the reply to %s: %v", p.kind, id, err)
		}
		if m["t"] == "reply" {
			if m["reqId"] != id {
				tb.Fatalf("%s: reply %s, want one to %s", p.kind, raw, id)
			}
			return m
		}
	}
}

// closed waits for the connection to end, and returns its close code. A
// message before the close fails the test.
func (p *txPeer) closed(tb testing.TB) (int, string) {
	tb.Helper()
	m, raw, err := p.next(10 * time.Second)
	var ce *txClosed
	if !errors.As(err, &ce) {
		tb.Fatalf("%s: want the connection closed, got message %v %s, error %v", p.kind, m, raw, err)
	}
	return ce.code, ce.reason
}

// checkServes makes sure a fresh connection of kind gets its session.list
// answered.
func (r *txRig) checkServes(tb testing.TB, kind string) {
	tb.Helper()
	query := ""
	if kind == "remote" {
		query = "?token=" + r.good
	}
	p := r.dial(tb, kind, query)
	p.send(tb, `{"t":"session.list","id":"alive"}`)
	if m := p.reply(tb); m["reqId"] != "alive" || m["ok"] != true {
		tb.Fatalf("%s: session.list on a fresh connection = %v, want ok", kind, m)
	}
}

// txSentence reports whether msg reads as a sentence that tells the client
// something: several words, not a bare code.
func txSentence(msg string) bool {
	return len(strings.Fields(msg)) >= 4
}

// TestTransportBadInput sends WS messages and pipe lines the server must
// refuse, each with its exact outcome: an error reply whose sentence names
// the fix, and then either the connection stays open or it closes with a
// code. After each, a fresh connection is served and no session changed.
func TestTransportBadInput(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true})
	idle := r.newIdleSession(t)
	var head struct{ Head uint64 }
	json.Unmarshal(r.control(t, `{"t":"session.read","id":"r","session":"`+idle+`"}`), &head)

	type want struct {
		id       string
		ok       bool
		contains []string // words the error must contain
	}
	type row struct {
		name   string
		on     []string // "ws" (loopback), "remote" (WS off loopback), "pipe"
		query  string   // on the /ws URL
		hello  string   // a first message sent and answered with ok before send
		binary bool     // send as a binary WebSocket message
		send   []string // messages, or pipe lines
		want   []want   // the replies, in order; nothing else may arrive
		close  int      // 0: the connection stays open; else its close code
	}
	both := []string{"ws", "pipe"}
	big := `{"t":"session.list","id":"big","pad":"` + strings.Repeat("x", txMaxMessage) + `"}`
	rows := []row{
		{name: "malformed JSON", on: both, send: []string{`{"t":"session.list","id":"m"`},
			want: []want{{contains: []string{"JSON object"}}}},
		{name: "syntax error", on: both, send: []string{`{"t" "session.list"}`},
			want: []want{{contains: []string{"not valid JSON", "JSON object"}}}},
		{name: "not JSON at all", on: both, send: []string{`hello world`},
			want: []want{{contains: []string{"not valid JSON"}}}},
		{name: "not an object", on: both, send: []string{`[1,2]`},
			want: []want{{contains: []string{"JSON object"}}}},
		{name: "a string", on: both, send: []string{`"session.list"`},
			want: []want{{contains: []string{"JSON object"}}}},
		{name: "missing t", on: both, send: []string{`{"id":"q"}`},
			want: []want{{id: "q", contains: []string{"t is missing", "session.list"}}}},
		{name: "unknown t", on: both, send: []string{`{"t":"session.explode","id":"q"}`},
			want: []want{{id: "q", contains: []string{"session.explode", "session.list"}}}},
		{name: "field of the wrong type", on: both, send: []string{`{"t":"session.attach","id":"q","session":5}`},
			want: []want{{id: "q", contains: []string{"session", "string"}}}},
		{name: "binary message", on: []string{"ws"}, binary: true, send: []string{`{"t":"session.list","id":"b"}`},
			want: []want{{contains: []string{"binary", "JSON text"}}}},
		{name: "oversized message", on: []string{"ws"}, send: []string{big}, close: int(websocket.StatusMessageTooBig)},
		{name: "oversized line", on: []string{"pipe"}, send: []string{big},
			want: []want{{contains: []string{"limit", "smaller"}}}},
		{name: "oversized line among good ones", on: []string{"pipe"},
			send: []string{`{"t":"session.list","id":"l1"}`, big, `{"t":"session.list","id":"l2"}`},
			want: []want{{id: "l1", ok: true}, {contains: []string{"limit"}}, {id: "l2", ok: true}}},
		{name: "empty lines are skipped", on: []string{"pipe"}, send: []string{"", "   ", "\t"}},
		{name: "attach unknown session", on: both, send: []string{`{"t":"session.attach","id":"a","session":"nope"}`},
			want: []want{{id: "a", contains: []string{"unknown session", "session.new"}}}},
		{name: "attach since beyond the head", on: both,
			send: []string{fmt.Sprintf(`{"t":"session.attach","id":"a","session":%q,"since":%d}`, idle, head.Head+1)},
			want: []want{{id: "a", contains: []string{"since", "beyond", "omit since"}}}},
		{name: "attach since negative", on: both, send: []string{`{"t":"session.attach","id":"a","session":"` + idle + `","since":-1}`},
			want: []want{{id: "a", contains: []string{"since"}}}},
		{name: "attach without session", on: both, send: []string{`{"t":"session.attach","id":"a"}`},
			want: []want{{id: "a", contains: []string{"session is missing"}}}},
		{name: "detach a session not attached", on: both, send: []string{`{"t":"session.detach","id":"d","session":"` + idle + `"}`},
			want: []want{{id: "d", contains: []string{"not attached", "session.attach"}}}},
		{name: "detach without session", on: both, send: []string{`{"t":"session.detach","id":"d"}`},
			want: []want{{id: "d", contains: []string{"session is missing"}}}},
		{name: "hello twice", on: both, hello: `{"t":"hello","id":"h","client":"test","draws":["thread","tools"]}`,
			send: []string{`{"t":"hello","id":"h2"}`},
			want: []want{{id: "h2", contains: []string{"first message"}}}},
		{name: "hello lacking tools", on: both, send: []string{`{"t":"hello","id":"h","client":"tui","draws":["thread"]}`},
			want: []want{{id: "h", contains: []string{`"tools"`, "required"}}}, close: 4003},
		{name: "hello lacking thread", on: both, send: []string{`{"t":"hello","id":"h","draws":["consent"]}`},
			want: []want{{id: "h", contains: []string{`"thread"`}}}, close: 4003},
		{name: "hello draws not an array", on: both, send: []string{`{"t":"hello","id":"h","draws":"thread"}`},
			want: []want{{id: "h", contains: []string{"draws"}}}},
		// Off loopback (simulated: see simulatedRemote).
		{name: "request before hello", on: []string{"remote"}, send: []string{`{"t":"session.list","id":"q"}`},
			want: []want{{id: "q", contains: []string{"token", "orrery node token create"}}}, close: 4001},
		{name: "attach before hello", on: []string{"remote"}, send: []string{`{"t":"session.attach","id":"q","session":"` + idle + `"}`},
			want: []want{{id: "q", contains: []string{"token"}}}, close: 4001},
		{name: "hello without a token", on: []string{"remote"}, send: []string{`{"t":"hello","id":"h"}`},
			want: []want{{id: "h", contains: []string{"token", "orrery node token create"}}}, close: 4001},
		{name: "hello with a wrong token", on: []string{"remote"}, send: []string{`{"t":"hello","id":"h","token":"orr_wrong_wrong"}`},
			want: []want{{id: "h", contains: []string{"not valid", "orrery node token create"}}}, close: 4001},
		{name: "hello with a revoked token", on: []string{"remote"}, send: []string{`{"t":"hello","id":"h","token":"` + r.revoked + `"}`},
			want: []want{{id: "h", contains: []string{"not valid"}}}, close: 4001},
		{name: "unknown request before hello", on: []string{"remote"}, send: []string{`{"t":"nope","id":"z"}`},
			want: []want{{id: "z"}}, close: 4001},
		{name: "malformed first message", on: []string{"remote"}, send: []string{`{"t":`},
			want: []want{{}}, close: 4001},
		{name: "hello with a good token", on: []string{"remote"}, send: []string{`{"t":"hello","id":"h","token":"` + r.good + `"}`},
			want: []want{{id: "h", ok: true}}},
		{name: "good token in the URL", on: []string{"remote"}, query: "?token=" + r.good,
			send: []string{`{"t":"session.list","id":"q"}`}, want: []want{{id: "q", ok: true}}},
		{name: "hello with a good token on loopback", on: both, send: []string{`{"t":"hello","id":"h","token":"` + r.good + `"}`},
			want: []want{{id: "h", ok: true}}},
		{name: "a bad token on loopback is not looked at", on: []string{"ws"}, query: "?token=orr_bad",
			send: []string{`{"t":"session.list","id":"q"}`}, want: []want{{id: "q", ok: true}}},
	}

	for _, tc := range rows {
		for _, kind := range tc.on {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				before := r.snapshot(t, idle)

				p := r.dial(t, kind, tc.query)
				if tc.hello != "" {
					p.send(t, tc.hello)
					if m := p.reply(t); m["ok"] != true {
						t.Fatalf("first hello = %v, want ok", m)
					}
				}
				for _, msg := range tc.send {
					p.sendRaw(t, tc.binary, []byte(msg))
				}
				for _, w := range tc.want {
					m := p.reply(t)
					if id, _ := m["reqId"].(string); id != w.id {
						t.Errorf("reply reqId = %q, want %q (%v)", id, w.id, m)
					}
					if m["ok"] != w.ok {
						t.Errorf("reply ok = %v, want %v (%v)", m["ok"], w.ok, m)
					}
					if _, has := m["seq"]; has {
						t.Errorf("reply %v has a seq, want none", m)
					}
					msg, _ := m["error"].(string)
					if w.ok {
						if _, has := m["value"]; !has || msg != "" {
							t.Errorf("reply = %v, want a value and no error", m)
						}
						continue
					}
					if !txSentence(msg) {
						t.Errorf("reply error = %q, want a sentence that names the fix", msg)
					}
					for _, word := range w.contains {
						if !strings.Contains(msg, word) {
							t.Errorf("reply error = %q, want it to mention %q", msg, word)
						}
					}
				}
				if tc.close != 0 {
					if code, reason := p.closed(t); code != tc.close {
						t.Errorf("close code = %d %q, want %d", code, reason, tc.close)
					}
				} else {
					// Still open, and nothing more was said: the next
					// message is the answer to this request.
					p.send(t, `{"t":"session.list","id":"after"}`)
					if m := p.reply(t); m["reqId"] != "after" || m["ok"] != true {
						t.Errorf("session.list after the row = %v, want the ok reply to \"after\"", m)
					}
				}

				r.checkServes(t, kind)
				if after := r.snapshot(t, idle); after != before {
					t.Errorf("sessions after = %s\nwant unchanged %s", after, before)
				}
			})
		}
	}
}

// TestTransportMessageLimit checks that a message of exactly
// MaxMessageBytes is served on both transports, and one byte more is not.
func TestTransportMessageLimit(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true})
	fit := func(n int) string {
		base := `{"t":"session.list","id":"fit","pad":""}`
		return `{"t":"session.list","id":"fit","pad":"` + strings.Repeat("x", n-len(base)) + `"}`
	}
	for _, kind := range []string{"ws", "pipe"} {
		t.Run(kind, func(t *testing.T) {
			p := r.dial(t, kind, "")
			p.send(t, fit(txMaxMessage))
			if m := p.reply(t); m["reqId"] != "fit" || m["ok"] != true {
				t.Errorf("a %d-byte message (MaxMessageBytes) = %v, want served", txMaxMessage, m)
			}
			p = r.dial(t, kind, "")
			p.send(t, fit(txMaxMessage+1))
			m, raw, err := p.next(10 * time.Second)
			var ce *txClosed
			switch {
			case kind == "ws" && (!errors.As(err, &ce) || ce.code != int(websocket.StatusMessageTooBig)):
				t.Errorf("a %d-byte message = %s %v, want close 1009", txMaxMessage+1, raw, err)
			case kind == "pipe" && (err != nil || m["ok"] != false || !strings.Contains(fmt.Sprint(m["error"]), "limit")):
				t.Errorf("a %d-byte line = %s %v, want an error naming the limit", txMaxMessage+1, raw, err)
			}
		})
	}
}

// TestTransportHTTPAuth checks the HTTP routes from off loopback (simulated:
// see simulatedRemote) with no token, bad tokens and good ones.
func TestTransportHTTPAuth(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true})
	idle := r.newIdleSession(t)
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	list := `{"t":"session.list","id":"l"}`
	tests := []struct {
		name     string
		local    bool // on the loopback listener
		method   string
		path     string
		hdr      map[string]string
		body     string
		status   int
		contains string
	}{
		{"control/no token", false, "POST", "/control", nil, list, 401, "orrery node token create"},
		{"control/wrong bearer", false, "POST", "/control", bearer("orr_wrong_wrong"), list, 401, "not valid"},
		{"control/wrong query token", false, "POST", "/control?token=orr_wrong", nil, list, 401, "not valid"},
		{"control/revoked bearer", false, "POST", "/control", bearer(r.revoked), list, 401, "not valid"},
		{"control/revoked query token", false, "POST", "/control?token=" + r.revoked, nil, list, 401, "not valid"},
		{"control/X-Forwarded-For loopback", false, "POST", "/control", map[string]string{"X-Forwarded-For": "127.0.0.1"}, list, 401, "token"},
		{"control/X-Real-IP loopback", false, "POST", "/control", map[string]string{"X-Real-IP": "127.0.0.1"}, list, 401, "token"},
		{"control/Forwarded loopback", false, "POST", "/control", map[string]string{"Forwarded": "for=127.0.0.1"}, list, 401, "token"},
		{"control/good bearer", false, "POST", "/control", bearer(r.good), list, 200, ""},
		{"control/good query token", false, "POST", "/control?token=" + r.good, nil, list, 200, ""},
		{"control/good bearer, wrong query token", false, "POST", "/control?token=orr_wrong", bearer(r.good), list, 200, ""},
		{"events/no token", false, "GET", "/events?session=" + idle, nil, "", 401, "token"},
		{"events/wrong token", false, "GET", "/events?session=" + idle + "&token=orr_wrong", nil, "", 401, "not valid"},
		{"events/revoked token", false, "GET", "/events?session=" + idle, bearer(r.revoked), "", 401, "not valid"},
		{"events/X-Forwarded-For loopback", false, "GET", "/events?session=" + idle, map[string]string{"X-Forwarded-For": "127.0.0.1"}, "", 401, "token"},
		{"events/good token", false, "GET", "/events?session=" + idle + "&since=0&token=" + r.good, nil, "", 200, ""},
		{"run/no token", false, "POST", "/run", nil, `{"threadId":"x","runId":"r","messages":[]}`, 401, "token"},
		{"run/revoked token", false, "POST", "/run", bearer(r.revoked), `{"threadId":"x","runId":"r","messages":[]}`, 401, "not valid"},
		{"unknown route/no token", false, "GET", "/nowhere", nil, "", 401, "token"},
		{"healthz/no token", false, "GET", "/healthz", nil, "", 200, ""},
		{"readyz/no token", false, "GET", "/readyz", nil, "", 200, ""},
		{"metrics/no token", false, "GET", "/metrics", nil, "", 401, "token"},
		{"metrics/good token", false, "GET", "/metrics?token=" + r.good, nil, "", 404, "metrics are off"},
		{"events/draws without thread", true, "GET", "/events?session=" + idle + "&client=web&draws=consent", nil, "", 400, `"thread"`},
		{"events/draws without tools", true, "GET", "/events?session=" + idle + "&draws=thread", nil, "", 400, `"tools"`},
		{"events/draws complete", true, "GET", "/events?session=" + idle + "&draws=thread,tools,consent", nil, "", 200, ""},
		{"events/no draws", true, "GET", "/events?session=" + idle, nil, "", 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := r.snapshot(t, idle)
			base := r.remote
			if tc.local {
				base = r.local
			}
			status, hdr, body := r.post(t, base, tc.method, tc.path, tc.hdr, tc.body)
			if status != tc.status {
				t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, status, body, tc.status)
			}
			if status >= 400 {
				var reply struct{ Error string }
				if err := json.Unmarshal(body, &reply); err != nil || !txSentence(reply.Error) {
					t.Errorf("%s %s body = %s, want {\"error\": a sentence}", tc.method, tc.path, body)
				}
				if !strings.Contains(reply.Error, tc.contains) {
					t.Errorf("%s %s error = %q, want it to mention %q", tc.method, tc.path, reply.Error, tc.contains)
				}
			}
			if status == http.StatusUnauthorized && !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s: 401 with WWW-Authenticate %q, want Bearer", tc.method, tc.path, hdr.Get("WWW-Authenticate"))
			}
			if after := r.snapshot(t, idle); after != before {
				t.Errorf("sessions after = %s\nwant unchanged %s", after, before)
			}
		})
	}

	// The WebSocket upgrade checks a token in the URL before upgrading.
	for _, tc := range []struct{ name, query string }{
		{"wrong", "?token=orr_wrong_wrong"},
		{"revoked", "?token=" + r.revoked},
		{"garbage", "?token=x"},
	} {
		t.Run("ws upgrade/"+tc.name+" token", func(t *testing.T) {
			p, resp, err := txDialWS(t, r.remote.URL, tc.query, nil)
			if err == nil {
				p.ws.CloseNow()
				t.Fatalf("dial /ws%s off loopback succeeded, want 401", tc.query)
			}
			if resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("dial /ws%s off loopback = %v %v, want 401", tc.query, resp, err)
			}
		})
	}
	t.Run("ws upgrade/X-Forwarded-For loopback", func(t *testing.T) {
		p := txMustDialWS(t, r.remote.URL, "", http.Header{"X-Forwarded-For": {"127.0.0.1"}})
		p.send(t, `{"t":"session.list","id":"q"}`)
		if m := p.reply(t); m["ok"] != false || !strings.Contains(fmt.Sprint(m["error"]), "token") {
			t.Errorf("request with X-Forwarded-For: 127.0.0.1 = %v, want refused for want of a token", m)
		}
		if code, _ := p.closed(t); code != 4001 {
			t.Errorf("close code = %d, want 4001", code)
		}
	})
	r.checkServes(t, "remote")
	r.checkServes(t, "ws")
}

// TestTransportWatchWithoutDeclaring checks that a client that declares
// nothing (no hello, or a hello without client and draws) may still
// attach and watch a session.
func TestTransportWatchWithoutDeclaring(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true})
	idle := r.newIdleSession(t)
	for _, kind := range []string{"ws", "pipe"} {
		for _, hello := range []string{"", `{"t":"hello","id":"h"}`, `{"t":"hello","id":"h","client":"watcher"}`, `{"t":"hello","id":"h","draws":[]}`} {
			t.Run(kind+"/"+hello, func(t *testing.T) {
				p := r.dial(t, kind, "")
				if hello != "" {
					p.send(t, hello)
					if m := p.reply(t); m["ok"] != true {
						t.Fatalf("hello %s = %v, want ok", hello, m)
					}
				}
				p.send(t, `{"t":"session.attach","id":"a","session":"`+idle+`","since":0}`)
				if m := p.replyTo(t, "a"); m["ok"] != true {
					t.Fatalf("attach = %v, want ok", m)
				}
				var want uint64 = 1
				for {
					m, raw, err := p.next(10 * time.Second)
					if err != nil {
						t.Fatalf("frame %d: %v", want, err)
					}
					meta, _ := m["metadata"].(map[string]any)
					orr, _ := meta["orrery"].(map[string]any)
					seq, _ := orr["seq"].(float64)
					if orr["session"] != idle || uint64(seq) != want {
						t.Fatalf("frame %s, want seq %d of session %s", raw, want, idle)
					}
					want++
					if m["type"] == "RUN_FINISHED" {
						break
					}
				}
				p.send(t, `{"t":"session.detach","id":"d","session":"`+idle+`"}`)
				if m := p.replyTo(t, "d"); m["ok"] != true {
					t.Errorf("detach = %v, want ok", m)
				}
			})
		}
	}
	t.Run("events", func(t *testing.T) {
		status, _, body := r.post(t, r.local, http.MethodGet, "/events?session="+idle+"&client=watcher", nil, "")
		if status != http.StatusOK {
			t.Errorf("GET /events with no draws = %d %s, want 200", status, body)
		}
	})
}

// TestTransportCloseReason checks the reason a refused connection is
// closed with, when it echoes what the client sent: a pipe's close line
// must be JSON (every line is), and a WebSocket close reason must be UTF-8
// (RFC 6455 §5.5.1; browsers fail a connection whose reason is not).
func TestTransportCloseReason(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true})
	hellos := map[string]string{
		"control characters": `{"t":"hello","id":"h","client":"tui\u0001\u007f","draws":["\u0000"]}`,
		"quotes and escapes": `{"t":"hello","id":"h","client":"a\"b\\c","draws":["\t"]}`,
		// The reason starts with the client's name; 1 + 2×60 bytes puts a
		// two-byte rune across byte 120.
		"long multibyte name": `{"t":"hello","id":"h","client":"a` + strings.Repeat("é", 60) + `","draws":["thread"]}`,
	}
	for name, hello := range hellos {
		for _, kind := range []string{"ws", "pipe"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				p := r.dial(t, kind, "")
				p.send(t, hello)
				if m := p.reply(t); m["ok"] != false {
					t.Fatalf("hello %s = %v, want refused", hello, m)
				}
				m, raw, err := p.next(10 * time.Second)
				var ce *txClosed
				if !errors.As(err, &ce) {
					t.Fatalf("after the refusal: %v %s %v, want a close", m, raw, err)
				}
				if ce.code != 4003 {
					t.Errorf("close code = %d, want 4003", ce.code)
				}
				if !utf8.ValidString(ce.reason) {
					t.Errorf("close reason %q is not UTF-8", ce.reason)
				}
				if len(ce.reason) < 100 && !strings.Contains(ce.reason, "lacks") {
					t.Errorf("close reason %q, want the refusal's sentence", ce.reason)
				}
			})
		}
	}
}

// TestReadyzSaysWhyOnlyToTrusted: /readyz needs no token, so a caller off
// this machine without one learns only that the kernel is not ready; from
// loopback, or with a token, it says why (here: the kernel is shutting
// down).
func TestReadyzSaysWhyOnlyToTrusted(t *testing.T) {
	r := newTxRig(t, txRigOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if status, _, body := r.post(t, r.remote, "GET", "/readyz", nil, ""); status != http.StatusOK {
		t.Fatalf("GET /readyz of a ready kernel = %d %s", status, body)
	}
	if err := r.k.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		base   *httptest.Server
		hdr    map[string]string
		detail bool
	}{
		{"loopback", r.local, nil, true},
		{"remote with a token", r.remote, map[string]string{"Authorization": "Bearer " + r.good}, true},
		{"remote without one", r.remote, nil, false},
	} {
		status, _, body := r.post(t, tc.base, "GET", "/readyz", tc.hdr, "")
		if status != http.StatusServiceUnavailable || strings.Contains(string(body), "shutting down") != tc.detail {
			t.Errorf("%s: GET /readyz of a closed kernel = %d %s; want 503, saying why: %v", tc.name, status, body, tc.detail)
		}
	}
}
