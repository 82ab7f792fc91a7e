//go:build linux

package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/getorrery/orrery/server"
)

// The fd-limit test's processes, told apart by the environment.
const (
	envFDServer = "ORRERY_FD_SERVER" // "1": TestFDServerHelper serves
	envFDFlood  = "ORRERY_FD_FLOOD"  // the address TestFDFloodHelper floods
	// fdLimit is the server's RLIMIT_NOFILE, soft and hard: well under the
	// flood.
	fdLimit = 64
	// fdFlood is how many connections the slow client opens.
	fdFlood = 4 * fdLimit
)

// TestFDLimitSlowClient runs a real server in a process of its own whose
// open-file limit is fdLimit, and opens fdFlood idle connections to it
// from one address off loopback (a network namespace, see newNetns), far
// more than it has file descriptors. The address's cap
// (MaxConnsPerAddr, 16 by default) refuses all but 16 as they arrive, so
// a program on loopback and a token holder from another address are still
// served. Then a flood from loopback, which no address cap holds back,
// runs the server out of file descriptors: it backs off accepting (it
// does not crash or spin) and serves again once the flood is gone.
func TestFDLimitSlowClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pair := newNetns(t, ctx)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	srv := exec.CommandContext(ctx, exe, "-test.run=^TestFDServerHelper$", "-test.v", "-test.count=1", "-test.timeout=55s")
	srv.Env = append(os.Environ(), envFDServer+"=1")
	stdin, err := srv.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	var logsMu sync.Mutex
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan [2]string, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			logsMu.Lock()
			logs.WriteString(line + "\n")
			logsMu.Unlock()
			if f := strings.Fields(line); len(f) == 3 && f[0] == "fd-server" {
				ready <- [2]string{f[1], f[2]}
			}
		}
	}()
	serverLogs := func() string {
		logsMu.Lock()
		defer logsMu.Unlock()
		return logs.String()
	}
	defer func() {
		stdin.Close()
		<-exited
		srv.Wait()
		if t.Failed() {
			t.Logf("the server's output:\n%s", serverLogs())
		}
	}()
	var port, token string
	select {
	case got := <-ready:
		port, token = got[0], got[1]
	case <-exited:
		t.Fatalf("the server exited before it listened")
	case <-ctx.Done():
		t.Fatalf("the server did not start")
	}

	// The slow client: fdFlood idle connections from the namespace.
	flood := pair.exec(ctx, exe, "-test.run=^TestFDFloodHelper$", "-test.v", "-test.count=1", "-test.timeout=50s")
	flood.Env = append(os.Environ(), envFDFlood+"="+net.JoinHostPort(pair.hostIP, port))
	floodIn, err := flood.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	floodOut, err := flood.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := flood.Start(); err != nil {
		t.Fatal(err)
	}
	floodLines := bufio.NewScanner(floodOut)
	held := -1
	var floodLog strings.Builder
	for floodLines.Scan() {
		floodLog.WriteString(floodLines.Text() + "\n")
		if f := strings.Fields(floodLines.Text()); len(f) == 5 && f[0] == "flood" {
			held, _ = strconv.Atoi(f[4])
			break
		}
	}
	if held != server.DefaultMaxConnsPerAddr {
		t.Fatalf("the flood holds %d connections, want the cap, %d:\n%s", held, server.DefaultMaxConnsPerAddr, floodLog.String())
	}
	go io.Copy(io.Discard, floodOut)

	// Well-behaved clients, while the flood holds its connections.
	loopback := "http://127.0.0.1:" + port
	other := "http://" + net.JoinHostPort(pair.hostIP, port) // from this side: another address, off loopback
	hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	call := func(base, tok string) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, base+"/control", strings.NewReader(`{"t":"session.list","id":"l"}`))
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for _, c := range []struct {
		name, base, tok string
		want            int
	}{
		{"a program on loopback", loopback, "", 200},
		{"a token holder from another address", other, token, 200},
		{"a stranger from another address", other, "", 401},
	} {
		for i := range 3 {
			if status, err := call(c.base, c.tok); err != nil || status != c.want {
				t.Errorf("%s, request %d, during the flood: %d %v, want %d", c.name, i, status, err, c.want)
			}
		}
	}
	floodIn.Close()
	flood.Wait()

	// A flood from loopback: only MaxConns (4096) holds it back, so the
	// server runs out of file descriptors.
	var conns []net.Conn
	for range fdFlood {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err != nil {
			break // the listen backlog is full
		}
		conns = append(conns, c)
	}
	// The server goes on running while it cannot accept; once the flood
	// leaves it serves again.
	waitLog(t, serverLogs, "too many open files")
	for _, c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, err := call(loopback, "")
		if err == nil && status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the loopback flood left: %d %v, want served again", status, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-exited:
		t.Fatal("the server exited during the floods")
	default:
	}
	accepts := strings.Count(serverLogs(), "Accept error")
	if !strings.Contains(serverLogs(), "retrying in") {
		t.Errorf("the server's accept errors do not say it backs off (retrying in …):\n%s", serverLogs())
	}
	t.Logf("during the loopback flood of %d connections the server logged %d accept errors, backing off", len(conns), accepts)
	for _, line := range strings.Split(serverLogs(), "\n") {
		if strings.Contains(line, "open files") || strings.Contains(line, "refusing") {
			t.Log(line)
		}
	}
}

