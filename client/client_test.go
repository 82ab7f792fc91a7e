package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/agent/provider/script"
	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/internal/logbuf"
	"github.com/getorrery/orrery/internal/testdisk"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// testTimeout bounds each wait of a test.
const testTimeout = 20 * time.Second

// transports are the targets every transport test runs against.
var transports = []string{client.TransportHTTP, client.TransportWS, client.TransportPipe}

// harness is a kernel on a real SQLite file behind a real listener and a
// pipe, each reached through a proxy the test can cut.
type harness struct {
	t   *testing.T
	dir string
	db  string
	gen int

	st        *sqlite.Log
	k         *kernel.Kernel
	srv       *server.Server
	hs        *httptest.Server
	pipeStop  context.CancelFunc
	pipeDone  chan error
	tcp, unix *proxy
	logs      *logbuf.Buffer
	hub       *hub.Hub // the server's event hub, kept across restarts
	// flood, when set, is the kernel's default model (newFloodHarness).
	flood *testdisk.Flood
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessIn(t, t.TempDir(), nil)
}

// newHarnessIn starts a harness whose log is in dir; with flood set, that
// is the kernel's default model.
func newHarnessIn(t *testing.T, dir string, flood *testdisk.Flood) *harness {
	t.Helper()
	h := &harness{t: t, dir: dir, db: filepath.Join(dir, "orrery.db"), logs: &logbuf.Buffer{}, hub: hub.New(), flood: flood}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server logs:\n%s", h.logs.String())
		}
	})
	h.start()
	h.tcp = newProxy(t, "tcp", "127.0.0.1:0", h.hs.Listener.Addr().String())
	h.unix = newProxy(t, "unix", filepath.Join(dir, "proxy.sock"), h.sockPath())
	t.Cleanup(func() {
		h.tcp.close()
		h.unix.close()
		h.stop()
	})
	return h
}

func (h *harness) sockPath() string { return filepath.Join(h.dir, fmt.Sprintf("p%d.sock", h.gen)) }

