package server_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/getorrery/orrery/agent/provider/script"
	"github.com/getorrery/orrery/auth"
	"github.com/getorrery/orrery/server"
)

// revokeWait bounds the wait for a revocation to end a connection: the
// server notices it within about server.DefaultRevokeCheck, and this is
// generous for a loaded machine.
const revokeWait = 15 * time.Second

// txStream is an HTTP response read line by line in the background.
type txStream struct {
	started chan struct{} // closed when a line matched the start condition
	ended   chan struct{} // closed when the body ended
	status  int
}

// openStream sends a request to base and reads its streamed answer until
// it ends; started is closed at the first line for which start is true.
func openStream(tb testing.TB, base *httptest.Server, method, path string, hdr http.Header, body string, start func(line string) bool) *txStream {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	var req *http.Request
	var err error
	if rd != nil {
		req, err = http.NewRequestWithContext(ctx, method, base.URL+path, rd)
	} else {
		req, err = http.NewRequestWithContext(ctx, method, base.URL+path, nil)
	}
	if err != nil {
		tb.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := base.Client().Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	s := &txStream{started: make(chan struct{}), ended: make(chan struct{}), status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		tb.Fatalf("%s %s = %d, want 200", method, path, resp.StatusCode)
	}
	go func() {
		defer close(s.ended)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		started := false
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if !started && start(line) {
				started = true
				close(s.started)
			}
		}
	}()
	return s
}

// waitStarted waits for the stream's first wanted line.
func (s *txStream) waitStarted(tb testing.TB, what string) {
	tb.Helper()
	select {
	case <-s.started:
	case <-s.ended:
		tb.Fatalf("%s ended before it started", what)
	case <-time.After(revokeWait):
		tb.Fatalf("%s: nothing after %v", what, revokeWait)
	}
}

// closedFor reads a connection's messages until it is closed, and returns
// the close code and reason.
func (p *txPeer) closedFor(tb testing.TB, what string) (int, string) {
	tb.Helper()
	deadline := time.Now().Add(revokeWait)
	for time.Now().Before(deadline) {
		_, _, err := p.next(time.Until(deadline))
		var ce *txClosed
		if errors.As(err, &ce) {
			return ce.code, ce.reason
		}
		if err != nil && !strings.Contains(err.Error(), "not a JSON object") {
			tb.Fatalf("%s: %v, want the connection closed", what, err)
		}
	}
	tb.Fatalf("%s: still open after %v", what, revokeWait)
	return 0, ""
}

func dialPath(tb testing.TB, baseURL, path string, hdr http.Header) *txPeer {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(baseURL, "http")+path, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		tb.Fatalf("dial %s: %v", path, err)
	}
	c.SetReadLimit(4 << 20)
	tb.Cleanup(func() { c.CloseNow() })
	return &txPeer{kind: "ws", ws: c}
}

