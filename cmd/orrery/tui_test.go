package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTUIInTmux runs bare orrery with the offline model in a real terminal
// (tmux) and reads the screen with capture-pane: a streamed answer, a chart
// placed in a pane, a consent prompt answered with a key and the command
// it allowed, the pane folding into the band at 60 columns, and /ui.
func TestTUIInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and drives it in tmux")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("ORRERY_REQUIRE_TMUX") != "" {
			t.Fatal("tmux is not installed but ORRERY_REQUIRE_TMUX is set: install it (apt-get install -y tmux)")
		}
		t.Skip("tmux is not installed: install it (apt-get install -y tmux) to run the terminal UI end to end; set ORRERY_REQUIRE_TMUX to make its absence a failure")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "orrery")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/getorrery/orrery/cmd/orrery").CombinedOutput(); err != nil {
		t.Fatalf("go build = %v\n%s", err, out)
	}
	ws := filepath.Join(dir, "ws")
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range environ(t) {
		name, _, _ := strings.Cut(kv, "=")
		if name == "ANTHROPIC_API_KEY" || name == "OPENAI_API_KEY" || name == "TMUX" || name == "TERM" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "TERM=xterm-256color")
	sock := "orrery-test-" + strconv.Itoa(os.Getpid())
	tm := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("tmux", append([]string{"-L", sock, "-f", "/dev/null"}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s = %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	tm("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", "-c", ws, bin+" --data "+data+"; sleep 60")
	t.Cleanup(func() {
		c := exec.Command("tmux", "-L", sock, "kill-server")
		c.Env = env
		_ = c.Run()
	})
	screen := func() string { return tm("capture-pane", "-p", "-t", "t") }
	waitFor := func(what string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s := screen()
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("the screen never showed %s:\n%s", what, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	has := func(subs ...string) func(string) bool {
		return func(s string) bool {
			for _, sub := range subs {
				if !strings.Contains(s, sub) {
					return false
				}
			}
			return true
		}
	}
	waitFor("the status line of an idle session", has("orrery · ses_", "idle"))

	tm("send-keys", "-t", "t", "-l", "hello there")
	tm("send-keys", "-t", "t", "Enter")
	waitFor("the streamed answer", has("› hello there", `You said: "hello there"`))

	tm("send-keys", "-t", "t", "-l", "show me a chart of apples pears")
	tm("send-keys", "-t", "t", "Enter")
	s := waitFor("the chart in the right pane", has("┌ Letters per word", "agent ┐", "apples █", "pears  █"))
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "apples █") && !strings.HasSuffix(strings.TrimRight(l, " "), "│") {
			t.Errorf("the chart is not drawn in the right pane: %q", l)
		}
	}

	tm("send-keys", "-t", "t", "-l", "run `echo hi`")
	tm("send-keys", "-t", "t", "Enter")
	waitFor("the consent prompt", has("⚠ CONSENT · orrery asks: allow shell(echo hi)?", "[y] Allow once"))
	tm("send-keys", "-t", "t", "y")
	waitFor("the command's output", has("consent allowed", "│ hi", `Done: shell returned "hi\nexit status 0"`))

	tm("resize-window", "-t", "t", "-x", "60", "-y", "30")
	waitFor("the pane folded into the band", func(s string) bool {
		return strings.Contains(s, "▸ Letters per word [agent]") && !strings.Contains(s, "┌ Letters per word")
	})

	tm("send-keys", "-t", "t", "-l", "/ui")
	tm("send-keys", "-t", "t", "Enter")
	waitFor("the /ui list", has("ID", "PLACEMENT", "OWNER", "offline-chart  pane.right  agent  shown, folded"))

	tm("send-keys", "-t", "t", "C-c")
	waitFor("orrery to quit on Ctrl-C with no run in flight", func(s string) bool { return !strings.Contains(s, "orrery · ses_") })
}