// start opens the store, the kernel and the server on the harness's files.
func (h *harness) start() {
	t := h.t
	t.Helper()
	h.gen++
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, err := sqlite.Open(h.db)
	if err != nil {
		t.Fatalf("sqlite.Open() = %v, want nil", err)
	}
	cfg := kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "offline", Tools: tool.Builtins(), DebugActor: true, Logger: log}
	if h.flood != nil {
		cfg.Models, cfg.DefaultModel = h.flood.Models(models.Resolve), "flood"
	}
	k := kernel.New(cfg)
	if err := k.Open(context.Background()); err != nil {
		st.Close()
		t.Fatalf("kernel.Open() = %v, want nil", err)
	}
	// The tests name scripted models and put sessions in their own
	// temporary directories.
	srv := server.New(server.Config{Kernel: k, Logger: log, KeepAlive: 200 * time.Millisecond, Hub: h.hub,
		CheckSpec: models.RequestPolicy{AllowCommands: true}.Check, Roots: []string{os.TempDir()}})
	ln, err := server.ListenPipe(h.sockPath())
	if err != nil {
		t.Fatalf("ListenPipe() = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServePipeListener(ctx, ln) }()
	h.st, h.k, h.srv, h.hs, h.pipeStop, h.pipeDone = st, k, srv, httptest.NewServer(srv), cancel, done
}

// stop closes the server, the kernel and the store.
func (h *harness) stop() {
	if h.k == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.srv.Close(ctx); err != nil {
		h.t.Errorf("server.Close() = %v, want nil", err)
	}
	h.hs.Close()
	h.pipeStop()
	<-h.pipeDone
	if err := h.k.Close(ctx); err != nil {
		h.t.Errorf("kernel.Close() = %v, want nil", err)
	}
	if err := h.st.Close(); err != nil {
		h.t.Errorf("store.Close() = %v, want nil", err)
	}
	h.k = nil
}

// restart stops the kernel and starts a new one on the same log, behind
// the same proxies.
func (h *harness) restart() {
	h.stop()
	h.start()
	h.tcp.retarget(h.hs.Listener.Addr().String())
	h.unix.retarget(h.sockPath())
}

// sever cuts every connection through the proxies.
func (h *harness) sever() {
	h.tcp.sever()
	h.unix.sever()
}

// target returns the address of the kernel for a transport.
func (h *harness) target(transport string) string {
	switch transport {
	case client.TransportWS:
		return "ws://" + h.tcp.addr()
	case client.TransportPipe:
		return "pipe:" + h.unix.addr()
	}
	return "http://" + h.tcp.addr()
}

func (h *harness) dial(transport string, opts client.Options) *client.Client {
	h.t.Helper()
	opts.ReconnectDelay = 20 * time.Millisecond
	opts.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("side", "client")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := client.Dial(ctx, h.target(transport), opts)
	if err != nil {
		h.t.Fatalf("Dial(%s) = %v, want nil", h.target(transport), err)
	}
	if got := c.Transport(); got != transport {
		h.t.Fatalf("Transport() = %s, want %s", got, transport)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// script writes a script model and returns its spec.
func (h *harness) script(turns ...script.Turn) string {
	h.t.Helper()
	data, err := json.Marshal(script.File{Turns: turns})
	if err != nil {
		h.t.Fatal(err)
	}
	f, err := os.CreateTemp(h.dir, "script-*.json")
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		h.t.Fatal(err)
	}
	return "script:" + f.Name()
}

// proxy forwards connections to a target the test can change, and cuts
// them on demand.
type proxy struct {
	t       *testing.T
	network string
	ln      net.Listener
	wg      sync.WaitGroup

	mu     sync.Mutex // guards target and conns
	target string
	conns  map[net.Conn]struct{}
}

func newProxy(t *testing.T, network, listen, target string) *proxy {
	t.Helper()
	ln, err := net.Listen(network, listen)
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &proxy{t: t, network: network, ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		out, err := net.Dial(p.network, target)
		if err != nil {
			in.Close()
			continue
		}
		p.track(in, out)
		p.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			io.Copy(dst, src)
			dst.Close()
			src.Close()
			p.untrack(dst, src)
		}
		go pipe(in, out)
		go pipe(out, in)
	}
}

func (p *proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	p.mu.Unlock()
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		delete(p.conns, c)
	}
	p.mu.Unlock()
}

func (p *proxy) sever() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) retarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.ln.Close()
	p.sever()
	p.wg.Wait()
}

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// readUntil reads s until stop reports true for a frame, and returns the
// frames read.
func readUntil(t *testing.T, ctx context.Context, s *client.Stream, stop func(client.Frame) bool) []client.Frame {
	t.Helper()
	var got []client.Frame
	for {
		f, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("Next() after %d frames = %v, want a frame", len(got), err)
		}
		got = append(got, f)
		if stop(f) {
			return got
		}
	}
}

func terminal(f client.Frame) bool { return f.Type.Terminal() }

func atSeq(seq uint64) func(client.Frame) bool {
	return func(f client.Frame) bool { return f.Seq >= seq }
}

// untag removes the metadata.orrery.session a WebSocket or pipe adds.
func untag(data []byte, session string) []byte {
	return bytes.Replace(data, []byte(`"session":"`+session+`",`), nil, 1)
}

