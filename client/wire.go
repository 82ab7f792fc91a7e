package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/getorrery/orrery/protocol"
)

// link is one message connection: a WebSocket or a pipe.
type link interface {
	// read returns the next batch of JSON objects the server sent.
	read(ctx context.Context) ([][]byte, error)
	// write sends one JSON object.
	write(ctx context.Context, msg []byte) error
	close()
}

// wsLink adapts a coder/websocket connection.
type wsLink struct {
	c    *websocket.Conn
	ping time.Duration // how often to ping, and how long to wait for the pong
}

// keepalive pings the server until done is closed; a server that does not
// answer in time is cut off, which ends the wire (and its streams resume).
func (l *wsLink) keepalive(done <-chan struct{}) {
	tick := time.NewTicker(l.ping)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), l.ping)
			err := l.c.Ping(ctx)
			cancel()
			if err != nil {
				l.c.CloseNow()
				return
			}
		}
	}
}

func (l *wsLink) read(ctx context.Context) ([][]byte, error) {
	_, data, err := l.c.Read(ctx)
	if err != nil {
		if code := websocket.CloseStatus(err); code != -1 {
			var ce websocket.CloseError
			errors.As(err, &ce)
			return nil, &CloseError{Code: int(code), Reason: ce.Reason}
		}
		return nil, err
	}
	return bytes.Split(data, []byte("\n")), nil
}

func (l *wsLink) write(ctx context.Context, msg []byte) error {
	return l.c.Write(ctx, websocket.MessageText, msg)
}

// close closes with a handshake, or at once when the peer does not answer
// within a second.
func (l *wsLink) close() {
	done := make(chan struct{})
	go func() {
		l.c.Close(websocket.StatusNormalClosure, "")
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		l.c.CloseNow()
	}
}

// pipeLink is a Unix socket: one JSON object per line each way.
type pipeLink struct {
	nc  net.Conn
	br  *bufio.Reader
	max int64

	mu sync.Mutex // serialises writes
}

