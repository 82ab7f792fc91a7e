// Package client is the Go client of Orrery's wire protocol. It speaks to
// a kernel over HTTP (POST /control for requests, GET /events for frames),
// a WebSocket (GET /ws) or a pipe (a Unix socket), with the same API:
// Do and its typed helpers send requests, Attach follows a session's frames
// in seq order and resumes by itself after a dropped connection, and State
// folds frames into the conversation and the shared state a client shows.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/getorrery/orrery/protocol"
)

// Transports a Client can use, as Options.Transport names them.
const (
	TransportHTTP = "http" // POST /control and GET /events (SSE)
	TransportWS   = "ws"   // GET /ws
	TransportPipe = "pipe" // a Unix socket, one JSON object per line
)

// Defaults of Options.
const (
	DefaultMaxReconnects  = 20
	DefaultReconnectDelay = 100 * time.Millisecond
	DefaultMaxQueue       = 1 << 16
	DefaultIdleTimeout    = 60 * time.Second
	DefaultMaxFrameBytes  = 64 << 20
	maxReconnectDelay     = 5 * time.Second
)

// Options configure a Client. The zero value connects from loopback with no
// token and declares nothing.
type Options struct {
	// Token is a node token, needed off loopback. It is sent as a bearer
	// token over HTTP and WebSocket, and in hello over WebSocket and pipe.
	Token string
	// Client names this client to the server (hello.client, ?client=).
	Client string
	// Draws declares what the client renders (hello.draws, ?draws=); empty
	// declares nothing, which is a client that only watches.
	Draws []string
	// DataDir resolves a target pipe:NAME to DataDir/NAME.sock.
	DataDir string
	// Transport picks the transport for an http:// target: "" or "http"
	// uses POST /control and GET /events, "ws" uses GET /ws. Other targets
	// name their own transport.
	Transport string
	// Logger receives the client's logs (reconnects); nil discards them.
	Logger *slog.Logger
	// HTTPClient makes HTTP requests and WebSocket upgrades; nil means a
	// client of its own with no overall timeout (streams are long).
	HTTPClient *http.Client
	// MaxReconnects bounds the attempts a Stream makes in a row to get a
	// dropped connection back; 0 means DefaultMaxReconnects, negative turns
	// reconnecting off.
	MaxReconnects int
	// ReconnectDelay is the wait before the second attempt; it doubles
	// with each further attempt up to 5s. 0 means DefaultReconnectDelay.
	ReconnectDelay time.Duration
	// MaxQueue bounds the frames a Stream holds that Next has not returned
	// yet; when a consumer falls that far behind, the stream drops its
	// connection and resumes from the last frame it holds once drained.
	// 0 means DefaultMaxQueue.
	MaxQueue int
	// IdleTimeout ends an SSE stream that received nothing, not even a
	// keepalive comment, for this long (it then reconnects); it must exceed
	// the server's keepalive interval. 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxFrameBytes bounds one frame or message read; 0 means
	// DefaultMaxFrameBytes.
	MaxFrameBytes int64
	// OnHubMessage, when set, receives what the kernel's hub delivers to
	// this client's seat client://Client (WebSocket and pipe only: the
	// connection holds the seat while it is open). It is called on the
	// connection's reader, so it must not block.
	OnHubMessage func(protocol.HubMessage)
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.MaxReconnects == 0 {
		o.MaxReconnects = DefaultMaxReconnects
	}
	if o.ReconnectDelay <= 0 {
		o.ReconnectDelay = DefaultReconnectDelay
	}
	if o.MaxQueue <= 0 {
		o.MaxQueue = DefaultMaxQueue
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = DefaultMaxFrameBytes
	}
}

// Errors a caller branches on.
var (
	// ErrClosed is returned by a Client or Stream after Close.
	ErrClosed = errors.New("client: closed")
	// ErrConnectionLost is returned for a request in flight when its
	// WebSocket or pipe connection ended before the reply came. The request
	// may or may not have taken effect.
	ErrConnectionLost = errors.New("client: connection lost before the reply")
)

// RequestError is a refusal: the server answered the request with ok false
// (or a non-2xx status over HTTP). Message is the server's sentence, which
// says what to do instead.
type RequestError struct {
	// Request is the refused request's t.
	Request string
	// Status is the HTTP status over HTTP; 0 over WebSocket and pipe.
	Status int
	// Message is the server's sentence.
	Message string
}

