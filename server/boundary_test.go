package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/acp"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/tool"
)

// bReq is one request of the boundary tests. Host, when set, replaces the
// Host header the client would send.
type bReq struct {
	method, path, host string
	hdr                http.Header
	body               string
}

// do sends q to base as it is: no Content-Type is added, so a test says
// every header it means.
func (q bReq) do(tb testing.TB, base *httptest.Server) (int, http.Header, []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if q.body != "" {
		rd = strings.NewReader(q.body)
	}
	req, err := http.NewRequestWithContext(ctx, q.method, base.URL+q.path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range q.hdr {
		req.Header[k] = v
	}
	if q.host != "" {
		req.Host = q.host
	}
	resp, err := base.Client().Do(req)
	if err != nil {
		tb.Fatalf("%s %s (Host %s): %v", q.method, q.path, q.host, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, resp.Header, nil
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: read body: %v", q.method, q.path, err)
	}
	return resp.StatusCode, resp.Header, data
}

// upgrade is the header of a WebSocket upgrade request.
func upgrade() http.Header {
	return http.Header{
		"Connection": {"Upgrade"}, "Upgrade": {"websocket"},
		"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="},
	}
}

// jsonHdr is the header of a program's JSON request.
func jsonHdr(extra ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	return h
}

// everyRoute is one request to each route, each of which would change
// something if the server took it: make a session, start a run, stream.
func everyRoute(session string) []bReq {
	newSession := `{"t":"session.new","id":"n","title":"made by an attacker"}`
	return []bReq{
		{method: "POST", path: "/run", hdr: jsonHdr(), body: `{"threadId":"attacker-thread","runId":"r1","messages":[{"id":"u1","role":"user","content":"hello"}]}`},
		{method: "GET", path: "/events?session=" + session + "&since=0"},
		{method: "POST", path: "/control", hdr: jsonHdr(), body: newSession},
		{method: "GET", path: "/ws", hdr: upgrade()},
		{method: "GET", path: "/acp/ws?session=" + session, hdr: upgrade()},
		{method: "POST", path: "/v1/chat/completions", hdr: jsonHdr(), body: `{"model":"orrery","user":"attacker-chat","messages":[{"role":"user","content":"hello"}]}`},
		{method: "GET", path: "/v1/models"},
		{method: "GET", path: "/api/live"},
		{method: "GET", path: "/"},
		{method: "GET", path: "/assets/app.js"},
		{method: "GET", path: "/healthz"},
		{method: "GET", path: "/readyz"},
		{method: "GET", path: "/metrics"},
		{method: "POST", path: "/auth", hdr: jsonHdr(), body: `{"token":"orr_x_y"}`},
		{method: "DELETE", path: "/auth"},
		{method: "OPTIONS", path: "/control", hdr: http.Header{"Access-Control-Request-Method": {"POST"}}},
		{method: "GET", path: "/nowhere"},
	}
}

// errorOf returns the sentence of a refusal's body (a JSON error, or an
// OpenAI error object).
func errorOf(body []byte) string {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(v.Error, &s) == nil {
		return s
	}
	var oa struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(v.Error, &oa)
	return oa.Message
}

// TestBoundaryHost sends a request to every route with each Host a page
// could give after rebinding a DNS name to this machine: every one is
// refused with 403 naming allowed_hosts, and nothing changes. The names
// this server answers to are served.
func TestBoundaryHost(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true, allowedHosts: []string{"orrery.example", "*.corp.example"}})
	idle := r.newIdleSession(t)
	_, port, _ := net.SplitHostPort(r.local.Listener.Addr().String())
	foreign := []string{
		"evil.example:" + port, "evil.example", "EVIL.example.", "localhost.evil.example", "127.0.0.1.nip.io:" + port,
		"orrery.example.evil.example", "corp.example", "0.0.0.0:" + port, "[::]:" + port, "8.8.8.8", "192.0.2.1:" + port,
	}
	for _, host := range foreign {
		for _, q := range everyRoute(idle) {
			q.host = host
			t.Run(host+" "+q.method+" "+q.path, func(t *testing.T) {
				before := r.snapshot(t, idle)
				status, _, body := q.do(t, r.local)
				if status != http.StatusForbidden || !strings.Contains(errorOf(body), "[server] allowed_hosts") {
					t.Errorf("%s %s with Host %s = %d %s, want 403 naming [server] allowed_hosts", q.method, q.path, host, status, body)
				}
				if after := r.snapshot(t, idle); after != before {
					t.Errorf("the sessions changed after a refused request:\n%s\nwant\n%s", after, before)
				}
			})
		}
	}
	// Names this server answers to: the page, health and a request pass.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost", "app.localhost:" + port, "[::1]:" + port,
		"127.0.0.2", "orrery.example", "orrery.example:443", "build.corp.example"} {
		t.Run("answers "+host, func(t *testing.T) {
			for _, q := range []bReq{{method: "GET", path: "/healthz"}, {method: "GET", path: "/"},
				{method: "POST", path: "/control", hdr: jsonHdr(), body: `{"t":"session.list","id":"l"}`}} {
				q.host = host
				if status, _, body := q.do(t, r.local); status != http.StatusOK {
					t.Errorf("%s %s with Host %s = %d %s, want 200", q.method, q.path, host, status, body)
				}
			}
		})
	}
}

