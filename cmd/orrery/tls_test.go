package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/protocol"
)

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its
// key into dir, and returns their paths.
func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "orrery test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// lines is a writer whose complete lines can be waited for.
type lines struct {
	mu   sync.Mutex
	buf  strings.Builder
	more chan struct{}
}

func newLines() *lines { return &lines{more: make(chan struct{}, 1)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.mu.Unlock()
	select {
	case l.more <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitLine waits for a line that starts with prefix and returns it.
func (l *lines) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		for _, line := range strings.Split(l.String(), "\n") {
			if strings.HasPrefix(line, prefix) {
				return line
			}
		}
		select {
		case <-l.more:
		case <-deadline:
			t.Fatalf("no line starting %q in:\n%s", prefix, l.String())
		}
	}
}

// cliRun is the orrery CLI running in-process.
type cliRun struct {
	stdout, stderr *lines
	cancel         context.CancelFunc
	exited         chan struct{} // closed when run returned
	code           int           // run's exit code, once exited is closed
}

// startCLI runs the orrery CLI in-process; the test's end stops it.
func startCLI(t *testing.T, args ...string) *cliRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &cliRun{stdout: newLines(), stderr: newLines(), cancel: cancel, exited: make(chan struct{})}
	e := &env{stdout: c.stdout, stderr: c.stderr, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
	go func() {
		defer close(c.exited)
		c.code = run(ctx, e, args)
	}()
	t.Cleanup(func() { c.stop(t) })
	return c
}

// wait waits for the command to end by itself and returns its exit code.
func (c *cliRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-c.exited:
		return c.code
	case <-time.After(20 * time.Second):
		t.Fatalf("the command is still running after 20s; stderr:\n%s", c.stderr.String())
		return 0
	}
}

// stop interrupts the command and returns its exit code.
func (c *cliRun) stop(t *testing.T) int {
	t.Helper()
	c.cancel()
	return c.wait(t)
}

// TestServeTLS runs orrery serve with --tls-cert and --tls-key, and
// follows a session over https:// with orrery watch --ca-cert and with
// the Go client over wss://.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeSelfSigned(t, dir)
	config := filepath.Join(dir, "orrery.toml")
	if err := os.WriteFile(config, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	srv := startCLI(t, "serve", "--listen", "127.0.0.1:0", "--data", data, "--config", config, "--model", "offline",
		"--tls-cert", certFile, "--tls-key", keyFile)
	url := strings.TrimPrefix(srv.stdout.waitLine(t, "listening on "), "listening on ")
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("orrery serve with a certificate says it listens on %q, want https://127.0.0.1:PORT", url)
	}
	if strings.Contains(srv.stderr.String(), "plain HTTP") {
		t.Errorf("orrery serve over TLS warns about plain HTTP:\n%s", srv.stderr.String())
	}

	hc, err := httpClient(certFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, url, client.Options{HTTPClient: hc, Transport: client.TransportWS})
	if err != nil {
		t.Fatalf("Dial(%s) over wss:// = %v", url, err)
	}
	defer cl.Close()
	session, err := cl.NewSession(ctx, protocol.SessionNew{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Send(ctx, session, protocol.RunInput{Text: "hello"}); err != nil {
		t.Fatal(err)
	}

	watch := startCLI(t, "watch", session, "--since", "0", "--json", "--connect", url, "--ca-cert", certFile, "--config", config, "--data", data)
	finished := watch.stdout.waitLine(t, `{"type":"RUN_FINISHED"`)
	var f struct{ Type string }
	if err := json.Unmarshal([]byte(finished), &f); err != nil || f.Type != "RUN_FINISHED" {
		t.Errorf("orrery watch over https:// printed %q, want the RUN_FINISHED frame", finished)
	}
	if code := watch.stop(t); code != exitOK {
		t.Errorf("orrery watch exit %d, want 0; stderr:\n%s", code, watch.stderr.String())
	}

	// Without --ca-cert the self-signed certificate is not trusted.
	untrusted := startCLI(t, "watch", session, "--since", "0", "--json", "--connect", url, "--config", config, "--data", data)
	if code := untrusted.wait(t); code == exitOK || !strings.Contains(untrusted.stderr.String(), "certificate") {
		t.Errorf("orrery watch without --ca-cert: exit %d, stderr %q; want a failure that names the certificate", code, untrusted.stderr.String())
	}
	if code := srv.stop(t); code != exitOK {
		t.Errorf("orrery serve exit %d, want 0; stderr:\n%s", code, srv.stderr.String())
	}
}

// TestNodeWarnsOverPlainHTTP checks the warning of a node that serves
// tokens off loopback without TLS.
func TestNodeWarnsOverPlainHTTP(t *testing.T) {
	data := t.TempDir()
	if code, _, stderr := cli(t, "node", "token", "create", "--name", "laptop", "--data", data); code != exitOK {
		t.Fatalf("token create: exit %d %s", code, stderr)
	}
	node := startCLI(t, "node", "--listen", "0.0.0.0:0", "--data", data, "--model", "offline")
	if line := node.stdout.waitLine(t, "listening on "); !strings.HasPrefix(line, "listening on http://") {
		t.Errorf("orrery node says %q, want listening on http://…", line)
	}
	warning := node.stderr.waitLine(t, "warning: ")
	for _, want := range []string{"plain HTTP", "--tls-cert", "tls_cert"} {
		if !strings.Contains(warning, want) {
			t.Errorf("warning %q, want it to mention %q", warning, want)
		}
	}
	node.stop(t)
}
