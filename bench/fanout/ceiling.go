package fanout

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
)

// Ceiling is the physical ceiling the systems are compared with: the least a
// Go server can do to fan frames out. Each frame is encoded once. Publish
// queues it for the ceiling's one publisher goroutine, which hands every
// frame queued since its last round to each connection's queue (one lock
// per connection per round, as a session's committer does) and signals it.
// Each connection's handler takes everything queued and writes it with one
// Flush (SSE) or as one message (WebSocket). Queues grow as needed, so an
// idle connection holds no buffer.
type Ceiling struct {
	URL string
	ws  bool

	mu   sync.Mutex // guards subs
	subs []*ceilingSub

	pmu     sync.Mutex // guards pending
	pending [][]byte
	wake    chan struct{}

	srv *httptest.Server
}

type ceilingSub struct {
	mu    sync.Mutex // guards q
	q     [][]byte
	ready chan struct{}
}

// NewCeilingSSE starts a ceiling serving SSE at URL.
func NewCeilingSSE(b testing.TB) *Ceiling { return newCeiling(b, false) }

// NewCeilingWS starts a ceiling serving WebSocket at URL (ws://).
func NewCeilingWS(b testing.TB) *Ceiling { return newCeiling(b, true) }

func newCeiling(b testing.TB, ws bool) *Ceiling {
	c := &Ceiling{ws: ws, wake: make(chan struct{}, 1)}
	done := make(chan struct{})
	go c.publisher(done)
	b.Cleanup(func() { close(done) })
	if ws {
		c.srv = httptest.NewServer(http.HandlerFunc(c.serveWS))
		c.URL = "ws" + strings.TrimPrefix(c.srv.URL, "http")
	} else {
		c.srv = httptest.NewServer(http.HandlerFunc(c.serveSSE))
		c.URL = c.srv.URL
	}
	b.Cleanup(c.srv.Close)
	return c
}

func (c *Ceiling) add() *ceilingSub {
	s := &ceilingSub{ready: make(chan struct{}, 1)}
	c.mu.Lock()
	c.subs = append(c.subs, s)
	c.mu.Unlock()
	return s
}

func (c *Ceiling) remove(s *ceilingSub) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.subs {
		if x == s {
			c.subs = append(c.subs[:i], c.subs[i+1:]...)
			return
		}
	}
}

// take swaps out everything queued.
func (s *ceilingSub) take(dst [][]byte) [][]byte {
	s.mu.Lock()
	dst, s.q = s.q, dst[:0]
	s.mu.Unlock()
	return dst
}

// Publish queues frame seq, stamped now, for every subscriber.
func (c *Ceiling) Publish(seq uint64) {
	var data []byte
	if c.ws {
		data = Frame(seq, "fanout")
	} else {
		data = SSEFrame(seq)
	}
	c.pmu.Lock()
	c.pending = append(c.pending, data)
	c.pmu.Unlock()
	signal(c.wake)
}

// publisher hands the queued frames to every subscriber until done closes.
func (c *Ceiling) publisher(done chan struct{}) {
	var frames [][]byte
	for {
		select {
		case <-done:
			return
		case <-c.wake:
		}
		c.pmu.Lock()
		frames, c.pending = c.pending, frames[:0]
		c.pmu.Unlock()
		c.mu.Lock()
		for _, s := range c.subs {
			s.mu.Lock()
			s.q = append(s.q, frames...)
			s.mu.Unlock()
			signal(s.ready)
		}
		c.mu.Unlock()
		clear(frames)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *Ceiling) serveSSE(w http.ResponseWriter, r *http.Request) {
	s := c.add()
	defer c.remove(s)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	var batch [][]byte
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.ready:
			batch = s.take(batch)
			for _, f := range batch {
				w.Write(f)
			}
			clear(batch)
			if rc.Flush() != nil {
				return
			}
		}
	}
}

func (c *Ceiling) serveWS(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	s := c.add()
	defer c.remove(s)
	ctx := conn.CloseRead(r.Context())
	var batch [][]byte
	var buf []byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.ready:
			batch = s.take(batch)
			buf = buf[:0]
			for i, f := range batch {
				if i > 0 {
					buf = append(buf, '\n')
				}
				buf = append(buf, f...)
			}
			clear(batch)
			if conn.Write(ctx, websocket.MessageText, buf) != nil {
				return
			}
			if cap(buf) > 64<<10 {
				buf = nil
			}
		}
	}
}

// System returns the ceiling as a system under test.
func (c *Ceiling) System() System {
	// The handler registers before it answers, so the headers (or the
	// upgrade) mean the subscription is live.
	sub := Subscribers{Transport: "sse", URL: c.URL}
	if c.ws {
		sub.Transport = "ws"
	}
	return System{Subscribers: sub, Publish: c.Publish}
}

// Park is a server that answers the handshake (an SSE response's headers, or
// a WebSocket upgrade) and then only holds each connection: no goroutine,
// no buffer. Idle subscribers attached to it cost what the clients cost.
type Park struct {
	URL string // http:// for SSE, ws:// for WebSocket

	ln    net.Listener
	mu    sync.Mutex // guards conns
	conns []net.Conn
}

// NewPark starts a park on loopback, speaking SSE or WebSocket.
func NewPark(b testing.TB, ws bool) *Park {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p := &Park{ln: ln}
	if ws {
		p.URL = "ws://" + ln.Addr().String()
	} else {
		p.URL = "http://" + ln.Addr().String()
	}
	go p.accept(ws)
	b.Cleanup(p.close)
	return p
}

func (p *Park) accept(ws bool) {
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handshake(nc, ws)
	}
}

const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

func (p *Park) handshake(nc net.Conn, ws bool) {
	br := bufio.NewReaderSize(nc, 4096)
	key := ""
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			nc.Close()
			return
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Sec-WebSocket-Key") {
			key = strings.TrimSpace(v)
		}
		if line == "\r\n" {
			break
		}
	}
	var resp string
	if ws {
		sum := sha1.Sum([]byte(key + wsGUID))
		resp = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
			base64.StdEncoding.EncodeToString(sum[:]) + "\r\n\r\n"
	} else {
		resp = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	}
	if _, err := nc.Write([]byte(resp)); err != nil {
		nc.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, nc)
	p.mu.Unlock()
}

func (p *Park) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// DialSSE attaches an SSE subscriber to the park.
func (p *Park) DialSSE(client *http.Client) func(ctx context.Context, i int) (Conn, error) {
	return func(ctx context.Context, _ int) (Conn, error) { return DialSSE(ctx, client, p.URL, nil) }
}

// DialWS attaches a WebSocket subscriber to the park; hello is sent and
// never answered.
func (p *Park) DialWS(hello []byte) func(ctx context.Context, i int) (Conn, error) {
	return func(ctx context.Context, _ int) (Conn, error) { return DialWS(ctx, p.URL, WSOptions{Hello: hello}) }
}