// TestBoundaryEmptyHost sends requests with an empty Host (and with only a
// port), which net.SplitHostPort reads as an empty host: never local.
func TestBoundaryEmptyHost(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true})
	for _, host := range []string{"", ":" + portOf(r.local)} {
		nc, err := net.Dial("tcp", r.local.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(nc, "GET /api/live HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			t.Fatalf("Host %q: %v", host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		nc.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(errorOf(body), "host") {
			t.Errorf("GET /api/live with Host %q = %d %s, want 403", host, resp.StatusCode, body)
		}
	}
}

func portOf(s *httptest.Server) string {
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	return port
}

// TestBoundaryOrigin checks every route against browser origins: another
// origin (another site, or another port of this one), the opaque "null"
// origin and malformed ones are refused with 403 naming allowed_origins;
// the server's own origin and a listed one are served, the listed one
// with CORS headers; a preflight is answered for a listed origin only.
func TestBoundaryOrigin(t *testing.T) {
	const app = "http://app.example:3000"
	r := newTxRig(t, txRigOptions{logs: true, allowedOrigins: []string{app, "https://dash.example"}})
	idle := r.newIdleSession(t)
	port := portOf(r.local)
	own := "http://127.0.0.1:" + port
	for _, origin := range []string{"http://evil.example", "null", "http://127.0.0.1:1", "http://localhost:" + port, "http://127.0.0.1." + port,
		"file://", "http://app.example:3001", "https://app.example:3000", "http://dash.example", "chrome-extension://abc", own + "/path"} {
		for _, q := range everyRoute(idle) {
			q.hdr = q.hdr.Clone()
			if q.hdr == nil {
				q.hdr = http.Header{}
			}
			q.hdr.Set("Origin", origin)
			t.Run(origin+" "+q.method+" "+q.path, func(t *testing.T) {
				before := r.snapshot(t, idle)
				status, hdr, body := q.do(t, r.local)
				if status != http.StatusForbidden || !strings.Contains(errorOf(body), "[server] allowed_origins") {
					t.Errorf("%s %s from %s = %d %s, want 403 naming [server] allowed_origins", q.method, q.path, origin, status, body)
				}
				if got := hdr.Get("Access-Control-Allow-Origin"); got != "" {
					t.Errorf("%s %s from %s: Access-Control-Allow-Origin %q, want none", q.method, q.path, origin, got)
				}
				if after := r.snapshot(t, idle); after != before {
					t.Errorf("the sessions changed after a refused request:\n%s\nwant\n%s", after, before)
				}
			})
		}
	}
	list := bReq{method: "POST", path: "/control", hdr: jsonHdr(), body: `{"t":"session.list","id":"l"}`}
	for _, tc := range []struct {
		origin, cors string
	}{{own, ""}, {"HTTP://127.0.0.1:" + port, ""}, {app, app}, {"https://dash.example:443", "https://dash.example"}} {
		q := list
		q.hdr = jsonHdr("Origin", tc.origin)
		status, hdr, body := q.do(t, r.local)
		if status != http.StatusOK {
			t.Errorf("POST /control from %s = %d %s, want 200", tc.origin, status, body)
		}
		if got := hdr.Get("Access-Control-Allow-Origin"); got != tc.cors {
			t.Errorf("POST /control from %s: Access-Control-Allow-Origin %q, want %q", tc.origin, got, tc.cors)
		}
		if got := hdr.Get("Access-Control-Allow-Credentials"); got != "" {
			t.Errorf("POST /control from %s: Access-Control-Allow-Credentials %q, want none: cookies never cross origins", tc.origin, got)
		}
	}
	// A listed origin's preflight is answered; an unlisted one's refused.
	pre := bReq{method: "OPTIONS", path: "/control", hdr: http.Header{"Origin": {app}, "Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Headers": {"content-type,authorization"}}}
	status, hdr, _ := pre.do(t, r.local)
	if status != http.StatusNoContent || hdr.Get("Access-Control-Allow-Origin") != app || !strings.Contains(hdr.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight from %s = %d %v, want 204 allowing it with Authorization", app, status, hdr)
	}
	// The WebSocket: the server's own origin and a listed one upgrade.
	for _, origin := range []string{own, app} {
		p, resp, err := txDialWS(t, r.local.URL, "", http.Header{"Origin": {origin}})
		if err != nil {
			t.Errorf("dial /ws from %s: %v %v, want an upgrade", origin, resp, err)
			continue
		}
		p.send(t, `{"t":"session.list","id":"q"}`)
		if m := p.reply(t); m["ok"] != true {
			t.Errorf("session.list over /ws from %s = %v, want ok", origin, m)
		}
	}
}