// checkLog checks that frames are the log's frames after since, in order,
// each once, byte for byte (without the session tag).
func checkLog(t *testing.T, c *client.Client, session string, since uint64, frames []client.Frame) {
	t.Helper()
	log, err := c.ReadAll(timeout(t), session, since)
	if err != nil {
		t.Fatalf("ReadAll() = %v", err)
	}
	if len(frames) != len(log) {
		t.Errorf("got %d frames, want the log's %d after seq %d", len(frames), len(log), since)
	}
	for i, f := range frames {
		if f.Seq != since+uint64(i)+1 {
			t.Fatalf("frame %d has seq %d, want %d (seqs must be contiguous)", i, f.Seq, since+uint64(i)+1)
		}
		if f.Session != session {
			t.Errorf("frame %d Session = %q, want %q", f.Seq, f.Session, session)
		}
		if f.Event == nil || f.Event.EventType() != f.Type {
			t.Errorf("frame %d Event = %v, want a decoded %s", f.Seq, f.Event, f.Type)
		}
		if i < len(log) && !bytes.Equal(untag(f.Data, session), log[i]) {
			t.Errorf("frame %d = %s, want the logged %s", f.Seq, f.Data, log[i])
		}
	}
}

// stateOf folds frames into a State.
func stateOf(t *testing.T, frames []json.RawMessage) *client.State {
	t.Helper()
	st := client.NewState()
	for _, f := range frames {
		if err := st.Apply(client.Frame{Data: f}); err != nil {
			t.Fatalf("Apply(%s) = %v", f, err)
		}
	}
	return st
}

func sameState(t *testing.T, what string, got, want *client.State) {
	t.Helper()
	g, _ := json.Marshal(got.Messages())
	w, _ := json.Marshal(want.Messages())
	if !bytes.Equal(g, w) {
		t.Errorf("%s: messages = %s, want %s", what, g, w)
	}
	if !jsonEqual(got.Shared(), want.Shared()) {
		t.Errorf("%s: state = %s, want %s", what, got.Shared(), want.Shared())
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// runPrompt sends text to an idle session and waits for the run's end.
func runPrompt(t *testing.T, c *client.Client, session, text string) {
	t.Helper()
	ctx := timeout(t)
	page, err := c.Read(ctx, session, 0, 1)
	if err != nil {
		t.Fatalf("Read() = %v", err)
	}
	s, err := c.Attach(ctx, session, &page.Head)
	if err != nil {
		t.Fatalf("Attach() = %v", err)
	}
	defer s.Close()
	if _, err := c.Send(ctx, session, protocol.RunInput{Text: text}); err != nil {
		t.Fatalf("Send() = %v", err)
	}
	readUntil(t, ctx, s, terminal)
}

func TestRequestReply(t *testing.T) {
	h := newHarness(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := h.dial(tr, client.Options{Client: "test", Draws: []string{"thread", "tools"}})
			ctx := timeout(t)
			if tr != client.TransportHTTP {
				if got := c.Hello().Protocol; got != protocol.ProtocolVersion {
					t.Errorf("Hello().Protocol = %q, want %q", got, protocol.ProtocolVersion)
				}
			}
			id, err := c.NewSession(ctx, protocol.SessionNew{Title: "t-" + tr})
			if err != nil || id == "" {
				t.Fatalf("NewSession() = %q, %v, want an id", id, err)
			}
			list, err := c.Sessions(ctx)
			if err != nil {
				t.Fatalf("Sessions() = %v", err)
			}
			found := false
			for _, s := range list {
				found = found || (s.ID == id && s.Title == "t-"+tr)
			}
			if !found {
				t.Errorf("Sessions() = %+v, want %s titled t-%s", list, id, tr)
			}

			err = c.Cancel(ctx, id, "")
			var re *client.RequestError
			if !errors.As(err, &re) || !strings.Contains(re.Message, "nothing to cancel") || re.Request != "run.cancel" {
				t.Errorf("Cancel(idle) = %v, want a *RequestError saying there is nothing to cancel", err)
			}
			if tr == client.TransportHTTP && (re == nil || re.Status != 400) {
				t.Errorf("Cancel(idle) over HTTP: status = %+v, want 400", re)
			}
			if _, err := c.Read(ctx, "ses_nope", 0, 0); !errors.As(err, &re) || !strings.Contains(re.Message, "unknown session") {
				t.Errorf("Read(unknown) = %v, want a *RequestError naming the unknown session", err)
			}
			if _, err := c.Do(ctx, &protocol.SessionAttach{Envelope: protocol.Envelope{T: "nope"}}); !errors.As(err, &re) || !strings.Contains(re.Message, "not a request") {
				t.Errorf("Do(t nope) = %v, want a *RequestError", err)
			}
			value, err := c.Do(ctx, &protocol.SessionList{Envelope: protocol.Envelope{T: "session.list"}})
			if err != nil || !bytes.Contains(value, []byte(id)) {
				t.Errorf("Do(session.list) = %s, %v, want the list with %s", value, err, id)
			}

			runPrompt(t, c, id, "hello there")
			page, err := c.Read(ctx, id, 0, 0)
			if err != nil {
				t.Fatalf("Read() = %v", err)
			}
			if page.Head == 0 || len(page.Frames) != int(page.Head) {
				t.Fatalf("Read() = %d frames, head %d, want every frame of the run", len(page.Frames), page.Head)
			}
			if !bytes.Contains(page.Frames[len(page.Frames)-1], []byte(`"RUN_FINISHED"`)) {
				t.Errorf("last frame = %s, want RUN_FINISHED", page.Frames[len(page.Frames)-1])
			}
			if _, err := c.Send(ctx, id, protocol.RunInput{}); !errors.As(err, &re) || !strings.Contains(re.Message, "input.text") {
				t.Errorf("Send(empty) = %v, want a refusal naming input.text", err)
			}
		})
	}
}

