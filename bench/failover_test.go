package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/internal/logbuf"
	"github.com/getorrery/orrery/internal/natstest"
)

// failoverTTL is the lease TTL the failover benchmark configures.
const failoverTTL = 2 * time.Second

// failoverWait bounds each wait of the failover benchmark: a process
// starting, a control call, the stream showing the run, the failover.
const failoverWait = time.Minute

// buildOrrery builds ./cmd/orrery from the module root into a directory
// removed when b ends, and returns the binary's path.
func buildOrrery(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "orrery")
	build := exec.Command("go", "build", "-o", bin, "./cmd/orrery")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/orrery: %v\n%s", err, out)
	}
	return bin
}

// BenchmarkFailover measures cluster failover with real processes: two
// orrery serve processes share a three-server NATS JetStream cluster, each
// connected to a different server, with a lease TTL of 2 s. Node a owns a
// session mid-run and node b's client follows it over SSE; node a is killed
// with SIGKILL, and the failover time is from the kill to node b's client
// receiving the run's RUN_ERROR interrupted. It reports the mean and the
// maximum over the iterations (failover-s, max-failover-s), the TTL
// (ttl-s) and mean/TTL (ratio); the target is at most TTL + 1 s. Each
// iteration takes a few seconds, so run it with a small fixed count (it
// uses b.Loop, so the binary is built and the cluster started once):
//
//	go test -run='^$' -bench=Failover -benchtime=3x -timeout=20m ./bench/
func BenchmarkFailover(b *testing.B) {
	bin := buildOrrery(b)
	srvs := natstest.Cluster(b, 3)
	cfgPath := filepath.Join(b.TempDir(), "orrery.toml")
	cfg := fmt.Sprintf("[nats]\nlease_ttl = %q\nreplicas = 3\n", failoverTTL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		b.Fatalf("write config: %v", err)
	}
	chunks := make([]string, 200)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("c%d ", i)
	}
	script, err := json.Marshal(map[string]any{"turns": []any{map[string]any{"text": chunks, "delay_ms": 50}}})
	if err != nil {
		b.Fatalf("script: %v", err)
	}
	scriptPath := filepath.Join(b.TempDir(), "script.json")
	if err := os.WriteFile(scriptPath, script, 0o600); err != nil {
		b.Fatalf("write script: %v", err)
	}
	args := []string{"--model", "script:" + scriptPath, "--config", cfgPath, "--store", "jetstream"}

	var sum, most time.Duration
	i := 0
	for b.Loop() {
		b.StopTimer() // failoverOnce times the failover itself
		d := failoverOnce(b, bin, args, srvs[i%3].ClientURL(), srvs[(i+1)%3].ClientURL())
		sum += d
		most = max(most, d)
		i++
		b.StartTimer() // b.Loop wants it running
	}
	mean := sum.Seconds() / float64(b.N)
	b.ReportMetric(mean, "failover-s")
	b.ReportMetric(most.Seconds(), "max-failover-s")
	b.ReportMetric(failoverTTL.Seconds(), "ttl-s")
	b.ReportMetric(mean/failoverTTL.Seconds(), "ratio")
}

// failoverOnce runs one failover: node a on natsA owns a run that node b
// on natsB follows, a is killed, and it returns the time from the kill to
// b's client seeing RUN_ERROR. Its processes and directories are gone
// when it returns.
func failoverOnce(b *testing.B, bin string, args []string, natsA, natsB string) time.Duration {
	b.Helper()
	root, err := os.MkdirTemp("", "orrery-bench-failover-")
	if err != nil {
		b.Fatalf("iteration dir: %v", err)
	}
	defer os.RemoveAll(root)
	env := failoverEnv(filepath.Join(root, "home"))
	a := startServe(b, bin, env, append([]string{"--data", filepath.Join(root, "a"), "--nats", natsA}, args...))
	defer a.kill()
	nb := startServe(b, bin, env, append([]string{"--data", filepath.Join(root, "b"), "--nats", natsB}, args...))
	defer nb.kill()

	var created struct{ Session string }
	a.control(b, map[string]any{"t": "session.new", "id": "1"}, &created)
	ctx, cancel := context.WithTimeout(context.Background(), 3*failoverWait)
	defer cancel()
	frames, err := followEvents(ctx, nb.url, created.Session)
	if err != nil {
		b.Fatal(err)
	}
	a.control(b, map[string]any{"t": "run.send", "id": "2", "session": created.Session, "input": map[string]any{"text": "go"}}, nil)

	next := func(what string) sseFrame {
		select {
		case f, ok := <-frames:
			if !ok {
				b.Fatalf("node b's stream ended while waiting for %s:\n%s", what, nb.stderr.String())
			}
			if f.err != nil {
				b.Fatalf("node b's stream, waiting for %s: %v", what, f.err)
			}
			return f
		case <-time.After(failoverWait):
			b.Fatalf("node b's stream showed no frame in %v, waiting for %s:\nnode a:\n%s\nnode b:\n%s", failoverWait, what, a.stderr.String(), nb.stderr.String())
		}
		panic("unreachable")
	}
	for texts := 0; texts < 5; {
		switch f := next("the run's text"); f.Type {
		case "TEXT_MESSAGE_CONTENT":
			texts++
		case "RUN_ERROR", "RUN_FINISHED":
			b.Fatalf("the run ended (%s %q) before node a was killed", f.Type, f.Code)
		}
	}

	b.StartTimer()
	if err := a.cmd.Process.Kill(); err != nil {
		b.Fatalf("kill node a: %v", err)
	}
	killed := time.Now()
	for {
		f := next("RUN_ERROR")
		if f.Type == "RUN_FINISHED" {
			b.Fatalf("the run finished after node a was killed, want RUN_ERROR interrupted")
		}
		if f.Type == "RUN_ERROR" {
			b.StopTimer()
			if f.Code != "interrupted" {
				b.Fatalf("node b's client saw RUN_ERROR %q, want interrupted", f.Code)
			}
			return f.at.Sub(killed)
		}
	}
}

