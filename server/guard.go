package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/getorrery/orrery/auth"
)

// peer is who sent a request, as the server judges it from the connection
// and the headers a browser sets on its own. Nothing a caller declares (its
// client name, what it draws) changes it.
type peer struct {
	// local is a program on this machine: a loopback connection that no
	// reverse proxy forwarded (auth.IsLocalProgram).
	local bool
	// pipe is a connection on a Unix socket, whose file mode (0600) is its
	// authentication.
	pipe bool
	// browser marks a request a browser sent for a page: it carries
	// Origin, or a Sec-Fetch-Site other than "none".
	browser bool
	// page is the web client this server served: a browser request from
	// the server's own origin that carries the page's cookie.
	page bool
	// token is the id of the valid node token the request presented, or "".
	token string
}

// mayConsent reports whether the connection is one the server trusts to
// show a consent question to the person and carry their answer back: a
// pipe, the server's own web client, a token holder, or a program on this
// machine. A browser page from another origin is none of these, whatever
// it declares.
func (p peer) mayConsent() bool {
	return p.pipe || p.token != "" || p.page || (p.local && !p.browser)
}

type peerKey struct{}

// peerOf returns the peer ServeHTTP judged for r's request.
func peerOf(ctx context.Context) peer {
	p, _ := ctx.Value(peerKey{}).(peer)
	return p
}

// errNoConsentRight refuses a consent declaration from a connection that
// has not earned it.
const errNoConsentRight = "this connection may not answer consent: only a pipe, the web client this kernel serves, " +
	"a node token holder or a program on this machine may; a page from another origin must present a token " +
	"(orrery node token create), or leave consent out of draws"

// guard is the server's trust boundary for HTTP: which Host names it
// answers to, which browser origins may call it, and what cookie marks its
// own web client. It is built once from Config and read-only after.
type guard struct {
	listenHost string   // the host of the listen address, lowercased; "" or unspecified means any interface
	hosts      []string // [server] allowed_hosts, lowercased; "*.example.com" matches subdomains
	anyHost    bool     // allowed_hosts holds "*"
	origins    map[string]bool
	anyOrigin  bool // allowed_origins holds "*"

	pageSecret  string // the web client's cookie value
	pageCookie  string // the cookie's name
	tokenCookie string // the cookie a web client's token rides in

	ifMu    sync.Mutex // guards ifAddrs and ifRead
	ifAddrs map[string]bool
	ifRead  time.Time
}

// cookiePrefix starts the names of Orrery's cookies. A cookie is not bound
// to a port, so two kernels on one host would overwrite each other's
// cookies: each name ends with a digest of the kernel's page secret.
const cookiePrefix = "orrery_"

func newGuard(cfg Config) *guard {
	g := &guard{origins: make(map[string]bool)}
	if host, _, err := net.SplitHostPort(cfg.ListenAddr); err == nil {
		g.listenHost = normalHost(host)
	}
	for _, h := range cfg.AllowedHosts {
		h = normalHost(h)
		if h == "*" {
			g.anyHost = true
		}
		g.hosts = append(g.hosts, h)
	}
	for _, o := range cfg.AllowedOrigins {
		if o == "*" {
			g.anyOrigin = true
			continue
		}
		if n, ok := normalOrigin(o); ok {
			g.origins[n] = true
		}
	}
	g.pageSecret = cfg.PageSecret
	if g.pageSecret == "" {
		var b [32]byte
		_, _ = rand.Read(b[:])
		g.pageSecret = hex.EncodeToString(b[:])
	}
	sum := sha256.Sum256([]byte("orrery cookie name\x00" + g.pageSecret))
	suffix := hex.EncodeToString(sum[:5])
	g.pageCookie = cookiePrefix + "web_" + suffix
	g.tokenCookie = cookiePrefix + "token_" + suffix
	return g
}

// normalHost lowercases a host name and drops a trailing dot and IPv6
// brackets.
func normalHost(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	h = strings.TrimSuffix(h, ".")
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return h
}

