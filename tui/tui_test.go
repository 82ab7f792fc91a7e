package tui_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/tui"
	"github.com/getorrery/orrery/ui"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// newKernel starts a real kernel on a SQLite file with the offline model;
// opts adjust its config.
func newKernel(t testing.TB, opts ...func(*kernel.Config)) *kernel.Kernel {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "offline", Tools: tool.Builtins(), DebugActor: true}
	for _, o := range opts {
		o(&cfg)
	}
	k := kernel.New(cfg)
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		k.Close(ctx)
		st.Close()
	})
	return k
}

func show(t testing.TB, s *kernel.Session, owner ui.Owner, id, placement, title, surface string) {
	t.Helper()
	if err := s.Show(context.Background(), owner, kernel.ShowInput{ID: id, Placement: placement, Title: title, Surface: json.RawMessage(surface)}); err != nil {
		t.Fatalf("Show(%s) = %v", id, err)
	}
}

// prompt runs one prompt to its end.
func prompt(t testing.TB, s *kernel.Session, text string) {
	t.Helper()
	if _, err := s.Send(context.Background(), kernel.SendInput{Text: text}); err != nil {
		t.Fatalf("Send(%q) = %v", text, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.Running() {
		if time.Now().After(deadline) {
			t.Fatal("the run did not end")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// frames returns every logged frame of the session, as a stream delivers
// them, once the log holds a frame containing want.
func frames(t testing.TB, s *kernel.Session, want string) []client.Frame {
	t.Helper()
	// Show returns once the actor took the change; wait until the store
	// holds everything up to the head it has published.
	var fs []kernel.Frame
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		fs, _, err = s.Read(context.Background(), 0, 100000)
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) > 0 && strings.Contains(string(fs[len(fs)-1].Data), want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the log did not reach the session's head")
		}
		time.Sleep(time.Millisecond)
	}
	out := make([]client.Frame, len(fs))
	for i, f := range fs {
		out[i] = client.Frame{Seq: f.Seq, Data: f.Data}
	}
	return out
}

// draw feeds frames into a new model and draws it at w×h.
func draw(t testing.TB, fs []client.Frame, w, h int) (*tui.Model, string) {
	t.Helper()
	m := tui.New(tui.Options{})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	if msg := m.Push(fs...); msg != nil {
		m.Update(msg)
	}
	return m, m.Screen()
}

// layoutSession places two panes, five band rows, a footer and a thread.
func layoutSession(t testing.TB) *kernel.Session {
	k := newKernel(t)
	s, err := k.CreateSession(context.Background(), kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prompt(t, s, "hello")
	show(t, s, ui.OwnerAgent, "files", "pane.left", "Files", `{"kind":{"t":"tree","nodes":[{"label":"cmd","children":[{"label":"orrery"}]},{"label":"tui","children":[{"label":"model.go"},{"label":"screen.go"}]}]}}`)
	show(t, s, ui.OwnerAgent, "fruit", "pane.right", "Fruit", `{"kind":{"t":"chart","kind":"bars","labels":["apples","pears"],"series":[{"label":"count","values":[6,5]}]}}`)
	show(t, s, ui.OwnerConfig, "diff", "pane.right", "Patch", `{"kind":{"t":"diff","path":"a.go","value":"@@ -1 +1 @@\n-old line\n+new line"}}`)
	for i, name := range []string{"ci", "deploy", "queue", "alerts", "build"} {
		show(t, s, ui.OwnerAgent, name, "band", strings.ToUpper(name[:1])+name[1:], `{"kind":{"t":"progress","label":"`+name+`","value":`+itoa(20*(i+1))+`}}`)
	}
	show(t, s, ui.OwnerAgent, "status", "footer", "Status", `{"kind":{"t":"text","value":"3 of 5 checks green"}}`)
	return s
}

func tuiWidth(s string) int { return ansi.StringWidth(s) }

func kernelOpts() kernel.SessionOptions { return kernel.SessionOptions{} }

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestGoldenLayouts draws the same session at four sizes: panes at the
// wide ones, both panes folded into the band at 50 columns, the band
// capped at 3 rows with +N more, and the footer.
func TestGoldenLayouts(t *testing.T) {
	s := layoutSession(t)
	fs := frames(t, s, `3 of 5 checks green`)
	for _, size := range []struct{ w, h int }{{160, 48}, {120, 40}, {80, 24}, {50, 20}} {
		name := itoa(size.w) + "x" + itoa(size.h)
		t.Run(name, func(t *testing.T) {
			_, got := draw(t, fs, size.w, size.h)
			lines := strings.Split(got, "\n")
			if len(lines) != size.h {
				t.Fatalf("Screen() has %d lines, want %d", len(lines), size.h)
			}
			for i, l := range lines {
				if n := tuiWidth(l); n != size.w {
					t.Errorf("line %d is %d cells wide, want %d: %q", i, n, size.w, l)
				}
			}
			golden(t, filepath.Join("testdata", "golden", name+".txt"), got)
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v (run go test -run %s -update to write it)", path, err, t.Name())
	}
	if got != string(want) {
		t.Errorf("Screen() differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestToolOutputStaysAfterLaterTurns: a call's output is drawn after later
// turns as it was while it ran (a command's last lines, as its stream
// surface showed them), though each turn starts the state's surfaces
// anew, and so it is after a resume, which replays the whole log.
func TestToolOutputStaysAfterLaterTurns(t *testing.T) {
	s := seq30(t)
	_, live := draw(t, frames(t, s, "RUN_FINISHED"), 100, 60)
	prompt(t, s, "hello")
	prompt(t, s, "what time is it")
	_, later := draw(t, frames(t, s, "RUN_FINISHED"), 100, 60)
	for name, screen := range map[string]string{"after its turn": live, "after two later turns": later} {
		if !strings.Contains(screen, "⚙ shell") || !strings.Contains(screen, "│ 30") || strings.Contains(screen, "more lines") {
			t.Errorf("%s the command's output is not its last lines (30 in it, nothing cut as more lines):\n%s", name, screen)
		}
	}
}

// TestReplyDoesNotMoveWhenTheTurnEnds draws a Markdown reply while it
// streams, again once the run has ended, and from the whole log as
// --resume does: every line of the reply is where it was, drawn as it was,
// and drawn as Markdown (no ** left).
func TestReplyDoesNotMoveWhenTheTurnEnds(t *testing.T) {
	reply := "# Plan\n\nFirst we read the **config**, then we write it back.\n\n1. read `orrery.toml`\n2. change the listen address\n\n```toml\nlisten = \"127.0.0.1:7400\"\n```\n\nThat is all."
	ev := func(seq uint64, v map[string]any) client.Frame {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return client.Frame{Seq: seq, Data: b}
	}
	start := []client.Frame{
		ev(1, map[string]any{"type": "RUN_STARTED", "threadId": "ses_md", "runId": "run_1"}),
		ev(2, map[string]any{"type": "TEXT_MESSAGE_START", "messageId": "msg_1", "role": "assistant"}),
		ev(3, map[string]any{"type": "TEXT_MESSAGE_CONTENT", "messageId": "msg_1", "delta": reply}),
	}
	end := []client.Frame{
		ev(4, map[string]any{"type": "TEXT_MESSAGE_END", "messageId": "msg_1"}),
		ev(5, map[string]any{"type": "RUN_FINISHED", "threadId": "ses_md", "runId": "run_1"}),
	}
	for _, w := range []int{100, 60} {
		m, streaming := draw(t, start, w, 40)
		if msg := m.Push(end...); msg != nil {
			m.Update(msg)
		}
		ended := m.Screen()
		_, resumed := draw(t, append(append([]client.Frame(nil), start...), end...), w, 40)
		want := replyLines(resumed)
		if len(want) == 0 || strings.Contains(resumed, "**") {
			t.Fatalf("at %d columns the resumed reply is not drawn as Markdown:\n%s", w, resumed)
		}
		for name, screen := range map[string]string{"while streaming": streaming, "once ended": ended} {
			if got := replyLines(screen); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("at %d columns the reply %s\n%s\ndiffers from the resumed one\n%s", w, name, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
	}
}

// replyLines are the lines of a screen from the reply's heading to its
// last sentence.
func replyLines(screen string) []string {
	lines := strings.Split(screen, "\n")
	from, to := -1, -1
	for i, l := range lines {
		if from < 0 && strings.Contains(l, "Plan") {
			from = i
		}
		if strings.Contains(l, "That is all.") {
			to = i
		}
	}
	if from < 0 || to < from {
		return nil
	}
	return lines[from : to+1]
}

// TestConsentUnderlinesThePart: the part of a shell line that made the
// gate ask is underlined in the request, also where it breaks across rows,
// and every other word is drawn plain.
func TestConsentUnderlinesThePart(t *testing.T) {
	ev := func(seq uint64, v map[string]any) client.Frame {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return client.Frame{Seq: seq, Data: b}
	}
	subject := "echo hi && echo again and again and again; rm -rf ./important"
	fs := []client.Frame{
		ev(1, map[string]any{"type": "RUN_STARTED", "threadId": "s", "runId": "r"}),
		ev(2, map[string]any{"type": "CUSTOM", "name": "orrery.consent.requested", "value": map[string]any{
			"request": "q1", "tool": "shell", "subject": subject, "part": "rm -rf ./important",
			"rule":    `the part "rm -rf ./important" matches no allow rule`,
			"options": []map[string]any{{"id": "allow_once", "label": "Allow once"}, {"id": "deny", "label": "Deny"}}}}),
	}
	for _, w := range []int{120, 50} {
		m, screen := draw(t, fs, w, 20)
		if !strings.Contains(strings.Join(strings.Fields(screen), " "), "allow shell(echo hi && echo again and again and again; rm -rf ./important)?") {
			t.Errorf("at %d columns the request is not whole:\n%s", w, screen)
		}
		for _, l := range strings.Split(screen, "\n") {
			if strings.HasSuffix(strings.TrimSpace(l), "-") {
				t.Errorf("at %d columns a row of the request breaks after a hyphen (rm - / rf): %q", w, l)
			}
		}
		var under strings.Builder
		for _, l := range strings.Split(m.View().Content, "\n") {
			for rest := l; ; {
				i := strings.Index(rest, "\x1b[4m")
				if i < 0 {
					break
				}
				rest = rest[i+len("\x1b[4m"):]
				j := strings.Index(rest, "\x1b[24m")
				if j < 0 {
					t.Fatalf("at %d columns a row opens the underline and never closes it: %q", w, l)
				}
				under.WriteString(rest[:j] + " ")
				rest = rest[j:]
			}
		}
		if got := strings.Join(strings.Fields(under.String()), " "); got != "rm -rf ./important" {
			t.Errorf("at %d columns the underlined text is %q, want the part %q", w, got, "rm -rf ./important")
		}
	}
}

// TestCtrlOShowsToolCallsWhole: a command's 30 lines of output are folded
// to its last lines by default, live and on replay alike; Ctrl-O shows
// them whole (and the arguments unclipped), and a second Ctrl-O folds
// them again.
func TestCtrlOShowsToolCallsWhole(t *testing.T) {
	s := seq30(t)
	m, folded := draw(t, frames(t, s, "RUN_FINISHED"), 100, 80)
	lines := func(screen string) (n int) {
		for _, l := range strings.Split(screen, "\n") {
			if strings.Contains(l, "│ ") {
				n++
			}
		}
		return n
	}
	hasLine := func(screen, want string) bool {
		for _, l := range strings.Split(screen, "\n") {
			if strings.TrimSpace(l) == want {
				return true
			}
		}
		return false
	}
	if !hasLine(folded, "│ 30") || hasLine(folded, "│ 1") || lines(folded) > 8 {
		t.Fatalf("folded, the output is not its last lines (at most 8):\n%s", folded)
	}
	ctrlO := tea.KeyPressMsg{Code: 'o', Mod: tea.ModCtrl}
	m.Update(ctrlO)
	whole := m.Screen()
	for _, want := range []string{"│ 1", "│ 15", "│ 30"} {
		if !hasLine(whole, want) {
			t.Errorf("after Ctrl-O the screen lacks %q:\n%s", want, whole)
		}
	}
	if !strings.Contains(whole, "shown whole") {
		t.Errorf("Ctrl-O said nothing:\n%s", whole)
	}
	m.Update(ctrlO)
	if again := m.Screen(); lines(again) > 8 || !hasLine(again, "│ 30") || hasLine(again, "│ 1") {
		t.Errorf("a second Ctrl-O did not fold the output again:\n%s", again)
	}
}

// seq30 is a session on a real kernel with the coding tools whose one
// run, allowed without asking, ran seq 30 in the shell.
func seq30(t *testing.T) *kernel.Session {
	t.Helper()
	ws := t.TempDir()
	k := newKernel(t, func(c *kernel.Config) {
		c.Tools, c.Workspace = tool.NewSet(tool.Coding(tool.Shell{})...), tool.Workspace{Root: ws}
	})
	s, err := k.CreateSession(context.Background(), kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(context.Background(), kernel.SendInput{Text: "run `seq 30`", Permissions: &kernel.RunPermissions{Yes: true}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); s.Running(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run did not end")
		}
	}
	return s
}
