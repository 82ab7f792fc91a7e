package fanout

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"
)

// NewHTTPClient returns the client the SSE subscribers share: no timeout,
// no compression, one connection per stream and none kept idle.
func NewHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		DisableCompression:  true,
		MaxIdleConnsPerHost: -1,
	}}
}

// sseBuffer is each SSE subscriber's read buffer.
const sseBuffer = 16 << 10

// SSEConn is one SSE subscriber: a GET whose response is read line by line.
// An event's seq is its id line or, without one, the first "seq" number in
// its data line (centrifuge's publications).
type SSEConn struct {
	resp *http.Response
	br   *bufio.Reader
}

// DialSSE sends GET url and returns once the response headers are in and,
// when ready is not nil, once a line for which ready returns true was read
// (the lines up to it are not counted); an error from ready fails the dial.
func DialSSE(ctx context.Context, client *http.Client, url string, ready func(line []byte) (bool, error)) (*SSEConn, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s %s", url, resp.Status, body)
	}
	c := &SSEConn{resp: resp, br: bufio.NewReaderSize(resp.Body, sseBuffer)}
	for ready != nil {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("GET %s: waiting for the stream to start: %w", url, err)
		}
		ok, err := ready(line)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("GET %s: %w", url, err)
		}
		if ok {
			break
		}
	}
	return c, nil
}

// Run reads events until the stream ends.
func (c *SSEConn) Run(rx *Receiver) error {
	var seq uint64
	var stamp int64
	has := false
	var now int64
	for {
		buffered := c.br.Buffered()
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) > buffered {
			now = rx.Now() // this line needed a read: it arrived just now
		}
		rx.Bytes(len(line))
		switch {
		case bytes.HasPrefix(line, []byte("id:")):
			if n, ok := parseUint(bytes.TrimSpace(line[3:])); ok {
				seq, has = n, true
			}
		case bytes.HasPrefix(line, []byte("data:")):
			if !has {
				seq, has = FindSeq(line)
			}
			stamp = FindStamp(line)
		case len(bytes.TrimSpace(line)) == 0: // an event ends
			if has {
				rx.Frame(seq, stamp, now)
			}
			has, stamp = false, 0
		}
	}
}

// Close ends the stream.
func (c *SSEConn) Close() { c.resp.Body.Close() }

// WSConn is one WebSocket subscriber. Each message holds one or more JSON
// objects separated by "\n"; each object with a "seq" number is a frame.
type WSConn struct {
	c    *websocket.Conn
	pong []byte // answer to a message that is exactly "{}" (centrifuge's ping)
	buf  bytes.Buffer
}

// WSOptions say how a WebSocket subscriber attaches.
type WSOptions struct {
	// Hello is sent once connected (an attach or connect request), if set;
	// each of its lines as a message of its own.
	Hello []byte
	// Ready, if set, is called on each line received after Hello until it
	// returns true or an error; those lines are not counted.
	Ready func(line []byte) (bool, error)
	// Pong, if set, is sent back for each message that is exactly "{}".
	Pong []byte
	// Subprotocols are offered in the handshake.
	Subprotocols []string
}

// DialWS dials url and attaches as o says.
func DialWS(ctx context.Context, url string, o WSOptions) (*WSConn, error) {
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: o.Subprotocols})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(-1)
	w := &WSConn{c: c, pong: o.Pong}
	if o.Hello != nil {
		// Each line of Hello is a message of its own (hello, then attach).
		for m := range bytes.SplitSeq(o.Hello, []byte("\n")) {
			if err := c.Write(ctx, websocket.MessageText, m); err != nil {
				c.CloseNow()
				return nil, err
			}
		}
	}
	for o.Ready != nil {
		msg, err := w.read(ctx)
		if err != nil {
			c.CloseNow()
			return nil, fmt.Errorf("waiting for the attach reply: %w", err)
		}
		done := false
		for line := range bytes.SplitSeq(msg, []byte("\n")) {
			ok, err := o.Ready(line)
			if err != nil {
				c.CloseNow()
				return nil, err
			}
			done = done || ok
		}
		if done {
			break
		}
	}
	return w, nil
}

func (w *WSConn) read(ctx context.Context) ([]byte, error) {
	_, r, err := w.c.Reader(ctx)
	if err != nil {
		return nil, err
	}
	w.buf.Reset()
	if _, err := w.buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return w.buf.Bytes(), nil
}

// Run reads messages until the connection ends.
func (w *WSConn) Run(rx *Receiver) error {
	ctx := context.Background()
	for {
		msg, err := w.read(ctx)
		if err != nil {
			return err
		}
		now := rx.Now()
		rx.Bytes(len(msg))
		for len(msg) > 0 {
			line := msg
			if i := bytes.IndexByte(msg, '\n'); i >= 0 {
				line, msg = msg[:i], msg[i+1:]
			} else {
				msg = nil
			}
			if seq, ok := FindSeq(line); ok {
				rx.Frame(seq, FindStamp(line), now)
			} else if w.pong != nil && string(line) == "{}" {
				if err := w.c.Write(ctx, websocket.MessageText, w.pong); err != nil {
					return err
				}
			}
		}
	}
}

// Close ends the connection without a closing handshake.
func (w *WSConn) Close() { w.c.CloseNow() }

var seqKey = []byte(`"seq":`)

// FindSeq returns the first "seq" number in a JSON line.
func FindSeq(line []byte) (uint64, bool) {
	i := bytes.Index(line, seqKey)
	if i < 0 {
		return 0, false
	}
	rest := line[i+len(seqKey):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	return parseUint(rest[:j])
}

// stampKey starts the stamp a frame carries in its text (see Stamp).
var stampKey = []byte(`tok@`)

// Stamp returns the text of a streamed delta that carries the time now on
// the machine's wall clock, in nanoseconds: "tok@<ns> ". Every process on
// the machine reads the same clock, so the subscriber program measures
// latency from it.
func Stamp() string { return "tok@" + strconv.FormatInt(time.Now().UnixNano(), 10) + " " }

// FindStamp returns the time in the first stamp in a frame, or 0.
func FindStamp(line []byte) int64 {
	i := bytes.Index(line, stampKey)
	if i < 0 {
		return 0
	}
	rest := line[i+len(stampKey):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	n, _ := parseUint(rest[:j])
	return int64(n)
}

func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	return n, err == nil
}

// Frame returns a frame shaped like Orrery's streamed text delta (the same
// JSON and size), with seq in metadata.orrery and a Stamp of now as its
// delta, tagged with session when it is not "" (as Orrery's WebSocket
// frames are).
func Frame(seq uint64, session string) []byte {
	b := make([]byte, 0, 192)
	b = append(b, `{"type":"TEXT_MESSAGE_CONTENT","timestamp":`...)
	b = strconv.AppendInt(b, time.Now().UnixMilli(), 10)
	b = append(b, `,"metadata":{"orrery":{`...)
	if session != "" {
		b = strconv.AppendQuote(append(b, `"session":`...), session)
		b = append(b, ',')
	}
	b = append(b, `"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `}},"messageId":"msg_yuksvctb2u4akie4","delta":"`...)
	b = append(b, Stamp()...)
	return append(b, `"}`...)
}

// SSEFrame returns Frame(seq, "") framed as Orrery frames SSE.
func SSEFrame(seq uint64) []byte {
	b := make([]byte, 0, 224)
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, "\ndata: "...)
	b = append(b, Frame(seq, "")...)
	return append(b, '\n', '\n')
}
