package tui_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/tui"
)

// live is a real kernel served on a pipe, a client of it, and a model
// driven as a program drives it: every command runs, and its message comes
// back through Update.
type live struct {
	t    *testing.T
	dir  string // the kernel's workspace
	k    *kernel.Kernel
	cl   *client.Client
	m    *tui.Model
	msgs chan tea.Msg
	quit bool
	// stopServer stops serving the pipe, as a kernel that died would.
	stopServer func()
}

func startLive(t *testing.T, model string, opts ...func(*tui.Options)) *live {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(kernel.Config{
		Store: st, Models: models.Resolve, DefaultModel: model, DebugActor: true,
		Tools:     tool.NewSet(append([]tool.Tool{tool.Clock{}, tool.Echo{}}, tool.Coding(tool.Shell{})...)...),
		Workspace: tool.Workspace{Root: dir},
	})
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A host's screen names its own directory as the session's cwd: the
	// tests' are temporary directories.
	srv := server.New(server.Config{Kernel: k, Logger: slog.New(slog.DiscardHandler), Roots: []string{os.TempDir()}})
	sock := filepath.Join(dir, "k.sock")
	pl, err := server.ListenPipe(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.ServePipeListener(ctx, pl) }()
	cl, err := client.Dial(ctx, "pipe:"+sock, client.Options{Client: "tui test",
		Draws: []string{protocol.DrawThread, protocol.DrawTools, protocol.DrawReasoning, protocol.DrawSurfaces, protocol.DrawConsent}})
	if err != nil {
		t.Fatal(err)
	}
	l := &live{t: t, dir: dir, k: k, cl: cl, msgs: make(chan tea.Msg, 1024)}
	o := tui.Options{Client: cl, Workspace: dir}
	for _, f := range opts {
		f(&o)
	}
	l.m = tui.New(o)
	l.m.SetSender(func(msg tea.Msg) { l.msgs <- msg })
	var stopped sync.Once
	l.stopServer = func() {
		stopped.Do(func() {
			stop()
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Close(cctx)
			<-served
		})
	}
	t.Cleanup(func() {
		l.m.Update(tea.QuitMsg{})
		cl.Close()
		l.stopServer()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		k.Close(cctx)
		st.Close()
	})
	l.m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	l.run(l.m.Init())
	return l
}

func (l *live) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	go func() {
		if msg := cmd(); msg != nil {
			l.msgs <- msg
		}
	}()
}

// until handles messages until the screen satisfies ok.
func (l *live) until(what string, ok func(string) bool) string {
	l.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		s := l.m.Screen()
		if ok(s) {
			return s
		}
		select {
		case msg := <-l.msgs:
			if _, isQuit := msg.(tea.QuitMsg); isQuit {
				l.quit = true
			}
			if batch, ok := msg.(tea.BatchMsg); ok {
				// As the program does: each command on its own.
				for _, cmd := range batch {
					l.run(cmd)
				}
				continue
			}
			_, cmd := l.m.Update(msg)
			l.run(cmd)
		case <-deadline:
			l.t.Fatalf("the screen never showed %s:\n%s", what, s)
		}
	}
}

func contains(subs ...string) func(string) bool {
	return func(s string) bool {
		words := strings.Join(strings.Fields(s), " ")
		for _, sub := range subs {
			// A notice wraps where its text (a temporary path in it) puts
			// the break: a phrase may run across rows.
			if !strings.Contains(s, sub) && !strings.Contains(words, strings.Join(strings.Fields(sub), " ")) {
				return false
			}
		}
		return true
	}
}

func (l *live) typeText(s string) {
	for _, r := range s {
		l.press(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

// scriptModel writes a script model of turns, named name, and returns its
// spec.
func scriptModel(t *testing.T, name string, turns ...map[string]any) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"turns": turns})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return "script:" + path
}

// toks is n chunks of streamed text.
func toks(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "tok "
	}
	return out
}

func (l *live) press(k tea.KeyPressMsg) {
	_, cmd := l.m.Update(k)
	l.run(cmd)
}

