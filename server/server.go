// Package server is Orrery's HTTP face: one listener that serves runs and
// session streams as SSE (POST /run, GET /events), requests (POST /control)
// and health. It turns HTTP into kernel calls and kernel frames into bytes;
// it holds no session state of its own.
package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/getorrery/orrery"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/auth"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/web"
)

// DefaultMaxBodyBytes bounds a request body when Config.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 4 << 20

// DefaultKeepAlive is the silence after which a stream sends a comment.
const DefaultKeepAlive = 15 * time.Second

// Config is what a Server is built from. Kernel is required.
type Config struct {
	Kernel *kernel.Kernel
	// Ready are checks GET /readyz makes besides the kernel's
	// (kernel.Ready): the data dir's lock (datadir.Lock.Check), say. Each
	// returns nil, or why the server cannot take work.
	Ready []func() error
	// Metrics serves GET /metrics (package metrics); nil leaves the route
	// answering that metrics are off.
	Metrics http.Handler
	// MaxBodyBytes bounds request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// KeepAlive is how long a stream may stay silent before a ": keepalive"
	// comment; 0 means DefaultKeepAlive.
	KeepAlive time.Duration
	// Logger receives the server's logs; nil means slog.Default().
	Logger *slog.Logger
	// Tokens are the node tokens that admit requests from off loopback; nil
	// admits loopback only.
	Tokens *auth.Store
	// Node names this kernel in hello replies; "" means the host name.
	Node string
	// MaxMessageBytes bounds one WebSocket message or pipe line; 0 means
	// MaxBodyBytes.
	MaxMessageBytes int64
	// PingInterval is how often a WebSocket is pinged; 0 means
	// DefaultPingInterval, negative turns pings off.
	PingInterval time.Duration
	// FlushInterval is the shortest time between two writes to one stream
	// or connection: frames published sooner go out together in the next
	// write, and the first frame after a quiet spell goes out at once. 0
	// means DefaultFlushInterval; negative writes as often as frames come.
	FlushInterval time.Duration
	// SaveConfig writes one key of the configuration file (for ui.save);
	// nil refuses ui.save.
	SaveConfig func(key, value string) error
	// Models are the model names GET /v1/models lists besides "orrery"
	// (the default model): the configured [models.<alias>] names.
	Models []string
	// ListenAddr is the address the server listens on (host:port). Its
	// host is a name the server answers to; an unspecified one (0.0.0.0,
	// [::]) or "" means every IP address of this machine.
	ListenAddr string
	// AllowedHosts are the names besides localhost and this machine's IP
	// addresses that a request's Host may give: [server] allowed_hosts.
	// "*.example.com" matches the names below example.com; "*" matches any
	// name and gives up the defence against DNS rebinding.
	AllowedHosts []string
	// AllowedOrigins are the browser origins besides the server's own whose
	// pages may call it (scheme://host[:port]): [server] allowed_origins.
	// "*" admits every origin. Their pages never earn the right to answer
	// consent without a token.
	AllowedOrigins []string
	// PageSecret is the value of the cookie that marks the server's own web
	// client; "" makes a random one for this server. A kernel keeps it in
	// its data dir, so that an open page stays its own across a restart.
	PageSecret string
	// CheckSpec decides the model or agent spec a request names (session
	// .new, the model of /v1/chat/completions): nil accepts the default
	// model, provider specs and the aliases in Models
	// (models.RequestPolicy), and refuses every spec that starts a process.
	CheckSpec func(spec string) error
	// CheckPipeSpec decides the spec a pipe caller names instead: the
	// socket's mode makes every such caller this process's own user, who
	// may run what the command line may. nil means CheckSpec.
	CheckPipeSpec func(spec string) error
	// Roots are the directories a request's session cwd must lie in
	// ([workspace] roots); empty refuses every cwd a request names.
	Roots []string
	// Hub is the kernel's event hub, which hub.* requests reach and whose
	// client seats WebSocket and pipe connections hold; nil refuses them.
	Hub *hub.Hub
	// Cluster, when set, sends the requests that change a session another
	// node owns to that node (forward.go).
	Cluster Forwarder
	// Extensions serves ext.list and ext.restart; nil means no extension
	// runs (ext.list answers none).
	Extensions Extensions
	// RevokeCheck is how often the token file is read for revocations: a
	// revoked token's streams and connections end within about this long.
	// 0 means DefaultRevokeCheck.
	RevokeCheck time.Duration
	// HelloTimeout is how long a WebSocket that needs a token (off
	// loopback, none in the upgrade) may go without a hello that gives one
	// before it is closed (4001); 0 means DefaultHelloTimeout, negative
	// waits for ever. A trusted connection needs no hello at all.
	HelloTimeout time.Duration
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout are those of the
	// http.Server that HTTPServer returns; 0 means DefaultReadHeaderTimeout,
	// DefaultReadTimeout and DefaultIdleTimeout. ReadTimeout covers a
	// request's body; a stream lifts it once the request is read.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	// MaxConns bounds the TCP connections open at once on the listeners
	// Serve serves; 0 means DefaultMaxConns. One over it is answered 503
	// and closed.
	MaxConns int
	// MaxConnsPerAddr bounds, for each address off loopback, the
	// connections open at once that have not presented a valid token; 0
	// means DefaultMaxConnsPerAddr. One over it is answered 429 and
	// closed. Loopback programs and token holders count only toward
	// MaxConns.
	MaxConnsPerAddr int
	// TLS, when set, makes Serve serve HTTPS with it (TLS 1.2 at least);
	// its Certificates or GetCertificate give the certificate.
	TLS *tls.Config
}

