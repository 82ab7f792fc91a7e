package main_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goldenCommand is a shell command of 300 characters whose dangerous part
// comes last, where a prompt that cuts would hide it.
var goldenCommand = func() string {
	cmd, tail := "cd ./project && echo building the release notes", "; rm -rf ./important"
	for len(cmd)+len(" && echo step")+len(tail) < 300 {
		cmd += " && echo step"
	}
	return cmd + strings.Repeat(" ", 300-len(cmd)-len(tail)) + tail
}()

// goldenScript is the scripted model of TestTUIGoldenScreensInTmux, one
// turn per model call: rows in the band and footer, a shell call that
// asks for consent, a reply after the denial, a later reply that streams
// (after a model call whose usage the status line counts) and then hangs
// until it is interrupted, and a provider failure.
func goldenScript(t *testing.T) []byte {
	t.Helper()
	show := func(id, placement, title, surface string) map[string]any {
		return map[string]any{"name": "ui.show", "args": map[string]any{"id": id, "placement": placement, "title": title, "surface": json.RawMessage(surface)}}
	}
	turns := []any{
		map[string]any{"tool_calls": []any{map[string]any{"name": "tools.search", "args": map[string]any{"query": "show surface"}}}},
		map[string]any{"tool_calls": []any{
			show("build", "band", "Build", `{"kind":{"t":"progress","label":"tests","value":3,"max":5}}`),
			show("disk", "band", "Disk", `{"kind":{"t":"chart","kind":"gauge","unit":"%","series":[{"label":"disk","values":[72]}]}}`),
			show("load", "band", "Load", `{"kind":{"t":"chart","kind":"sparkline","unit":"%","series":[{"label":"cpu","values":[12,30,28,60,95,70,40,22]}]}}`),
			show("checks", "footer", "Checks", `{"kind":{"t":"text","value":"3 of 5 checks green"}}`),
		}},
		map[string]any{"text": []string{"Placed three rows in the band and one in the footer."}},
		map[string]any{"tool_calls": []any{map[string]any{"name": "shell", "args": map[string]any{"command": goldenCommand}}}},
		map[string]any{"text": []string{"Not done: the shell command was denied."}},
		map[string]any{"text": []string{"Let me check first. "}, "tool_calls": []any{map[string]any{"name": "echo", "args": map[string]any{"text": "checked"}}},
			"usage": map[string]any{"inputTokens": 120, "outputTokens": 30}},
		map[string]any{"text": []string{"## A later turn\n\n", "This reply is drawn ", "as **Markdown** ", "while it streams, ", "and then it waits."}, "hang": true},
		map[string]any{"error": "the provider is overloaded"},
	}
	// As a model sends them: && stays &&, not \u0026\u0026.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"turns": turns}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestTUIGoldenScreensInTmux drives the TUI in tmux at 160×45, 100×30 and
// 60×20 through a day's moments and compares each screen with its golden
// file in testdata/tui (rewrite them with -update): rows in the band and
// footer with their numbers; consent for a 300-character command, whole;
// typing during consent (the keys answer nothing and the draft stays); the
// transcript after the denial, after a later turn and after --resume; the
// status line while a reply streams; and a failure's notice, which does
// not follow into a /new session. Session ids, the clock and the spinner
// are masked.
func TestTUIGoldenScreensInTmux(t *testing.T) {
	for _, size := range [][2]int{{160, 45}, {100, 30}, {60, 20}} {
		w, h := size[0], size[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			t.Parallel()
			goldenScreens(t, w, h)
		})
	}
}

