package main_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/datadir"
	"github.com/getorrery/orrery/store/sqlite"
)

// TestTUIInTmux runs bare orrery with the offline model in a real terminal
// (tmux) and reads the screen with capture-pane: a streamed answer, a chart
// placed in a pane, a consent prompt answered with a key and the command
// it allowed, the pane folding into the band at 60 columns, and /ui.
func TestTUIInTmux(t *testing.T) {
	tt := startTmux(t, 120, 40)
	tm, waitFor := tt.tm, tt.waitFor
	tm("new-window", "-t", "t:", "-n", "app", "-c", tt.ws, tt.bin+" --data "+tt.data+"; sleep 60")
	tm("resize-window", "-t", "t:app", "-x", "120", "-y", "40")
	waitFor("the status line of an idle session", has("orrery · ses_", "idle"))

	tm("send-keys", "-t", "t:app", "-l", "hello there")
	tm("send-keys", "-t", "t:app", "Enter")
	waitFor("the streamed answer", has("› hello there", `You said: "hello there"`))

	tm("send-keys", "-t", "t:app", "-l", "show me a chart of apples pears")
	tm("send-keys", "-t", "t:app", "Enter")
	s := waitFor("the chart in the right pane", has("┌ Letters per word", "agent ┐", "apples █", "pears  █"))
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "apples █") && !strings.HasSuffix(strings.TrimRight(l, " "), "│") {
			t.Errorf("the chart is not drawn in the right pane: %q", l)
		}
	}

	tm("send-keys", "-t", "t:app", "-l", "run `echo hi`")
	tm("send-keys", "-t", "t:app", "Enter")
	waitFor("the consent prompt", has("⚠ CONSENT · orrery asks: allow shell(echo hi)?", "[1] Allow once", "❯ [3] Deny"))
	tm("send-keys", "-t", "t:app", "y") // a letter answers nothing
	waitFor("the nudge", has("answer this first", "❯ [3] Deny"))
	tm("send-keys", "-t", "t:app", "1")
	waitFor("the command's output", has("consent allowed", "│ hi", `Done: shell returned "hi\nexit status 0"`))

	tm("resize-window", "-t", "t:app", "-x", "60", "-y", "30")
	waitFor("the pane folded into the band", func(s string) bool {
		return strings.Contains(s, "▸ Letters per word [agent]") && !strings.Contains(s, "┌ Letters per word")
	})

	tm("send-keys", "-t", "t:app", "-l", "/ui")
	tm("send-keys", "-t", "t:app", "Enter")
	waitFor("the /ui list", has("ID", "PLACEMENT", "OWNER", "offline-chart  pane.right  agent  shown, folded"))

	tm("send-keys", "-t", "t:app", "C-c", "C-c") // a second Ctrl-C within 2 s quits
	waitFor("orrery to quit on Ctrl-C twice with no run in flight", func(s string) bool { return !strings.Contains(s, "orrery · ses_") })
}

// tmuxTUI is a tmux server of the test's own (-L) with a built orrery, a
// workspace and a data dir; window 0 runs a shell for the test's controls.
type tmuxTUI struct {
	t             *testing.T
	bin, ws, data string
	env           []string
	sock          string
}