// TestBoundaryFetchSite checks the requests a browser sends without an
// Origin (a page's <img>, <script>, <iframe> or link): from another site
// they are refused on every route but the page itself, which a person may
// open from a link.
func TestBoundaryFetchSite(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true})
	idle := r.newIdleSession(t)
	for _, site := range []string{"cross-site", "same-site"} {
		for _, q := range everyRoute(idle) {
			q.hdr = q.hdr.Clone()
			if q.hdr == nil {
				q.hdr = http.Header{}
			}
			q.hdr.Set("Sec-Fetch-Site", site)
			want := http.StatusForbidden
			if q.method == "GET" && (q.path == "/" || q.path == "/assets/app.js" || q.path == "/healthz" || q.path == "/readyz") {
				want = http.StatusOK
			}
			t.Run(site+" "+q.method+" "+q.path, func(t *testing.T) {
				before := r.snapshot(t, idle)
				status, _, body := q.do(t, r.local)
				if status != want {
					t.Errorf("%s %s with Sec-Fetch-Site %s = %d %s, want %d", q.method, q.path, site, status, body, want)
				}
				if after := r.snapshot(t, idle); after != before {
					t.Errorf("the sessions changed:\n%s\nwant\n%s", after, before)
				}
			})
		}
	}
}

// TestBoundaryContentType sends the state-changing routes the body types
// a page can send across origins without a preflight, and others: only
// application/json is taken (415 otherwise), and nothing changes.
func TestBoundaryContentType(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true})
	idle := r.newIdleSession(t)
	bodies := map[string]string{
		"/run":                 `{"threadId":"ct-thread","runId":"r1","messages":[{"id":"u1","role":"user","content":"hello"}]}`,
		"/control":             `{"t":"session.new","id":"n","title":"made by a form"}`,
		"/v1/chat/completions": `{"model":"orrery","user":"ct-chat","messages":[{"role":"user","content":"hello"}]}`,
		"/auth":                `{"token":"` + "orr_x" + `"}`,
	}
	for path, body := range bodies {
		for _, ct := range []string{"", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
			"application/json-patch+json", "text/json", "application/jsonx", "application/json,text/plain", "json", "application/json; =broken"} {
			t.Run(path+" "+ct, func(t *testing.T) {
				before := r.snapshot(t, idle)
				q := bReq{method: "POST", path: path, body: body, hdr: http.Header{}}
				if ct != "" {
					q.hdr.Set("Content-Type", ct)
				}
				status, _, resp := q.do(t, r.local)
				if status != http.StatusUnsupportedMediaType || !strings.Contains(errorOf(resp), "application/json") {
					t.Errorf("POST %s as %q = %d %s, want 415 naming application/json", path, ct, status, resp)
				}
				if after := r.snapshot(t, idle); after != before {
					t.Errorf("the sessions changed:\n%s\nwant\n%s", after, before)
				}
			})
		}
	}
	q := bReq{method: "POST", path: "/control", body: `{"t":"session.list","id":"l"}`, hdr: http.Header{"Content-Type": {"Application/JSON; charset=utf-8"}}}
	if status, _, body := q.do(t, r.local); status != http.StatusOK {
		t.Errorf("POST /control as application/json with a charset = %d %s, want 200", status, body)
	}
}