// TestRevokeEndsConnections opens every kind of stream and connection with
// one token, revokes the token from another Store on the same file (as
// orrery node token revoke does from its own process), and checks that
// each ends with the reason, that the token no longer opens anything, and
// that another token's connections go on.
func TestRevokeEndsConnections(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true, scripts: true})
	idle := r.newIdleSession(t)
	victim, vt, err := r.tokens.Create("victim")
	if err != nil {
		t.Fatal(err)
	}
	spec := writeScript(t, script.Turn{Text: chunks(20000), DelayMS: 5})
	var long struct{ Session string }
	if err := json.Unmarshal(r.control(t, `{"t":"session.new","id":"n","model":`+strconv.Quote(spec)+`}`), &long); err != nil || long.Session == "" {
		t.Fatalf("session.new: %v", err)
	}

	// The web client's sign-in: the token in its cookie.
	status, hdr, body := r.post(t, r.remote, http.MethodPost, "/auth", nil, `{"token":"`+victim+`"}`)
	if status != http.StatusOK {
		t.Fatalf("POST /auth = %d %s, want 200", status, body)
	}
	cookies := (&http.Response{Header: hdr}).Cookies()
	if len(cookies) != 1 {
		t.Fatalf("POST /auth set cookies %v, want one", cookies)
	}
	cookie := http.Header{"Cookie": {cookies[0].Name + "=" + cookies[0].Value}}
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	data := func(line string) bool { return strings.HasPrefix(line, "data: ") }
	content := func(line string) bool { return strings.Contains(line, `"TEXT_MESSAGE_CONTENT"`) }

	streams := map[string]*txStream{
		"GET /events with a bearer":   openStream(t, r.remote, "GET", "/events?since=0&session="+idle, bearer(victim), "", data),
		"GET /events with a cookie":   openStream(t, r.remote, "GET", "/events?since=0&session="+idle, cookie, "", data),
		"GET /events with ?token=":    openStream(t, r.remote, "GET", "/events?since=0&session="+idle+"&token="+victim, nil, "", data),
		"GET /api/live with a bearer": openStream(t, r.remote, "GET", "/api/live", bearer(victim), "", data),
		"POST /run with a bearer":     openStream(t, r.remote, "POST", "/run", bearer(victim), runInput(long.Session, "r-revoked", "u-revoked", "go"), content),
	}
	for name, s := range streams {
		s.waitStarted(t, name)
	}
	kept := openStream(t, r.remote, "GET", "/events?since=0&session="+idle, bearer(r.good), "", data)
	kept.waitStarted(t, "the other token's stream")

	hello := `{"t":"hello","id":"h","token":"` + victim + `"}`
	conns := map[string]*txPeer{
		"/ws with ?token=":               r.dial(t, "remote", "?token="+victim),
		"/ws with a bearer":              txMustDialWS(t, r.remote.URL, "", bearer(victim)),
		"/ws with hello":                 r.dial(t, "remote", ""),
		"/ws on loopback with hello":     r.dial(t, "ws", ""),
		"pipe with hello":                r.dial(t, "pipe", ""),
		"/acp/ws with a bearer":          dialPath(t, r.remote.URL, "/acp/ws?session="+idle, bearer(victim)),
		"/ws with a cookie, hello again": txMustDialWS(t, r.remote.URL, "", cookie),
	}
	for name, p := range conns {
		switch {
		case strings.Contains(name, "hello"):
			p.send(t, hello)
			if m := p.reply(t); m["ok"] != true {
				t.Fatalf("%s: hello = %v, want ok", name, m)
			}
		case strings.HasPrefix(name, "/ws"):
			p.send(t, `{"t":"session.list","id":"l"}`)
			if m := p.reply(t); m["ok"] != true {
				t.Fatalf("%s: session.list = %v, want ok", name, m)
			}
		default: // /acp/ws: its hello comes first
			if m, raw, err := p.next(10 * time.Second); err != nil || m["type"] != "hello" {
				t.Fatalf("%s: first message %s %v, want hello", name, raw, err)
			}
		}
	}
	other := r.dial(t, "remote", "")
	other.send(t, `{"t":"hello","id":"h","token":"`+r.good+`"}`)
	if m := other.reply(t); m["ok"] != true {
		t.Fatalf("hello with the other token = %v, want ok", m)
	}

	cli, err := auth.Open(r.tokens.Path())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke("victim"); err != nil {
		t.Fatal(err)
	}

	for name, p := range conns {
		code, reason := p.closedFor(t, name)
		if code != 4001 || !strings.Contains(reason, "revoked") || !strings.Contains(reason, vt.ID) {
			t.Errorf("%s: closed with %d %q, want 4001 and a reason that says token %s was revoked", name, code, reason, vt.ID)
		}
	}
	for name, s := range streams {
		select {
		case <-s.ended:
		case <-time.After(revokeWait):
			t.Errorf("%s: still streaming %v after the revocation", name, revokeWait)
		}
	}

	// What the token opened is over; what the other token opened is not.
	other.send(t, `{"t":"session.list","id":"after"}`)
	if m := other.reply(t); m["ok"] != true {
		t.Errorf("the other token's connection after the revocation: %v, want served", m)
	}
	select {
	case <-kept.ended:
		t.Error("the other token's stream ended with the revocation, want it open")
	default:
	}
	for name, h := range map[string]http.Header{"bearer": bearer(victim), "cookie": cookie} {
		if status, _, body := r.post(t, r.remote, http.MethodGet, "/events?session="+idle, toMap(h), ""); status != http.StatusUnauthorized {
			t.Errorf("GET /events with the revoked token's %s = %d %s, want 401", name, status, body)
		}
	}
	// The run was the request's: it is cancelled with it.
	waitRunEnd(t, r, long.Session)
}

