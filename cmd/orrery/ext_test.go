package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/getorrery/orrery/protocol"
)

// extDirs makes the two extensions testExt installs: the button example
// (a Go process) and "tests" (runtime none, a component whose press runs a
// command).
func extDirs(t *testing.T) (button, none string) {
	t.Helper()
	root := t.TempDir()
	button = filepath.Join(root, "button")
	if err := os.MkdirAll(button, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(button, "button"), "github.com/getorrery/orrery/examples/button").CombinedOutput(); err != nil {
		t.Fatalf("build the button example: %v\n%s", err, out)
	}
	m, err := os.ReadFile(filepath.Join("..", "..", "examples", "button", "orrery.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(button, "orrery.toml"), m, 0o600); err != nil {
		t.Fatal(err)
	}
	none = filepath.Join(root, "tests")
	if err := os.MkdirAll(none, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(none, "orrery.toml"), []byte(`[extension]
api = "orrery-ext/1"
name = "tests"
version = "0.2.0"
runtime = "none"

[[provides.placements]]
id = "panel"
placement = "band"
component = "panel"

[[provides.components]]
name = "panel"
structure = '{"type":"button","label":"Run the tests","on":{"press":"rerun"}}'
schema = '{"type":"object"}'

[provides.actions.rerun]
command = ["sh", "-c", "echo ran $ORRERY_ACTION"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return button, none
}

// testExt installs extensions with orrery ext add, runs them in orrery
// serve, presses their components over /control, lists and restarts them
// with orrery ext, reads their logs, and removes them.
func testExt(t *testing.T, bin string) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	env := append(environ(t), "ORRERY_EXT_DIR="+filepath.Join(root, "exts"))
	button, none := extDirs(t)
	ext := func(wantCode int, args ...string) string {
		t.Helper()
		r := orrery(t, bin, env, append([]string{"ext"}, args...)...)
		if r.code != wantCode {
			t.Fatalf("orrery ext %q = exit %d, want %d\nstdout: %s\nstderr: %s", args, r.code, wantCode, r.stdout, r.stderr)
		}
		return r.stdout + r.stderr
	}

	if out := ext(0, "list"); !strings.Contains(out, "no extensions") {
		t.Errorf("ext list with none installed = %q", out)
	}
	ext(0, "add", button)
	ext(0, "add", none)
	if out := ext(1, "add", button); !strings.Contains(out, "orrery ext remove button") {
		t.Errorf("ext add twice = %q, want the fix", out)
	}
	if out := ext(1, "add", root); !strings.Contains(out, "orrery.toml") {
		t.Errorf("ext add of a dir without a manifest = %q, want it named", out)
	}
	var listed []struct{ Name, Where, Runtime string }
	if err := json.Unmarshal([]byte(ext(0, "list", "--json")), &listed); err != nil || len(listed) != 2 ||
		listed[0].Name != "button" || listed[1].Name != "tests" || listed[1].Runtime != "none" || listed[0].Where != "user" {
		t.Fatalf("ext list --json = %+v (%v), want button and tests in the user's dir", listed, err)
	}

	srv := serve(t, bin, env, "--data", data)
	var created struct{ Session string }
	srv.control(map[string]any{"t": "session.new", "id": "n"}, &created)
	s := created.Session
	state := func(name string) string {
		var r struct {
			Extensions []struct{ Name, State string }
		}
		srv.control(map[string]any{"t": "ext.list", "id": "l", "session": s}, &r)
		for _, x := range r.Extensions {
			if x.Name == name {
				return x.State
			}
		}
		return ""
	}
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(waitLimit); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never happened\n%s", what, srv.stderr.String())
			}
		}
	}
	waitUntil("button running", func() bool { return state("button") == "running" })
	if got := state("tests"); got != "none" {
		t.Errorf("tests is %q, want none (no process)", got)
	}
	// The person presses both components.
	waitUntil("both components placed", func() bool {
		b, _ := json.Marshal(srv.read(s).Frames)
		return strings.Contains(string(b), "pressed 0 times") && strings.Contains(string(b), "Run the tests")
	})
	srv.control(map[string]any{"t": "ui.intent", "id": "p", "session": s, "node": "placed:ext:button:counter", "action": "press"}, nil)
	srv.control(map[string]any{"t": "ui.intent", "id": "p", "session": s, "node": "placed:ext:tests:panel", "action": "rerun"}, nil)
	waitUntil("the button's new data", func() bool {
		b, _ := json.Marshal(srv.read(s).Frames)
		return strings.Contains(string(b), `"path":"/data/ext:button/counter/presses","value":1`)
	})
	waitUntil("the action's notice", func() bool {
		b, _ := json.Marshal(srv.read(s).Frames)
		return strings.Contains(string(b), "action rerun of extension tests finished")
	})

	// The metrics count the extensions by state.
	if _, body := httpGet(t, srv.url+"/metrics"); !strings.Contains(body, "\norrery_extensions{state=\"running\"} 1\n") || !strings.Contains(body, "\norrery_extensions{state=\"none\"} 1\n") {
		t.Errorf("GET /metrics does not count button running and tests with no process:\n%s", grepLines(body, "orrery_extension"))
	}
	connect := []string{"--session", s, "--connect", srv.url}
	if out := ext(0, append([]string{"list"}, connect...)...); !strings.Contains(out, "button") || !strings.Contains(out, "running") {
		t.Errorf("ext list --session = %q, want button running", out)
	}
	// --json is an array with --session too, as without it.
	var running []protocol.ExtStatus
	if out := ext(0, append([]string{"list", "--json"}, connect...)...); json.Unmarshal([]byte(out), &running) != nil ||
		len(running) != 2 || running[0].Name != "button" || running[0].State != "running" || running[1].Name != "tests" {
		t.Errorf("ext list --session --json = %q, want an array of button, running, and tests", out)
	}
	// A session the kernel does not have is named in the CLI's words, and
	// shown visibly, in both commands.
	for _, args := range [][]string{{"list", "--session", "no\x1b]0;pwned\x07pe"}, {"restart", "button", "--session", "no\x1b]0;pwned\x07pe"}} {
		out := ext(1, append(args, "--connect", srv.url)...)
		if !strings.Contains(out, "no session no") || !strings.Contains(out, "pe on "+srv.url+": list them with orrery sessions") || strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("ext %s of an unknown session = %q, want it named visibly, and orrery sessions", args[0], out)
		}
	}
	var before struct {
		Extensions []struct {
			Name string
			PID  int
		}
	}
	srv.control(map[string]any{"t": "ext.list", "id": "l", "session": s}, &before)
	if out := ext(0, append([]string{"restart", "button"}, connect...)...); !strings.Contains(out, "restarted button") {
		t.Errorf("ext restart = %q", out)
	}
	var after struct {
		Extensions []struct {
			Name string
			PID  int
		}
	}
	srv.control(map[string]any{"t": "ext.list", "id": "l", "session": s}, &after)
	if before.Extensions[0].PID == 0 || before.Extensions[0].PID == after.Extensions[0].PID {
		t.Errorf("button's pid before and after ext restart: %d, %d; want a new process", before.Extensions[0].PID, after.Extensions[0].PID)
	}
	if out := ext(1, append([]string{"restart", "ghost"}, connect...)...); !strings.Contains(out, "orrery ext list") {
		t.Errorf("ext restart of an unknown extension = %q, want the fix", out)
	}
	if out := ext(2, "restart", "button"); !strings.Contains(out, "--session") {
		t.Errorf("ext restart without --session = %q", out)
	}
	pid := after.Extensions[0].PID
	if code := srv.stop(); code != 130 {
		t.Errorf("orrery serve exit %d after SIGINT, want 130 (interrupted)", code)
	}
	// The host closed its extensions before the kernel: no process is left.
	if p, err := os.FindProcess(pid); err == nil && p.Signal(syscall.Signal(0)) == nil {
		t.Errorf("the button extension (pid %d) outlived orrery serve", pid)
	}

	if out := ext(0, "logs", "tests", "--data", data); !strings.Contains(out, "ran rerun") {
		t.Errorf("ext logs tests = %q, want the action's output", out)
	}
	if out := ext(1, "logs", "nobody", "--data", data); !strings.Contains(out, "no logs for nobody") {
		t.Errorf("ext logs of an extension that never ran = %q", out)
	}

	ext(0, "remove", "button")
	if out := ext(1, "remove", "button"); !strings.Contains(out, "no extension button") {
		t.Errorf("ext remove twice = %q", out)
	}
	if out := ext(0, "list"); strings.Contains(out, "button") || !strings.Contains(out, "tests") {
		t.Errorf("ext list after remove = %q, want tests only", out)
	}
	ext(2)
	ext(0, "--help")
	if out := ext(2, "explode"); !strings.Contains(out, "list, add, remove, restart or logs") {
		t.Errorf("ext explode = %q", out)
	}
}