func (l *pipeLink) read(ctx context.Context) ([][]byte, error) {
	var line []byte
	for {
		part, err := l.br.ReadSlice('\n')
		line = append(line, part...)
		if int64(len(line)) > l.max {
			return nil, fmt.Errorf("a line from the pipe is over the %d-byte limit", l.max)
		}
		switch {
		case err == nil:
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			return [][]byte{line}, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

func (l *pipeLink) write(ctx context.Context, msg []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		l.nc.SetWriteDeadline(d)
	} else {
		l.nc.SetWriteDeadline(time.Time{})
	}
	_, err := l.nc.Write(append(msg, '\n'))
	return err
}

func (l *pipeLink) close() { l.nc.Close() }

// wire speaks the request protocol over one link: one goroutine reads,
// routing replies to the calls that wait for them and frames to the
// streams attached on it.
type wire struct {
	c    *Client
	l    link
	done chan struct{} // closed when the reader returns

	mu      sync.Mutex // guards pending, streams and err
	pending map[string]*call
	streams map[string]*Stream // by session
	err     error              // why the wire ended
	closing error              // set by close: the reason to report
}

// call is a request waiting for its reply.
type call struct {
	reply chan protocol.Reply
	// onReply runs on the reader goroutine when the reply arrives, before
	// the next message is read.
	onReply func(protocol.Reply)
}

// wire returns the live WebSocket or pipe connection, dialling one when
// there is none.
func (c *Client) wire(ctx context.Context) (*wire, error) {
	c.mu.Lock()
	w, closed := c.w, c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if w != nil {
		return w, nil
	}
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	c.mu.Lock()
	w = c.w
	c.mu.Unlock()
	if w != nil {
		return w, nil
	}
	w, hello, err := c.dialWire(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		w.close(ErrClosed)
		return nil, ErrClosed
	}
	c.w, c.hello = w, hello
	c.mu.Unlock()
	return w, nil
}

// dialWire connects, starts the reader and says hello.
func (c *Client) dialWire(ctx context.Context) (*wire, protocol.HelloReply, error) {
	var l link
	switch c.transport {
	case TransportWS:
		h := http.Header{}
		c.authorize(h)
		conn, resp, err := websocket.Dial(ctx, c.wsURL, &websocket.DialOptions{HTTPClient: c.opts.HTTPClient, HTTPHeader: h})
		if err != nil {
			if resp != nil && resp.StatusCode/100 != 1 && resp.StatusCode != 0 {
				var body []byte
				if resp.Body != nil {
					body, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
				}
				return nil, protocol.HelloReply{}, statusError("dial "+c.wsURL, resp.StatusCode, resp.Status, body)
			}
			return nil, protocol.HelloReply{}, fmt.Errorf("dial %s: %w (is orrery serve running there?)", c.wsURL, err)
		}
		conn.SetReadLimit(c.opts.MaxFrameBytes)
		l = &wsLink{c: conn, ping: c.opts.IdleTimeout}
	case TransportPipe:
		var d net.Dialer
		nc, err := d.DialContext(ctx, "unix", c.pipePath)
		if err != nil {
			return nil, protocol.HelloReply{}, fmt.Errorf("dial pipe %s: %w (start the kernel with orrery serve --pipe NAME)", c.pipePath, err)
		}
		l = &pipeLink{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), max: c.opts.MaxFrameBytes}
	default:
		return nil, protocol.HelloReply{}, fmt.Errorf("client: transport %s has no connection", c.transport)
	}
	w := &wire{c: c, l: l, done: make(chan struct{}), pending: make(map[string]*call), streams: make(map[string]*Stream)}
	go w.readLoop()
	if wl, ok := l.(*wsLink); ok {
		go wl.keepalive(w.done)
	}

	// Batches: the link splits a message on newlines (a pipe's lines
	// never hold one), and a busy stream costs fewer messages.
	hello := &protocol.Hello{Envelope: protocol.Envelope{T: "hello", ID: c.nextID()}, Token: c.opts.Token, Client: c.opts.Client, Draws: c.opts.Draws, Batch: true}
	body, err := json.Marshal(hello)
	if err == nil {
		var value json.RawMessage
		value, err = w.call(ctx, "hello", hello.ID, body, nil)
		if err == nil {
			var hr protocol.HelloReply
			if err = json.Unmarshal(value, &hr); err == nil {
				return w, hr, nil
			}
		}
	}
	// A refused hello is followed by a close that says why; prefer it.
	select {
	case <-w.done:
		var ce *CloseError
		if errors.As(w.cause(), &ce) {
			err = ce
		}
	case <-time.After(200 * time.Millisecond):
	}
	w.close(err)
	return nil, protocol.HelloReply{}, fmt.Errorf("hello: %w", err)
}

// call sends one request and waits for its reply. onReply, when set, runs
// on the reader goroutine as the reply arrives.
func (w *wire) call(ctx context.Context, kind, id string, body []byte, onReply func(protocol.Reply)) (json.RawMessage, error) {
	cl := &call{reply: make(chan protocol.Reply, 1), onReply: onReply}
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	if _, dup := w.pending[id]; dup {
		w.mu.Unlock()
		return nil, fmt.Errorf("%s: id %s is already in flight on this connection: use a fresh id", kind, id)
	}
	w.pending[id] = cl
	w.mu.Unlock()
	forget := func() {
		w.mu.Lock()
		if w.pending[id] == cl {
			delete(w.pending, id)
		}
		w.mu.Unlock()
	}
	if err := w.l.write(ctx, body); err != nil {
		forget()
		w.close(fmt.Errorf("write: %w", err))
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	select {
	case r := <-cl.reply:
		if !r.OK {
			return nil, &RequestError{Request: kind, Message: r.Error}
		}
		if len(r.Value) == 0 {
			return json.RawMessage("{}"), nil
		}
		return r.Value, nil
	case <-w.done:
		select {
		case r := <-cl.reply:
			if !r.OK {
				return nil, &RequestError{Request: kind, Message: r.Error}
			}
			return r.Value, nil
		default:
		}
		return nil, fmt.Errorf("%s: %w: %w", kind, ErrConnectionLost, w.cause())
	case <-ctx.Done():
		forget()
		return nil, fmt.Errorf("%s: %w", kind, ctx.Err())
	}
}

// send writes a request whose reply nobody waits for.
func (w *wire) send(ctx context.Context, body []byte) error {
	return w.l.write(ctx, body)
}

func (w *wire) cause() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// readLoop reads until the link fails, then ends the wire.
func (w *wire) readLoop() {
	var err error
	var closeLine *CloseError
	for err == nil {
		var msgs [][]byte
		msgs, err = w.l.read(context.Background())
		for _, m := range msgs {
			if len(bytes.TrimSpace(m)) == 0 {
				continue
			}
			if ce := w.dispatch(m); ce != nil {
				closeLine = ce
			}
		}
	}
	if closeLine != nil {
		err = closeLine
	}
	w.end(err)
}

// dispatch routes one message: a reply to its call, a frame to its stream.
// It returns the close a pipe's last line announces.
func (w *wire) dispatch(m []byte) *CloseError {
	var head struct {
		T string `json:"t"`
	}
	if err := json.Unmarshal(m, &head); err != nil {
		w.c.log.Warn("skipping a message that is not JSON", "err", err)
		return nil
	}
	switch head.T {
	case "":
		meta, err := parseMeta(m)
		if err != nil {
			w.c.log.Warn("skipping a frame", "err", err)
			return nil
		}
		if meta.session == "" && meta.seq == 0 {
			w.c.hubFrame(m) // a frame outside every session
			return nil
		}
		w.mu.Lock()
		s := w.streams[meta.session]
		w.mu.Unlock()
		if s != nil {
			s.deliverMeta(w, m, meta)
		}
	case "reply":
		var r protocol.Reply
		if err := json.Unmarshal(m, &r); err != nil {
			w.c.log.Warn("skipping a reply that does not decode", "err", err)
			return nil
		}
		w.mu.Lock()
		cl := w.pending[r.ReqID]
		delete(w.pending, r.ReqID)
		w.mu.Unlock()
		if cl == nil {
			if !r.OK {
				w.c.log.Debug("the server refused a message nobody waits for", "reqId", r.ReqID, "error", r.Error)
			}
			return nil
		}
		if cl.onReply != nil {
			cl.onReply(r)
		}
		cl.reply <- r
	case "close":
		var ce CloseError
		var line struct {
			Code   int    `json:"code"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(m, &line); err != nil {
			w.c.log.Warn("a close line that does not decode", "err", err)
		}
		ce.Code, ce.Reason = line.Code, line.Reason
		return &ce
	default:
		w.c.log.Debug("skipping a message of unknown kind", "t", head.T)
	}
	return nil
}

// close ends the wire, giving why as the reason.
func (w *wire) close(why error) {
	w.mu.Lock()
	if w.closing == nil {
		w.closing = why
	}
	w.mu.Unlock()
	w.l.close()
	<-w.done
}

// end runs once the reader stopped: every call waiting and every stream
// attached learns why, and the client forgets the wire.
func (w *wire) end(err error) {
	w.mu.Lock()
	if w.closing != nil {
		err = w.closing
	}
	if err == nil {
		err = io.EOF
	}
	w.err = err
	streams := w.streams
	w.pending = map[string]*call{}
	w.streams = map[string]*Stream{}
	w.mu.Unlock()
	close(w.done)
	c := w.c
	c.mu.Lock()
	if c.w == w {
		c.w = nil
	}
	c.mu.Unlock()
	for _, s := range streams {
		s.lost(w, fmt.Errorf("connection: %w", err))
	}
}

// register routes session's frames on this wire to s.
func (w *wire) register(session string, s *Stream) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.streams[session] = s
	return nil
}

// unregister stops routing session's frames to s.
func (w *wire) unregister(session string, s *Stream) {
	w.mu.Lock()
	if w.streams[session] == s {
		delete(w.streams, session)
	}
	w.mu.Unlock()
}
