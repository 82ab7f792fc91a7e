package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/auth"
)

// The environment TestNetnsAuth passes to TestNetnsClientHelper, which it
// runs inside the network namespace.
const (
	envNetnsHelper  = "ORRERY_NETNS_HELPER" // "1" turns the helper on
	envNetnsURL     = "ORRERY_NETNS_URL"    // http://<host-side address>:<port>
	envNetnsSession = "ORRERY_NETNS_SESSION"
	envNetnsGood    = "ORRERY_NETNS_GOOD"    // a token that must be accepted
	envNetnsRevoked = "ORRERY_NETNS_REVOKED" // tokens (comma-separated) that must be refused
)

// netnsPair is a network namespace joined to this one by a veth pair with
// two addresses of a /30 in 10.251.0.0/16 (made for one test, used by
// nothing else): a process run in it (exec) is a real peer off loopback to
// a server on hostIP. No traffic leaves the pair.
type netnsPair struct {
	ns, hostIP, nsIP string
	ipPath           string
}

// newNetns makes a netnsPair that lives until the test ends. It skips the
// test, or fails it in CI, when namespaces cannot be made here.
func newNetns(t *testing.T, ctx context.Context) *netnsPair {
	t.Helper()
	ipPath, err := exec.LookPath("ip")
	switch {
	case os.Geteuid() != 0:
		netnsUnavailable(t, "not root: a network namespace and a veth pair need root")
	case err != nil:
		netnsUnavailable(t, "ip (iproute2) is not installed: "+err.Error())
	}
	ip := func(args ...string) error {
		out, err := exec.CommandContext(ctx, ipPath, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}

	suffix := netnsRandomHex(t, 3)
	ns := "orrtest-" + suffix
	hostIf, nsIf := "orrh"+suffix, "orrn"+suffix
	octet := netnsRandomInt(t, 256)
	base := 4 * netnsRandomInt(t, 64)
	p := &netnsPair{ns: ns, ipPath: ipPath,
		hostIP: fmt.Sprintf("10.251.%d.%d", octet, base+1), nsIP: fmt.Sprintf("10.251.%d.%d", octet, base+2)}

	if err := ip("netns", "add", ns); err != nil {
		netnsUnavailable(t, err.Error())
	}
	t.Cleanup(func() {
		// Deleting the namespace deletes the veth end inside it, and
		// with it the pair; the link delete covers a pair never moved.
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		exec.CommandContext(cctx, ipPath, "link", "del", hostIf).Run()
		if out, err := exec.CommandContext(cctx, ipPath, "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	for _, args := range [][]string{
		{"link", "add", hostIf, "type", "veth", "peer", "name", nsIf},
		{"link", "set", nsIf, "netns", ns},
		{"addr", "add", p.hostIP + "/30", "dev", hostIf},
		{"link", "set", hostIf, "up"},
		{"netns", "exec", ns, "ip", "addr", "add", p.nsIP + "/30", "dev", nsIf},
		{"netns", "exec", ns, "ip", "link", "set", nsIf, "up"},
		{"netns", "exec", ns, "ip", "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// exec returns the command that runs name with args inside the namespace.
func (p *netnsPair) exec(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, p.ipPath, append([]string{"netns", "exec", p.ns, name}, args...)...)
}

// TestNetnsAuth checks token auth over a real network path: it serves on
// the host side of a netnsPair and runs the clients inside the namespace
// by re-executing this test binary (TestNetnsClientHelper). The server
// therefore sees a real non-loopback peer.
func TestNetnsAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pair := newNetns(t, ctx)
	ns, hostIP, nsIP := pair.ns, pair.hostIP, pair.nsIP
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable() = %v", err)
	}

	r := newTxRig(t, txRigOptions{logs: true})
	session := r.newIdleSession(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(hostIP, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", hostIP, err)
	}
	var mu sync.Mutex
	peers := map[string]int{} // the hosts the server saw requests from
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			host, _, _ := net.SplitHostPort(req.RemoteAddr)
			mu.Lock()
			peers[host]++
			mu.Unlock()
			r.srv.ServeHTTP(w, req)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	url := "http://" + ln.Addr().String()

	runHelper := func(phase, good, revoked string) {
		t.Helper()
		cmd := pair.exec(ctx, exe, "-test.run=^TestNetnsClientHelper$", "-test.v", "-test.count=1", "-test.timeout=25s")
		cmd.Env = append(os.Environ(),
			envNetnsHelper+"=1", envNetnsURL+"="+url, envNetnsSession+"="+session,
			envNetnsGood+"="+good, envNetnsRevoked+"="+revoked)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestNetnsClientHelper") {
			t.Errorf("%s: the clients in namespace %s failed (%v):\n%s", phase, ns, err, out)
		}
	}

	// A good token works; no token, a wrong one, or one revoked before the
	// server started do not.
	runHelper("before revoking", r.good, r.revoked+",orr_wrong_token")

	// Revoke the good token as the CLI does (another Store on the same
	// file) while the server runs: it must stop working at once.
	cli, err := auth.Open(r.tokens.Path())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke("good"); err != nil {
		t.Fatal(err)
	}
	fresh, _, err := cli.Create("fresh")
	if err != nil {
		t.Fatal(err)
	}
	runHelper("after revoking", fresh, r.good)

	mu.Lock()
	defer mu.Unlock()
	if len(peers) != 1 || peers[nsIP] == 0 {
		t.Errorf("the server saw requests from %v, want only from %s (the namespace's side of the pair)", peers, nsIP)
	}
}

// netnsUnavailable fails the test in CI (where the namespace test must
// run) and skips it elsewhere, saying why.
func netnsUnavailable(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("the network-namespace auth test cannot run: %s (CI is set, so it must)", why)
	}
	t.Skipf("the network-namespace auth test cannot run: %s", why)
}

func netnsRandomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func netnsRandomInt(t *testing.T, n int64) int {
	t.Helper()
	v, err := rand.Int(rand.Reader, big.NewInt(n))
	if err != nil {
		t.Fatal(err)
	}
	return int(v.Int64())
}

// TestNetnsClientHelper is the client side of TestNetnsAuth, run inside its
// network namespace. It does nothing unless ORRERY_NETNS_HELPER is set.
func TestNetnsClientHelper(t *testing.T) {
	if os.Getenv(envNetnsHelper) != "1" {
		return
	}
	url := os.Getenv(envNetnsURL)
	session := os.Getenv(envNetnsSession)
	good := os.Getenv(envNetnsGood)
	revoked := strings.Split(os.Getenv(envNetnsRevoked), ",")
	client := &http.Client{Timeout: 10 * time.Second}

	do := func(method, path string, hdr map[string]string, body string) (int, string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, url+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp.StatusCode, ""
		}
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}

	// The veth pair may take a moment to carry traffic.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := client.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /healthz = %d, want 200 (it needs no token)", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s/healthz: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	list := `{"t":"session.list","id":"l"}`
	events := "/events?session=" + session + "&since=0"
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	type call struct {
		name   string
		method string
		path   string
		hdr    map[string]string
		status int
	}
	calls := []call{
		{"control, no token", "POST", "/control", nil, 401},
		{"events, no token", "GET", events, nil, 401},
		{"run, no token", "POST", "/run", nil, 401},
		{"control, X-Forwarded-For loopback", "POST", "/control", map[string]string{"X-Forwarded-For": "127.0.0.1"}, 401},
		{"control, X-Real-IP loopback", "POST", "/control", map[string]string{"X-Real-IP": "127.0.0.1"}, 401},
		{"control, Forwarded loopback", "POST", "/control", map[string]string{"Forwarded": "for=127.0.0.1"}, 401},
		{"events, X-Forwarded-For loopback", "GET", events, map[string]string{"X-Forwarded-For": "127.0.0.1, ::1"}, 401},
		{"control, good bearer", "POST", "/control", bearer(good), 200},
		{"control, good query token", "POST", "/control?token=" + good, nil, 200},
		{"events, good bearer", "GET", events, bearer(good), 200},
		{"events, good query token", "GET", events + "&token=" + good, nil, 200},
	}
	for _, bad := range revoked {
		calls = append(calls,
			call{"control, bad bearer " + bad, "POST", "/control", bearer(bad), 401},
			call{"control, bad query token " + bad, "POST", "/control?token=" + bad, nil, 401},
			call{"events, bad bearer " + bad, "GET", events, bearer(bad), 401},
			call{"control, bad bearer with X-Forwarded-For loopback " + bad, "POST", "/control",
				map[string]string{"Authorization": "Bearer " + bad, "X-Forwarded-For": "127.0.0.1"}, 401},
		)
	}
	for _, c := range calls {
		body := ""
		if c.method == "POST" {
			body = list
			if c.path == "/run" {
				body = `{"threadId":"netns","runId":"r","messages":[]}`
			}
		}
		status, data := do(c.method, c.path, c.hdr, body)
		if status != c.status {
			t.Errorf("%s: %s %s = %d %s, want %d", c.name, c.method, c.path, status, data, c.status)
		}
		if status == 401 && !strings.Contains(data, "token") {
			t.Errorf("%s: 401 body %s, want a sentence about the token", c.name, data)
		}
	}

	// WebSocket: no token, a request before hello.
	p := txMustDialWS(t, url, "", nil)
	p.send(t, list)
	if m := p.reply(t); m["ok"] != false || !strings.Contains(fmt.Sprint(m["error"]), "token") {
		t.Errorf("WS request without a token = %v, want refused for want of a token", m)
	}
	if code, _ := p.closed(t); code != 4001 {
		t.Errorf("WS request without a token: close code %d, want 4001", code)
	}
	// X-Forwarded-For does not make the upgrade loopback.
	p = txMustDialWS(t, url, "", http.Header{"X-Forwarded-For": {"127.0.0.1"}})
	p.send(t, list)
	if m := p.reply(t); m["ok"] != false {
		t.Errorf("WS request with X-Forwarded-For: 127.0.0.1 and no token = %v, want refused", m)
	}
	if code, _ := p.closed(t); code != 4001 {
		t.Errorf("WS request with X-Forwarded-For: 127.0.0.1: close code %d, want 4001", code)
	}
	// A good token in hello, then in the URL.
	p = txMustDialWS(t, url, "", nil)
	p.send(t, `{"t":"hello","id":"h","token":"`+good+`"}`)
	if m := p.reply(t); m["ok"] != true {
		t.Errorf("WS hello with a good token = %v, want ok", m)
	}
	p.send(t, list)
	if m := p.reply(t); m["ok"] != true {
		t.Errorf("WS session.list after a good hello = %v, want ok", m)
	}
	p = txMustDialWS(t, url, "?token="+good, nil)
	p.send(t, `{"t":"session.attach","id":"a","session":"`+session+`","since":0}`)
	if m := p.replyTo(t, "a"); m["ok"] != true {
		t.Errorf("WS attach with a good URL token = %v, want ok", m)
	}
	// Bad tokens: in the URL the upgrade is refused; in hello, an error
	// reply and close 4001.
	for _, bad := range revoked {
		if p, resp, err := txDialWS(t, url, "?token="+bad, nil); err == nil {
			p.ws.CloseNow()
			t.Errorf("WS upgrade with token %s succeeded, want 401", bad)
		} else if resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("WS upgrade with token %s = %v, want 401", bad, err)
		}
		p = txMustDialWS(t, url, "", nil)
		p.send(t, `{"t":"hello","id":"h","token":"`+bad+`"}`)
		if m := p.reply(t); m["ok"] != false || !strings.Contains(fmt.Sprint(m["error"]), "not valid") {
			t.Errorf("WS hello with token %s = %v, want refused as not valid", bad, m)
		}
		if code, _ := p.closed(t); code != 4001 {
			t.Errorf("WS hello with token %s: close code %d, want 4001", bad, code)
		}
	}
}
