package web_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// orreryBinary builds cmd/orrery once per test into a temporary directory.
func orreryBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "orrery")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/orrery")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/orrery: %v\n%s", err, out)
	}
	return bin
}

// serveProcess is `orrery serve` as a real process in its own process
// group, so that killing it takes nothing else with it.
type serveProcess struct {
	cmd *exec.Cmd
	log *os.File
}

func startServe(t *testing.T, bin, addr, data, workspace string) *serveProcess {
	t.Helper()
	cfg := filepath.Join(data, "orrery.toml")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(data, "serve.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data", data, "--config", cfg, "--model", "offline")
	cmd.Dir = workspace
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start orrery serve: %v", err)
	}
	p := &serveProcess{cmd: cmd, log: logf}
	t.Cleanup(p.kill)
	for range 200 {
		res, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			res.Body.Close()
			return p
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(logf.Name())
	t.Fatalf("orrery serve did not answer /healthz:\n%s", b)
	return nil
}

// kill sends SIGKILL to the server's process group and reaps it.
func (p *serveProcess) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.cmd.Wait()
	p.log.Close()
}

// freeAddr returns a loopback address with a port free at the moment.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestKillAndRestartMidRun(t *testing.T) {
	ctx := browser(t, 1280, 800)
	bin := orreryBinary(t)
	data, workspace, addr := t.TempDir(), t.TempDir(), freeAddr(t)
	base := "http://" + addr
	srv := startServe(t, bin, addr, data, workspace)
	session := openNewSession(t, ctx, base)

	prompt(t, ctx, "run `echo one; sleep 15; echo two`")
	run(t, ctx, "allow it", chromedp.Click(chromedp.CSS(".consent button[data-option=allow_once]")))
	until(t, ctx, "the first line of output is shown", `[...document.querySelectorAll(".tool .k-stream")].some(e => e.textContent === "one\n")`)

	// Kill the server mid-run (SIGKILL: no graceful close), then start it
	// again on the same address and data.
	srv.kill()
	until(t, ctx, "the page shows it is disconnected", `document.getElementById("conn").dataset.state === "offline"`)
	screenshot(t, ctx, "disconnected", "the server was killed mid-run: the connection state reads disconnected, reconnecting; the thread keeps what it had")
	startServe(t, bin, addr, data, workspace)
	until(t, ctx, "the page is live again and shows the interrupted run", `document.getElementById("conn").dataset.state === "live" && document.body.textContent.includes("interrupted")`)
	screenshot(t, ctx, "resumed", "after the restart the page resumed from its last seq: the run is closed as interrupted, nothing is repeated")

	// Everything is there once.
	checks := []struct {
		selector, text string
		want           int
	}{
		{".msg.user", "run `echo one; sleep 15; echo two`", 1},
		{".msg.assistant", "Calling shell.", 1},
		{"details.tool", "shell", 1},
		{"details.reasoning", "Reasoning", 1},
		{".decision", "allowed", 1},
	}
	for _, c := range checks {
		n := evalJS[int](t, ctx, fmt.Sprintf(`[...document.querySelectorAll(%q)].filter(e => e.textContent.includes(%q)).length`, c.selector, c.text))
		if n != c.want {
			t.Errorf("%s with %q = %d, want %d", c.selector, c.text, n, c.want)
		}
	}
	if got := textOf(t, ctx, ".tool .k-stream"); got != "one\n" {
		t.Errorf("the command's output = %q, want %q once", got, "one\n")
	}
	// The page holds exactly the frames the log holds.
	v, status := control(t, base, "", `{"t":"session.list","id":"l"}`)
	if status != 200 {
		t.Fatalf("session.list = %d %v", status, v)
	}
	var head float64
	for _, s := range v["sessions"].([]any) {
		if m := s.(map[string]any); m["id"] == session {
			head = m["head"].(float64)
		}
	}
	if got := evalJS[float64](t, ctx, `window.orrery.view.lastSeq`); got != head || head == 0 {
		t.Errorf("the page's last seq = %v, want the log's head %v", got, head)
	}
	if got := textOf(t, ctx, "#run-state"); !strings.Contains(got, "idle") {
		t.Errorf("run state = %q, want idle after the interrupted run", got)
	}
}