// TestConsentRights checks who may declare that it draws consent: a
// program on this machine, a pipe, a token holder and the server's own web
// client (its cookie, from its own origin) may; a browser page from
// another origin (listed or not), and a page of this origin without the
// cookie, may not, over every transport. The refusal says who may.
func TestConsentRights(t *testing.T) {
	const app = "http://app.example:3000"
	r := newTxRig(t, txRigOptions{logs: true, allowedOrigins: []string{app}})
	idle := r.newIdleSession(t)
	own := "http://127.0.0.1:" + portOf(r.local)

	// The web client's cookie comes with its page.
	status, hdr, _ := bReq{method: "GET", path: "/"}.do(t, r.local)
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: hdr}).Cookies() {
		if strings.HasPrefix(c.Name, "orrery_web_") {
			cookie = c
		}
	}
	if status != 200 || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" {
		t.Fatalf("GET / = %d, cookie %+v; want 200 with an HttpOnly, SameSite=Strict page cookie", status, cookie)
	}
	page := cookie.Name + "=" + cookie.Value
	draws := "client=web&draws=thread,tools,consent"
	bearer := "Bearer " + r.good

	tests := []struct {
		name   string
		remote bool
		hdr    http.Header
		ok     bool
	}{
		{"a program on this machine", false, nil, true},
		{"the web client (own origin, its cookie)", false, http.Header{"Origin": {own}, "Cookie": {page}}, true},
		{"the web client's GET (same-origin fetch site, its cookie)", false, http.Header{"Sec-Fetch-Site": {"same-origin"}, "Cookie": {page}}, true},
		{"a page of this origin without the cookie", false, http.Header{"Origin": {own}}, false},
		{"a same-origin GET without the cookie", false, http.Header{"Sec-Fetch-Site": {"same-origin"}}, false},
		{"a page of this origin with a wrong cookie", false, http.Header{"Origin": {own}, "Cookie": {cookie.Name + "=nope"}}, false},
		{"a listed origin", false, http.Header{"Origin": {app}}, false},
		{"a listed origin carrying the cookie", false, http.Header{"Origin": {app}, "Cookie": {page}}, false},
		{"a listed origin with a token", false, http.Header{"Origin": {app}, "Authorization": {bearer}}, true},
		{"a token holder off this machine", true, http.Header{"Authorization": {bearer}}, true},
		{"a token holder off this machine, scheme in capitals", true, http.Header{"Authorization": {"BEARER " + r.good}}, true},
		{"a proxied request from this machine", false, http.Header{"X-Forwarded-For": {"203.0.113.9"}, "Authorization": {bearer}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := r.local
			if tc.remote {
				base = r.remote
			}
			for _, q := range []bReq{
				{method: "POST", path: "/control?" + draws, body: `{"t":"session.list","id":"l"}`},
				{method: "GET", path: "/events?session=" + idle + "&since=0&" + draws},
			} {
				q.hdr = tc.hdr.Clone()
				if q.hdr == nil {
					q.hdr = http.Header{}
				}
				if q.method == "POST" {
					q.hdr.Set("Content-Type", "application/json")
				}
				status, _, body := q.do(t, base)
				switch {
				case tc.ok && status != http.StatusOK:
					t.Errorf("%s %s = %d %s, want 200", q.method, q.path, status, body)
				case !tc.ok && (status != http.StatusForbidden || !strings.Contains(errorOf(body), "may not answer consent")):
					t.Errorf("%s %s = %d %s, want 403 saying it may not answer consent", q.method, q.path, status, body)
				}
			}
			// The same declaration in a WebSocket hello.
			wsHdr := tc.hdr.Clone()
			p, resp, err := txDialWS(t, base.URL, "", wsHdr)
			if err != nil {
				t.Fatalf("dial /ws: %v %v", resp, err)
			}
			p.send(t, `{"t":"hello","id":"h","client":"web","draws":["thread","tools","consent"]}`)
			m := p.reply(t)
			if tc.ok != (m["ok"] == true) {
				t.Errorf("hello with draws consent = %v, want ok %v", m, tc.ok)
			}
			if !tc.ok {
				if code, _ := p.closed(t); code != 4003 {
					t.Errorf("refused hello: close code %d, want 4003", code)
				}
			}
		})
	}
	// A pipe may.
	p := txDialPipe(t, r.sock)
	p.send(t, `{"t":"hello","id":"h","client":"tui","draws":["thread","tools","consent"]}`)
	if m := p.reply(t); m["ok"] != true {
		t.Errorf("hello with draws consent over a pipe = %v, want ok", m)
	}
}

// acpOrOffline resolves acp:COMMAND ARGS… to a real ACP agent process (as
// cmd/orrery does, with the words split on spaces) and anything else as
// txOfflineOnly does: so a spec that got past the boundary really runs.
func acpOrOffline(spec string) (agent.Provider, error) {
	if line, ok := strings.CutPrefix(spec, "acp:"); ok {
		words := strings.Fields(line)
		return acp.New(acp.Config{Command: words[0], Args: words[1:], HandshakeTimeout: 5 * time.Second})
	}
	return txOfflineOnly(spec)
}

