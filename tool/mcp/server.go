package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/getorrery/orrery"
	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/tool"
)

// terminateAfter is how long Close waits for a command server to exit
// after its stdin closes, before it is sent SIGTERM (and as long again
// before SIGKILL).
const terminateAfter = 2 * time.Second

// Server is a connected MCP server: an initialized session, and the tools
// it listed when it connected. Its tools stay valid until Close; a call
// after the server died is a Result error, not a panic.
type Server struct {
	name   string
	cfg    ServerConfig
	logger *slog.Logger

	session *mcp.ClientSession
	tools   []tool.Tool
	stderr  *stderrLog // nil for a url server

	// ended is closed when the session ends, whoever ended it; endErr is
	// why, set before ended closes.
	ended  chan struct{}
	endErr error

	// closing ends when Close begins, and with it every call in flight:
	// the SDK closes a session only once no call is waiting for a reply.
	closing   context.Context
	stopCalls context.CancelFunc
	closeOnce sync.Once
	closeErr  error
}

// Connect reaches the server cfg describes and named name: it starts the
// command (or connects to the url), initializes the MCP session and lists
// the server's tools, following every page. ctx bounds only connecting,
// and a server that never answers holds Connect until ctx ends, so give
// ctx a deadline; the session lasts until Close. A nil logger discards.
// The tools are listed once: a server's later tools/list_changed is not
// followed.
func Connect(ctx context.Context, name string, cfg ServerConfig, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("mcp_server", name)
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("[mcp.servers.%s]: %w", name, err)
	}
	s := &Server{name: name, cfg: cfg, logger: logger, ended: make(chan struct{})}
	s.closing, s.stopCalls = context.WithCancel(context.Background())

	var transport mcp.Transport
	if cfg.Command != "" {
		cmd := exec.Command(cfg.Command, cfg.Args...)
		cmd.Dir = cfg.Cwd
		cmd.Env = environ(cfg.Env)
		s.stderr = &stderrLog{logger: logger}
		cmd.Stderr = s.stderr
		// A server whose children keep stderr open must not hold Close.
		cmd.WaitDelay = terminateAfter
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: terminateAfter}
	} else {
		transport = &mcp.StreamableClientTransport{
			Endpoint:   cfg.URL,
			HTTPClient: &http.Client{Transport: headerTransport{headers: cfg.Headers, next: http.DefaultTransport}},
			// Orrery does not take requests or notifications from a
			// server outside of a call, so it opens no standing stream.
			DisableStandaloneSSE: true,
		}
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "orrery", Version: orrery.Version}, &mcp.ClientOptions{
		Logger: logger,
		// Orrery offers the server nothing: no roots, sampling or
		// elicitation.
		Capabilities: &mcp.ClientCapabilities{},
	})
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		s.stopCalls()
		return nil, s.connectError(ctx, err)
	}
	s.session = session
	go func() {
		err := session.Wait()
		s.endErr = err
		close(s.ended)
	}()

	tools, err := s.listTools(ctx)
	if err != nil {
		_ = s.Close()
		return nil, s.connectError(ctx, err)
	}
	s.tools = tools
	logger.Info("mcp server connected", "tools", len(tools))
	return s, nil
}

// connectError explains why connecting failed and what to check.
func (s *Server) connectError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("connect to MCP server %q: %w", s.name, ctx.Err())
	}
	if s.cfg.Command != "" {
		var hint string
		switch {
		case errors.Is(err, exec.ErrNotFound):
			hint = fmt.Sprintf("the program %q was not found; install it or set command in [mcp.servers.%s] to its full path", s.cfg.Command, s.name)
		case errors.Is(err, os.ErrNotExist) && s.cfg.Cwd != "":
			hint = fmt.Sprintf("check that the program %q and the directory %q exist (command and cwd in [mcp.servers.%s])", s.cfg.Command, s.cfg.Cwd, s.name)
		default:
			hint = fmt.Sprintf("check that %q speaks MCP on stdin and stdout (command and args in [mcp.servers.%s])", s.cfg.Command, s.name)
		}
		return fmt.Errorf("start MCP server %q: %w; %s%s", s.name, err, hint, s.stderr.tailNote())
	}
	return &redactedError{
		text: s.redact(fmt.Sprintf("connect to MCP server %q at %s: %v; check that it is running and that url and headers in [mcp.servers.%s] are right", s.name, s.cfg.URL, err, s.name)),
		err:  err,
	}
}

// listTools lists every tool the server offers, page by page.
func (s *Server) listTools(ctx context.Context) ([]tool.Tool, error) {
	var out []tool.Tool
	seen := map[string]bool{}
	for t, err := range s.session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		if err := validToolName(t.Name); err != nil {
			s.logger.Warn("mcp server offers a tool Orrery cannot name; it is left out", "tool", t.Name, "error", err)
			continue
		}
		if seen[t.Name] {
			s.logger.Warn("mcp server lists a tool twice; the first is kept", "tool", t.Name)
			continue
		}
		seen[t.Name] = true
		out = append(out, newRemoteTool(s, t))
	}
	return out, nil
}

// Name returns the server's name, as in [mcp.servers.<name>].
func (s *Server) Name() string { return s.name }