// DefaultFlushInterval is Config.FlushInterval's default: well under what a
// person notices, and enough to cut the writes of a busy stream several
// times (see docs/PERFORMANCE.md).
const DefaultFlushInterval = 5 * time.Millisecond

// DefaultPingInterval is how often a WebSocket is pinged.
const DefaultPingInterval = 20 * time.Second

// Server serves the HTTP routes. It tracks its own streams, which
// http.Server.Shutdown does not wait for: Close ends them.
type Server struct {
	// idem remembers the answers of /v1 requests that gave an
	// Idempotency-Key.
	idem idempotency
	cfg  Config
	k    *kernel.Kernel
	log  *slog.Logger
	mux  *http.ServeMux

	// subscribers counts the streams open by transport (Subscribers); its
	// keys are fixed in New.
	subscribers map[string]*atomic.Int64

	ctx    context.Context // ends every stream when cancelled
	cancel context.CancelFunc

	guard *guard    // the trust boundary: Host, Origin, the web client's cookie
	seats seatTable // clients' seats on the hub
	flush *flusher  // writes live frames for every stream and connection

	holds   tokenHolds    // what each token opened, ended when it is revoked
	conns   connTable     // TCP connections, for the caps
	watched chan struct{} // closed when the token watch returns

	mu     sync.Mutex     // guards closed and the start of streams
	closed bool           // set by Close: no new stream starts
	wg     sync.WaitGroup // counts streams in progress
}

// track counts a stream that is starting; it reports false once Close was
// called, and then the stream must not start.
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// New returns a Server with cfg's defaults filled in.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = cfg.MaxBodyBytes
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.Node == "" {
		cfg.Node, _ = os.Hostname()
	}
	if cfg.HelloTimeout == 0 {
		cfg.HelloTimeout = DefaultHelloTimeout
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxConnsPerAddr <= 0 {
		cfg.MaxConnsPerAddr = DefaultMaxConnsPerAddr
	}
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.CheckSpec == nil {
		cfg.CheckSpec = models.RequestPolicy{Aliases: cfg.Models}.Check
	}
	if cfg.CheckPipeSpec == nil {
		cfg.CheckPipeSpec = cfg.CheckSpec
	}
	s := &Server{cfg: cfg, k: cfg.Kernel, log: cfg.Logger, mux: http.NewServeMux(), ctx: ctx, cancel: cancel,
		guard: newGuard(cfg), flush: newFlusher(runtime.GOMAXPROCS(0), cfg.FlushInterval), watched: make(chan struct{}),
		subscribers: map[string]*atomic.Int64{"sse": new(atomic.Int64), "ws": new(atomic.Int64), "pipe": new(atomic.Int64)}}
	if cfg.Tokens != nil {
		go s.watchTokens()
	} else {
		close(s.watched)
	}
	s.mux.HandleFunc("POST /run", s.handleRun)
	s.mux.HandleFunc("GET /events", s.handleEvents)
	s.mux.HandleFunc("POST /control", s.handleControl)
	s.mux.HandleFunc("GET /healthz", s.handleHealth)
	s.mux.HandleFunc("GET /readyz", s.handleReady)
	s.mux.HandleFunc("GET /metrics", s.handleMetrics)
	s.mux.HandleFunc("GET /ws", s.handleWS)
	page := web.New()
	s.mux.Handle("GET /{$}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.guard.setPageCookie(w, r)
		page.ServeHTTP(w, r)
	}))
	s.mux.Handle("GET /assets/", page)
	s.mux.HandleFunc("POST /auth", s.handleAuth)
	s.mux.HandleFunc("DELETE /auth", s.handleSignOut)
	s.mux.HandleFunc("GET /acp/ws", s.handleOri)
	s.mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("GET /v1/models/{id}", s.handleModel)
	s.mux.HandleFunc("/v1/", s.handleV1NotFound)
	s.mux.HandleFunc("GET /api/live", s.handleLive)
	s.mux.HandleFunc("/", s.handleNotFound)
	return s
}