func TestAttachSince(t *testing.T) {
	h := newHarness(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := h.dial(tr, client.Options{})
			ctx := timeout(t)
			id, err := c.NewSession(ctx, protocol.SessionNew{})
			if err != nil {
				t.Fatal(err)
			}
			runPrompt(t, c, id, "echo one two three")
			log, err := c.ReadAll(ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			head := uint64(len(log))
			for _, since := range []uint64{0, 3, head - 1} {
				s, err := c.Attach(ctx, id, &since)
				if err != nil {
					t.Fatalf("Attach(since %d) = %v", since, err)
				}
				checkLog(t, c, id, since, readUntil(t, ctx, s, atSeq(head)))
				s.Close()
			}

			// At the head: nothing until something happens.
			s, err := c.Attach(ctx, id, &head)
			if err != nil {
				t.Fatalf("Attach(since head) = %v", err)
			}
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			if f, err := s.Next(wctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Next() at the head = %s, %v, want a wait that times out", f.Data, err)
			}
			cancel()
			s.Close()
			if _, err := s.Next(ctx); !errors.Is(err, client.ErrClosed) {
				t.Errorf("Next() after Close = %v, want ErrClosed", err)
			}

			want := stateOf(t, log)
			// Without since: two seq-0 snapshots that hold the whole session.
			s, err = c.Attach(ctx, id, nil)
			if err != nil {
				t.Fatalf("Attach(no since) = %v", err)
			}
			var snaps []json.RawMessage
			for _, typ := range []protocol.EventType{protocol.TypeStateSnapshot, protocol.TypeMessagesSnapshot} {
				f, err := s.Next(ctx)
				if err != nil || f.Seq != 0 || f.Type != typ {
					t.Fatalf("Next() = seq %d %s, %v, want a seq-0 %s", f.Seq, f.Type, err, typ)
				}
				snaps = append(snaps, f.Data)
			}
			s.Close()
			sameState(t, "snapshots", stateOf(t, snaps), want)

			// Coalesced: fewer frames, the same result.
			zero := uint64(0)
			s, err = c.AttachWith(ctx, id, client.AttachOptions{Since: &zero, Coalesce: true})
			if err != nil {
				t.Fatalf("AttachWith(coalesce) = %v", err)
			}
			frames := readUntil(t, ctx, s, atSeq(head))
			s.Close()
			var data []json.RawMessage
			merged := 0
			for _, f := range frames {
				data = append(data, f.Data)
				if f.MergedFrom > 0 {
					merged++
				}
			}
			if merged == 0 || len(frames) >= len(log) {
				t.Errorf("coalesced replay: %d frames, %d merged, want fewer than %d with some merged", len(frames), merged, len(log))
			}
			sameState(t, "coalesced", stateOf(t, data), want)

			beyond := head + 10
			var re *client.RequestError
			if _, err := c.Attach(ctx, id, &beyond); !errors.As(err, &re) || !strings.Contains(re.Message, "beyond the head") {
				t.Errorf("Attach(since beyond head) = %v, want a refusal", err)
			}
			if _, err := c.Attach(ctx, "ses_nope", nil); !errors.As(err, &re) {
				t.Errorf("Attach(unknown session) = %v, want a *RequestError", err)
			}
		})
	}
}