var (
	keyEnter = tea.KeyPressMsg{Code: tea.KeyEnter}
	keyCtrlC = tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	keyF6    = tea.KeyPressMsg{Code: tea.KeyF6}
	keyEsc   = tea.KeyPressMsg{Code: tea.KeyEscape}
)

// TestSteerThenCancel types into a run in flight (a steer, logged as one),
// cancels it with Ctrl-C, and quits with a second Ctrl-C.
func TestSteerThenCancel(t *testing.T) {
	l := startLive(t, scriptModel(t, "slow.json",
		map[string]any{"text": toks(400), "delay_ms": 20},
		map[string]any{"text": []string{"after the steer"}},
	))
	l.until("an idle session", contains("orrery · ses_", "idle"))
	l.typeText("go slowly")
	l.press(keyEnter)
	l.until("the run in flight", contains("› go slowly", "tok tok", "running", "Enter steers the run"))
	l.typeText("turn left")
	l.press(keyEnter)
	l.until("the steer in the thread", contains("› turn left", "steered the run in flight"))

	l.press(keyCtrlC)
	l.until("the run cancelled", contains("the run was cancelled", "idle"))
	if l.quit {
		t.Fatal("the first Ctrl-C quit; it must only cancel the run")
	}
	// The log holds the steer as a steer.
	sess, err := l.k.Session(context.Background(), sessionOf(t, l.m.Screen()))
	if err != nil {
		t.Fatal(err)
	}
	fs, _, err := sess.Read(context.Background(), 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	steered := false
	for _, f := range fs {
		if strings.Contains(string(f.Data), `"steer":true`) && strings.Contains(string(f.Data), "turn left") {
			steered = true
		}
	}
	if !steered {
		t.Error("the log has no orrery.user.message with steer true for \"turn left\"")
	}
	// With no run and no draft, a Ctrl-C says a second one quits, and a
	// second one within 2 s does.
	if _, cmd := l.m.Update(keyCtrlC); cmd != nil {
		if _, quit := cmd().(tea.QuitMsg); quit {
			t.Fatal("a Ctrl-C with no run in flight quit at once; want it to say a second one quits")
		}
	}
	l.until("the quit hint", contains("Ctrl-C again within 2 s quits"))
	_, cmd := l.m.Update(keyCtrlC)
	if cmd == nil {
		t.Fatal("a second Ctrl-C with no run in flight did nothing; want it to quit")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Error("a second Ctrl-C with no run in flight did not quit")
	}
}

// sessionOf reads the session id from the status line.
func sessionOf(t *testing.T, screen string) string {
	t.Helper()
	i := strings.Index(screen, "ses_")
	if i < 0 {
		t.Fatalf("no session id on the screen:\n%s", screen)
	}
	id := screen[i:]
	if j := strings.IndexAny(id, " ·"); j >= 0 {
		id = id[:j]
	}
	return id
}

// TestConsentAndDismiss answers a consent request with the keys, then
// focuses the chart with F6 and dismisses it with Esc on this screen only.
func TestConsentAndDismiss(t *testing.T) {
	l := startLive(t, "offline")
	l.until("an idle session", contains("orrery · ses_", "idle"))
	l.typeText("show me a chart of apples pears")
	l.press(keyEnter)
	l.until("the chart", contains("┌ Letters per word", "apples █"))
	l.until("the run's end", contains("idle"))

	l.typeText("run `echo hi`")
	l.press(keyEnter)
	l.until("the consent prompt", contains("⚠ CONSENT", "❯ [3] Deny", "paused: the request above takes the keys"))
	// Typing while it waits answers nothing and reaches no composer; the
	// highlight starts on Deny, which Enter takes.
	l.typeText("stay")
	s := l.until("the nudge", contains("answer this first", "❯ [3] Deny"))
	if strings.Contains(s, "› stay") || strings.Contains(s, "answered") {
		t.Errorf("the typed text went to the composer or answered the request:\n%s", s)
	}
	l.press(keyEnter)
	l.until("the denial", contains("consent denied", "idle"))
	s = l.m.Screen()
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "│ hi ") && strings.TrimSpace(strings.Split(line, "│ hi ")[1]) == "│" {
			t.Errorf("the command ran though consent was denied:\n%s", s)
		}
	}
	if !strings.Contains(s, "the person denied this call") {
		t.Errorf("the shell call's result does not say it was denied:\n%s", s)
	}
	// Each call carries its outcome: the chart's ui.show went, the shell
	// call was denied.
	if !strings.Contains(s, "⚙ shell ⊘ denied") || !strings.Contains(s, "⚙ ui.show ✓") {
		t.Errorf("the calls do not carry their outcomes (want ⚙ ui.show ✓ and ⚙ shell ⊘ denied):\n%s", s)
	}

	l.press(keyF6)
	l.until("the focused pane", contains("┏ Letters per word"))
	l.press(keyEsc)
	s = l.until("the pane dismissed", func(s string) bool { return !strings.Contains(s, "Letters per word") })
	if !strings.Contains(s, "dismissed offline-chart on this screen") {
		t.Errorf("no notice of the dismissal:\n%s", s)
	}
	// Dismissal is this client's: the kernel still holds the node.
	l.typeText("/ui")
	l.press(keyEnter)
	l.until("the /ui list", contains("offline-chart", "dismissed here"))
}