// TestRequestSpecs checks that a request may name only the models config
// and the command line define: an agent command line (acp:), a script or
// a crew file is refused over POST /control and /v1/chat/completions, and
// the command never runs. With allow_agent_commands the same request does
// run it, which shows the test can fail.
func TestRequestSpecs(t *testing.T) {
	dir := t.TempDir()
	canary := filepath.Join(dir, "pwned")
	attack := "acp:touch " + canary
	refused := []string{
		`{"t":"session.new","id":"1","agent":"` + attack + `"}`,
		`{"t":"session.new","id":"1","model":"` + attack + `"}`,
		`{"t":"session.new","id":"1","model":"script:/etc/passwd"}`,
		`{"t":"session.new","id":"1","model":"crew:` + filepath.Join(dir, "crew.toml") + `"}`,
		`{"t":"session.new","id":"1","model":"agent:nosuch"}`,
		`{"t":"session.new","id":"1","agent":"nosuch"}`,
		`{"t":"session.new","id":"1","model":"gemini:pro"}`,
	}
	r := newTxRig(t, txRigOptions{logs: true, models: acpOrOffline})
	idle := r.newIdleSession(t)
	for _, body := range refused {
		before := r.snapshot(t, idle)
		status, _, resp := r.post(t, r.local, "POST", "/control", nil, body)
		if status != http.StatusBadRequest || !txSentence(errorOf(resp)) {
			t.Errorf("POST /control %s = %d %s, want 400 with a sentence", body, status, resp)
		}
		if after := r.snapshot(t, idle); after != before {
			t.Errorf("after %s the sessions changed:\n%s\nwant\n%s", body, after, before)
		}
	}
	status, _, resp := r.post(t, r.local, "POST", "/control", nil, refused[0])
	if msg := errorOf(resp); !strings.Contains(msg, "[agents.<name>]") || !strings.Contains(msg, "allow_agent_commands") {
		t.Errorf("session.new {agent: acp:…} = %d %q, want the fix: [agents.<name>] or allow_agent_commands", status, msg)
	}
	chat := `{"model":"` + attack + `","user":"spec-chat","messages":[{"role":"user","content":"hi"}]}`
	status, _, resp = r.post(t, r.local, "POST", "/v1/chat/completions", nil, chat)
	if status != http.StatusBadRequest || !strings.Contains(errorOf(resp), "allow_agent_commands") {
		t.Errorf("POST /v1/chat/completions {model: acp:…} = %d %s, want 400 (an SDK does not retry it)", status, resp)
	}
	for _, ok := range []string{`{"t":"session.new","id":"2"}`, `{"t":"session.new","id":"3","model":"offline"}`} {
		if status, _, resp := r.post(t, r.local, "POST", "/control", nil, ok); status != http.StatusOK {
			t.Errorf("POST /control %s = %d %s, want 200", ok, status, resp)
		}
	}
	if _, err := os.Stat(canary); !os.IsNotExist(err) {
		t.Fatalf("the acp: command ran (%s exists: %v), want it refused", canary, err)
	}

	// The control: with allow_agent_commands the same spec runs.
	open := newTxRig(t, txRigOptions{logs: true, models: acpOrOffline, checkSpec: models.RequestPolicy{AllowCommands: true}.Check})
	var created struct{ Session string }
	if err := json.Unmarshal(open.control(t, refused[0]), &created); err != nil {
		t.Fatal(err)
	}
	open.control(t, `{"t":"run.send","id":"s","session":"`+created.Session+`","input":{"text":"hi"}}`)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(canary); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with allow_agent_commands the acp: command never ran (%s missing): the test cannot tell a refusal from a broken agent", canary)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPipeSpecs: the spec a pipe caller names is judged by CheckPipeSpec
// (cmd/orrery's lets the pipe, which only this user can reach, name
// commands), while the same session.new over a WebSocket is judged by
// CheckSpec and refused; the pipe's command does run.
func TestPipeSpecs(t *testing.T) {
	canary := filepath.Join(t.TempDir(), "pwned")
	body := `{"t":"session.new","id":"n","model":"acp:touch ` + canary + `"}`
	r := newTxRig(t, txRigOptions{logs: true, models: acpOrOffline, config: func(c *server.Config) {
		c.CheckPipeSpec = models.RequestPolicy{AllowCommands: true}.Check
	}})
	ws := r.hello(t, "ws", "")
	ws.send(t, body)
	if m := ws.reply(t); m["ok"] != false || !strings.Contains(fmt.Sprint(m["error"]), "allow_agent_commands") {
		t.Errorf("session.new {model: acp:…} over a WebSocket = %v, want the refusal", m)
	}
	pipe := r.hello(t, "pipe", "")
	pipe.send(t, body)
	m := pipe.reply(t)
	session, _ := m["value"].(map[string]any)["session"].(string)
	if m["ok"] != true || session == "" {
		t.Fatalf("session.new {model: acp:…} over the pipe = %v, want a session", m)
	}
	pipe.send(t, `{"t":"run.send","id":"s","session":"`+session+`","input":{"text":"hi"}}`)
	pipe.replyTo(t, "s")
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(canary); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pipe's acp: command never ran (%s missing)", canary)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRequestSpecPolicy is the policy's table: what config and the command
// line define is accepted, and nothing that starts a process.
func TestRequestSpecPolicy(t *testing.T) {
	p := models.RequestPolicy{Aliases: []string{"local"}, Agents: []string{"gemini"}, Defined: []string{"acp:claude-code-acp"}}
	for _, tc := range []struct {
		spec string
		ok   bool
	}{
		{"", true}, {"offline", true}, {"openai:gpt-4.1", true}, {"anthropic:claude-sonnet-4-5", true}, {"local", true},
		{"agent:gemini", true}, {"acp:claude-code-acp", true},
		{"acp:claude-code-acp --dangerous", false}, {"acp:sh -c id", false}, {"script:/etc/passwd", false}, {"crew:/tmp/c.toml", false},
		{"agent:other", false}, {"openai:", false}, {"offline:x", false}, {"mystery", false}, {"ACP:sh", false},
	} {
		err := p.Check(tc.spec)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%q) = %v, want ok %v", tc.spec, err, tc.ok)
		}
		if err != nil && !txSentence(err.Error()) {
			t.Errorf("Check(%q) = %q, want a sentence", tc.spec, err)
		}
	}
	if err := (models.RequestPolicy{AllowCommands: true}).Check("acp:sh -c id"); err != nil {
		t.Errorf("with AllowCommands, Check(acp:…) = %v, want nil", err)
	}
}

