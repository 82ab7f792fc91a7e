package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// Version is the jsonrpc member every message carries.
const Version = "2.0"

// Standard JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeRefused is Orrery's code for a request the host understood and
	// refused (a surface that fails its schema, another owner's id …); the
	// message says what to do instead.
	CodeRefused = -32000
)

// Message is one JSON-RPC 2.0 message: a request (Method and ID), a
// notification (Method, no ID) or a response (ID with Result or Error).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// IsRequest reports whether m is a request, which must be answered.
func (m *Message) IsRequest() bool { return m.Method != "" && len(m.ID) > 0 }

// IsNotification reports whether m is a notification.
func (m *Message) IsNotification() bool { return m.Method != "" && len(m.ID) == 0 }

// Error is a JSON-RPC error object. Message is a sentence that says what to
// do.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Decode parses one message body and checks its shape. Its error is an
// *Error with CodeParseError or CodeInvalidRequest whose message says what
// to send instead.
func Decode(body []byte) (*Message, *Error) {
	var m Message
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil {
		return nil, Errorf(CodeParseError, "the message is not valid JSON (%v): send one JSON-RPC 2.0 object per Content-Length frame", err)
	}
	if dec.More() {
		return nil, Errorf(CodeParseError, "the message has data after its JSON object: send one object per frame")
	}
	if m.JSONRPC != Version {
		return &m, Errorf(CodeInvalidRequest, "the message's jsonrpc is %q: send \"jsonrpc\": \"2.0\"", m.JSONRPC)
	}
	if len(m.ID) > 0 && !validID(m.ID) {
		return &m, Errorf(CodeInvalidRequest, "the message's id %s is not a number or a string: use a number", clip(string(m.ID)))
	}
	if m.Method == "" && len(m.ID) == 0 {
		return &m, Errorf(CodeInvalidRequest, "the message has neither method nor id: send a request {jsonrpc, id, method, params}")
	}
	if m.Method == "" && m.Result == nil && m.Error == nil {
		return &m, Errorf(CodeInvalidRequest, "the response to id %s has neither result nor error: answer with \"result\": {}", m.ID)
	}
	return &m, nil
}

func validID(id json.RawMessage) bool {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case float64, string:
		return true
	}
	return false
}

// Conn is one JSON-RPC connection over a framed byte stream. Calls and
// notifications may be sent from any goroutine; incoming requests and
// notifications are handed, in the order read, to the handler given to Run.
type Conn struct {
	rd *Reader

	wmu  sync.Mutex // guards w and werr
	w    io.Writer
	werr error

	mu      sync.Mutex // guards next, pending and closed
	next    int64
	pending map[string]chan *Message
	closed  error
}

// NewConn returns a connection reading framed messages from r (bodies of at
// most maxBody bytes; 0 means DefaultMaxBody) and writing them to w.
func NewConn(r io.Reader, w io.Writer, maxBody int) *Conn {
	return &Conn{rd: NewReader(r, maxBody), w: w, pending: make(map[string]chan *Message)}
}

// ErrClosed is returned by calls on a connection whose reading ended.
var ErrClosed = errors.New("jsonrpc: connection closed")

// Run reads messages until the stream ends or breaks. Responses complete
// the matching Call; requests and notifications go to handle, one at a
// time and in order, on Run's goroutine: handle must not block on the
// connection itself. A message that is not valid JSON-RPC is answered with
// its error (when it can be) and passed to bad, when set, then reading goes
// on; a framing error ends Run. Run returns nil when the stream ended
// cleanly between messages.
func (c *Conn) Run(handle func(*Message), bad func(*Error)) error {
	var err error
	for {
		var body []byte
		body, err = c.rd.Read()
		if err != nil {
			break
		}
		m, derr := Decode(body)
		if derr != nil {
			if bad != nil {
				bad(derr)
			}
			var id json.RawMessage
			if m != nil && m.IsRequest() && validID(m.ID) {
				id = m.ID
			}
			if m == nil || m.Method != "" || len(m.ID) == 0 {
				_ = c.send(&Message{JSONRPC: Version, ID: nullID(id), Error: derr})
			}
			continue
		}
		if m.Method == "" {
			c.complete(m)
			continue
		}
		handle(m)
	}
	if err == io.EOF {
		err = nil
	}
	c.shut(err)
	return err
}