// startTmux builds orrery and starts tmux at w×h; without tmux it skips
// (or fails under ORRERY_REQUIRE_TMUX).
func startTmux(t *testing.T, w, h int) *tmuxTUI {
	t.Helper()
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
	tt := &tmuxTUI{t: t, bin: filepath.Join(dir, "orrery"), ws: filepath.Join(dir, "ws"), data: filepath.Join(dir, "data")}
	if out, err := exec.Command("go", "build", "-o", tt.bin, "github.com/getorrery/orrery/cmd/orrery").CombinedOutput(); err != nil {
		t.Fatalf("go build = %v\n%s", err, out)
	}
	if err := os.MkdirAll(tt.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, kv := range environ(t) {
		name, _, _ := strings.Cut(kv, "=")
		if name == "ANTHROPIC_API_KEY" || name == "OPENAI_API_KEY" || name == "TMUX" || name == "TERM" {
			continue
		}
		tt.env = append(tt.env, kv)
	}
	tt.env = append(tt.env, "TERM=xterm-256color")
	tt.sock = "orrery-test-" + strconv.Itoa(os.Getpid()) + "-" + strings.ReplaceAll(t.Name(), "/", "-")
	tt.tm("new-session", "-d", "-s", "t", "-x", strconv.Itoa(w), "-y", strconv.Itoa(h), "-c", tt.ws, "sh")
	t.Cleanup(func() {
		c := exec.Command("tmux", "-L", tt.sock, "kill-server")
		c.Env = tt.env
		_ = c.Run()
	})
	return tt
}

// tm runs one tmux command on the test's server.
func (tt *tmuxTUI) tm(args ...string) string {
	tt.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-L", tt.sock, "-f", "/dev/null"}, args...)...)
	cmd.Env = tt.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		tt.t.Fatalf("tmux %s = %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen is what the app window shows, as capture-pane reads it.
func (tt *tmuxTUI) screen() string { return tt.tm("capture-pane", "-p", "-t", "t:app") }

// waitFor reads the screen until ok holds, for at most 30 s.
func (tt *tmuxTUI) waitFor(what string, ok func(string) bool) string {
	tt.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := tt.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			tt.t.Fatalf("the screen never showed %s:\n%s", what, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// has is true of a screen that holds every one of subs.
func has(subs ...string) func(string) bool {
	return func(s string) bool {
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return true
	}
}

// hostileText tries to clear the screen and home the cursor, write the
// clipboard (OSC 52), set the terminal's title (OSC 0 and 2), draw a link
// (OSC 8), colour with an 8-bit CSI and reverse the reading order (bidi).
const hostileText = "\x1b[2J\x1b[Hbefore\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b]2;pwned2\x1b\\\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\\u009b31m \u202eexe.txt\u202c after"

// TestTUIHostileSurfaceInTmux has the agent place surfaces full of
// control sequences in a pane, the band and inline, and answer with them,
// at 80×24 in a real terminal (tmux). capture-pane shows their text inert
// inside the frames, the status line intact, the terminal title the TUI's
// own and no clipboard buffer. The same sequences printed by a shell in
// another window do set the title and the clipboard, so the checks can
// fail.
func TestTUIHostileSurfaceInTmux(t *testing.T) {
	tt := startTmux(t, 80, 24)
	// Clipboard writes from programs become tmux buffers (OSC 52 is
	// honoured), so one that leaked would show in list-buffers.
	tt.tm("set-option", "-s", "set-clipboard", "on")
	surface := func(t string) map[string]any { return map[string]any{"kind": map[string]any{"t": "text", "value": t}} }
	script, err := json.Marshal(map[string]any{"turns": []any{
		map[string]any{"tool_calls": []any{
			map[string]any{"name": "ui.show", "args": map[string]any{"id": "evil", "placement": "pane.right", "title": "Ev\x1b]0;pwned\x07il", "surface": surface(hostileText)}},
			map[string]any{"name": "ui.show", "args": map[string]any{"id": "band", "placement": "band", "title": "Band", "surface": surface(hostileText)}},
			map[string]any{"name": "ui.show", "args": map[string]any{"id": "table", "placement": "inline", "title": "Table",
				"surface": map[string]any{"kind": map[string]any{"t": "table", "columns": []string{"c" + hostileText}, "rows": [][]string{{hostileText}}}}}},
		}},
		map[string]any{"text": []string{"answer ", hostileText}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tt.data + "-script.json")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	tt.tm("new-window", "-t", "t:", "-n", "app", "-c", tt.ws, tt.bin+" --data "+tt.data+" --model script:"+path+"; sleep 60")
	tt.tm("resize-window", "-t", "t:app", "-x", "80", "-y", "24")
	tt.waitFor("the status line of an idle session", has("orrery · ses_", "idle"))
	tt.tm("send-keys", "-t", "t:app", "-l", "show the evil")
	tt.tm("send-keys", "-t", "t:app", "Enter")
	s := tt.waitFor("the hostile surfaces and answer", has("› show the evil", "answer before", "┌ Evil", "▸ Band [agent] beforelink", "idle"))

	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) != 24 {
		t.Errorf("capture-pane has %d lines, want 24 (a cleared or scrolled screen?):\n%s", len(lines), s)
	}
	if !strings.HasPrefix(lines[0], "▸ Band [agent] beforelink") {
		t.Errorf("the band is not the first line (did something move the cursor home?): %q", lines[0])
	}
	if !strings.Contains(lines[len(lines)-1], "orrery · ses_") {
		t.Errorf("the status line is not the last line: %q", lines[len(lines)-1])
	}
	for _, l := range lines {
		for _, bad := range []string{"\u202e", "\u202c", "\x1b", "\u009b", "\x07", "pwned"} {
			if strings.Contains(l, bad) {
				t.Errorf("the screen holds %q: %q", bad, l)
			}
		}
		// Text in the right pane stays inside its frame.
		if strings.Contains(l, "│ before") && !strings.HasSuffix(strings.TrimRight(l, " "), "│") {
			t.Errorf("the pane's text leaves its frame: %q", l)
		}
	}
	if !strings.Contains(s, "exe.txt after") {
		t.Errorf("the text after the sequences is not shown in reading order:\n%s", s)
	}
	if title := strings.TrimSpace(tt.tm("display-message", "-p", "-t", "t:app", "#{pane_title}")); title != "orrery" {
		t.Errorf("the terminal title = %q, want the TUI's own %q", title, "orrery")
	}
	if bufs := strings.TrimSpace(tt.tm("list-buffers")); bufs != "" {
		t.Errorf("a clipboard write reached the terminal: tmux buffers %q", bufs)
	}

	// The control: the same bytes from a program in window 0 set the title
	// and the clipboard, so the checks above can see a leak.
	tt.tm("send-keys", "-t", "t:0", "-l", `printf '\033]52;c;ZXZpbA==\007\033]2;pwned\033\\'`)
	tt.tm("send-keys", "-t", "t:0", "Enter")
	deadline := time.Now().Add(10 * time.Second)
	for {
		title := strings.TrimSpace(tt.tm("display-message", "-p", "-t", "t:0", "#{pane_title}"))
		bufs := strings.TrimSpace(tt.tm("list-buffers"))
		if title == "pwned" && bufs != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the control did not take: title %q, buffers %q; the checks of the TUI cannot fail", title, bufs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTUIFormInTmux has the agent place a form component at 80×24 in tmux
// and edits it with the keys a terminal sends (F6, Backspace, typed text,
// Tab, Space, Enter): the screen shows the values as typed and toggled and
// the submit sent to the agent; a required field emptied is refused.
func TestTUIFormInTmux(t *testing.T) {
	tt := startTmux(t, 80, 24)
	form := map[string]any{"type": "form", "submit": "Go", "on": map[string]any{"submit": "go"}, "fields": []any{
		map[string]any{"name": "name", "label": "Name", "type": "text", "required": true, "value": "${/name}"},
		map[string]any{"name": "canary", "label": "Canary", "type": "boolean", "value": false},
		map[string]any{"name": "region", "label": "Region", "type": "choice", "choices": []string{"eu", "us"}, "value": "eu"},
	}}
	script, err := json.Marshal(map[string]any{"turns": []any{
		map[string]any{"tool_calls": []any{map[string]any{"name": "ui.show", "args": map[string]any{
			"id": "deploy", "placement": "inline", "title": "Deploy", "structure": form, "data": map[string]any{"name": "web-1"}}}}},
		map[string]any{"text": []string{"placed the form"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	path := tt.data + "-script.json"
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	tt.tm("new-window", "-t", "t:", "-n", "app", "-c", tt.ws, tt.bin+" --data "+tt.data+" --model script:"+path+"; sleep 60")
	tt.tm("resize-window", "-t", "t:app", "-x", "80", "-y", "24")
	tt.waitFor("the status line of an idle session", has("orrery · ses_", "idle"))
	tt.tm("send-keys", "-t", "t:app", "-l", "a form please")
	tt.tm("send-keys", "-t", "t:app", "Enter")
	tt.waitFor("the form", has("┌ Deploy", "Name *: [web-1]", "Canary: [ ]", "Region: [eu]", "[ Go ]", "placed the form", "idle"))
	tt.tm("send-keys", "-t", "t:app", "F6")
	tt.waitFor("the focused form", has("┏ Deploy", "❯ Name *: [web-1 ]"))
	tt.tm("send-keys", "-t", "t:app", "BSpace")
	tt.tm("send-keys", "-t", "t:app", "-l", "x")
	// The cursor goes back over x and -, and a 1 goes in between.
	tt.tm("send-keys", "-t", "t:app", "Left")
	tt.tm("send-keys", "-t", "t:app", "Left")
	tt.tm("send-keys", "-t", "t:app", "-l", "1")
	tt.waitFor("the letter typed mid-value", has("❯ Name *: [web1-x]"))
	tt.tm("send-keys", "-t", "t:app", "Tab")
	tt.tm("send-keys", "-t", "t:app", "Space")
	tt.tm("send-keys", "-t", "t:app", "Tab")
	tt.tm("send-keys", "-t", "t:app", "Right")
	tt.waitFor("the edited fields", has("Name *: [web1-x]", "Canary: [x]", "❯ Region: ‹ us ›"))
	tt.tm("send-keys", "-t", "t:app", "Enter")
	tt.waitFor("the submit sent", has("sent go to agent"))
	// The cursor stayed after the 1: Ctrl-E goes to the end, Ctrl-U
	// deletes back to the start.
	tt.tm("send-keys", "-t", "t:app", "BTab")
	tt.tm("send-keys", "-t", "t:app", "BTab")
	tt.tm("send-keys", "-t", "t:app", "C-e")
	tt.tm("send-keys", "-t", "t:app", "C-u")
	tt.tm("send-keys", "-t", "t:app", "Enter")
	tt.waitFor("the required field refused", has("Name is required: type a value in it, then Enter", "❯ Name *: [ ]"))

	tt.tm("send-keys", "-t", "t:app", "C-c", "C-c") // a second Ctrl-C within 2 s quits
	tt.waitFor("orrery to quit on Ctrl-C twice", func(s string) bool { return !strings.Contains(s, "orrery · ses_") })
	want := `[ext:ui] deploy: go {"canary":true,"name":"web1-x","region":"us"}`
	if got := notes(t, tt.data, "[ext:ui] deploy:"); len(got) != 1 || got[0] != want {
		t.Errorf("the notes of the submit = %q, want [%q]", got, want)
	}
}

// notes reads the data dir's one session and returns the texts of its
// CUSTOM notes that start with prefix.
func notes(t *testing.T, data, prefix string) []string {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(data, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	sessions, err := st.Sessions(ctx)
	if err != nil || len(sessions) != 1 {
		t.Fatalf("Sessions() = %v, %v; want one", sessions, err)
	}
	frames, err := st.Read(ctx, sessions[0].ID, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range frames {
		var ev struct {
			Type  string `json:"type"`
			Value struct {
				Text string `json:"text"`
			} `json:"value"`
		}
		if json.Unmarshal(f.Data, &ev) == nil && ev.Type == "CUSTOM" && strings.HasPrefix(ev.Value.Text, prefix) {
			out = append(out, ev.Value.Text)
		}
	}
	return out
}

// TestTUIDataDirInTmux: bare orrery on a data dir orrery serve holds is the
// server's client over its pipe (the status line says attached) and works
// as on its own kernel; on a free data dir it holds the dir itself (host),
// and orrery run and orrery sessions on that dir are its clients.
func TestTUIDataDirInTmux(t *testing.T) {
	tt := startTmux(t, 100, 30)
	s := serveIn(t, tt.bin, tt.env, tt.ws, "--data", tt.data)
	tt.tm("new-window", "-t", "t:", "-n", "app", "-c", tt.ws, tt.bin+" --data "+tt.data+"; sleep 60")
	tt.tm("resize-window", "-t", "t:app", "-x", "100", "-y", "30")
	tt.waitFor("the status line of a session attached to the server", has("orrery · ses_", "attached", "idle"))
	tt.tm("send-keys", "-t", "t:app", "-l", "hello there")
	tt.tm("send-keys", "-t", "t:app", "Enter")
	tt.waitFor("the streamed answer", has("› hello there", `You said: "hello there"`))
	var list struct {
		Sessions []struct {
			ID   string `json:"id"`
			Head uint64 `json:"head"`
		} `json:"sessions"`
	}
	s.control(map[string]any{"t": "session.list", "id": "l"}, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].Head == 0 {
		t.Errorf("the server's sessions = %+v, want the TUI's one, with its run", list.Sessions)
	}
	tt.tm("send-keys", "-t", "t:app", "C-c", "C-c") // a second Ctrl-C within 2 s quits
	tt.waitFor("orrery to quit on Ctrl-C twice", func(s string) bool { return !strings.Contains(s, "orrery · ses_") })
	if code := s.stop(); code != 130 {
		t.Errorf("orrery serve exit code after SIGINT = %d, want 130 (interrupted)", code)
	}

	// A free dir: the TUI holds it.
	own := tt.data + "-own"
	tt.tm("kill-window", "-t", "t:app")
	tt.tm("new-window", "-t", "t:", "-n", "app", "-c", tt.ws, tt.bin+" --data "+own+"; sleep 60")
	tt.tm("resize-window", "-t", "t:app", "-x", "100", "-y", "30")
	tt.waitFor("the status line of the host", has("orrery · ses_", "host", "idle"))
	if o := waitOwner(t, own); o.Command != "orrery (the terminal UI)" {
		t.Errorf("owner file = %+v, want the terminal UI", o)
	}
	r := orreryIn(t, tt.bin, tt.env, tt.ws, "run", "--model", "offline", "-p", "hello from a client", "--data", own)
	if r.code != 0 || !strings.Contains(r.stdout, `You said: "hello from a client"`) {
		t.Errorf("orrery run on the TUI's dir = %d, stdout %q, stderr %q; want 0 and the answer", r.code, r.stdout, r.stderr)
	}
	r = orreryIn(t, tt.bin, tt.env, tt.ws, "sessions", "--data", own)
	if r.code != 0 || strings.Count(r.stdout, "ses_") != 2 || !strings.Contains(r.stdout, "hello from a client") {
		t.Errorf("orrery sessions on the TUI's dir = %d, stdout %q, stderr %q; want the TUI's session and the run's", r.code, r.stdout, r.stderr)
	}
	tt.tm("send-keys", "-t", "t:app", "C-c", "C-c") // a second Ctrl-C within 2 s quits
	tt.waitFor("orrery to quit on Ctrl-C twice", func(s string) bool { return !strings.Contains(s, "orrery · ses_") })
	deadline := time.Now().Add(waitLimit)
	for {
		o, _ := datadir.ReadOwner(own)
		if o == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the owner file is still there after the TUI quit: %+v", o)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