// TestRequestCwd checks that a session's cwd from a request must lie in
// the workspace roots, whatever the spelling: "/", another directory, a
// "..", a symlink out and a relative path are refused; a directory inside
// is taken, with its symlinks resolved. With no roots every cwd is
// refused.
func TestRequestCwd(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	other, _ := filepath.EvalSymlinks(t.TempDir())
	inside := filepath.Join(root, "proj")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(inside, filepath.Join(root, "in")); err != nil {
		t.Fatal(err)
	}
	r := newTxRig(t, txRigOptions{logs: true, roots: []string{root}})
	idle := r.newIdleSession(t)
	for _, cwd := range []string{"/", "/etc", other, filepath.Join(root, "..", filepath.Base(other)), filepath.Join(inside, "..", ".."),
		filepath.Join(root, "out"), filepath.Join(root, "out", "x"), "proj", "./proj", root + "/../" + filepath.Base(root) + "/../"} {
		body, _ := json.Marshal(map[string]string{"t": "session.new", "id": "c", "cwd": cwd})
		before := r.snapshot(t, idle)
		status, _, resp := r.post(t, r.local, "POST", "/control", nil, string(body))
		if status != http.StatusBadRequest || !strings.Contains(errorOf(resp), "root") {
			t.Errorf("session.new {cwd: %q} = %d %s, want 400 naming the workspace roots", cwd, status, resp)
		}
		if after := r.snapshot(t, idle); after != before {
			t.Errorf("after a refused cwd %q the sessions changed", cwd)
		}
	}
	for cwd, want := range map[string]string{root: root, inside: inside, filepath.Join(root, "in"): inside, inside + "/./": inside} {
		body, _ := json.Marshal(map[string]string{"t": "session.new", "id": "c", "cwd": cwd})
		var created struct{ Session string }
		status, _, resp := r.post(t, r.local, "POST", "/control", nil, string(body))
		if status != http.StatusOK || json.Unmarshal(resp, &created) != nil {
			t.Errorf("session.new {cwd: %q} = %d %s, want 200", cwd, status, resp)
			continue
		}
		sess, err := r.k.Session(context.Background(), created.Session)
		if err != nil {
			t.Fatal(err)
		}
		info, err := sess.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.Cwd != want {
			t.Errorf("session.new {cwd: %q}: the session's cwd = %q, want %q", cwd, info.Cwd, want)
		}
	}

	none := newTxRig(t, txRigOptions{logs: true})
	status, _, resp := none.post(t, none.local, "POST", "/control", nil, `{"t":"session.new","id":"c","cwd":"`+inside+`"}`)
	if status != http.StatusBadRequest || !strings.Contains(errorOf(resp), "[workspace] roots") {
		t.Errorf("session.new {cwd} on a server without roots = %d %s, want 400 naming [workspace] roots", status, resp)
	}
}

