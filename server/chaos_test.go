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
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// chaosFeed is a model whose deltas come from a channel, as in bench's
// feed: the test decides when each piece "arrives from the model". A Delta
// with Kind 0 ends the model step.
type chaosFeed struct {
	deltas chan agent.Delta
}

var _ agent.Provider = (*chaosFeed)(nil)

func (f *chaosFeed) Name() string  { return "feed" }
func (f *chaosFeed) Model() string { return "feed" }

func (f *chaosFeed) Stream(ctx context.Context, _ agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	for {
		select {
		case <-ctx.Done():
			return agent.Usage{}, ctx.Err()
		case d := <-f.deltas:
			if d.Kind == 0 {
				return agent.Usage{}, nil
			}
			if err := emit(d); err != nil {
				return agent.Usage{}, err
			}
		}
	}
}

// chaosLogBuffer collects server logs, shown when a test fails.
type chaosLogBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *chaosLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail returns at most the last n bytes logged.
func (b *chaosLogBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// chaosRig is one real in-process server: a kernel on SQLite in a temp dir
// whose only model is p, served over HTTP (SSE, WebSocket, control) and a
// Unix-socket pipe.
type chaosRig struct {
	url  string
	ws   string
	sock string
	db   string // the SQLite file
	srv  *server.Server
	logs *chaosLogBuffer
	// http is the client for control requests and SSE streams.
	http *http.Client
}

// chaosSendBuffer wraps a listener so that each accepted connection has a
// small socket send buffer: a client that stops reading then backs the
// server up after a few frames, not after the megabytes Linux autotuning
// allows.
type chaosSendBuffer struct {
	net.Listener
	size int
}

func (l chaosSendBuffer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		if b, ok := c.(interface{ SetWriteBuffer(int) error }); ok {
			b.SetWriteBuffer(l.size)
		}
	}
	return c, err
}