// waitLog waits for the server's output to hold want.
func waitLog(t *testing.T, logs func() string, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the server never logged %q:\n%s", want, logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFDServerHelper is the server of TestFDLimitSlowClient: with an
// open-file limit of fdLimit, it serves on every interface, prints
// "fd-server PORT TOKEN", and serves until its stdin closes, its logs on
// stdout.
func TestFDServerHelper(t *testing.T) {
	if os.Getenv(envFDServer) != "1" {
		return
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: fdLimit, Max: fdLimit}); err != nil {
		t.Fatalf("setrlimit: %v", err)
	}
	// The flood's connections send nothing: the header timeout must not
	// end them before the test is done.
	r := newTxRig(t, txRigOptions{config: func(c *server.Config) {
		c.ReadHeaderTimeout = time.Minute
		c.Logger = slog.New(slog.NewTextHandler(os.Stdout, nil))
	}})
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := r.srv.HTTPServer()
	go r.srv.Serve(hs, ln)
	// What the server holds before any client comes, for the record.
	fds, _ := os.ReadDir("/proc/self/fd")
	fmt.Printf("fd-server %d %s\n", ln.Addr().(*net.TCPAddr).Port, r.good)
	fmt.Printf("open files before any client: %d of %d\n", len(fds), fdLimit)
	io.Copy(io.Discard, os.Stdin)
	hs.Close()
}

// TestFDFloodHelper is the slow client of TestFDLimitSlowClient, run in
// its network namespace: it opens fdFlood connections and sends nothing.
// Once every connection over the server's cap was refused, it prints
// "flood OPENED REFUSED held HELD" and holds the rest until stdin closes.
func TestFDFloodHelper(t *testing.T) {
	addr := os.Getenv(envFDFlood)
	if addr == "" {
		return
	}
	var refused, opened atomic.Int64
	var bodies sync.Map // one refusal's answer, to check its sentence
	var conns []net.Conn
	// The veth pair may take a moment to carry traffic.
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	refusedOne := make(chan struct{}, fdFlood)
	for range fdFlood {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %s after %d connections: %v", addr, opened.Load(), err)
		}
		opened.Add(1)
		conns = append(conns, c)
		go func() {
			// A held connection blocks here; a refused one reads the
			// answer and the end.
			data, _ := io.ReadAll(c)
			refused.Add(1)
			bodies.Store(string(data), true)
			refusedOne <- struct{}{}
		}()
	}
	// Baseline: the connection that checked the pair was closed, so every
	// connection past the cap is refused.
	want := int64(fdFlood - server.DefaultMaxConnsPerAddr)
	timeout := time.After(30 * time.Second)
	for refused.Load() < want {
		select {
		case <-refusedOne:
		case <-timeout:
			t.Fatalf("%d of %d connections refused after 30s, want %d", refused.Load(), fdFlood, want)
		}
	}
	sentence := false
	bodies.Range(func(k, _ any) bool {
		if strings.Contains(k.(string), "429") && strings.Contains(k.(string), "max_conns_per_addr") {
			sentence = true
		}
		return true
	})
	if !sentence {
		t.Errorf("no refusal said 429 and named max_conns_per_addr")
	}
	fmt.Printf("flood %d %d held %d\n", opened.Load(), refused.Load(), opened.Load()-refused.Load())
	io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
}