// TestLayoutCommands moves the agent's chart with /ui move, then hides it
// with /ui hide; both go to the kernel, so the state (and every client)
// changes.
func TestLayoutCommands(t *testing.T) {
	l := startLive(t, "offline")
	l.until("an idle session", contains("orrery · ses_", "idle"))
	l.typeText("show me a chart of apples pears")
	l.press(keyEnter)
	l.until("the chart in the pane", contains("┌ Letters per word", "idle"))
	l.typeText("/ui move offline-chart band")
	l.press(keyEnter)
	l.until("the chart in the band", func(s string) bool {
		return strings.Contains(s, "▸ Letters per word [agent]") && !strings.Contains(s, "┌ Letters per word")
	})
	l.typeText("/ui move nosuch band")
	l.press(keyEnter)
	l.until("the refusal", contains("nothing placed is called nosuch: /ui lists what is"))
	l.typeText("/ui hide offline-chart")
	l.press(keyEnter)
	l.until("the chart gone", func(s string) bool { return !strings.Contains(s, "Letters per word [agent]") })
	l.typeText("/ui")
	l.press(keyEnter)
	l.until("an empty /ui", contains("nothing is placed now"))
}

// TestResumePicker opens the picker, resumes the older session and
// redraws it from its log.
func TestResumePicker(t *testing.T) {
	l := startLive(t, "offline")
	l.until("an idle session", contains("orrery · ses_", "idle"))
	l.typeText("first session words")
	l.press(keyEnter)
	l.until("the answer", contains(`You said: "first session words"`, "idle"))
	first := sessionOf(t, l.m.Screen())
	l.typeText("/new")
	l.press(keyEnter)
	l.until("a new session", func(s string) bool { return !strings.Contains(s, first) && strings.Contains(s, "ses_") })

	m := tui.New(tui.Options{Client: l.cl, Resume: true})
	l.m = m
	m.SetSender(func(msg tea.Msg) { l.msgs <- msg })
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
	l.run(m.Init())
	s := l.until("the picker", contains("Resume a session", first))
	// Sessions are listed newest first: move down to the first one.
	if i, j := strings.Index(s, first), strings.Index(s, "❯ "); i < j {
		t.Fatalf("the picker does not list the newest session first:\n%s", s)
	}
	l.press(tea.KeyPressMsg{Code: tea.KeyDown})
	l.press(keyEnter)
	l.until("the first session redrawn from its log", contains("orrery · "+first, "› first session words", `You said: "first session words"`))
}