func nullID(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

func (c *Conn) complete(m *Message) {
	key := string(m.ID)
	c.mu.Lock()
	ch, ok := c.pending[key]
	delete(c.pending, key)
	c.mu.Unlock()
	if ok {
		ch <- m
	}
}

// shut fails every call in flight.
func (c *Conn) shut(err error) {
	if err == nil {
		err = ErrClosed
	} else {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	c.mu.Lock()
	if c.closed == nil {
		c.closed = err
	}
	pending := c.pending
	c.pending = make(map[string]chan *Message)
	c.mu.Unlock()
	for _, ch := range pending {
		close(ch)
	}
}

// Pending is a request sent and not yet answered.
type Pending struct {
	c      *Conn
	method string
	id     string
	ch     chan *Message
	err    error
}

// Go sends a request and returns at once: requests sent one after another
// with Go reach the peer in that order, without waiting for answers.
func (c *Conn) Go(method string, params any) *Pending {
	p := &Pending{c: c, method: method}
	raw, err := marshalParams(params)
	if err != nil {
		p.err = fmt.Errorf("call %s: %w", method, err)
		return p
	}
	p.ch = make(chan *Message, 1)
	c.mu.Lock()
	if c.closed != nil {
		p.err = fmt.Errorf("call %s: %w", method, c.closed)
		c.mu.Unlock()
		return p
	}
	c.next++
	id := strconv.AppendInt(nil, c.next, 10)
	p.id = string(id)
	c.pending[p.id] = p.ch
	c.mu.Unlock()
	if err := c.send(&Message{JSONRPC: Version, ID: id, Method: method, Params: raw}); err != nil {
		c.forget(p.id)
		p.err = fmt.Errorf("call %s: %w", method, err)
	}
	return p
}

// Wait waits for the answer and decodes its result into result (when not
// nil). An error response is returned as an *Error.
func (p *Pending) Wait(ctx context.Context, result any) error {
	if p.err != nil {
		return p.err
	}
	select {
	case m, ok := <-p.ch:
		if !ok {
			p.c.mu.Lock()
			err := p.c.closed
			p.c.mu.Unlock()
			return fmt.Errorf("call %s: %w", p.method, err)
		}
		if m.Error != nil {
			return m.Error
		}
		if result != nil && len(m.Result) > 0 {
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("call %s: decode result: %w", p.method, err)
			}
		}
		return nil
	case <-ctx.Done():
		p.c.forget(p.id)
		return fmt.Errorf("call %s: %w", p.method, ctx.Err())
	}
}

// Call sends a request and waits for its response, decoding its result
// into result (when not nil). An error response is returned as an *Error.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	return c.Go(method, params).Wait(ctx, result)
}

func (c *Conn) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	p, err := marshalParams(params)
	if err != nil {
		return fmt.Errorf("notify %s: %w", method, err)
	}
	return c.send(&Message{JSONRPC: Version, Method: method, Params: p})
}

// Reply answers the request with id: with rerr when it is not nil, else
// with result ({} when result is nil).
func (c *Conn) Reply(id json.RawMessage, result any, rerr *Error) error {
	m := &Message{JSONRPC: Version, ID: nullID(id)}
	if rerr != nil {
		m.Error = rerr
	} else {
		r, err := marshalParams(result)
		if err != nil {
			m.Error = Errorf(CodeInternalError, "encode the result: %v", err)
		} else {
			m.Result = r
		}
	}
	return c.send(m)
}

func marshalParams(v any) (json.RawMessage, error) {
	switch p := v.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		if len(p) == 0 {
			return json.RawMessage("{}"), nil
		}
		return p, nil
	}
	return json.Marshal(v)
}

func (c *Conn) send(m *Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	if err := Write(c.w, body); err != nil {
		c.werr = err
		return err
	}
	return nil
}
