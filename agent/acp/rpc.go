package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
)

// JSON-RPC and ACP error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeAuthRequired is ACP's "authentication required".
	CodeAuthRequired = -32000
	// CodeNotFound is ACP's "resource not found" (an unknown session).
	CodeNotFound = -32002
	// CodeRequestCancelled answers a request withdrawn by $/cancel_request.
	CodeRequestCancelled = -32800
)

// Message is one JSON-RPC 2.0 message: a request (ID and Method), a
// notification (Method only) or a response (ID and Result or Error). IDs
// are kept verbatim, a number or a string, and echoed byte for byte.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// IsRequest reports whether m is a request: it has a method and an id.
func (m *Message) IsRequest() bool { return m.Method != "" && hasID(m.ID) }

// IsNotification reports whether m is a notification: a method, no id.
func (m *Message) IsNotification() bool { return m.Method != "" && !hasID(m.ID) }

// IsResponse reports whether m answers a request: an id and no method.
func (m *Message) IsResponse() bool { return m.Method == "" && hasID(m.ID) }

func hasID(id json.RawMessage) bool { return len(id) > 0 && !bytes.Equal(id, []byte("null")) }

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	if len(e.Data) > 0 {
		return fmt.Sprintf("%s (code %d, %s)", e.Message, e.Code, e.Data)
	}
	return fmt.Sprintf("%s (code %d)", e.Message, e.Code)
}

// DecodeMessage parses one line of the wire as a JSON-RPC message. It
// refuses what is not one JSON object, a version other than "2.0", an id
// that is not a number, a string or null, and a message that is neither a
// request, a notification nor a response.
func DecodeMessage(line []byte) (*Message, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil, errors.New("not a JSON-RPC message: a line must be one JSON object")
	}
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("not a JSON-RPC message: %w", err)
	}
	if m.JSONRPC != "2.0" {
		return nil, fmt.Errorf("not a JSON-RPC 2.0 message: jsonrpc is %q", m.JSONRPC)
	}
	if len(m.ID) > 0 {
		switch m.ID[0] {
		case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		default:
			return nil, fmt.Errorf("JSON-RPC id %s is not a number or a string", m.ID)
		}
	}
	if m.Method == "" && !hasID(m.ID) && m.Error == nil {
		return nil, errors.New("JSON-RPC message has neither a method nor an id")
	}
	return &m, nil
}

// Handler handles the peer's requests and notifications, one at a time in
// arrival order, on the connection's reader goroutine: it must not block
// on anything the peer does next. A request must be answered, with Reply
// or ReplyError, exactly once (it may be later, from another goroutine).
type Handler func(m *Message)

// Conn is one end of a newline-delimited JSON-RPC 2.0 connection, as ACP
// speaks on stdio. Lines have no length cap. Both ends send requests; the
// connection matches responses to its own requests by id and hands the
// rest to its Handler.
type Conn struct {
	w       io.Writer
	handler Handler
	log     *slog.Logger

	wmu sync.Mutex // serialises writes of whole lines

	mu      sync.Mutex // guards pending, next and err
	pending map[string]chan *Message
	next    int64
	err     error // why the connection ended, once it has

	done chan struct{}
}

// NewConn returns a connection that writes to w and, once Serve runs,
// reads from r. log may be nil.
func NewConn(w io.Writer, handler Handler, log *slog.Logger) *Conn {
	if log == nil {
		log = slog.Default()
	}
	return &Conn{w: w, handler: handler, log: log, pending: make(map[string]chan *Message), done: make(chan struct{})}
}

// Serve reads messages from r until it ends or fails, then fails every
// request still waiting for its response. A line that is not a JSON-RPC
// message is logged and skipped, and so is a response to an id nobody
// asked: the connection goes on. It returns why reading stopped.
func (c *Conn) Serve(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var err error
	for {
		var line []byte
		line, err = br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			c.dispatch(line)
		}
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		err = io.EOF
	}
	c.finish(fmt.Errorf("the agent's output ended: %w", err))
	return err
}

func (c *Conn) dispatch(line []byte) {
	m, err := DecodeMessage(line)
	if err != nil {
		c.log.Warn("acp: skipped a line that is not JSON-RPC", "err", err, "line", clip(line, 200))
		return
	}
	if m.IsResponse() || (m.Method == "" && m.Error != nil) {
		key := string(m.ID)
		c.mu.Lock()
		ch, ok := c.pending[key]
		delete(c.pending, key)
		c.mu.Unlock()
		if !ok {
			c.log.Warn("acp: skipped a response to an id nobody asked", "id", key)
			return
		}
		ch <- m
		return
	}
	if c.handler == nil {
		if m.IsRequest() {
			_ = c.ReplyError(m.ID, CodeMethodNotFound, "Method not found")
		}
		return
	}
	c.handler(m)
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func (c *Conn) finish(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = make(map[string]chan *Message)
	c.mu.Unlock()
	for _, ch := range pending {
		ch <- &Message{Error: &RPCError{Code: CodeInternalError, Message: err.Error()}}
	}
	close(c.done)
}

// Close ends the connection: waiting requests fail with err.
func (c *Conn) Close(err error) { c.finish(err) }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// write sends one message as one line.
func (c *Conn) write(m any) error {
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode JSON-RPC message: %w", err)
	}
	data = append(data, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.Write(data); err != nil {
		return fmt.Errorf("write to the agent: %w", err)
	}
	return nil
}

type outRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  any             `json:"params,omitempty"`
}

// Call sends a request and waits for its response. A JSON-RPC error comes
// back as a *RPCError. When ctx ends first, Call returns ctx's error (the
// response, if it comes, is dropped).
func (c *Conn) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id, ch, err := c.Start(method, params)
	if err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, string(id))
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// Start sends a request and returns its id and the channel its response
// will arrive on (exactly one message; a connection that ends first sends
// an error).
func (c *Conn) Start(method string, params any) (json.RawMessage, <-chan *Message, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, nil, err
	}
	id := json.RawMessage(strconv.FormatInt(c.next, 10))
	c.next++
	ch := make(chan *Message, 1)
	c.pending[string(id)] = ch
	c.mu.Unlock()
	if err := c.write(outRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params}); err != nil {
		c.mu.Lock()
		delete(c.pending, string(id))
		c.mu.Unlock()
		return nil, nil, err
	}
	return id, ch, nil
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	return c.write(outRequest{JSONRPC: "2.0", Method: method, Params: params})
}

type outResult struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result"`
}

type outError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   RPCError        `json:"error"`
}

// Reply answers the request id with result (nil sends {}).
func (c *Conn) Reply(id json.RawMessage, result any) error {
	if result == nil {
		result = struct{}{}
	}
	return c.write(outResult{JSONRPC: "2.0", ID: id, Result: result})
}

// ReplyError answers the request id with an error.
func (c *Conn) ReplyError(id json.RawMessage, code int, msg string) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return c.write(outError{JSONRPC: "2.0", ID: id, Error: RPCError{Code: code, Message: msg}})
}