// TestAttachmentsOutsideWorkspace sends files outside the session's
// workspace every way a request can name one: a run.send attachment by a
// ".." path, a file:// URL in a stock client's message, and an ori
// browser's prompt by absolute path and file:// URL. Each is refused and
// nothing of it reaches the log; a file inside is attached.
func TestAttachmentsOutsideWorkspace(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	secret := filepath.Join(filepath.Dir(ws), "secret-"+filepath.Base(ws)+".txt")
	if err := os.WriteFile(secret, []byte("the outside secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(secret) })
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("inside notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newTxRig(t, txRigOptions{logs: true, tools: tool.NewSet(tool.Echo{}), workspace: ws})
	idle := r.newIdleSession(t)
	rel := filepath.Join("..", filepath.Base(secret))
	fileURL := (&url.URL{Scheme: "file", Path: secret}).String()
	part := func(typ, value string) string {
		return `{"type":"document","source":{"type":"` + typ + `","value":"` + value + `"}}`
	}
	for _, tc := range []struct {
		name, path, body string
	}{
		{"run.send, a .. path", "/control", `{"t":"run.send","id":"s","session":"` + idle + `","input":{"text":"read it","attachments":[` + part("path", rel) + `]}}`},
		{"run.send, an absolute path", "/control", `{"t":"run.send","id":"s","session":"` + idle + `","input":{"text":"read it","attachments":[` + part("path", secret) + `]}}`},
		{"run.send, a file URL", "/control", `{"t":"run.send","id":"s","session":"` + idle + `","input":{"text":"read it","attachments":[` + part("url", fileURL) + `]}}`},
		{"run.send, a file URL of another host", "/control", `{"t":"run.send","id":"s","session":"` + idle + `","input":{"text":"read it","attachments":[` + part("url", "file://evil.example/etc/passwd") + `]}}`},
		{"POST /run, a file URL in a message", "/run", `{"threadId":"` + idle + `","runId":"r-att","messages":[{"id":"u-att","role":"user","content":[{"type":"text","text":"read it"},` + part("url", fileURL) + `]}]}`},
		{"POST /run, a .. path in a message", "/run", `{"threadId":"` + idle + `","runId":"r-att2","messages":[{"id":"u-att2","role":"user","content":[{"type":"text","text":"read it"},` + part("path", rel) + `]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := r.snapshot(t, idle)
			status, _, resp := r.post(t, r.local, "POST", tc.path, nil, tc.body)
			if msg := errorOf(resp); status != http.StatusBadRequest || !strings.Contains(msg, "outside") && !strings.Contains(msg, "not relative") && !strings.Contains(msg, "not a file URL") {
				t.Errorf("POST %s = %d %s, want 400: the file is outside the workspace", tc.path, status, resp)
			}
			if after := r.snapshot(t, idle); after != before {
				t.Errorf("the session changed after a refused attachment")
			}
		})
	}
	// The ori browser's prompts.
	for _, path := range []string{secret, fileURL, rel} {
		o := dialOri(t, r.local.URL, "?session="+idle, nil)
		before := r.snapshot(t, idle)
		msg, _ := json.Marshal(map[string]any{"type": "prompt", "text": "read it", "attachments": []map[string]string{{"path": path}}})
		o.send(string(msg))
		if m := o.until("error"); !strings.Contains(fmt.Sprint(m["message"]), "outside the session's workspace") {
			t.Errorf("ori prompt attaching %s: %v, want an error: outside the workspace", path, m)
		}
		if after := r.snapshot(t, idle); after != before {
			t.Errorf("ori prompt attaching %s changed the session", path)
		}
	}
	// A file inside is attached. run.send answers once the run starts,
	// which may be before its first frames are durable: wait for them.
	r.control(t, `{"t":"run.send","id":"s","session":"`+idle+`","input":{"text":"read it","attachments":[`+part("path", "notes.txt")+`]}}`)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.snapshot(t, idle), "inside notes") {
		if time.Now().After(deadline) {
			t.Fatalf("an attachment inside the workspace did not reach the log")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if strings.Contains(r.snapshot(t, idle), "the outside secret") {
		t.Errorf("the outside secret reached the log")
	}
}

// dialOri opens GET /acp/ws on the server at base with query and header.
func dialOri(t *testing.T, base, query string, hdr http.Header) *browser {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/acp/ws"+query, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("dial /acp/ws%s: %v %v", query, resp, err)
	}
	c.SetReadLimit(1 << 24)
	t.Cleanup(func() { c.CloseNow() })
	return &browser{t: t, c: c}
}

// TestForgedConsentAnswer puts a real consent question (the shell tool,
// asked about by default) before a legitimate client on a pipe, then has
// callers that did not earn the right answer it "allow once" every way:
// POST /control from a page of this origin without the cookie and from a
// listed origin, a WebSocket from a listed origin, and an ori browser from
// a listed origin. Each is refused; the question stays pending and the
// command does not run until the pipe client denies it.
func TestForgedConsentAnswer(t *testing.T) {
	const app = "http://app.example:3000"
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	canary := filepath.Join(ws, "pwned")
	r := newTxRig(t, txRigOptions{logs: true, allowedOrigins: []string{app},
		tools: tool.NewSet(tool.Coding(tool.Shell{})...), workspace: ws})
	idle := r.newIdleSession(t)
	own := "http://127.0.0.1:" + portOf(r.local)

	person := txDialPipe(t, r.sock)
	person.send(t, `{"t":"hello","id":"h","client":"tui","draws":["thread","tools","consent"]}`)
	if m := person.replyTo(t, "h"); m["ok"] != true {
		t.Fatalf("hello = %v", m)
	}
	person.send(t, `{"t":"session.attach","id":"a","session":"`+idle+`"}`)
	person.replyTo(t, "a")
	r.control(t, `{"t":"run.send","id":"s","session":"`+idle+`","input":{"text":"run `+"`touch "+canary+"`"+`"}}`)
	var request string
	for request == "" {
		m, _, err := person.next(15 * time.Second)
		if err != nil {
			t.Fatalf("waiting for the consent question: %v", err)
		}
		if m["type"] == "CUSTOM" && m["name"] == "orrery.consent.requested" {
			request, _ = m["value"].(map[string]any)["request"].(string)
		}
	}
	answer := `{"t":"consent.answer","id":"f","session":"` + idle + `","request":"` + request + `","option":"allow_once"}`
	for _, tc := range []struct {
		name string
		path string
		hdr  http.Header
	}{
		{"this origin without the cookie, declaring consent", "/control?client=web&draws=thread,tools,consent", jsonHdr("Origin", own)},
		{"this origin without the cookie", "/control", jsonHdr("Origin", own)},
		{"a listed origin, declaring consent", "/control?client=web&draws=thread,tools,consent", jsonHdr("Origin", app)},
		{"a listed origin", "/control", jsonHdr("Origin", app)},
	} {
		status, _, body := bReq{method: "POST", path: tc.path, hdr: tc.hdr, body: answer}.do(t, r.local)
		if status < 400 || !strings.Contains(errorOf(body), "consent") {
			t.Errorf("consent.answer from %s = %d %s, want a refusal about consent", tc.name, status, body)
		}
	}
	p, _, err := txDialWS(t, r.local.URL, "", http.Header{"Origin": {app}})
	if err != nil {
		t.Fatal(err)
	}
	p.send(t, `{"t":"hello","id":"h","client":"page"}`)
	p.replyTo(t, "h")
	p.send(t, answer)
	if m := p.replyTo(t, "f"); m["ok"] != false {
		t.Errorf("consent.answer over /ws from %s = %v, want refused", app, m)
	}
	o := dialOri(t, r.local.URL, "?session="+idle, http.Header{"Origin": {app}})
	o.send(`{"type":"permission_response","requestId":"` + request + `","optionId":"allow_once"}`)
	if m := o.until("error"); !strings.Contains(fmt.Sprint(m["message"]), "may not answer consent") {
		t.Errorf("permission_response from an ori page on %s = %v, want refused", app, m)
	}

	// Still pending: nothing resolved it and the command has not run.
	if log := r.snapshot(t, idle); strings.Contains(log, "orrery.consent.resolved") {
		t.Fatalf("the question was resolved by a forged answer:\n%s", log)
	}
	if _, err := os.Stat(canary); !os.IsNotExist(err) {
		t.Fatalf("the command ran (%s: %v)", canary, err)
	}
	person.send(t, `{"t":"consent.answer","id":"d","session":"`+idle+`","request":"`+request+`","option":"deny"}`)
	if m := person.replyTo(t, "d"); m["ok"] != true {
		t.Fatalf("the person's deny = %v, want ok", m)
	}
	if _, err := os.Stat(canary); !os.IsNotExist(err) {
		t.Fatalf("the command ran after a deny (%s: %v)", canary, err)
	}
}