// TestMentionAttachesFile completes an @mention with Tab and sends the
// file as an attachment, on the host's own screen (an embedded kernel,
// whose workspace is this machine's).
func TestMentionAttachesFile(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("the secret is 42"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, "offline", func(o *tui.Options) { o.Workspace, o.Host = ws, true })
	l.until("an idle session", contains("orrery · ses_", "idle"))
	l.typeText("read @no")
	l.press(tea.KeyPressMsg{Code: tea.KeyTab})
	l.until("the completed mention", contains("› read @notes.txt"))
	l.press(keyEnter)
	s := l.until("the answer", contains("› read @notes.txt", "idle", "You said"))
	sess, err := l.k.Session(context.Background(), sessionOf(t, s))
	if err != nil {
		t.Fatal(err)
	}
	fs, _, err := sess.Read(context.Background(), 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range fs {
		if strings.Contains(string(f.Data), "orrery.user.message") && strings.Contains(string(f.Data), "File @notes.txt:\\nthe secret is 42") {
			found = true
		}
	}
	if !found {
		t.Error("no user message in the log carries notes.txt as an attachment")
	}
}

// TestLocalSessionOutsideRoots: a screen on this machine that is not the
// kernel's host (bare orrery on a data dir another process holds) asks for
// sessions in its own directory; when the kernel's roots do not take it,
// the session works in the kernel's own directory, and the screen says why.
func TestLocalSessionOutsideRoots(t *testing.T) {
	outside := "/"
	l := startLive(t, "offline", func(o *tui.Options) { o.Local, o.Workspace = true, outside })
	s := l.until("a session, and why it is not in this directory", contains("orrery · ses_", "attached", "works in the kernel's own directory, not /", "outside the workspace roots"))
	if !strings.Contains(s, "idle") {
		t.Errorf("the screen = %s, want an idle session", s)
	}
}

// TestConsentModal: a consent request takes the keys while it waits. A
// draft typed before it stays in the composer untouched; a command longer
// than the screen is wrapped whole, its end visible, never cut; letters
// answer nothing, ←/→ move the highlight, and Esc denies.
func TestConsentModal(t *testing.T) {
	l := startLive(t, "offline")
	l.until("an idle session", contains("orrery · ses_", "idle"))
	long := "echo " + strings.Repeat("word ", 30) + "; rm -rf ./important"
	l.typeText("run `" + long + "`")
	l.press(keyEnter)
	l.until("the consent prompt", contains("⚠ CONSENT", "❯ [3] Deny"))
	s := l.until("the whole command", contains("rm -rf ./important)?"))
	if strings.Contains(s, "…)?") {
		t.Errorf("the command is cut:\n%s", s)
	}
	l.typeText("yay")
	l.press(tea.KeyPressMsg{Code: tea.KeyLeft})
	l.until("the highlight moved", contains("❯ [2] Allow"))
	if strings.Contains(l.m.Screen(), "answered") {
		t.Errorf("a letter answered the request:\n%s", l.m.Screen())
	}
	l.press(keyEsc)
	l.until("the denial", contains("consent denied", "idle"))
	if s := l.m.Screen(); strings.Contains(s, "› yay") {
		t.Errorf("keys typed at the request reached the composer:\n%s", s)
	}
}

// TestCtrlCKeepsTheDraft: with no run in flight, a Ctrl-C puts a draft
// away rather than quitting with it (↑ brings it back), and the next
// Ctrl-C quits. Esc interrupts a run as the first Ctrl-C does, and a new
// session starts without the old one's notices.
func TestCtrlCKeepsTheDraft(t *testing.T) {
	l := startLive(t, scriptModel(t, "slow.json", map[string]any{"text": toks(200), "delay_ms": 20}))
	l.until("an idle session", contains("orrery · ses_", "idle"))

	l.typeText("go slowly")
	l.press(keyEnter)
	l.until("the run in flight", contains("tok tok", "running"))
	l.press(keyEsc)
	if s := l.m.Screen(); !strings.Contains(s, "cancelling the run (Esc)") {
		t.Errorf("Esc said nothing of the cancel it sent:\n%s", s)
	}
	s := l.until("the run cancelled by Esc", contains("the run was cancelled", "idle"))
	if strings.Contains(s, "cancelling the run") {
		t.Errorf("the screen still says it is cancelling once the log says cancelled:\n%s", s)
	}

	l.typeText("a draft worth keeping")
	_, cmd := l.m.Update(keyCtrlC)
	if cmd != nil {
		if _, quit := cmd().(tea.QuitMsg); quit {
			t.Fatal("Ctrl-C with a draft quit; want the draft put away")
		}
	}
	s = l.until("the draft put away", contains("the draft is put away (↑ brings it back)"))
	if strings.Contains(s, "› a draft worth keeping") {
		t.Errorf("the draft is still in the composer:\n%s", s)
	}
	l.press(tea.KeyPressMsg{Code: tea.KeyUp})
	l.until("the draft back", contains("› a draft worth keeping"))

	old := sessionOf(t, l.m.Screen())
	l.press(tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl}) // the line cleared
	l.typeText("/new")
	l.press(keyEnter)
	s = l.until("a new session", func(s string) bool {
		return strings.Contains(s, "idle") && strings.Contains(s, "ses_") && sessionOf(t, s) != old
	})
	if strings.Contains(s, "the draft is put away") || strings.Contains(s, "cancelling the run") {
		t.Errorf("the old session's notices followed into the new one:\n%s", s)
	}
	// With an empty composer and no run, a Ctrl-C says a second quits.
	if _, cmd = l.m.Update(keyCtrlC); cmd != nil {
		if _, quit := cmd().(tea.QuitMsg); quit {
			t.Fatal("a first Ctrl-C with an empty composer and no run quit; want it to say a second one quits")
		}
	}
	_, cmd = l.m.Update(keyCtrlC)
	if cmd == nil {
		t.Fatal("a second Ctrl-C with an empty composer and no run did nothing; want it to quit")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Error("a second Ctrl-C with an empty composer and no run did not quit")
	}
	// Ctrl-D on an empty composer quits too, as a shell does.
	_, cmd = l.m.Update(tea.KeyPressMsg{Code: 'd', Mod: tea.ModCtrl})
	if cmd == nil {
		t.Fatal("Ctrl-D on an empty composer did nothing; want it to quit")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Error("Ctrl-D on an empty composer did not quit")
	}
}