// failoverEnv is the environment without ORRERY_* and with HOME and the
// XDG dirs under home, so that no user config is read.
func failoverEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "ORRERY_") || name == "HOME" || strings.HasPrefix(name, "XDG_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_DATA_HOME="+filepath.Join(home, "data"))
}

// serveProc is a running orrery serve.
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *logbuf.Buffer // stdout's lines and stderr
	waited chan struct{}
}

// startServe starts orrery serve on a free loopback port and waits for its
// "listening on http://ADDR" line.
func startServe(b *testing.B, bin string, env, args []string) *serveProc {
	b.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatalf("orrery serve stdout: %v", err)
	}
	p := &serveProc{cmd: cmd, stderr: &logbuf.Buffer{}, waited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("start orrery serve: %v", err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintf(p.stderr, "stdout: %s\n", sc.Text())
			if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				select {
				case urls <- addr:
				default:
				}
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(p.waited) }()
	select {
	case p.url = <-urls:
	case <-p.waited:
		b.Fatalf("orrery serve %q exited (%v) before listening:\n%s", args, waitErr, p.stderr.String())
	case <-time.After(failoverWait):
		p.kill()
		b.Fatalf("orrery serve %q did not print \"listening on http://ADDR\":\n%s", args, p.stderr.String())
	}
	return p
}

// kill ends the process with SIGKILL, if it has not ended, and waits for it.
func (p *serveProc) kill() {
	select {
	case <-p.waited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.waited
}

// control POSTs req to /control and decodes the reply into out, if not nil.
func (p *serveProc) control(b *testing.B, req map[string]any, out any) {
	b.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		b.Fatalf("control request: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), failoverWait)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/control", bytes.NewReader(body))
	if err != nil {
		b.Fatalf("POST /control %s: %v", body, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		b.Fatalf("POST /control %s: %v", body, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("POST /control %s = %d %s (%v), want 200", body, resp.StatusCode, data, err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			b.Fatalf("POST /control %s: reply %s: %v", body, data, err)
		}
	}
}

// sseFrame is one frame of GET /events, stamped when it arrived, or the
// error that ended the stream.
type sseFrame struct {
	Type string `json:"type"`
	Code string `json:"code"`
	at   time.Time
	err  error
}

// followEvents opens GET /events?session=…&since=0 on base and sends each
// frame on the channel it returns, closed when the stream ends or ctx is
// done.
func followEvents(ctx context.Context, base, session string) (<-chan sseFrame, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events?session="+session+"&since=0", nil)
	if err != nil {
		return nil, fmt.Errorf("GET /events: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /events: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("GET /events = %d %s, want 200", resp.StatusCode, body)
	}
	frames := make(chan sseFrame, 1024)
	go func() {
		defer close(frames)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				select {
				case frames <- sseFrame{err: fmt.Errorf("read: %w", err)}:
				case <-ctx.Done():
				}
				return
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			f := sseFrame{at: time.Now()}
			if err := json.Unmarshal([]byte(data), &f); err != nil {
				f.err = fmt.Errorf("frame %s: %w", data, err)
			}
			select {
			case frames <- f:
			case <-ctx.Done():
				return
			}
		}
	}()
	return frames, nil
}