// ServeHTTP implements http.Handler. Every request first passes the trust
// boundary (guard.admit): its Host must name this server, its Origin (if
// any) must be the server's own or an allowed one, and a state change must
// be declared JSON. Then a request from off this machine needs a valid
// token, except GET /healthz, GET /ws (which may authenticate with its
// hello instead), POST /auth (which checks the token it is given) and the
// web client's page and assets (which hold no session data, and ask for
// the token the other routes need). A request that presented a valid
// token is tied to it while it runs: revoking the token ends it (see
// holdToken).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, ref := s.guard.admit(r)
	if ref != nil {
		s.refuse(w, r, ref)
		return
	}
	if s.guard.cors(w, r) {
		return
	}
	tok := auth.RequestToken(r)
	if tok == "" {
		tok = s.guard.cookieToken(r, p)
	}
	ctx := r.Context()
	if tok != "" {
		t, ok := s.cfg.Tokens.Lookup(tok)
		if ok {
			// The request is tied to its token: revoking the token ends
			// it (a stream, a WebSocket) with the reason.
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			defer cancel(nil)
			var release func()
			if release, ok = s.holdToken(t.ID, cancel); ok {
				defer release()
				p.token = t.ID
				authenticated(ctx)
			}
		}
		if !ok && !p.local && r.URL.Path != "/auth" {
			s.unauthorized(w, r, auth.ErrBadToken)
			return
		}
	}
	if !p.local && p.token == "" && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" && r.URL.Path != "/ws" && r.URL.Path != "/auth" && !isPage(r) {
		s.unauthorized(w, r, auth.ErrNoToken)
		return
	}
	if ref := checkJSON(r); ref != nil {
		s.refuse(w, r, ref)
		return
	}
	if r.Header.Get("traceparent") != "" {
		// A run this request starts is a span of the caller's trace.
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	s.mux.ServeHTTP(w, r.WithContext(context.WithValue(ctx, peerKey{}, p)))
}

// refuse answers a request the boundary refused, and logs it.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, ref *refusal) {
	s.log.Info("request refused at the boundary", "method", r.Method, "path", r.URL.Path, "host", r.Host,
		"origin", r.Header.Get("Origin"), "remote", r.RemoteAddr, "status", ref.status)
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		code := "forbidden"
		if ref.status == http.StatusUnsupportedMediaType {
			code = "unsupported_media_type"
		}
		writeOAError(w, ref.status, "", code, ref.msg)
		return
	}
	writeError(w, ref.status, ref.msg)
}

// unauthorized answers a request that needs a token it lacks.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="orrery"`)
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		// OpenAI SDKs send their API key as the bearer token: a node
		// token goes there.
		writeOAError(w, http.StatusUnauthorized, "", "invalid_api_key", err.Error()+" (an OpenAI SDK sends it as its API key)")
		return
	}
	writeError(w, http.StatusUnauthorized, err.Error())
}

// isPage reports whether r reads the web client's page or one of its
// assets.
func isPage(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/assets/"))
}

// Close ends every stream in progress and waits for their handlers to
// return, or for ctx to end.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		<-s.watched
		s.flush.close()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close streams: %w", ctx.Err())
	}
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "version": orrery.Version})
}

