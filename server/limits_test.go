package server_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/provider/script"
	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/server"
)

// serveReal serves the rig's server through HTTPServer and Serve on a
// loopback listener, wrapped by wrap when it is set, and returns the
// listener's address.
func serveReal(t *testing.T, r *txRig, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	hs := r.srv.HTTPServer()
	done := make(chan error, 1)
	go func() { done <- r.srv.Serve(hs, ln) }()
	t.Cleanup(func() {
		hs.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve() = %v, want http.ErrServerClosed", err)
		}
	})
	return addr
}

// remoteListener makes each connection it accepts look as if it came from
// addr, off loopback.
type remoteListener struct {
	net.Listener
	addr net.Addr
}

func (l remoteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return remoteConn{c, l.addr}, nil
}

type remoteConn struct {
	net.Conn
	addr net.Addr
}

func (c remoteConn) RemoteAddr() net.Addr { return c.addr }

// rawConn is one TCP connection that speaks HTTP/1.1 by hand, so that a
// test holds exactly the connections it opened.
type rawConn struct {
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{nc: nc, br: bufio.NewReader(nc)}
}

// do sends one request and reads its answer.
func (c *rawConn) do(t *testing.T, method, path string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n", method, path, len(body))
	if body != "" {
		b.WriteString("Content-Type: application/json\r\n")
	}
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n" + body)
	c.nc.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(c.nc, b.String()); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return c.read(t)
}

// read reads one response: one the server sends unasked when it refuses
// the connection, or the answer to a request.
func (c *rawConn) read(t *testing.T) (int, string) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("read a response: %v", err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(data)
}

// TestConnCaps checks the caps on connections: an address off loopback may
// hold MaxConnsPerAddr connections that presented no valid token, token
// holders and loopback programs count only toward MaxConns, and a
// connection over a cap is answered with a sentence and closed.
func TestConnCaps(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true, config: func(c *server.Config) {
		c.MaxConnsPerAddr = 3
		c.MaxConns = 10
	}})
	remote := &net.TCPAddr{IP: net.ParseIP("203.0.113.9"), Port: 40000}
	far := serveReal(t, r, func(ln net.Listener) net.Listener { return remoteListener{ln, remote} })
	near := serveReal(t, r, nil)
	list := `{"t":"session.list","id":"l"}`
	bearer := map[string]string{"Authorization": "Bearer " + r.good}

	// Token holders from the address: they do not count toward its cap.
	for i := range 3 {
		c := dialRaw(t, far)
		if status, body := c.do(t, "POST", "/control", bearer, list); status != 200 {
			t.Fatalf("token holder %d: POST /control = %d %s, want 200", i, status, body)
		}
	}
	// Strangers up to the cap are served (a 401 is an answer).
	var strangers []*rawConn
	for i := range 3 {
		c := dialRaw(t, far)
		if status, body := c.do(t, "POST", "/control", nil, list); status != 401 {
			t.Fatalf("stranger %d: POST /control = %d %s, want 401", i, status, body)
		}
		strangers = append(strangers, c)
	}
	// One more is refused as soon as it connects.
	status, body := dialRaw(t, far).read(t)
	if status != http.StatusTooManyRequests || !strings.Contains(body, "too many connections from this address") || !strings.Contains(body, "max_conns_per_addr") {
		t.Errorf("a connection over the address's cap = %d %s, want 429 and the sentence that names max_conns_per_addr", status, body)
	}
	// Loopback programs are not held to the address's cap.
	for i := range 3 {
		c := dialRaw(t, near)
		if status, body := c.do(t, "GET", "/healthz", nil, ""); status != 200 {
			t.Fatalf("loopback connection %d: GET /healthz = %d %s, want 200", i, status, body)
		}
	}
	// A stranger that leaves makes room for another.
	strangers[0].nc.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c := dialRaw(t, far)
		status, body := c.do(t, "POST", "/control", nil, list)
		if status == 401 {
			break
		}
		c.nc.Close()
		if status != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("a stranger after another left: %d %s, want 401 once the server saw the other leave", status, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// 3 token holders, 3 strangers and 3 loopback connections are open:
	// one more fits under MaxConns, the next does not.
	if status, body := dialRaw(t, near).do(t, "GET", "/healthz", nil, ""); status != 200 {
		t.Fatalf("the 10th connection: GET /healthz = %d %s, want 200", status, body)
	}
	status, body = dialRaw(t, near).read(t)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "max_conns") {
		t.Errorf("a connection over MaxConns = %d %s, want 503 and the sentence that names max_conns", status, body)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "refusing connections from an address") || !strings.Contains(logs, "203.0.113.9") {
		t.Errorf("logs do not say which address was refused:\n%s", logs)
	}
}

