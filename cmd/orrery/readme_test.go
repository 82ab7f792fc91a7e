package main_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeBlock returns the README's "Try it" shell block.
func readmeBlock(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const start = "```sh\ngo build -o orrery ./cmd/orrery\n"
	_, rest, ok := strings.Cut(string(data), start)
	if !ok {
		t.Fatalf("README.md has no block starting %q", start)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README.md's Try it block does not end")
	}
	return block
}

// testReadme runs the README's "Try it" block as written, in a fresh
// home, with bash: every line must succeed. The block's first line builds
// the binary, which the test's build stands for. Two lines follow a stream
// that never ends (curl -N on /events, orrery watch): they are stopped
// after a few seconds, which counts as success (curl's --max-time, and a
// wrapper that runs orrery watch under timeout). After a line that starts
// a server in the background the script waits until it answers, as a
// person waits for "listening on".
func testReadme(t *testing.T, bin string) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed: the README's examples need it (apt-get install -y curl)")
		}
		t.Skip("curl is not installed")
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:7411", time.Second); err == nil {
		c.Close()
		t.Fatal("something listens on 127.0.0.1:7411 already: the README's examples use that address; stop it and run the test again")
	}
	dir := t.TempDir()
	real, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "orrery-real"), real, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := "#!/bin/sh\n" +
		"here=$(dirname \"$0\")\n" +
		"if [ \"$1\" = watch ]; then\n" +
		"  timeout 4 \"$here/orrery-real\" \"$@\"; rc=$?\n" +
		"  [ $rc -eq 124 ] && exit 0\n" +
		"  exit $rc\n" +
		"fi\n" +
		"exec \"$here/orrery-real\" \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "orrery"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "examples"), 0o755); err != nil {
		t.Fatal(err)
	}
	crew, err := os.ReadFile(filepath.Join("..", "..", "examples", "crew.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "examples", "crew.toml"), crew, 0o644); err != nil {
		t.Fatal(err)
	}

	var script strings.Builder
	script.WriteString(`set -e
trap 'echo "README line failed: $BASH_COMMAND" >&2' ERR
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null' EXIT
curl() { local rc=0; command curl -sS --max-time 4 "$@" || rc=$?; [ $rc -eq 28 ] && rc=0; return $rc; }
`)
	for line := range strings.Lines(readmeBlock(t)) {
		script.WriteString(line)
		code, _, _ := strings.Cut(line, "#")
		if strings.HasSuffix(strings.TrimSpace(code), "&") {
			script.WriteString("bg=$!; for i in $(seq 300); do command curl -s -o /dev/null http://127.0.0.1:7411/ && break; sleep 0.1; done\n")
			script.WriteString("sleep 0.5; kill -0 $bg 2>/dev/null || { echo " + shellQuote("README line failed (it exited): "+strings.TrimSpace(line)) + " >&2; exit 1; }\n")
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir, cmd.Env = dir, environ(t)
	// The script stops its servers as it exits; should one outlive it, its
	// process group is killed and Run does not wait for its output.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	defer func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	got := out.String()
	if err != nil {
		t.Fatalf("the README's Try it block failed (%v):\n%s", err, got)
	}
	for _, want := range []string{
		"listening on http://127.0.0.1:7411",       // ./orrery serve &
		`"type":"RUN_FINISHED"`,                    // curl POST /run
		`"type":"RUN_STARTED"`,                     // curl /events, the session's stream
		`"runId":"run_`,                            // run.send's reply
		`"frames":[`,                               // session.read's reply
		`echo returned "hi"`,                       // orrery run -p "echo hi"
		"demo",                                     // orrery sessions
		`"kind":"input.needed"`,                    // --events jsonl asks for consent
		`"kind":"task.completed","crewId":"notes"`, // the crew
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the README's block printed no %s:\n%s", want, got)
		}
	}
}

// shellQuote quotes s for sh as one word.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
