package server

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// handleWS serves GET /ws: the request protocol over a WebSocket. Each
// WebSocket message carries one JSON object, or, once the client's hello
// asked for batches (hello {batch: true}), possibly several separated by
// "\n" (split on newlines to read them). A
// client off loopback authenticates with a token in the upgrade request, or
// with hello {token} as its first message.
func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	p := peerOf(r.Context())
	cw := &corkingWriter{ResponseWriter: w}
	c, err := s.acceptWS(cw, r)
	if err != nil {
		s.log.Info("websocket upgrade failed", "err", err)
		return
	}
	if !s.track() {
		c.Close(websocket.StatusGoingAway, "the server is shutting down")
		return
	}
	defer s.wg.Done()
	t := &wsTransport{c: c, ping: s.cfg.PingInterval, cork: cw.conn}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go t.keepalive(ctx)
	s.serveConn(ctx, t, p)
}

// acceptWS upgrades r to a WebSocket. The browser's Origin has already
// passed the guard (own origin, or one in AllowedOrigins, with the Host
// checked against the allowlist), which is stronger than coder/websocket's
// Origin-equals-Host check: that one a rebound page passes.
func (s *Server) acceptWS(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(s.cfg.MaxMessageBytes)
	return c, nil
}

// wsTransport adapts a coder/websocket connection.
type wsTransport struct {
	c    *websocket.Conn
	ping time.Duration
	// batch is set once the client's hello asked for several objects in
	// one message.
	batch atomic.Bool
	// cork is the connection under c, which holds a batch's messages
	// for one write.
	cork *corkedConn
}

// batches lets several objects share a message from now on.
func (t *wsTransport) batches() { t.batch.Store(true) }

func (t *wsTransport) kind() string { return "ws" }

// interrupt closes the WebSocket with the cause's code, which ends the read.
func (t *wsTransport) interrupt(cause error) {
	code, reason := closeGoingAway, "closing"
	var ce *closeError
	if errors.As(cause, &ce) {
		code, reason = ce.code, ce.reason
	}
	t.close(code, reason)
}

func (t *wsTransport) read(ctx context.Context) ([]byte, error) {
	typ, data, err := t.c.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, &badMessage{"binary messages are not accepted: send each request as JSON text"}
	}
	return data, nil
}

// maxWSMessage bounds how many bytes of a batch go in one WebSocket
// message; a longer batch is sent as several.
const maxWSMessage = 256 << 10

// write sends msgs as one message (or a few, for a long batch),
// newline-separated, assembled in a pooled buffer so an idle connection
// holds none.
func (t *wsTransport) write(msgs [][]byte) error {
	// No deadline here (the connection's stall timer bounds a write), so
	// coder/websocket sets up no timeout per message.
	ctx := context.Background()
	if len(msgs) == 1 {
		return t.c.Write(ctx, websocket.MessageText, msgs[0])
	}
	if !t.batch.Load() {
		// One object a message: the messages go out in one write to the
		// socket all the same (coder/websocket flushes each message).
		t.cork.cork()
		var err error
		for _, m := range msgs {
			if err = t.c.Write(ctx, websocket.MessageText, m); err != nil {
				break
			}
		}
		return errors.Join(err, t.cork.uncork())
	}
	buf := bufPool.Get().(*[]byte)
	defer putBuf(buf)
	for _, m := range msgs {
		if len(*buf) > 0 && len(*buf)+len(m) > maxWSMessage {
			if err := t.c.Write(ctx, websocket.MessageText, *buf); err != nil {
				return err
			}
			*buf = (*buf)[:0]
		}
		if len(*buf) > 0 {
			*buf = append(*buf, '\n')
		}
		*buf = append(*buf, m...)
	}
	return t.c.Write(ctx, websocket.MessageText, *buf)
}

func (t *wsTransport) abort() { t.c.CloseNow() }

func (t *wsTransport) close(code closeCode, reason string) {
	// A close frame's reason is at most 123 bytes, and must stay UTF-8.
	for len(reason) > 120 {
		_, size := utf8.DecodeLastRuneInString(reason)
		reason = reason[:len(reason)-size]
	}
	t.c.Close(websocket.StatusCode(code), reason)
}

// keepalive pings the peer; a peer that does not answer within the interval
// is disconnected.
func (t *wsTransport) keepalive(ctx context.Context) {
	if t.ping <= 0 {
		return
	}
	tick := time.NewTicker(t.ping)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			pctx, cancel := context.WithTimeout(ctx, t.ping)
			err := t.c.Ping(pctx)
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				t.c.Close(websocket.StatusPolicyViolation, "no pong: reconnect and attach with since=<last seq>")
				return
			}
		}
	}
}

// corkingWriter is the ResponseWriter a WebSocket is accepted through: its
// Hijack hands coder/websocket a corkedConn over the connection.
type corkingWriter struct {
	http.ResponseWriter
	conn *corkedConn
}

// Hijack implements http.Hijacker, reaching the server's own through any
// wrapper of the ResponseWriter.
func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &corkedConn{Conn: nc}
	// coder/websocket writes through brw.Writer, which the server made
	// over the connection itself: it writes through the cork instead.
	if err := brw.Writer.Flush(); err != nil {
		nc.Close()
		return nil, nil, err
	}
	brw.Writer.Reset(w.conn)
	return w.conn, brw, nil
}

// corkedConn is a connection that, while corked, keeps what is written to
// it and sends it in one write when uncorked: the several messages of one
// batch (each flushed by coder/websocket on its own) cost one syscall.
// Uncorked, writes go straight through.
type corkedConn struct {
	net.Conn
	mu     sync.Mutex // guards corked and buf, and orders the writes
	corked bool
	buf    *[]byte // from bufPool while corked
}

// Write implements net.Conn.
func (c *corkedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *corkedConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.buf = bufPool.Get().(*[]byte)
	c.mu.Unlock()
}

// uncork writes what was kept, and lets writes through again.
func (c *corkedConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	buf := c.buf
	c.buf = nil
	defer putBuf(buf)
	if len(*buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(*buf)
	return err
}