// TestStatusShowsTheRun: while a run is in flight the status line shows a
// spinner that turns, how long it has run, its model and its tokens so far
// (from the usage events its run.send asks for), and the clock goes on
// between frames.
func TestStatusShowsTheRun(t *testing.T) {
	l := startLive(t, scriptModel(t, "usage.json",
		map[string]any{"text": []string{"first "}, "tool_calls": []map[string]any{{"name": "echo", "args": map[string]any{"text": "x"}}}, "usage": map[string]any{"inputTokens": 10, "outputTokens": 5}},
		map[string]any{"text": toks(150), "delay_ms": 20},
	))
	l.until("an idle session", contains("orrery · ses_", "idle"))
	l.typeText("count")
	l.press(keyEnter)
	l.until("the model and its tokens", contains(" running ", "· 15 tokens · usage.json"))
	frames := map[string]bool{}
	l.until("the spinner turning", func(s string) bool {
		for _, f := range []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"} {
			if strings.Contains(s, "· "+f+" running ") {
				frames[f] = true
			}
		}
		return len(frames) >= 3
	})
	l.until("the clock going on", func(s string) bool {
		return strings.Contains(s, " running 1s") || strings.Contains(s, " running 2s")
	})
	l.until("the run's end", contains("· idle ·"))
}