// TestReadTimeoutSparesStreams checks that ReadTimeout bounds reading a
// request and nothing after it: SSE streams, a run's stream and a
// WebSocket outlive it, and a body that does not come is cut off.
func TestReadTimeoutSparesStreams(t *testing.T) {
	r := newTxRig(t, txRigOptions{logs: true, scripts: true, config: func(c *server.Config) {
		c.ReadHeaderTimeout = 100 * time.Millisecond
		c.ReadTimeout = 100 * time.Millisecond
		c.KeepAlive = 150 * time.Millisecond
	}})
	idle := r.newIdleSession(t)
	addr := serveReal(t, r, nil)
	url := "http://" + addr
	ws := txMustDialWS(t, url, "", nil)

	// Three keepalives: the stream has lived through the read timeout
	// several times over.
	events := dialRaw(t, addr)
	fmt.Fprintf(events.nc, "GET /events?since=0&session=%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", idle)
	events.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(events.br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /events = %v %v, want 200", resp, err)
	}
	br := bufio.NewReader(resp.Body)
	for n := 0; n < 3; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("GET /events after %d keepalives: %v, want the stream open", n, err)
		}
		if strings.HasPrefix(line, ": keepalive") {
			n++
		}
	}
	ws.send(t, `{"t":"session.list","id":"late"}`)
	if m := ws.reply(t); m["ok"] != true {
		t.Errorf("a WebSocket after the read timeout: %v, want served", m)
	}

	// A run that streams for longer than the read timeout ends as it
	// should, not cancelled.
	spec := writeScript(t, script.Turn{Text: chunks(30), DelayMS: 20})
	var long struct{ Session string }
	json.Unmarshal(r.control(t, `{"t":"session.new","id":"n","model":`+strconv.Quote(spec)+`}`), &long)
	run := dialRaw(t, addr)
	body := runInput(long.Session, "r-long", "u-long", "go")
	fmt.Fprintf(run.nc, "POST /run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	run.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err = http.ReadResponse(run.br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /run = %v %v, want 200", resp, err)
	}
	all, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(all), `"RUN_FINISHED"`) || strings.Contains(string(all), `"cancelled"`) {
		t.Errorf("POST /run streamed %d bytes (%v), want a run that finished, not cancelled:\n%.2000s", len(all), err, all)
	}

	// A body that never comes.
	slow := dialRaw(t, addr)
	fmt.Fprintf(slow.nc, "POST /control HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	slow.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
	if resp, err := http.ReadResponse(slow.br, nil); err == nil {
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("a request whose body does not come = %d %s, want 400 or the connection closed", resp.StatusCode, data)
		}
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("a request whose body does not come: no answer and still open after 15s, want it cut off at the read timeout")
	}
}

// selfSigned makes a certificate for 127.0.0.1 and localhost, and a pool
// that trusts it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "orrery test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		DNSNames:     []string{"localhost"},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return cert, pool, certPEM, keyPEM
}

// TestTLS serves the real server over HTTPS and checks that the Go client
// works over https:// and wss://, that an old TLS version is refused, and
// that the web client's cookies are Secure.
func TestTLS(t *testing.T) {
	cert, pool, _, _ := selfSigned(t)
	r := newTxRig(t, txRigOptions{logs: true, config: func(c *server.Config) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	}})
	idle := r.newIdleSession(t)
	addr := serveReal(t, r, nil)
	// HTTP/2 where it can be: SSE streams go over it, WebSockets are
	// upgraded over HTTP/1.1.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}

	for _, transport := range []string{client.TransportHTTP, client.TransportWS} {
		t.Run(transport, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			cl, err := client.Dial(ctx, "https://"+addr, client.Options{HTTPClient: hc, Transport: transport, Token: r.good})
			if err != nil {
				t.Fatalf("Dial(https://%s) over %s = %v, want a client", addr, transport, err)
			}
			defer cl.Close()
			if _, err := cl.Sessions(ctx); err != nil {
				t.Errorf("Sessions() over %s = %v, want nil", transport, err)
			}
			var zero uint64
			s, err := cl.Attach(ctx, idle, &zero)
			if err != nil {
				t.Fatalf("Attach() over %s = %v", transport, err)
			}
			defer s.Close()
			for {
				f, err := s.Next(ctx)
				if err != nil {
					t.Fatalf("Next() over %s = %v, want the session's frames", transport, err)
				}
				if f.Type == "RUN_FINISHED" {
					break
				}
			}
		})
	}

	t.Run("streams over HTTP/2", func(t *testing.T) {
		// Clients that leave mid-stream: the server cuts the stream off
		// without touching it once its handler returned.
		for i := range 20 {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/events?since=0&session="+idle, nil)
			resp, err := hc.Do(req)
			if err != nil {
				cancel()
				t.Fatalf("GET /events over TLS: %v", err)
			}
			if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
				t.Errorf("GET /events over TLS = %d over %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto)
			}
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); err != nil || (!strings.HasPrefix(line, "id: ") && !strings.HasPrefix(line, "data: ")) {
				t.Errorf("stream %d: first line %q %v, want a frame", i, line, err)
			}
			cancel()
			resp.Body.Close()
		}
		resp, err := hc.Get("https://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz after the streams: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET /healthz after the streams = %d, want 200", resp.StatusCode)
		}
	})
	t.Run("plain HTTP client", func(t *testing.T) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("GET http:// on the HTTPS port = %d, want refused", resp.StatusCode)
			}
		}
	})
	t.Run("TLS 1.1", func(t *testing.T) {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11, ServerName: "127.0.0.1"})
		if err == nil {
			c.Close()
			t.Error("a TLS 1.1 handshake succeeded, want it refused (TLS 1.2 at least)")
		}
	})
	t.Run("secure cookies", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/auth", strings.NewReader(`{"token":"`+r.good+`"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cookies := resp.Cookies()
		if resp.StatusCode != 200 || len(cookies) != 1 || !cookies[0].Secure || !cookies[0].HttpOnly {
			t.Errorf("POST /auth over TLS = %d, cookies %v, want one Secure, HttpOnly cookie", resp.StatusCode, cookies)
		}
	})
}
