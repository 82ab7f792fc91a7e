package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/getorrery/orrery/auth"
	"github.com/getorrery/orrery/protocol"
)

// The defaults of the limits in Config.
const (
	// DefaultReadHeaderTimeout bounds the reading of a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds the reading of a whole request, body
	// included. A stream (SSE, WebSocket) is not bound by it: its handler
	// lifts the deadline once the request is read.
	DefaultReadTimeout = time.Minute
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultHelloTimeout is how long a connection that needs a token may
	// go without a hello that gives one.
	DefaultHelloTimeout = 10 * time.Second
	// DefaultMaxConns bounds the connections open at once.
	DefaultMaxConns = 4096
	// DefaultMaxConnsPerAddr bounds the connections from one address off
	// loopback that have not presented a valid token.
	DefaultMaxConnsPerAddr = 16
)

// HTTPServer returns an http.Server for s with Config's timeouts:
// ReadHeaderTimeout, ReadTimeout (which streams lift once their request is
// read) and IdleTimeout, and no WriteTimeout, which would cut every stream:
// a stream's own stall timer cuts a client that stops reading. Serve it
// with Serve, which adds the connection caps and TLS.
func (s *Server) HTTPServer() *http.Server {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnContext:       connContext,
	}
	if s.cfg.TLS != nil {
		hs.TLSConfig = s.cfg.TLS.Clone()
		if hs.TLSConfig.MinVersion < tls.VersionTLS12 {
			hs.TLSConfig.MinVersion = tls.VersionTLS12
		}
	}
	return hs
}

// Serve serves hs (from HTTPServer) on ln until hs is shut down: HTTPS
// when Config.TLS is set, else plain HTTP. Connections over the caps
// (Config.MaxConns, Config.MaxConnsPerAddr) are answered with a sentence
// and closed as soon as they are accepted, before they hold anything.
func (s *Server) Serve(hs *http.Server, ln net.Listener) error {
	ln = s.Listener(ln)
	if hs.TLSConfig != nil {
		return hs.ServeTLS(ln, "", "")
	}
	return hs.Serve(ln)
}

// Listener wraps ln with the server's connection caps. Serve uses it; a
// caller that builds its own http.Server must set its ConnContext to the
// one HTTPServer sets, or token holders count as unauthenticated.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return &capListener{Listener: ln, s: s}
}

// connTable counts the server's TCP connections: all of them, and by
// remote address those off loopback that have not presented a valid token
// (the ones a stranger can open).
type connTable struct {
	mu      sync.Mutex     // guards the fields below
	total   int            // open connections
	unauth  map[string]int // open connections off loopback without a token, by IP
	warned  map[string]bool
	warnAll bool // the refusal over MaxConns was logged since the count fell under it
}

// trackedConn is a connection the table counts until it is closed.
type trackedConn struct {
	net.Conn
	t  *connTable
	ip string // its remote IP, or "" on loopback (not counted by address)

	// Guarded by t.mu.
	counted bool // counted in t.unauth[ip]
	closed  bool
}

// errTooMany are the refusals of a connection over a cap.
const (
	tooManyFromAddr = "too many connections from this address: close some, or raise [server] max_conns_per_addr"
	tooManyAll      = "too many connections to this server: close some, or raise [server] max_conns"
)

// capListener refuses connections over the caps as it accepts them.
type capListener struct {
	net.Listener
	s *Server
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.s.admitConn(nc); c != nil {
			return c, nil
		}
	}
}

// admitConn counts nc, or refuses it (and returns nil) when it is over a
// cap.
func (s *Server) admitConn(nc net.Conn) net.Conn {
	ip := ""
	if !auth.IsLoopback(nc.RemoteAddr().String()) {
		ip = remoteIP(nc.RemoteAddr())
	}
	t := &s.conns
	t.mu.Lock()
	var refusal string
	status := http.StatusTooManyRequests
	switch {
	case t.total >= s.cfg.MaxConns:
		refusal, status = tooManyAll, http.StatusServiceUnavailable
		if !t.warnAll {
			t.warnAll = true
			s.log.Warn("refusing connections: the server is at its cap", "max_conns", s.cfg.MaxConns, "remote", nc.RemoteAddr().String())
		}
	case ip != "" && t.unauth[ip] >= s.cfg.MaxConnsPerAddr:
		refusal = tooManyFromAddr
		if !t.warned[ip] {
			if t.warned == nil {
				t.warned = make(map[string]bool)
			}
			t.warned[ip] = true
			s.log.Warn("refusing connections from an address at its cap of connections without a token",
				"remote", ip, "max_conns_per_addr", s.cfg.MaxConnsPerAddr)
		}
	}
	if refusal != "" {
		t.mu.Unlock()
		s.refuseConn(nc, status, refusal)
		return nil
	}
	t.total++
	c := &trackedConn{Conn: nc, t: t, ip: ip}
	if ip != "" {
		if t.unauth == nil {
			t.unauth = make(map[string]int)
		}
		t.unauth[ip]++
		c.counted = true
	}
	t.mu.Unlock()
	return c
}

// refuseConn answers a connection over a cap and closes it. Over plain
// HTTP the answer is a response with the sentence; under TLS there is no
// HTTP to answer in before a handshake, so it is only closed. The write
// goes into an empty socket buffer and cannot block.
func (s *Server) refuseConn(nc net.Conn, status int, msg string) {
	if s.cfg.TLS == nil {
		body, _ := json.Marshal(protocol.ErrorBody{Error: msg})
		body = append(body, '\n')
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		fmt.Fprintf(nc, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			status, http.StatusText(status), len(body), body)
	}
	nc.Close()
}

// authenticate takes c out of its address's count: it presented a valid
// token, so it counts only toward MaxConns.
func (c *trackedConn) authenticate() {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	c.uncountLocked()
}

func (c *trackedConn) uncountLocked() {
	if !c.counted {
		return
	}
	c.counted = false
	if c.t.unauth[c.ip]--; c.t.unauth[c.ip] <= 0 {
		delete(c.t.unauth, c.ip)
		delete(c.t.warned, c.ip)
	}
}

// Close closes the connection and takes it out of the counts, once.
func (c *trackedConn) Close() error {
	c.t.mu.Lock()
	if !c.closed {
		c.closed = true
		c.uncountLocked()
		c.t.total--
		c.t.warnAll = false
	}
	c.t.mu.Unlock()
	return c.Conn.Close()
}

// remoteIP returns the IP of addr, as a string, or addr itself.
func remoteIP(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

type connKey struct{}

// connContext puts the counted connection under a request's context, so
// that a request that presents a valid token takes it out of its
// address's count.
func connContext(ctx context.Context, nc net.Conn) context.Context {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if c, ok := nc.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// authenticated marks the connection under ctx as a token holder's.
func authenticated(ctx context.Context) {
	if c, ok := ctx.Value(connKey{}).(*trackedConn); ok {
		c.authenticate()
	}
}

// bodyRead lifts the read deadline (ReadTimeout) once a request's whole
// body is read: what follows is the handler's work, which may stream for
// hours, and net/http would cancel the request when the deadline passed.
// A body that failed to read keeps the deadline: net/http reads what is
// left of it after the handler, and that read must not wait for ever.
func bodyRead(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// helloTimeout returns how long a connection that needs a token waits for
// its hello; 0 means for ever.
func (s *Server) helloTimeout() time.Duration {
	if s.cfg.HelloTimeout < 0 {
		return 0
	}
	return s.cfg.HelloTimeout
}