// slowText is a script turn that streams n chunks, delay apart.
func slowText(n, delayMS int) script.Turn {
	chunks := make([]string, n)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("w%d ", i)
	}
	return script.Turn{Text: chunks, DelayMS: delayMS}
}

// followRun attaches to an empty session, starts a run and reads it to its
// end, calling during (once) after the k-th text delta.
func followRun(t *testing.T, c *client.Client, session string, k int, during func()) (*client.Stream, []client.Frame) {
	t.Helper()
	ctx := timeout(t)
	zero := uint64(0)
	s, err := c.Attach(ctx, session, &zero)
	if err != nil {
		t.Fatalf("Attach() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := c.Send(ctx, session, protocol.RunInput{Text: "count"}); err != nil {
		t.Fatalf("Send() = %v", err)
	}
	deltas := 0
	frames := readUntil(t, ctx, s, func(f client.Frame) bool {
		if f.Type == protocol.TypeTextMessageContent {
			if deltas++; deltas == k {
				during()
			}
		}
		return terminal(f)
	})
	return s, frames
}

func TestReconnectAfterDrop(t *testing.T) {
	h := newHarness(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := h.dial(tr, client.Options{})
			ctx := timeout(t)
			id, err := c.NewSession(ctx, protocol.SessionNew{Model: h.script(slowText(24, 15))})
			if err != nil {
				t.Fatal(err)
			}
			cuts := 0
			s, frames := followRun(t, c, id, 4, func() { h.sever(); cuts++ })
			if cuts != 1 || s.Reconnects() < 1 {
				t.Errorf("cuts %d, Reconnects() = %d, want the stream to reconnect after the cut", cuts, s.Reconnects())
			}
			if s.Gaps() != 0 {
				t.Errorf("Gaps() = %d, want 0", s.Gaps())
			}
			if frames[len(frames)-1].Type != protocol.TypeRunFinished {
				t.Errorf("last frame = %s, want RUN_FINISHED", frames[len(frames)-1].Data)
			}
			checkLog(t, c, id, 0, frames)
			// Requests work again too.
			if _, err := c.Sessions(ctx); err != nil {
				t.Errorf("Sessions() after the cut = %v, want nil", err)
			}
		})
	}
}

func TestReconnectAfterRestart(t *testing.T) {
	h := newHarness(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := h.dial(tr, client.Options{})
			ctx := timeout(t)
			id, err := c.NewSession(ctx, protocol.SessionNew{Model: h.script(slowText(40, 25))})
			if err != nil {
				t.Fatal(err)
			}
			s, frames := followRun(t, c, id, 3, h.restart)
			last := frames[len(frames)-1]
			if re, ok := last.Event.(*protocol.RunError); !ok || re.Code != "interrupted" {
				t.Errorf("last frame = %s, want RUN_ERROR interrupted", last.Data)
			}
			if s.Reconnects() < 1 {
				t.Errorf("Reconnects() = %d, want at least 1", s.Reconnects())
			}
			checkLog(t, c, id, 0, frames)
		})
	}
}