func toMap(h http.Header) map[string]string {
	m := map[string]string{}
	for k, v := range h {
		m[k] = v[0]
	}
	return m
}

// waitRunEnd waits for session's last frame to end a run.
func waitRunEnd(t *testing.T, r *txRig, session string) {
	t.Helper()
	deadline := time.Now().Add(revokeWait)
	for {
		var read struct {
			Frames []struct {
				Type string `json:"type"`
			} `json:"frames"`
		}
		json.Unmarshal(r.control(t, `{"t":"session.read","id":"r","session":"`+session+`","since":0,"limit":10000}`), &read)
		if n := len(read.Frames); n > 0 && (read.Frames[n-1].Type == "RUN_FINISHED" || read.Frames[n-1].Type == "RUN_ERROR") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: the run did not end after its stream's token was revoked", session)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBearerScheme checks that the Authorization scheme is matched
// without regard to case, with any spaces before the token, over HTTP and
// on the WebSocket upgrade, and that another scheme admits nothing.
func TestBearerScheme(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true})
	tests := []struct {
		header string
		ok     bool
	}{
		{"Bearer " + r.good, true},
		{"bearer " + r.good, true},
		{"BEARER " + r.good, true},
		{"Bearer  " + r.good, true},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+r.good)), false},
		{"Basic " + r.good, false},
		{"Token " + r.good, false},
	}
	for _, tc := range tests {
		name := strings.Replace(tc.header, r.good, "<token>", 1)
		t.Run("http/"+name, func(t *testing.T) {
			status, _, body := r.post(t, r.remote, http.MethodPost, "/control", map[string]string{"Authorization": tc.header}, `{"t":"session.list","id":"l"}`)
			if want := map[bool]int{true: 200, false: 401}[tc.ok]; status != want {
				t.Errorf("POST /control with Authorization %q = %d %s, want %d", name, status, body, want)
			}
		})
		t.Run("ws/"+name, func(t *testing.T) {
			p := txMustDialWS(t, r.remote.URL, "", http.Header{"Authorization": {tc.header}})
			p.send(t, `{"t":"session.list","id":"l"}`)
			m := p.reply(t)
			if m["ok"] != tc.ok {
				t.Errorf("session.list after an upgrade with Authorization %q = %v, want ok %v", name, m, tc.ok)
			}
			if !tc.ok {
				if code, _ := p.closed(t); code != 4001 {
					t.Errorf("close code %d, want 4001", code)
				}
			}
		})
	}
}

// TestHelloTimeout checks that a connection that needs a token and says
// nothing is closed once the hello deadline passes, while trusted
// connections and token holders that say nothing are kept.
func TestHelloTimeout(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true, config: func(c *server.Config) { c.HelloTimeout = 2 * time.Second }})
	// The others first: when the silent one is closed, a deadline of
	// theirs would have passed too.
	trusted := map[string]*txPeer{
		"loopback":               r.dial(t, "ws", ""),
		"pipe":                   r.dial(t, "pipe", ""),
		"a token in the upgrade": r.dial(t, "remote", "?token="+r.good),
	}
	hello := r.dial(t, "remote", "")
	hello.send(t, `{"t":"hello","id":"h","token":"`+r.good+`"}`)
	if m := hello.reply(t); m["ok"] != true {
		t.Fatalf("hello with a token = %v, want ok", m)
	}
	silent := r.dial(t, "remote", "")

	code, reason := silent.closedFor(t, "a silent connection that needs a token")
	if code != 4001 || !strings.Contains(reason, "hello") || !strings.Contains(reason, "token") {
		t.Errorf("silent connection closed with %d %q, want 4001 and a reason about hello and the token", code, reason)
	}
	// They are still served.
	trusted["a hello with a token"] = hello
	for name, p := range trusted {
		p.send(t, `{"t":"session.list","id":"late"}`)
		if m := p.reply(t); m["ok"] != true {
			t.Errorf("%s: session.list after the hello deadline = %v, want served", name, m)
		}
	}
}