// splitHost returns the host of a Host header value, normalised, without
// its port.
func splitHost(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return normalHost(host)
}

// normalOrigin returns an origin as scheme://host[:port], lowercased and
// without a default port, or false when o is not an http(s) origin.
func normalOrigin(o string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return strings.ToLower(u.Scheme) + "://" + host, true
}

// hostAllowed reports whether the Host header value names this server: an
// IP literal of this machine (no browser looked it up in DNS, so no page
// can rebind it), localhost or a name below .localhost (RFC 6761), the
// listen address's own name, or a name in allowed_hosts. An empty host is
// never allowed.
func (g *guard) hostAllowed(hostport string) bool {
	host := splitHost(hostport)
	switch {
	case host == "":
		return false
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return true
	case host == g.listenHost:
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() {
			return true
		}
		if g.listenHost != "" {
			if lip := net.ParseIP(g.listenHost); lip == nil || !lip.IsUnspecified() {
				return g.anyHost || g.matchHost(host)
			}
		}
		return g.localIP(ip) || g.anyHost || g.matchHost(host)
	}
	return g.anyHost || g.matchHost(host)
}

func (g *guard) matchHost(host string) bool {
	for _, h := range g.hosts {
		if h == host {
			return true
		}
		if suffix, ok := strings.CutPrefix(h, "*."); ok && strings.HasSuffix(host, "."+suffix) {
			return true
		}
	}
	return false
}

// localIP reports whether ip is an address of one of this machine's
// interfaces. The list is read again at most every few seconds, so an
// address that comes up later is found.
func (g *guard) localIP(ip net.IP) bool {
	g.ifMu.Lock()
	defer g.ifMu.Unlock()
	if g.ifAddrs == nil || time.Since(g.ifRead) > 5*time.Second {
		g.ifAddrs = make(map[string]bool)
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					g.ifAddrs[n.IP.String()] = true
				}
			}
		}
		g.ifRead = time.Now()
	}
	return g.ifAddrs[ip.String()]
}

// originKind is how the server sees a request's Origin.
type originKind int

const (
	originNone    originKind = iota // no Origin: not a page's request, or a page's same-origin GET
	originOwn                       // the server's own origin
	originAllowed                   // listed in allowed_origins
	originRefused                   // anything else, "null" included
)

// origin classifies r's Origin header. Own means the origin names the
// same host and port as the request's Host, which hostAllowed has already
// checked: so a rebound page (whose Origin equals its Host) never passes
// as own.
func (g *guard) origin(r *http.Request) (originKind, string) {
	o := r.Header.Get("Origin")
	if o == "" {
		return originNone, ""
	}
	n, ok := normalOrigin(o)
	if !ok {
		return originRefused, o
	}
	u, _ := url.Parse(n)
	if hostPortEqual(u, r.Host) {
		return originOwn, n
	}
	if g.anyOrigin || g.origins[n] {
		return originAllowed, n
	}
	return originRefused, n
}