func TestSlowConsumerResumes(t *testing.T) {
	h := newHarness(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := h.dial(tr, client.Options{MaxQueue: 3})
			ctx := timeout(t)
			id, err := c.NewSession(ctx, protocol.SessionNew{})
			if err != nil {
				t.Fatal(err)
			}
			runPrompt(t, c, id, "echo a b c d e f")
			page, err := c.Read(ctx, id, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			zero := uint64(0)
			s, err := c.Attach(ctx, id, &zero)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			time.Sleep(100 * time.Millisecond) // let the queue overflow
			frames := readUntil(t, ctx, s, atSeq(page.Head))
			if s.Reconnects() < 1 {
				t.Errorf("Reconnects() = %d, want the stream to resume after overflowing", s.Reconnects())
			}
			checkLog(t, c, id, 0, frames)
		})
	}
}

func TestSeveralSessionsOneConnection(t *testing.T) {
	h := newHarness(t)
	for _, tr := range []string{client.TransportWS, client.TransportPipe} {
		t.Run(tr, func(t *testing.T) {
			c := h.dial(tr, client.Options{})
			ctx := timeout(t)
			var ids []string
			var streams []*client.Stream
			zero := uint64(0)
			for range 2 {
				id, err := c.NewSession(ctx, protocol.SessionNew{})
				if err != nil {
					t.Fatal(err)
				}
				s, err := c.Attach(ctx, id, &zero)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				ids, streams = append(ids, id), append(streams, s)
			}
			if _, err := c.Attach(ctx, ids[0], nil); err == nil {
				t.Error("Attach() of an attached session = nil, want an error")
			}
			for i, id := range ids {
				if _, err := c.Send(ctx, id, protocol.RunInput{Text: fmt.Sprintf("echo session %d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			for i, id := range ids {
				checkLog(t, c, id, 0, readUntil(t, ctx, streams[i], terminal))
			}
		})
	}
}

func TestDialErrors(t *testing.T) {
	ctx := timeout(t)
	dir := t.TempDir()
	for _, tt := range []struct {
		target string
		opts   client.Options
		want   string
	}{
		{"pipe:orrery", client.Options{}, "data dir"},
		{"pipe:orrery", client.Options{DataDir: dir}, filepath.Join(dir, "orrery.sock")},
		{"pipe:" + filepath.Join(dir, "x.sock"), client.Options{}, filepath.Join(dir, "x.sock")},
		{"ftp://example.com", client.Options{}, "scheme ftp is unknown"},
		{"http://127.0.0.1:1", client.Options{Transport: "carrier-pigeon"}, "transport"},
		{"127.0.0.1:1", client.Options{}, "orrery serve"},
	} {
		if _, err := client.Dial(ctx, tt.target, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Dial(%s) = %v, want an error containing %q", tt.target, err, tt.want)
		}
	}
}

// TestHTTPTargetOverWS dials an http:// target with Transport ws.
func TestHTTPTargetOverWS(t *testing.T) {
	h := newHarness(t)
	c, err := client.Dial(timeout(t), "http://"+h.tcp.addr(), client.Options{Transport: client.TransportWS})
	if err != nil {
		t.Fatalf("Dial() = %v", err)
	}
	defer c.Close()
	if c.Transport() != client.TransportWS || c.Hello().Protocol != protocol.ProtocolVersion {
		t.Errorf("Transport() = %s, Hello() = %+v, want ws with a hello", c.Transport(), c.Hello())
	}
}

// TestRefusedHelloIsFinal: a real server refuses a hello whose draws lack a
// required element; Dial fails with the server's reason, without retrying.
func TestRefusedHelloIsFinal(t *testing.T) {
	h := newHarness(t)
	for _, tr := range []string{client.TransportWS, client.TransportPipe} {
		t.Run(tr, func(t *testing.T) {
			_, err := client.Dial(timeout(t), h.target(tr), client.Options{Client: "picky", Draws: []string{"consent"}})
			if err == nil || !strings.Contains(err.Error(), `lacks "thread"`) {
				t.Errorf("Dial(draws=consent) = %v, want the refusal naming thread", err)
			}
		})
	}
}

// TestDeclarationReachesRequests: a client that declares it draws consent
// may answer consent over every transport, POST /control included (the
// answer to an unknown request is then refused for that, not for the
// declaration), and one that does not is refused for the declaration.
func TestDeclarationReachesRequests(t *testing.T) {
	h := newHarness(t)
	for _, tr := range transports {
		for _, draws := range [][]string{{"thread", "tools", "consent"}, {"thread", "tools"}} {
			t.Run(tr+"/"+strings.Join(draws, ","), func(t *testing.T) {
				c := h.dial(tr, client.Options{Client: "test", Draws: draws})
				ctx := timeout(t)
				id, err := c.NewSession(ctx, protocol.SessionNew{})
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.Do(ctx, &protocol.ConsentAnswer{Envelope: protocol.Envelope{T: "consent.answer"}, Session: id, Request: "consent_nope", Option: "allow_once"})
				want := "no consent request"
				if len(draws) == 2 {
					want = "does not draw consent"
				}
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("consent.answer = %v, want a refusal naming %q", err, want)
				}
			})
		}
	}
}

// TestWorkspaceFiles lists a session's workspace over every transport and
// attaches a listed file by its path: the kernel logs it as the text part
// the terminal UI sends.
func TestWorkspaceFiles(t *testing.T) {
	h := newHarness(t)
	ws := t.TempDir()
	for name, content := range map[string]string{"notes.txt": "apples\n", "src/notes.go": "package src\n", ".git/notes": "x\n"} {
		full := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := h.dial(tr, client.Options{Client: "test", Draws: []string{"thread", "tools"}})
			ctx := timeout(t)
			id, err := c.NewSession(ctx, protocol.SessionNew{Cwd: ws})
			if err != nil {
				t.Fatalf("NewSession() = %v", err)
			}
			got, err := c.WorkspaceFiles(ctx, id, "no", 0)
			if err != nil || !slices.Equal(got.Files, []string{"notes.txt", "src/notes.go"}) || got.Truncated {
				t.Errorf("WorkspaceFiles(no) = %+v, %v, want notes.txt and src/notes.go, not truncated", got, err)
			}
			m, err := c.MatchWorkspaceFiles(ctx, id, "srcnot", 0)
			if err != nil || !slices.Equal(m.Files, []string{"src/notes.go"}) || len(m.Matches) != 1 || !slices.Equal(m.Matches[0], []int{0, 1, 2, 4, 5, 6}) {
				t.Errorf("MatchWorkspaceFiles(srcnot) = %+v, %v, want src/notes.go matched at 0 1 2 4 5 6", m, err)
			}
			if got, err := c.WorkspaceFiles(ctx, id, "", 1); err != nil || len(got.Files) != 1 || !got.Truncated {
				t.Errorf("WorkspaceFiles(limit 1) = %+v, %v, want one file, truncated", got, err)
			}
			var re *client.RequestError
			if _, err := c.WorkspaceFiles(ctx, id, "../", 0); !errors.As(err, &re) || !strings.Contains(re.Message, "climbs out") {
				t.Errorf("WorkspaceFiles(../) = %v, want a refusal", err)
			}
			in := protocol.RunInput{Text: "see @notes.txt", Attachments: []protocol.ContentPart{{Type: "document", Source: &protocol.Source{Type: "path", Value: "notes.txt"}}}}
			s, err := c.Attach(ctx, id, new(uint64))
			if err != nil {
				t.Fatalf("Attach() = %v", err)
			}
			defer s.Close()
			if _, err := c.Send(ctx, id, in); err != nil {
				t.Fatalf("Send(path attachment) = %v", err)
			}
			readUntil(t, ctx, s, terminal)
			frames, err := c.ReadAll(ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"type":"text","text":"File @notes.txt:\napples\n"}`
			found := false
			for _, f := range frames {
				found = found || bytes.Contains(f, []byte(want))
			}
			if !found {
				t.Errorf("no frame carries %s: %s", want, frames)
			}
		})
	}
}