// newChaosRig starts a rig. queueFrames is kernel.Config.QueueFrames;
// sendBuffer, when not 0, is the socket send buffer of every connection
// the server accepts.
func newChaosRig(t *testing.T, p agent.Provider, queueFrames, sendBuffer int) *chaosRig {
	t.Helper()
	dir := t.TempDir()
	logs := &chaosLogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server logs (tail):\n%s", logs.tail(8<<10))
		}
	})
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	db := filepath.Join(dir, "orrery.db")
	st, err := sqlite.Open(db)
	if err != nil {
		t.Fatalf("sqlite.Open() = %v, want nil", err)
	}
	k := kernel.New(kernel.Config{
		Store:        st,
		Models:       func(string) (agent.Provider, error) { return p, nil },
		DefaultModel: "feed",
		Tools:        tool.Builtins(),
		MaxSteps:     1 << 20,
		QueueFrames:  queueFrames,
		DebugActor:   true,
		Logger:       log,
	})
	if err := k.Open(context.Background()); err != nil {
		st.Close()
		t.Fatalf("kernel.Open() = %v, want nil", err)
	}
	srv := server.New(server.Config{Kernel: k, Logger: log})
	hs := httptest.NewUnstartedServer(srv)
	sock := filepath.Join(dir, "p.sock")
	pipe, err := server.ListenPipe(sock)
	if err != nil {
		t.Fatalf("server.ListenPipe() = %v, want nil", err)
	}
	if sendBuffer > 0 {
		hs.Listener = chaosSendBuffer{hs.Listener, sendBuffer}
		pipe = chaosSendBuffer{pipe, sendBuffer}
	}
	hs.Start()
	pctx, pcancel := context.WithCancel(context.Background())
	go srv.ServePipeListener(pctx, pipe)
	r := &chaosRig{
		url: hs.URL, ws: "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws", sock: sock, db: db, srv: srv, logs: logs,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}},
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pcancel()
		// Streams to clients that stopped reading end only with their
		// connection (see TestStalledSSEDoesNotBlockClose).
		hs.CloseClientConnections()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("server.Close() = %v, want nil", err)
		}
		r.http.CloseIdleConnections()
		hs.Close()
		if err := k.Close(ctx); err != nil {
			t.Errorf("kernel.Close() = %v, want nil", err)
		}
		st.Close()
	})
	for i := 0; ; i++ {
		nc, err := net.Dial("unix", sock)
		if err == nil {
			nc.Close()
			break
		}
		if i == 100 {
			t.Fatalf("pipe %s never came up: %v", sock, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return r
}

// control sends one request to POST /control and decodes the reply's value
// into out.
func (r *chaosRig) control(req, out any) error {
	body, _ := json.Marshal(req)
	resp, err := r.http.Post(r.url+"/control", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /control %s = %d %s", body, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (r *chaosRig) newSession(t *testing.T) string {
	t.Helper()
	var v struct{ Session string }
	if err := r.control(map[string]any{"t": "session.new", "id": "n"}, &v); err != nil {
		t.Fatal(err)
	}
	return v.Session
}

// readLog pages through the whole log with session.read.
func (r *chaosRig) readLog(t *testing.T, session string) [][]byte {
	t.Helper()
	var out [][]byte
	var since uint64
	for {
		var v struct {
			Frames []json.RawMessage `json:"frames"`
			Head   uint64            `json:"head"`
		}
		if err := r.control(map[string]any{"t": "session.read", "id": "r", "session": session, "since": since, "limit": 10000}, &v); err != nil {
			t.Fatal(err)
		}
		for _, f := range v.Frames {
			out = append(out, []byte(f))
		}
		since += uint64(len(v.Frames))
		if len(v.Frames) == 0 || since >= v.Head {
			return out
		}
	}
}

// serverState is the session's shared state as the server holds it: the
// STATE_SNAPSHOT (seq 0) that a fresh GET /events without since starts with.
func (r *chaosRig) serverState(t *testing.T, session string) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/events?session="+session, nil)
	resp, err := r.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events = %d, want 200", resp.StatusCode)
	}
	ev, err := newChaosSSE(resp.Body).next()
	if err != nil {
		t.Fatalf("GET /events: first event: %v", err)
	}
	var f struct {
		Type     string          `json:"type"`
		Snapshot json.RawMessage `json:"snapshot"`
		Metadata struct {
			Orrery struct {
				Seq uint64 `json:"seq"`
			} `json:"orrery"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(ev.data, &f); err != nil || f.Type != "STATE_SNAPSHOT" || f.Metadata.Orrery.Seq != 0 || ev.hasID {
		t.Fatalf("GET /events without since: first event = id %v %s, want a STATE_SNAPSHOT with seq 0 and no id", ev.hasID, ev.data)
	}
	return f.Snapshot
}

// chaosSSEEvent is one SSE event: its id line (if any) and its data.
type chaosSSEEvent struct {
	id    uint64
	hasID bool
	data  []byte // valid until the next call to next
}

// chaosSSE reads Server-Sent Events.
type chaosSSE struct {
	br   *bufio.Reader
	data []byte
}

func newChaosSSE(r io.Reader) *chaosSSE {
	return &chaosSSE{br: bufio.NewReaderSize(r, 256<<10)}
}

// next returns the next event with data; comments are skipped.
func (s *chaosSSE) next() (chaosSSEEvent, error) {
	var ev chaosSSEEvent
	s.data = s.data[:0]
	hasData := false
	for {
		line, err := s.br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return ev, fmt.Errorf("SSE line over %d bytes", s.br.Size())
			}
			return ev, err
		}
		line = line[:len(line)-1]
		switch {
		case len(line) == 0:
			if hasData {
				ev.data = s.data
				return ev, nil
			}
			ev = chaosSSEEvent{}
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("id: ")):
			n, err := strconv.ParseUint(string(line[4:]), 10, 64)
			if err != nil {
				return ev, fmt.Errorf("bad SSE id line %q", line)
			}
			ev.id, ev.hasID = n, true
		case bytes.HasPrefix(line, []byte("data: ")):
			if hasData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, line[6:]...)
			hasData = true
		case bytes.HasSuffix(line, []byte("\r")):
			return ev, fmt.Errorf("SSE line ends in CRLF: %q", line)
		default:
			return ev, fmt.Errorf("unexpected SSE line %q", line)
		}
	}
}

// chaosLink is one WebSocket or pipe connection, read one JSON object at a
// time (a WebSocket message may carry several, separated by "\n").
type chaosLink struct {
	ctx     context.Context
	ws      *websocket.Conn
	nc      net.Conn
	br      *bufio.Reader
	pending [][]byte
}

func (r *chaosRig) dialLink(ctx context.Context, kind string, opts *websocket.DialOptions, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*chaosLink, error) {
	if kind == "ws" {
		c, _, err := websocket.Dial(ctx, r.ws, opts)
		if err != nil {
			return nil, err
		}
		c.SetReadLimit(256 << 20)
		return &chaosLink{ctx: ctx, ws: c}, nil
	}
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	nc, err := dial(ctx, "unix", r.sock)
	if err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		nc.SetReadDeadline(d)
	}
	return &chaosLink{ctx: ctx, nc: nc, br: bufio.NewReaderSize(nc, 256<<10)}, nil
}

func (l *chaosLink) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if l.ws != nil {
		return l.ws.Write(l.ctx, websocket.MessageText, data)
	}
	_, err = l.nc.Write(append(data, '\n'))
	return err
}

// next returns the next JSON object; it is valid until the next call.
func (l *chaosLink) next() ([]byte, error) {
	if l.ws != nil {
		for len(l.pending) == 0 {
			typ, data, err := l.ws.Read(l.ctx)
			if err != nil {
				return nil, err
			}
			if typ != websocket.MessageText {
				return nil, fmt.Errorf("binary WebSocket message %q", data)
			}
			l.pending = bytes.Split(data, []byte("\n"))
		}
		m := l.pending[0]
		l.pending = l.pending[1:]
		return m, nil
	}
	line, err := l.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		buf := append([]byte(nil), line...)
		rest, err := l.br.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("pipe line cut short after %d bytes: %w", len(buf)+len(rest), err)
		}
		line = append(buf, rest...)
	} else if err != nil {
		if len(line) > 0 {
			return nil, fmt.Errorf("pipe line cut short after %d bytes (%.60q…): %w", len(line), line, err)
		}
		return nil, err
	}
	return line[:len(line)-1], nil
}

// close ends the connection: abruptly, or with a WebSocket close handshake.
func (l *chaosLink) close(graceful bool) {
	if l.ws != nil {
		if graceful {
			l.ws.Close(websocket.StatusNormalClosure, "bye")
		} else {
			l.ws.CloseNow()
		}
		return
	}
	l.nc.Close()
}

// chaosControlMsg is a message that is not a frame: a reply or a close line.
type chaosControlMsg struct {
	T      string          `json:"t"`
	ReqID  string          `json:"reqId"`
	OK     bool            `json:"ok"`
	Value  json.RawMessage `json:"value"`
	Error  string          `json:"error"`
	Code   int             `json:"code"`
	Reason string          `json:"reason"`
}

// chaosIsControl reports whether msg is a reply or a close line, not a frame.
func chaosIsControl(msg []byte) bool { return bytes.HasPrefix(msg, []byte(`{"t":`)) }

var chaosOrreryKey = []byte(`"metadata":{"orrery":{`)

// chaosTagged checks that a frame from a multi-session transport carries
// metadata.orrery.session as the kernel adds it, and returns the frame's
// seq and the offsets of the tag, which removed gives the logged frame.
func chaosTagged(data []byte, session string) (seq uint64, at, n int, err error) {
	i := bytes.Index(data, chaosOrreryKey)
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("frame has no metadata.orrery: %.200s", data)
	}
	at = i + len(chaosOrreryKey)
	tag := `"session":` + strconv.Quote(session) + `,`
	if !bytes.HasPrefix(data[at:], []byte(tag)) {
		return 0, 0, 0, fmt.Errorf("frame lacks metadata.orrery.session %q: %.200s", session, data)
	}
	seq, ok := chaosSeqAt(data[at+len(tag):])
	if !ok {
		return 0, 0, 0, fmt.Errorf("frame's metadata.orrery does not start with seq: %.200s", data)
	}
	return seq, at, len(tag), nil
}

// chaosSeqAt parses `"seq":N` at the start of b.
func chaosSeqAt(b []byte) (uint64, bool) {
	b, ok := bytes.CutPrefix(b, []byte(`"seq":`))
	if !ok {
		return 0, false
	}
	var n uint64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		n = n*10 + uint64(b[i]-'0')
	}
	return n, i > 0
}

// chaosFrameSeq returns an untagged frame's seq.
func chaosFrameSeq(data []byte) (uint64, bool) {
	i := bytes.Index(data, chaosOrreryKey)
	if i < 0 {
		return 0, false
	}
	return chaosSeqAt(data[i+len(chaosOrreryKey):])
}

// chaosType reports whether data is a frame of type typ (the kernel encodes
// "type" first).
func chaosType(data []byte, typ string) bool {
	return bytes.HasPrefix(data, []byte(`{"type":"`+typ+`"`))
}

// chaosRef is the reference copy of each seq's frame: the first client to
// receive a seq stores it, every other client compares against it, and at
// the end it is compared with the log. So every client is checked against
// the log without each holding 20,000 frames.
type chaosRef struct {
	frames []atomic.Pointer[[]byte] // index seq
	from   []atomic.Pointer[string] // who stored it
}

func newChaosRef(n int) *chaosRef {
	return &chaosRef{frames: make([]atomic.Pointer[[]byte], n), from: make([]atomic.Pointer[string], n)}
}

// check compares the frame seq (data with tag removed, if tag is not empty)
// with the reference, storing it if it is the first. It returns a
// description of the difference, or "".
func (r *chaosRef) check(who string, seq uint64, data []byte, at, n int) string {
	if seq >= uint64(len(r.frames)) {
		return fmt.Sprintf("seq %d is beyond the %d frames the test expects", seq, len(r.frames))
	}
	p := r.frames[seq].Load()
	if p == nil {
		cp := make([]byte, 0, len(data)-n)
		cp = append(cp, data[:at]...)
		cp = append(cp, data[at+n:]...)
		if r.frames[seq].CompareAndSwap(nil, &cp) {
			r.from[seq].Store(&who)
			return ""
		}
		p = r.frames[seq].Load()
	}
	ref := *p
	if len(data)-n == len(ref) && bytes.Equal(data[:at], ref[:at]) && bytes.Equal(data[at+n:], ref[at:]) {
		return ""
	}
	got := append(append([]byte(nil), data[:at]...), data[at+n:]...)
	return fmt.Sprintf("seq %d differs from what %s received:\n  got  %s\n  want %s", seq, *r.from[seq].Load(), got, ref)
}

// chaosFoldState applies the STATE_SNAPSHOTs and STATE_DELTAs of frames, in
// order, with a stock JSON Patch library and returns the document.
func chaosFoldState(frames [][]byte) (json.RawMessage, error) {
	var doc json.RawMessage
	var ops [][]byte
	apply := func() error {
		if len(ops) == 0 {
			return nil
		}
		// The ops of consecutive deltas form one RFC 6902 patch, applied in
		// order exactly as the deltas one by one (and far cheaper).
		patch, err := jsonpatch.DecodePatch(append(append([]byte("["), bytes.Join(ops, []byte(","))...), ']'))
		if err != nil {
			return err
		}
		opts := jsonpatch.NewApplyOptions()
		opts.SupportNegativeIndices = false
		if doc == nil {
			return fmt.Errorf("a STATE_DELTA comes before any STATE_SNAPSHOT")
		}
		doc, err = patch.ApplyWithOptions(doc, opts)
		ops = ops[:0]
		return err
	}
	for _, f := range frames {
		var ev struct {
			Type     string            `json:"type"`
			Snapshot json.RawMessage   `json:"snapshot"`
			Delta    []json.RawMessage `json:"delta"`
		}
		switch {
		case chaosType(f, "STATE_SNAPSHOT"):
			if err := json.Unmarshal(f, &ev); err != nil {
				return nil, err
			}
			if err := apply(); err != nil {
				return nil, err
			}
			doc = ev.Snapshot
		case chaosType(f, "STATE_DELTA"):
			if err := json.Unmarshal(f, &ev); err != nil {
				return nil, err
			}
			for _, op := range ev.Delta {
				ops = append(ops, op)
			}
		}
	}
	if err := apply(); err != nil {
		return nil, err
	}
	return doc, nil
}

// chaosJSONDiff describes how two JSON documents differ, or returns "".
func chaosJSONDiff(got, want json.RawMessage) string {
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Sprintf("got is not JSON (%v): %.300s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		return fmt.Sprintf("want is not JSON (%v): %.300s", err, want)
	}
	var diffs []string
	var walk func(path string, g, w any)
	walk = func(path string, g, w any) {
		if len(diffs) >= 10 {
			return
		}
		gm, gok := g.(map[string]any)
		wm, wok := w.(map[string]any)
		if gok && wok {
			keys := map[string]bool{}
			for k := range gm {
				keys[k] = true
			}
			for k := range wm {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				gv, gin := gm[k]
				wv, win := wm[k]
				switch {
				case !gin:
					diffs = append(diffs, fmt.Sprintf("%s/%s: missing, want %.120v", path, k, wv))
				case !win:
					diffs = append(diffs, fmt.Sprintf("%s/%s: = %.120v, want absent", path, k, gv))
				default:
					walk(path+"/"+k, gv, wv)
				}
			}
			return
		}
		if !reflect.DeepEqual(g, w) {
			diffs = append(diffs, fmt.Sprintf("%s: = %.120v, want %.120v", path, g, w))
		}
	}
	walk("", g, w)
	return strings.Join(diffs, "\n")
}

// Shape of the chaos run: steps of text then one echo call; every tenth
// step starts with reasoning. The frames a step logs:
// TEXT_MESSAGE_START, chaosText × CONTENT, TEXT_MESSAGE_END,
// TOOL_CALL_START, 3 × TOOL_CALL_ARGS, TOOL_CALL_END, TOOL_CALL_RESULT,
// STATE_DELTA (+ 6 for reasoning).
const (
	chaosSteps   = 520
	chaosText    = 30
	chaosClients = 50
	// chaosPace is the time between two model deltas: ~17,800 deltas make
	// ~20,600 frames in about 8 s.
	chaosPace = 450 * time.Microsecond
	// chaosBudget bounds the whole run, clients included. It only guards
	// against a hang: on a quiet machine the run takes ~10 s, on one shared
	// with other test binaries several times that.
	chaosBudget = 3 * time.Minute
)

// chaosFrames is how many frames the run logs.
const chaosFrames = 3 + chaosSteps*(chaosText+3+6) + (chaosSteps/10)*(2+4) + 2 + (chaosText + 2) + 1

// chaosProduce plays the run's model: paced deltas, a tool call per step,
// two steers, then a last step of text only, which ends the run.
func chaosProduce(ctx context.Context, r *chaosRig, session string, feed *chaosFeed) error {
	start := time.Now()
	n := 0
	send := func(d agent.Delta) error {
		if d.Kind != 0 {
			n++
			if ahead := time.Until(start.Add(time.Duration(n) * chaosPace)); ahead > time.Millisecond {
				time.Sleep(ahead)
			}
		}
		select {
		case feed.deltas <- d:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	text := func(step int) error {
		for i := range chaosText {
			if err := send(agent.Delta{Kind: agent.DeltaText, Text: fmt.Sprintf("s%d.%d ", step, i)}); err != nil {
				return err
			}
		}
		return nil
	}
	for step := range chaosSteps {
		if step%10 == 0 {
			for i := range 2 {
				if err := send(agent.Delta{Kind: agent.DeltaReasoning, Text: fmt.Sprintf("think %d.%d ", step, i)}); err != nil {
					return err
				}
			}
		}
		if err := text(step); err != nil {
			return err
		}
		args := []string{`{"text":`, fmt.Sprintf(`"step %d `, step), `done"}`}
		if err := send(agent.Delta{Kind: agent.DeltaToolCall, ToolName: "echo"}); err != nil {
			return err
		}
		for _, a := range args {
			if err := send(agent.Delta{Kind: agent.DeltaToolArgs, Text: a}); err != nil {
				return err
			}
		}
		if err := send(agent.Delta{}); err != nil {
			return err
		}
		if step == chaosSteps/4 || step == chaosSteps/2 {
			// A steer is logged as orrery.user.message between frames of the run.
			if err := r.control(map[string]any{"t": "run.send", "id": "s", "session": session, "target": "steer",
				"input": map[string]any{"text": fmt.Sprintf("steer at step %d", step)}}, nil); err != nil {
				return err
			}
		}
	}
	if err := text(chaosSteps); err != nil {
		return err
	}
	return send(agent.Delta{})
}

// chaosClient follows the session over one transport, cutting its
// connection at random points and resuming from the last seq it holds.
type chaosClient struct {
	name string
	kind string // "sse", "ws" or "pipe"
	rng  *rand.Rand
	// cuts are the seqs after which the client disconnects, ascending.
	cuts []uint64

	last   uint64
	state  [][]byte // the STATE_* frames received, for the state check
	errs   []string
	conns  int
	ended  []string // how connections ended, for the failure report
	done   bool
	reqSeq int
}

func (c *chaosClient) fail(format string, args ...any) {
	if len(c.errs) < 8 {
		c.errs = append(c.errs, fmt.Sprintf(format, args...))
	}
}

// accept takes frame seq (data with the tag at [at, at+n) removed). It
// reports whether it is the run's last frame.
func (c *chaosClient) accept(ref *chaosRef, seq uint64, data []byte, at, n int) bool {
	switch {
	case seq <= c.last:
		c.fail("duplicate: seq %d after seq %d (connection %d)", seq, c.last, c.conns)
		return false
	case seq != c.last+1:
		c.fail("gap: seq %d after seq %d (connection %d)", seq, c.last, c.conns)
	}
	if d := ref.check(c.name, seq, data, at, n); d != "" {
		c.fail("%s", d)
	}
	c.last = seq
	if chaosType(data, "STATE_SNAPSHOT") || chaosType(data, "STATE_DELTA") {
		cp := append(append([]byte(nil), data[:at]...), data[at+n:]...)
		c.state = append(c.state, cp)
	}
	return chaosType(data, "RUN_FINISHED")
}

// cut reports whether the client should disconnect now.
func (c *chaosClient) cut() bool {
	hit := false
	for len(c.cuts) > 0 && c.last >= c.cuts[0] {
		c.cuts = c.cuts[1:]
		hit = true
	}
	return hit
}

func (c *chaosClient) run(ctx context.Context, r *chaosRig, ref *chaosRef, session string) {
	time.Sleep(time.Duration(c.rng.IntN(400)) * time.Millisecond) // join late, with a backlog
	for !c.done && ctx.Err() == nil {
		c.conns++
		var how string
		var err error
		if c.kind == "sse" {
			how, err = c.sse(ctx, r, ref, session)
		} else {
			how, err = c.link(ctx, r, ref, session)
		}
		if err != nil {
			how = "error: " + err.Error()
		}
		if len(c.ended) < 20 {
			c.ended = append(c.ended, fmt.Sprintf("#%d at seq %d: %s", c.conns, c.last, how))
		}
		if c.done {
			return
		}
		if c.rng.IntN(6) == 0 {
			// Stay away a while, so the resume replays a long backlog.
			time.Sleep(time.Duration(50+c.rng.IntN(150)) * time.Millisecond)
		} else {
			time.Sleep(time.Duration(c.rng.IntN(20)) * time.Millisecond)
		}
	}
}

// sse follows GET /events from c.last, with since= or Last-Event-ID.
func (c *chaosClient) sse(ctx context.Context, r *chaosRig, ref *chaosRef, session string) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	url := r.url + "/events?session=" + session
	header := c.rng.IntN(2) == 0
	if !header {
		url += "&since=" + strconv.FormatUint(c.last, 10)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if header {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(c.last, 10))
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		c.fail("GET %s = %d %s", url, resp.StatusCode, body)
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	s := newChaosSSE(resp.Body)
	for {
		ev, err := s.next()
		if err != nil {
			// The server may end a stream (a subscriber too far behind):
			// resume, as a client would.
			return "", err
		}
		if !ev.hasID {
			c.fail("event without id after seq %d: %.200s", c.last, ev.data)
			continue
		}
		if seq, ok := chaosFrameSeq(ev.data); !ok || seq != ev.id {
			c.fail("event id %d carries metadata.orrery.seq %d (%v): %.200s", ev.id, seq, ok, ev.data)
		}
		if c.accept(ref, ev.id, ev.data, 0, 0) {
			c.done = true
			return "finished", nil
		}
		if c.cut() {
			return "cut", nil // the deferred Body.Close drops the connection mid-stream
		}
	}
}

// link follows the session over a WebSocket or a pipe: session.attach with
// since, on a new connection or, sometimes, again on the same one.
func (c *chaosClient) link(ctx context.Context, r *chaosRig, ref *chaosRef, session string) (string, error) {
	l, err := r.dialLink(ctx, c.kind, &websocket.DialOptions{HTTPClient: r.http}, nil)
	if err != nil {
		return "", err
	}
	graceful := c.rng.IntN(2) == 0
	defer func() { l.close(graceful) }()
	request := func(v map[string]any) (string, error) {
		c.reqSeq++
		id := fmt.Sprintf("%s-%d", v["t"], c.reqSeq)
		v["id"] = id
		return id, l.send(v)
	}
	if c.rng.IntN(2) == 0 {
		if _, err := request(map[string]any{"t": "hello", "client": "chaos"}); err != nil {
			return "", err
		}
	}
	awaiting, err := request(map[string]any{"t": "session.attach", "session": session, "since": c.last})
	if err != nil {
		return "", err
	}
	for {
		msg, err := l.next()
		if err != nil {
			return "", err
		}
		if chaosIsControl(msg) {
			var m chaosControlMsg
			if err := json.Unmarshal(msg, &m); err != nil {
				c.fail("bad message %.200s: %v", msg, err)
				continue
			}
			switch {
			case m.T == "close":
				return fmt.Sprintf("server closed: %d %s", m.Code, m.Reason), nil
			case m.T != "reply":
				c.fail("unexpected %.300s", msg)
			case m.ReqID == awaiting && !m.OK:
				c.fail("session.attach since %d refused: %s", c.last, m.Error)
				return "", errors.New(m.Error)
			case m.ReqID == awaiting:
				awaiting = ""
			case !m.OK:
				c.fail("request %s refused: %s", m.ReqID, m.Error)
			}
			continue
		}
		if awaiting != "" {
			// Frames of the previous attachment, queued before the new
			// attach's reply: the new one replays from c.last.
			continue
		}
		seq, at, n, err := chaosTagged(msg, session)
		if err != nil {
			c.fail("%v", err)
			continue
		}
		if c.accept(ref, seq, msg, at, n) {
			c.done = true
			return "finished", nil
		}
		if c.cut() {
			if c.rng.IntN(3) > 0 {
				return "cut", nil
			}
			// Attach again on the same connection.
			if awaiting, err = request(map[string]any{"t": "session.attach", "session": session, "since": c.last}); err != nil {
				return "", err
			}
		}
	}
}

// TestChaosResume follows one long run (20,000+ frames: text, tool calls
// whose results add surfaces by STATE_DELTA, reasoning, steers) with 50
// clients over SSE, WebSocket and pipe that each disconnect at random
// points and resume from their last seq. Every client must end with exactly
// the log's frames, in order, and rebuild the server's state from them.
func TestChaosResume(t *testing.T) {
	if testing.Short() {
		t.Skip("long chaos run")
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("ORRERY_CHAOS_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (rerun with ORRERY_CHAOS_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x6368616f73))

	feed := &chaosFeed{deltas: make(chan agent.Delta, 64)}
	r := newChaosRig(t, feed, 0, 0)
	session := r.newSession(t)

	ctx, cancel := context.WithTimeout(context.Background(), chaosBudget)
	defer cancel()
	ref := newChaosRef(chaosFrames + 64)
	clients := make([]*chaosClient, chaosClients)
	kinds := []string{"sse", "ws", "pipe"}
	for i := range clients {
		c := &chaosClient{kind: kinds[i%3], rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))}
		c.name = fmt.Sprintf("%s-%02d", c.kind, i)
		for range 3 + c.rng.IntN(4) {
			c.cuts = append(c.cuts, 1+c.rng.Uint64N(chaosFrames))
		}
		sort.Slice(c.cuts, func(a, b int) bool { return c.cuts[a] < c.cuts[b] })
		clients[i] = c
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { c.run(ctx, r, ref, session) })
	}
	if err := r.control(map[string]any{"t": "run.send", "id": "go", "session": session, "input": map[string]any{"text": "go"}}, nil); err != nil {
		t.Fatal(err)
	}
	produced := make(chan error, 1)
	go func() { produced <- chaosProduce(ctx, r, session, feed) }()
	if err := <-produced; err != nil {
		cancel()
		wg.Wait()
		t.Fatalf("producing the run: %v", err)
	}
	runTime := time.Since(start)
	wg.Wait()
	t.Logf("run produced in %v; every client done after %v", runTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	if ctx.Err() != nil {
		for _, c := range clients {
			if !c.done {
				t.Errorf("client %s did not finish within %v: at seq %d after %d connections; ends: %s",
					c.name, chaosBudget, c.last, c.conns, strings.Join(c.ended, "; "))
			}
		}
		t.FailNow()
	}

	log := r.readLog(t, session)
	if len(log) < 20000 {
		t.Errorf("the log holds %d frames, want at least 20000", len(log))
	}
	for i, f := range log {
		seq, ok := chaosFrameSeq(f)
		if !ok || seq != uint64(i+1) {
			t.Fatalf("session.read frame %d has seq %d (%v), want %d: %.200s", i, seq, ok, i+1, f)
		}
		if p := ref.frames[seq].Load(); p == nil {
			t.Errorf("no client received seq %d", seq)
		} else if !bytes.Equal(*p, f) {
			t.Errorf("seq %d as clients received it (first %s) differs from the log:\n  got  %s\n  want %s", seq, *ref.from[seq].Load(), *p, f)
		}
	}
	if last := log[len(log)-1]; !chaosType(last, "RUN_FINISHED") {
		t.Errorf("last logged frame = %.200s, want RUN_FINISHED", last)
	}
	if extra := ref.frames[len(log)+1].Load(); extra != nil {
		t.Errorf("clients received seq %d beyond the log's head %d: %s", len(log)+1, len(log), *extra)
	}

	want := r.serverState(t, session)
	logState, err := chaosFoldState(log)
	if err != nil {
		t.Fatalf("applying the log's state frames: %v", err)
	}
	if d := chaosJSONDiff(logState, want); d != "" {
		t.Errorf("the log's STATE_SNAPSHOT/STATE_DELTAs give a state other than the server's:\n%s", d)
	}
	var surfaces struct {
		Surfaces map[string]json.RawMessage `json:"surfaces"`
	}
	json.Unmarshal(want, &surfaces)
	if len(surfaces.Surfaces) != chaosSteps {
		t.Errorf("server state has %d surfaces, want one per tool call (%d)", len(surfaces.Surfaces), chaosSteps)
	}

	// Clients whose state frames are byte-identical rebuild the same state:
	// apply each distinct sequence once.
	folded := map[string]json.RawMessage{}
	reconnects := 0
	for _, c := range clients {
		reconnects += c.conns - 1
		for _, e := range c.errs {
			t.Errorf("client %s: %s", c.name, e)
		}
		if c.last != uint64(len(log)) {
			t.Errorf("client %s ends at seq %d, want the log's head %d; connections: %s", c.name, c.last, len(log), strings.Join(c.ended, "; "))
			continue
		}
		key := string(bytes.Join(c.state, []byte("\n")))
		got, ok := folded[key]
		if !ok {
			var err error
			if got, err = chaosFoldState(c.state); err != nil {
				t.Errorf("client %s: applying its state frames: %v", c.name, err)
				continue
			}
			folded[key] = got
		}
		if d := chaosJSONDiff(got, want); d != "" {
			t.Errorf("client %s: its STATE_SNAPSHOT/STATE_DELTAs give a state other than the server's:\n%s", c.name, d)
		}
	}
	t.Logf("%d frames; %d clients; %d reconnections", len(log), len(clients), reconnects)
}