// hostPortEqual reports whether origin u names the same host and port as
// the Host header value host. The scheme is left out: a proxy that ends
// TLS forwards https pages' requests as plain HTTP.
func hostPortEqual(u *url.URL, host string) bool {
	h, p := u.Hostname(), u.Port()
	if p == "" {
		p = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	rh, rp, err := net.SplitHostPort(host)
	if err != nil {
		rh, rp = host, ""
	}
	if rp == "" {
		rp = p // a Host without a port is on the scheme's default port
	}
	return normalHost(h) == normalHost(rh) && p == rp
}

// jsonRoutes are the routes that change state; their bodies must be
// declared JSON, which a browser cannot send across origins without a
// CORS preflight.
var jsonRoutes = map[string]bool{"/run": true, "/control": true, "/v1/chat/completions": true, "/auth": true}

// refusal is an answer the guard gives instead of the route.
type refusal struct {
	status int
	msg    string
}

// admit checks r's Host, Origin and Sec-Fetch-Site against the boundary
// and judges its peer. A refusal names the setting that would admit the
// request, when one would.
func (g *guard) admit(r *http.Request) (peer, *refusal) {
	if !g.hostAllowed(r.Host) {
		host := splitHost(r.Host)
		if host == "" {
			return peer{}, &refusal{http.StatusForbidden, "the request names no host: send a Host header with this server's name"}
		}
		return peer{}, &refusal{http.StatusForbidden, fmt.Sprintf(
			"this server does not answer to the name %q: use localhost or the server's IP address, or add the name to [server] allowed_hosts", host)}
	}
	kind, origin := g.origin(r)
	if kind == originRefused {
		return peer{}, &refusal{http.StatusForbidden, fmt.Sprintf(
			"pages from %s may not call this server: a page may call it only from its own origin or one listed in [server] allowed_origins", quoteOrigin(origin))}
	}
	site := r.Header.Get("Sec-Fetch-Site")
	if kind == originNone && (site == "cross-site" || site == "same-site") && !isPage(r) && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
		return peer{}, &refusal{http.StatusForbidden, "a page on another site may not reach " + r.URL.Path + ": open the web client this server serves at /"}
	}
	p := peer{local: auth.IsLocalProgram(r), browser: kind != originNone || (site != "" && site != "none")}
	sameOrigin := kind == originOwn || (kind == originNone && site == "same-origin")
	if sameOrigin || !p.browser {
		if c, err := r.Cookie(g.pageCookie); err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(g.pageSecret)) == 1 {
			p.page = p.browser
		}
	}
	return p, nil
}

// checkJSON refuses a state change whose body is not declared JSON.
func checkJSON(r *http.Request) *refusal {
	if r.Method != http.MethodPost || !jsonRoutes[r.URL.Path] {
		return nil
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return &refusal{http.StatusUnsupportedMediaType, fmt.Sprintf(
			"POST %s takes a JSON body: send it with Content-Type: application/json", r.URL.Path)}
	}
	return nil
}

// cookieToken returns the token of the web client's token cookie, taken
// only from a request of the server's own origin (or from a program, which
// has no origin).
func (g *guard) cookieToken(r *http.Request, p peer) string {
	if p.browser && !p.page && !sameOriginRequest(r) {
		return ""
	}
	c, err := r.Cookie(g.tokenCookie)
	if err != nil {
		return ""
	}
	return c.Value
}

// sameOriginRequest reports whether a browser says r came from a page of
// the same origin.
func sameOriginRequest(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		n, ok := normalOrigin(o)
		if !ok {
			return false
		}
		u, _ := url.Parse(n)
		return hostPortEqual(u, r.Host)
	}
	return r.Header.Get("Sec-Fetch-Site") == "same-origin"
}

func quoteOrigin(o string) string {
	if o == "" {
		return "an empty origin"
	}
	return fmt.Sprintf("%q", o)
}

// corsHeaders are the request headers a page on an allowed origin may send.
const corsHeaders = "Authorization, Content-Type, Last-Event-ID, " + SessionHeader

// cors adds the answer headers that let a page on an allowed origin read
// the answer, and answers its preflight. It reports true when it answered.
// Credentials (cookies) are never allowed across origins: such a page
// authenticates with a token in Authorization.
func (g *guard) cors(w http.ResponseWriter, r *http.Request) bool {
	kind, origin := g.origin(r)
	if kind != originAllowed {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", "GET, POST")
		h.Set("Access-Control-Allow-Headers", corsHeaders)
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	h.Set("Access-Control-Expose-Headers", SessionHeader)
	return false
}

// setPageCookie gives the web client the secret that marks its requests
// as its own: HttpOnly, so no script reads it, and SameSite=Strict, so no
// other site's page sends it.
func (g *guard) setPageCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: g.pageCookie, Value: g.pageSecret, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}
