package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/getorrery/orrery/agent/provider/script"
	"github.com/getorrery/orrery/protocol"
)

// hostileDeltas is a model's answer that tries everything a terminal could
// act on, cut as a stream may cut it: an OSC 52 whose ESC ends one delta, a
// CRLF whose CR ends one. Shown visibly, it reads hostileShown.
var hostileDeltas = []string{
	"answer \x1b",
	"]52;c;ZXZpbA==\x07 \x1b[2J\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ \u009b31m \u202eexe.txt\u2066 done\r",
	"\nsafe\rEVIL\x7f\x00",
}

var hostileShown = []string{
	"answer ␛]52;c;ZXZpbA==␇ ␛[2J␛]8;;https://evil.example␛\\link␛]8;;␛\\ <U+009B>31m <U+202E>exe.txt<U+2066> done\n",
	"safe␍EVIL␡␀",
}

// checkInert fails unless out holds nothing a terminal acts on (no ESC, no
// BEL or other C0 control but newline and tab, no DEL, no C1 control, no
// bidirectional control, no invalid UTF-8) and holds each of want.
func checkInert(t *testing.T, what, out string, want ...string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s printed invalid UTF-8: %q", what, out)
	}
	for i, r := range out {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			t.Errorf("%s printed %U at byte %d: %q", what, r, i, out[max(0, i-30):min(len(out), i+30)])
			break
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s printed %q, want it to hold %q", what, out, w)
		}
	}
}

// writeScript writes a script model of turns in dir and returns its spec.
func writeScript(t *testing.T, dir string, turns ...script.Turn) string {
	t.Helper()
	data, err := json.Marshal(script.File{Turns: turns})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "script.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return "script:" + path
}