func goldenScreens(t *testing.T, w, h int) {
	tt := startTmux(t, w, h)
	script := filepath.Join(tt.data + "-script.json")
	if err := os.WriteFile(script, goldenScript(t), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "tui", fmt.Sprintf("%dx%d", w, h))
	golden := func(name string, s string) {
		t.Helper()
		got := maskScreen(s)
		path := filepath.Join(dir, name+".txt")
		if updating() {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./cmd/orrery -run TestTUIGoldenScreensInTmux -update to write it)", err)
		}
		if got != string(want) {
			t.Errorf("the %s screen at %dx%d differs from %s:\n--- got\n%s\n--- want\n%s", name, w, h, path, got, want)
		}
	}
	launch := func(args string) {
		tt.tm("new-window", "-t", "t:", "-n", "app", "-c", tt.ws, tt.bin+" --data "+tt.data+" --model script:"+script+args+"; sleep 60")
		tt.tm("resize-window", "-t", "t:app", "-x", fmt.Sprint(w), "-y", fmt.Sprint(h))
	}
	keys := func(ks ...string) { tt.tm(append([]string{"send-keys", "-t", "t:app"}, ks...)...) }
	typed := func(text string) { keys("-l", text) }
	idle := has("· idle ·")

	launch("")
	tt.waitFor("an idle session", has("orrery · ses_", "idle"))
	typed("place the rows")
	keys("Enter")
	golden("band", tt.waitFor("the rows in the band and footer", func(s string) bool {
		return idle(s) && strings.Contains(s, "Placed three rows") && strings.Contains(s, "3 of 5 checks green") && strings.Contains(s, "72")
	}))

	typed("run the long command")
	keys("Enter")
	golden("consent", tt.waitFor("the consent prompt", has("CONSENT", "rm -rf ./important", "Deny")))

	typed("stay")
	s := tt.waitFor("the nudge", has("answer this first"))
	if strings.Contains(s, "stay") {
		t.Errorf("the keys typed during consent reached the screen (the composer?):\n%s", s)
	}
	golden("consent-typing", s)

	keys("Escape")
	s = tt.waitFor("the denial and the reply after it", func(s string) bool { return idle(s) && strings.Contains(s, "Not done: the shell command was denied.") })
	golden("transcript", s)
	denied := shellCallLines(s)
	if len(denied) == 0 {
		t.Fatalf("the denied shell call is not on the screen:\n%s", s)
	}

	typed("hello")
	keys("Enter")
	golden("streaming", tt.waitFor("the reply streaming", has("and then it waits.", " running ", "· 150")))
	keys("Escape")
	s = tt.waitFor("the interrupted run, ended", func(s string) bool { return idle(s) && strings.Contains(s, "the run was cancelled") })
	golden("later-turn", s)
	if got := shellCallLines(s); len(got) > 0 && strings.Join(got, "\n") != strings.Join(denied, "\n") {
		t.Errorf("the denied call changed after a later turn:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(denied, "\n"))
	}

	typed("fail now")
	keys("Enter")
	golden("notice", tt.waitFor("the failure's notice", func(s string) bool { return idle(s) && strings.Contains(s, "the provider is overloaded") }))
	first := sessionOnScreen(tt.screen())

	typed("/new")
	keys("Enter")
	s = tt.waitFor("a new session", func(s string) bool { id := sessionOnScreen(s); return id != "" && id != first && idle(s) })
	if strings.Contains(s, "overloaded") {
		t.Errorf("the first session's notice followed into the new one:\n%s", s)
	}
	golden("notice-after-new", s)

	keys("C-c", "C-c")
	tt.waitFor("orrery to quit", func(s string) bool { return !strings.Contains(s, "orrery · ses_") })
	tt.tm("kill-window", "-t", "t:app")
	launch(" --resume " + first)
	s = tt.waitFor("the resumed session", func(s string) bool {
		return sessionOnScreen(s) == first && idle(s) && strings.Contains(s, "the provider is overloaded")
	})
	golden("resumed", s)
	if got := shellCallLines(s); len(got) > 0 && strings.Join(got, "\n") != strings.Join(denied, "\n") {
		t.Errorf("the denied call is drawn otherwise after --resume:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(denied, "\n"))
	}
}

// updating reports whether -update was given (the flag is the bus
// goldens', in the package's internal tests).
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

var (
	sessionID = regexp.MustCompile(`ses_[a-z0-9]+`)
	clockRE   = regexp.MustCompile(`[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] running [0-9hms.]+`)
)

// maskScreen replaces what differs from run to run (session ids, the
// spinner and the clock) and the text of the tools.search result, the
// kernel's tool descriptions, which change with them, row for row.
// Trailing blanks go.
func maskScreen(s string) string {
	s = sessionID.ReplaceAllString(s, "ses_XXXXXXXXXXXXXXXX")
	s = clockRE.ReplaceAllString(s, "⠿ running Ns")
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	search := false
	for i, l := range lines {
		l = strings.TrimRight(l, " ")
		switch {
		case strings.Contains(l, "⚙ tools.search"):
			search = true
		case search && strings.HasPrefix(l, "   │ "):
			l = "   │ ⟨the tools found⟩"
		default:
			search = false
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n") + "\n"
}

// sessionOnScreen is the session id the status line names, or "".
func sessionOnScreen(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "orrery · ") {
			return sessionID.FindString(lines[i])
		}
	}
	return ""
}

// shellCallLines are the lines that draw the shell call: its header and
// the result under it.
func shellCallLines(s string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.Contains(l, "⚙ shell"):
			in = true
		case in && !strings.HasPrefix(strings.TrimLeft(l, " "), "│"):
			in = false
		}
		if in {
			out = append(out, strings.TrimRight(l, " "))
		}
	}
	return out
}