// TestReconnects: when the kernel goes away the status says reconnecting
// and a notice says what you type is kept; when it is back the stream
// resumes, the status says attached again, and a prompt runs.
func TestReconnects(t *testing.T) {
	l := startLive(t, "offline")
	l.until("an idle session", contains("orrery · ses_", "attached", "idle"))
	l.stopServer()
	l.until("the loss said", contains("· reconnecting ·", "the connection to the kernel is lost", "reconnecting; what you type is kept"))
	l.typeText("a draft")
	srv := server.New(server.Config{Kernel: l.k, Logger: slog.New(slog.DiscardHandler), Roots: []string{os.TempDir()}})
	pl, err := server.ListenPipe(filepath.Join(l.dir, "k.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.ServePipeListener(ctx, pl) }()
	t.Cleanup(func() {
		stop()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close(cctx)
		<-served
	})
	s := l.until("the stream back", contains("· attached ·", "reconnected: the session goes on where it was"))
	if !strings.Contains(s, "› a draft") {
		t.Errorf("the draft typed while reconnecting is gone:\n%s", s)
	}
	l.press(tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl})
	l.typeText("hello")
	l.press(keyEnter)
	l.until("a prompt runs after the reconnect", contains(`You said: "hello"`, "idle"))
}

// TestPromptKeptWhenTheKernelIsGone: with the kernel gone, a prompt that
// cannot be sent comes back into the composer with why, instead of being
// lost, and the status says disconnected.
func TestPromptKeptWhenTheKernelIsGone(t *testing.T) {
	l := startLive(t, "offline")
	l.until("an idle session", contains("orrery · ses_", "attached", "idle"))
	l.stopServer()
	l.typeText("a prompt worth keeping")
	l.press(keyEnter)
	s := l.until("the refusal", contains("could not send: the kernel cannot be reached", "the prompt is back in the composer", "· disconnected ·"))
	if !strings.Contains(s, "› a prompt worth keeping") {
		t.Errorf("the prompt is not back in the composer:\n%s", s)
	}
}

// TestResumeRaisesNoStaleNotices opens a session again from its log: the
// notices its past raised (a cancel, consent answers) are not raised again,
// and a failure is shown only while it is the last run's.
func TestResumeRaisesNoStaleNotices(t *testing.T) {
	l := startLive(t, scriptModel(t, "past.json",
		map[string]any{"error": "the provider is overloaded"},
		map[string]any{"text": toks(5), "hang": true},
		map[string]any{"error": "the provider is down"},
	))
	l.until("an idle session", contains("orrery · ses_", "idle"))
	id := sessionOf(t, l.m.Screen())
	l.typeText("one")
	l.press(keyEnter)
	l.until("the first failure", contains("the run failed: the provider is overloaded", "idle"))

	// The client of a screen attaches a session once: a second screen
	// dials its own, as a second orrery --resume does.
	reopen := func(what string, ok func(string) bool) string {
		t.Helper()
		cl, err := client.Dial(context.Background(), "pipe:"+filepath.Join(l.dir, "k.sock"), client.Options{Client: "tui test",
			Draws: []string{protocol.DrawThread, protocol.DrawTools, protocol.DrawReasoning, protocol.DrawSurfaces, protocol.DrawConsent}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		r := &live{t: t, dir: l.dir, k: l.k, cl: cl, msgs: make(chan tea.Msg, 1024)}
		r.m = tui.New(tui.Options{Client: cl, Workspace: l.dir, Session: id})
		r.m.SetSender(func(msg tea.Msg) { r.msgs <- msg })
		t.Cleanup(func() { r.m.Update(tea.QuitMsg{}) })
		r.m.Update(tea.WindowSizeMsg{Width: 120, Height: 36})
		r.run(r.m.Init())
		return r.until(what, ok)
	}
	reopen("the last run's failure, resumed", contains("› one", "the run failed: the provider is overloaded", "idle"))

	l.typeText("two")
	l.press(keyEnter)
	l.until("the run in flight", contains("tok tok", "running"))
	l.press(keyEsc)
	l.until("the run cancelled", contains("the run was cancelled", "idle"))
	s := reopen("the second run, resumed", contains("› two", "tok tok", "idle"))
	for _, stale := range []string{"cancelled", "cancelling", "overloaded"} {
		if strings.Contains(s, stale) {
			t.Errorf("the resumed screen raises the past's %q again:\n%s", stale, s)
		}
	}

	l.typeText("three")
	l.press(keyEnter)
	l.until("the last failure", contains("the run failed: the provider is down", "idle"))
	s = reopen("the last failure, resumed", contains("› three", "the run failed: the provider is down", "idle"))
	if strings.Contains(s, "overloaded") {
		t.Errorf("an earlier run's failure is raised again:\n%s", s)
	}
}