// Tools returns the server's tools as they were listed at Connect, named
// mcp.<server>.<tool>, in the server's order.
func (s *Server) Tools() []tool.Tool {
	return append([]tool.Tool(nil), s.tools...)
}

// Close ends the session; for a command server it closes the process's
// stdin and waits for it to exit, sending SIGTERM and then SIGKILL to one
// that does not. A call in flight ends with a Result error. Close is safe
// to call more than once and after the server died; a server that had
// already died is not an error.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.stopCalls()
		if s.session == nil {
			return
		}
		select {
		case <-s.ended:
			// It died or its side closed the session; the SDK reaped it.
			_ = s.session.Close()
			return
		default:
		}
		err := s.session.Close()
		<-s.ended
		if err != nil && s.cfg.URL != "" {
			// Ending a url server's session is a courtesy (an HTTP
			// DELETE) that a server already gone cannot receive.
			s.logger.Info("mcp server did not take the end of the session", "error", err)
			err = nil
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			// It exited, only not with status 0, once asked to: nothing
			// of Orrery's failed.
			s.logger.Info("mcp server exited", "status", exit.String())
			err = nil
		}
		if err != nil {
			s.closeErr = fmt.Errorf("close MCP server %q: %w", s.name, err)
		}
	})
	return s.closeErr
}

// callContext returns a context for one call that ends with ctx or when
// Close begins, and the func that releases it.
func (s *Server) callContext(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.closing, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// endedReason returns why the session ended and true, or false while it
// is live and open.
func (s *Server) endedReason() (string, bool) {
	if s.closing.Err() != nil {
		return "Orrery closed it", true
	}
	select {
	case <-s.ended:
	default:
		return "", false
	}
	if s.endErr != nil {
		return "it exited: " + s.endErr.Error(), true
	}
	return "its connection closed", true
}

// passed are the variables of Orrery's own environment a server inherits:
// what finding programs, a home and a locale need. Anything else, model API
// keys above all, reaches a server only through its env table.
var passed = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ", "SHELL", "TERM", "SYSTEMROOT", "APPDATA", "LOCALAPPDATA", "USERPROFILE"}

// environ returns a minimal environment (the passed variables that are set)
// with env laid over it, sorted for a stable order.
func environ(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range passed {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	// exec.Cmd keeps the last value of a duplicated name.
	return out
}

// headerTransport adds fixed headers to every request, and the trace of
// the tool call that made it (a W3C traceparent, once a program installed
// a propagator), so an HTTP MCP server can continue the run's trace.
type headerTransport struct {
	headers map[string]string
	next    http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	otel.GetTextMapPropagator().Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	return t.next.RoundTrip(req)
}

// traceMeta is the _meta of a tools/call made under ctx's span: its W3C
// traceparent (and tracestate), as MCP carries trace context over every
// transport, stdio included; nil when there is no span to continue.
func traceMeta(ctx context.Context) mcp.Meta {
	c := agent.TraceMeta(ctx)
	if c == nil {
		return nil
	}
	m := make(mcp.Meta, len(c))
	for k, v := range c {
		m[k] = v
	}
	return m
}

// stderrLog logs a command server's stderr line by line and keeps its last
// lines, to explain a server that fails.
type stderrLog struct {
	logger *slog.Logger

	mu      sync.Mutex // guards partial and tail
	partial []byte
	tail    []string
}

const (
	tailLines    = 5
	maxLineBytes = 4096
)

// Write implements io.Writer.
func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.lineLocked(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) > maxLineBytes {
		w.lineLocked(string(w.partial))
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

// lineLocked records one line of stderr. w.mu must be held.
func (w *stderrLog) lineLocked(line string) {
	line = strings.TrimRight(line, "\r")
	if len(line) > maxLineBytes {
		line = line[:maxLineBytes] + "…"
	}
	if strings.TrimSpace(line) == "" {
		return
	}
	w.logger.Debug("mcp server stderr", "line", line)
	w.tail = append(w.tail, line)
	if len(w.tail) > tailLines {
		w.tail = w.tail[len(w.tail)-tailLines:]
	}
}

// tailNote returns the last lines of stderr as a sentence to append to an
// error, or "" when there were none. A nil w has none.
func (w *stderrLog) tailNote() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := append([]string(nil), w.tail...)
	if p := strings.TrimSpace(string(w.partial)); p != "" {
		lines = append(lines, p)
	}
	if len(lines) == 0 {
		return ""
	}
	return ". Its last lines on stderr: " + strings.Join(lines, " | ")
}

// objectSchema returns the schema of a tool whose server gave none, new
// each time so that no two tools share its bytes.
func objectSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }

// redactedError is an error whose text has its URL redacted.
type redactedError struct {
	text string
	err  error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }

// redact returns text with s's URL shown without its query and user
// info, which may hold a key: the text may reach a model or a log.
func (s *Server) redact(text string) string {
	if s.cfg.URL == "" {
		return text
	}
	u, err := url.Parse(s.cfg.URL)
	if err != nil {
		return text
	}
	shown := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	if u.User != nil {
		// net/http shows a URL with its password masked.
		text = strings.ReplaceAll(text, u.Redacted(), shown)
	}
	return strings.ReplaceAll(text, s.cfg.URL, shown)
}