func (e *RequestError) Error() string {
	if e.Request == "" {
		return e.Message
	}
	return e.Request + ": " + e.Message
}

// CloseError is why the server ended a WebSocket or pipe connection: a
// WebSocket close status, or a pipe's last line {"t":"close"}.
type CloseError struct {
	Code   int
	Reason string
}

// Close codes a client branches on.
const (
	CloseNormal   = 1000
	CloseShutdown = 1001
	CloseTooBig   = 1009
	CloseAuth     = 4001 // no token, or a bad one: not retried
	CloseRefused  = 4003 // a refused hello: not retried
	CloseSlow     = 4008 // the client fell behind: resume from the last seq
)

func (e *CloseError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("connection closed by the server (code %d)", e.Code)
	}
	return fmt.Sprintf("connection closed by the server (code %d): %s", e.Code, e.Reason)
}

// Client is a connection to one kernel. It is safe for concurrent use.
// Over WebSocket and pipe, requests and every attached session share one
// connection, dialled again when it drops.
type Client struct {
	opts      Options
	transport string
	base      string // HTTP: the base URL, without a trailing slash
	wsURL     string // WS: the URL of /ws
	pipePath  string // pipe: the socket path
	log       *slog.Logger
	ids       atomic.Uint64

	dialMu sync.Mutex // serialises dialling the shared connection

	mu      sync.Mutex // guards w, streams and closed
	w       *wire      // the live WebSocket or pipe connection, or nil
	streams map[*Stream]struct{}
	closed  bool
	hello   protocol.HelloReply

	onReconnect atomic.Pointer[func(session string, lost error)]
}

// SetOnReconnect has f told when a stream of this client loses its
// connection and starts getting it back (lost is why), and once it has it
// back (lost is nil). It is called on the stream's reader, so it must not
// block. Nil stops the calls.
func (c *Client) SetOnReconnect(f func(session string, lost error)) {
	if f == nil {
		c.onReconnect.Store(nil)
		return
	}
	c.onReconnect.Store(&f)
}

// reconnecting tells the SetOnReconnect function, if any.
func (c *Client) reconnecting(session string, lost error) {
	if f := c.onReconnect.Load(); f != nil {
		(*f)(session, lost)
	}
}