// handleReady is GET /readyz: 200 while the kernel can take work, else 503
// with why (kernel.Ready), for a load balancer or an orchestrator to stop
// sending requests here. /healthz only says the process answers.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	err := s.k.Ready()
	for _, check := range s.cfg.Ready {
		if err != nil {
			break
		}
		if cerr := check(); cerr != nil {
			err = fmt.Errorf("%w: %w", kernel.ErrNotReady, cerr)
		}
	}
	if err != nil {
		why := err.Error()
		if p := peerOf(r.Context()); !p.local && p.token == "" {
			// /readyz needs no token: a caller without one learns that the
			// kernel is not ready, not which sessions or store errors.
			why = "not ready: ask GET /readyz from this machine, or with a node token, for why"
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ok": false, "error": why})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// subscribed counts one more subscriber on transport until the returned
// function is called.
func (s *Server) subscribed(transport string) func() {
	c := s.subscribers[transport]
	c.Add(1)
	return func() { c.Add(-1) }
}

// Subscribers counts the streams of sessions now open, by transport (sse,
// ws, pipe), for metrics.
func (s *Server) Subscribers() map[string]int {
	out := make(map[string]int, len(s.subscribers))
	for t, c := range s.subscribers {
		out[t] = int(c.Load())
	}
	return out
}

// handleMetrics is GET /metrics: the Prometheus text format. Off this
// machine it needs a token, as every route but /healthz and /readyz does.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		writeError(w, http.StatusNotFound, "metrics are off in this server: the kernel was started without them")
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}

func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	allow := map[string]string{"/run": "POST", "/control": "POST", "/events": "GET, HEAD", "/healthz": "GET, HEAD", "/readyz": "GET, HEAD", "/metrics": "GET, HEAD", "/ws": "GET"}
	if methods, ok := allow[r.URL.Path]; ok {
		w.Header().Set("Allow", methods)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s does not take %s: use POST /run, GET /events, POST /control or GET /healthz", r.URL.Path, r.Method))
		return
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s: Orrery serves POST /run, GET /events, POST /control and GET /healthz", r.Method, r.URL.Path))
}

// readBody reads a request body up to the size limit. On failure it has
// already answered.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err == nil {
		bodyRead(w)
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"the body is over the %d-byte limit: send less, or raise max_body_bytes in the [server] config", s.cfg.MaxBodyBytes))
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "the body could not be read: "+err.Error())
		return nil, false
	}
	return body, true
}

// kernelError answers an error from the kernel with the status it means.
// A damaged session is 409, as a busy one is: the session's state refuses
// the request until someone acts (orrery db repair), so a client must not
// retry it as it would a 5xx; the sentence says which it is.
func (s *Server) kernelError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := s.errorStatus(r.Context(), err)
	if status == http.StatusInternalServerError {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, status, msg)
}

// errorStatus is the HTTP status and message of a kernel error.
func (s *Server) errorStatus(ctx context.Context, err error) (int, string) {
	var reqErr *kernel.RequestError
	var busy *kernel.BusyError
	var since *kernel.SinceError
	var damaged *kernel.DamagedError
	var storeErr *kernel.StoreError
	var fwd *ForwardedError
	switch {
	case errors.As(err, &fwd):
		return fwd.Status, fwd.Msg
	case errors.As(err, &busy):
		return http.StatusConflict, busy.Error()
	case errors.As(err, &damaged):
		return http.StatusConflict, damaged.Error()
	case errors.As(err, &storeErr):
		return http.StatusServiceUnavailable, storeErr.Error()
	case errors.As(err, &reqErr):
		return http.StatusBadRequest, reqErr.Error()
	case errors.As(err, &since):
		return http.StatusBadRequest, since.Error()
	case errors.Is(err, kernel.ErrUnknownSession):
		return http.StatusNotFound, "unknown session: create it with session.new, or list sessions with session.list"
	case errors.Is(err, kernel.ErrSessionClosed):
		return http.StatusServiceUnavailable, "the session is closed because the server is stopping: retry in a moment"
	default:
		return http.StatusInternalServerError, "internal error: " + err.Error()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":"encode reply failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, protocol.ErrorBody{Error: msg})
}