// TestRunAndSessionsPrintInert: orrery run -p prints a hostile streamed
// answer and tool name visibly, however the deltas cut them, and orrery
// sessions so prints the title a hostile prompt gave the session.
func TestRunAndSessionsPrintInert(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	model := writeScript(t, dir,
		script.Turn{ToolCalls: []script.ToolCall{{Name: "echo\x1b]0;pwned\x07\u202e", Args: json.RawMessage(`{}`)}}},
		script.Turn{Text: hostileDeltas},
	)
	code, stdout, stderr := runPrompt(t, dir, "--model", model, "-p", "title \x1b]0;pwned\x07 \u009b2J \u202eevil")
	if code != exitOK {
		t.Fatalf("orrery run exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	checkInert(t, "orrery run -p", stdout, hostileShown...)
	checkInert(t, "orrery run -p on stderr", stderr, "→ echo␛]0;pwned␇<U+202E>\n")

	code, stdout, stderr = cli(t, "sessions", "--data", filepath.Join(dir, ".data"), "--config", filepath.Join(dir, "none.toml"))
	if code != exitOK {
		t.Fatalf("orrery sessions exit %d\nstderr:\n%s", code, stderr)
	}
	checkInert(t, "orrery sessions", stdout, "title ␛]0;pwned␇ <U+009B>2J <U+202E>evil\n")
}

// TestRunErrorPrintsInert: the message of a failed run, which the provider
// wrote, reaches stderr visibly.
func TestRunErrorPrintsInert(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	model := writeScript(t, dir, script.Turn{Text: []string{"half"}, Error: "overloaded \x1b]0;pwned\x07\u009b\r"})
	code, stdout, stderr := runPrompt(t, dir, "--model", model, "-p", "go")
	if code != exitRunFailed {
		t.Fatalf("orrery run exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitRunFailed, stdout, stderr)
	}
	checkInert(t, "orrery run -p", stdout, "half")
	checkInert(t, "orrery run -p on stderr", stderr, "overloaded ␛]0;pwned␇<U+009B>␍")
}

// TestWatchPrintsInert follows a session on a served kernel whose history
// and live run hold hostile prompts, answers, reasoning, tool output and a
// provider error: orrery watch prints all of it visibly.
func TestWatchPrintsInert(t *testing.T) {
	w := startWatchKernel(t)
	id := w.session(t,
		script.Turn{Text: []string{"history \x1b[2J", "\u009b \u202e"}, ToolCalls: []script.ToolCall{{Name: "echo", Args: json.RawMessage(`{"text":"past \u001b]0;t\u0007"}`)}}},
		script.Turn{Text: []string{"history done"}},
		script.Turn{Reasoning: "think \x1b]0;t\x07", Text: hostileDeltas, ToolCalls: []script.ToolCall{{Name: "echo", Args: json.RawMessage(`{"text":"out \u001b]52;c;eA==\u0007 \u202e"}`)}}},
		script.Turn{Text: []string{"after"}, Error: "overloaded \x1b]0;pwned\x07"},
	)
	w.prompt(t, id, "earlier \x1b[2J prompt")
	sent := false
	code, stdout, stderr := w.watching(t, func(stdout, stderr string) bool {
		if !sent && strings.Contains(stdout, "history done") {
			sent = true
			if _, err := w.c.Send(context.Background(), id, protocol.RunInput{Text: "live \x1b]0;x\x07"}); err != nil {
				t.Errorf("Send() = %v", err)
			}
		}
		return strings.Contains(stderr, "run failed")
	}, "watch", id, "--connect", w.url)
	if code != exitOK {
		t.Errorf("exit code = %d, want %d (interrupted)\nstderr:\n%s", code, exitOK, stderr)
	}
	checkInert(t, "orrery watch", stdout, append([]string{
		"> earlier ␛[2J prompt\n", "history ␛[2J<U+009B> <U+202E>\n", "← past ␛]0;t␇\n",
		"> live ␛]0;x␇\n", "thinking: think ␛]0;t␇\n", "← out ␛]52;c;eA==␇ <U+202E>\n",
	}, hostileShown...)...)
	checkInert(t, "orrery watch on stderr", stderr, "run failed (provider_error): overloaded ␛]0;pwned␇")
}

// TestTokenListPrintsInert: a token's name is whatever create was given;
// node token list prints it visibly.
func TestTokenListPrintsInert(t *testing.T) {
	data := t.TempDir()
	if code, _, stderr := cli(t, "node", "token", "create", "--name", "laptop\x1b]0;pwned\x07\u009b\u202e\r\n", "--data", data); code != exitOK {
		t.Fatalf("token create: exit %d, stderr %q", code, stderr)
	}
	code, stdout, stderr := cli(t, "node", "token", "list", "--data", data)
	if code != exitOK {
		t.Fatalf("token list: exit %d, stderr %q", code, stderr)
	}
	checkInert(t, "orrery node token list", stdout, "laptop␛]0;pwned␇<U+009B><U+202E>␊")
}

// TestExtPrintsInert: what an extension wrote (its log) and declared (its
// manifest's version) print visibly in ext logs and ext list.
func TestExtPrintsInert(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	config := filepath.Join(dir, "none.toml")
	if err := os.WriteFile(config, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, ".data")
	logs := filepath.Join(data, "ext-logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logs, "evil.log"), []byte("started\r\n\x1b]52;c;ZXZpbA==\x07\x1b[2J\u009b\u202e\xff"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := cli(t, "ext", "logs", "evil", "--data", data, "--config", config)
	if code != exitOK {
		t.Fatalf("ext logs: exit %d, stderr %q", code, stderr)
	}
	checkInert(t, "orrery ext logs", stdout, "started\n␛]52;c;ZXZpbA==␇␛[2J<U+009B><U+202E>\uFFFD")

	ext := filepath.Join(dir, ".orrery", "extensions", "evil")
	if err := os.MkdirAll(ext, 0o700); err != nil {
		t.Fatal(err)
	}
	manifest := "[extension]\napi = \"orrery-ext/1\"\nname = \"evil\"\nversion = \"1.0\\u001b]0;pwned\\u0007\\u202e\"\nruntime = \"none\"\n"
	if err := os.WriteFile(filepath.Join(ext, "orrery.toml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	// Only the project's extensions: the user's dir is an empty one.
	var out, errb strings.Builder
	userDir := t.TempDir()
	e := &env{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), getenv: func(k string) string {
		if k == "ORRERY_EXT_DIR" {
			return userDir
		}
		return ""
	}}
	code, stdout, stderr = run(context.Background(), e, []string{"ext", "list"}), out.String(), errb.String()
	if code != exitOK {
		t.Fatalf("ext list: exit %d, stderr %q", code, stderr)
	}
	checkInert(t, "orrery ext list", stdout, "1.0␛]0;pwned␇<U+202E>")
}