// Dial returns a client of the kernel at target: http://HOST:PORT (or
// https://), ws://HOST:PORT (path /ws added when missing; wss:// too),
// pipe:/abs/path.sock, or pipe:NAME for Options.DataDir/NAME.sock. A bare
// HOST:PORT means http://HOST:PORT. Dial checks that the kernel answers:
// GET /healthz over HTTP, a hello over WebSocket and pipe.
func Dial(ctx context.Context, target string, opts Options) (*Client, error) {
	opts.defaults()
	c := &Client{opts: opts, log: opts.Logger, streams: make(map[*Stream]struct{})}
	if err := c.resolve(target); err != nil {
		return nil, err
	}
	switch c.transport {
	case TransportHTTP:
		if err := c.health(ctx); err != nil {
			return nil, err
		}
	default:
		if _, err := c.wire(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// resolve parses target into the transport and its address.
func (c *Client) resolve(target string) error {
	if rest, ok := strings.CutPrefix(target, "pipe:"); ok {
		c.transport = TransportPipe
		switch {
		case rest == "":
			return fmt.Errorf("dial %s: name the pipe, as pipe:NAME or pipe:/path/to.sock", target)
		case strings.Contains(rest, "/"):
			c.pipePath = rest
		case c.opts.DataDir == "":
			return fmt.Errorf("dial %s: a pipe name needs the data dir (Options.DataDir); or give the socket's path, as pipe:/path/to.sock", target)
		default:
			c.pipePath = filepath.Join(c.opts.DataDir, strings.TrimSuffix(rest, ".sock")+".sock")
		}
		return nil
	}
	if !strings.Contains(target, "://") {
		target = "http://" + target
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return fmt.Errorf("dial %s: want http://HOST:PORT, ws://HOST:PORT or pipe:NAME", target)
	}
	switch u.Scheme {
	case "http", "https":
		switch c.opts.Transport {
		case "", TransportHTTP, "sse":
			c.transport = TransportHTTP
			u.RawQuery, u.Fragment = "", ""
			c.base = strings.TrimSuffix(u.String(), "/")
			return nil
		case TransportWS:
			u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
		default:
			return fmt.Errorf("dial %s: transport %q is unknown: use http or ws", target, c.opts.Transport)
		}
	case "ws", "wss":
	default:
		return fmt.Errorf("dial %s: scheme %s is unknown: use http://, ws:// or pipe:NAME", target, u.Scheme)
	}
	c.transport = TransportWS
	if !strings.HasSuffix(u.Path, "/ws") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/ws"
	}
	c.wsURL = u.String()
	return nil
}

// Transport returns the transport the client uses: TransportHTTP,
// TransportWS or TransportPipe.
func (c *Client) Transport() string { return c.transport }

// Hello returns the server's answer to this client's hello over WebSocket
// and pipe (the latest connection's); zero over HTTP.
func (c *Client) Hello() protocol.HelloReply {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hello
}

// Close ends the client's connection and every Stream it attached. It is
// safe to call more than once.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	w := c.w
	c.w = nil
	streams := make([]*Stream, 0, len(c.streams))
	for s := range c.streams {
		streams = append(streams, s)
	}
	c.mu.Unlock()
	for _, s := range streams {
		s.Close()
	}
	if w != nil {
		w.close(ErrClosed)
	}
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Client) nextID() string { return "c" + strconv.FormatUint(c.ids.Add(1), 10) }

// Do sends one request and returns its reply's value. An empty id is
// filled in (the request is changed). A refusal is a *RequestError.
func (c *Client) Do(ctx context.Context, req protocol.Request) (json.RawMessage, error) {
	h := req.Head()
	if h.T == "" {
		return nil, errors.New("client: the request has no t: set it, or use a typed helper such as Send")
	}
	if h.ID == "" {
		h.ID = c.nextID()
	}
	if c.isClosed() {
		return nil, fmt.Errorf("%s: %w", h.T, ErrClosed)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", h.T, err)
	}
	if c.transport == TransportHTTP {
		return c.control(ctx, h.T, body)
	}
	w, err := c.wire(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", h.T, err)
	}
	return w.call(ctx, h.T, h.ID, body, nil)
}

// doInto sends req and decodes its reply value into out.
func (c *Client) doInto(ctx context.Context, req protocol.Request, out any) error {
	value, err := c.Do(ctx, req)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(value, out); err != nil {
		return fmt.Errorf("decode the %s reply: %w", req.Head().T, err)
	}
	return nil
}

// NewSession creates a session (session.new) and returns its id. req's t
// and id are filled in.
func (c *Client) NewSession(ctx context.Context, req protocol.SessionNew) (string, error) {
	req.T = "session.new"
	var out protocol.SessionNewReply
	if err := c.doInto(ctx, &req, &out); err != nil {
		return "", err
	}
	return out.Session, nil
}

// Sessions lists the kernel's sessions (session.list), newest first.
func (c *Client) Sessions(ctx context.Context) ([]protocol.SessionSummary, error) {
	var out protocol.SessionListReply
	if err := c.doInto(ctx, &protocol.SessionList{Envelope: protocol.Envelope{T: "session.list"}}, &out); err != nil {
		return nil, err
	}
	return out.Sessions, nil
}

// Read returns up to limit frames of session with seq > since, exactly as
// logged (session.read), and the session's head. limit 0 means the
// server's default page.
func (c *Client) Read(ctx context.Context, session string, since uint64, limit int) (protocol.SessionReadReply, error) {
	var out protocol.SessionReadReply
	err := c.doInto(ctx, &protocol.SessionRead{Envelope: protocol.Envelope{T: "session.read"}, Session: session, Since: &since, Limit: limit}, &out)
	return out, err
}

// ReadAll returns every frame of session with seq > since, reading page by
// page up to the head the first page reports.
func (c *Client) ReadAll(ctx context.Context, session string, since uint64) ([]json.RawMessage, error) {
	var all []json.RawMessage
	var head uint64
	for first := true; first || since < head; first = false {
		page, err := c.Read(ctx, session, since, 0)
		if err != nil {
			return nil, err
		}
		if first {
			head = page.Head
		}
		if len(page.Frames) == 0 {
			break
		}
		all = append(all, page.Frames...)
		m, err := parseMeta(page.Frames[len(page.Frames)-1])
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", session, err)
		}
		since = m.seq
	}
	return all, nil
}

// Send starts a run on an idle session (run.send). While a run is in
// flight it is refused, naming steer: use Steer to join that run.
func (c *Client) Send(ctx context.Context, session string, in protocol.RunInput) (protocol.RunSendReply, error) {
	return c.SendWith(ctx, session, in, SendOptions{})
}

// SendOptions are what a run.send may ask for the run it starts.
type SendOptions struct {
	// Permissions are consent rules for that run only.
	Permissions *protocol.RunPermissions
	// UsageEvents logs an orrery.usage event after each of its model calls.
	UsageEvents bool
}

// SendWith is Send with the run's options.
func (c *Client) SendWith(ctx context.Context, session string, in protocol.RunInput, opts SendOptions) (protocol.RunSendReply, error) {
	var out protocol.RunSendReply
	err := c.doInto(ctx, &protocol.RunSend{Envelope: protocol.Envelope{T: "run.send"}, Session: session, Input: in,
		Permissions: opts.Permissions, UsageEvents: opts.UsageEvents}, &out)
	return out, err
}

// Steer sends input to the session's run in flight as a steer (run.send
// with target steer); on an idle session it starts a run.
func (c *Client) Steer(ctx context.Context, session string, in protocol.RunInput) (protocol.RunSendReply, error) {
	var out protocol.RunSendReply
	err := c.doInto(ctx, &protocol.RunSend{Envelope: protocol.Envelope{T: "run.send"}, Session: session, Input: in, Target: protocol.TargetSteer}, &out)
	return out, err
}

// WorkspaceFiles lists files of session's workspace whose path starts
// with prefix, or whose base name does when prefix has no "/"
// (workspace.files), for completing @mentions on a kernel elsewhere. limit
// 0 means the server's default (50); the reply says when more matched. A
// file listed here is attached to a prompt as a part whose source is
// {"type": "path", "value": PATH}; the kernel reads it.
func (c *Client) WorkspaceFiles(ctx context.Context, session, prefix string, limit int) (protocol.WorkspaceFilesReply, error) {
	var out protocol.WorkspaceFilesReply
	err := c.doInto(ctx, &protocol.WorkspaceFiles{Envelope: protocol.Envelope{T: "workspace.files"}, Session: session, Prefix: prefix, Limit: limit}, &out)
	return out, err
}

// MatchWorkspaceFiles lists files of session's workspace whose path
// contains query's characters in order, ignoring case, best match first
// (workspace.files with a query): the reply's Matches gives, for each
// path, the offsets of the characters matched, for highlighting. limit 0
// means the server's default (50).
func (c *Client) MatchWorkspaceFiles(ctx context.Context, session, query string, limit int) (protocol.WorkspaceFilesReply, error) {
	var out protocol.WorkspaceFilesReply
	err := c.doInto(ctx, &protocol.WorkspaceFiles{Envelope: protocol.Envelope{T: "workspace.files"}, Session: session, Query: query, Limit: limit}, &out)
	return out, err
}

// Cancel cancels the session's run in flight (run.cancel). runID, when
// not empty, must name that run.
func (c *Client) Cancel(ctx context.Context, session, runID string) error {
	return c.doInto(ctx, &protocol.RunCancel{Envelope: protocol.Envelope{T: "run.cancel"}, Session: session, RunID: runID}, nil)
}

// retryable reports whether a stream should try again after err. The
// caller checks its own context first: a context error here is an
// attempt's own timeout.
func retryable(err error) bool {
	var re *RequestError
	var ce *CloseError
	switch {
	case errors.Is(err, ErrClosed):
		return false
	case errors.As(err, &ce):
		return ce.Code != CloseAuth && ce.Code != CloseRefused && ce.Code != CloseTooBig
	case errors.As(err, &re):
		if re.Status >= 500 || re.Status == http.StatusTooManyRequests {
			return true
		}
		// Over WS and pipe a refusal has no status: a stopping server's
		// refusals say so.
		return re.Status == 0 && (strings.Contains(re.Message, "server is stopping") || strings.Contains(re.Message, "shutting down"))
	}
	return true
}
