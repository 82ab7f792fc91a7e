package ext_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/ext"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/ui"
)

// recorder is a real model (the one spec names) that keeps every request
// it was sent, so a test can read what the model read.
type recorder struct {
	agent.Provider
	mu   sync.Mutex
	reqs []agent.Request
}

func (r *recorder) Stream(ctx context.Context, req agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.Provider.Stream(ctx, req, emit)
}

func (r *recorder) requests() []agent.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// recording makes the kernel's model a recorder of models.Resolve(spec).
func recording(rec *recorder) func(*kernel.Config) {
	return func(c *kernel.Config) {
		c.Models = func(spec string) (agent.Provider, error) {
			p, err := models.Resolve(spec)
			if err != nil {
				return nil, err
			}
			rec.Provider = p
			return rec, nil
		}
	}
}

// call has rogue (mode "api") make the call named action, and returns the
// outcome it reported in its state key action.
func (w *world) call(t *testing.T, action string) any {
	t.Helper()
	owner, _ := ui.ExtOwner("rogue")
	if err := w.h.Intent(context.Background(), kernel.Intent{Session: w.s.ID(), Owner: owner, ID: "api", Action: action}); err != nil {
		t.Fatalf("Intent(%s) = %v", action, err)
	}
	return stateValue(t, w.w.until(stateKey("ext:rogue/"+action)))
}

// runTools runs one offline turn whose prompt names tool, and returns the
// tools the model was offered and the result of the call, if it made one.
func (w *world) runTools(t *testing.T, rec *recorder, tool string) (offered []string, result string) {
	t.Helper()
	n := len(rec.requests())
	if _, err := w.s.Send(context.Background(), kernel.SendInput{Text: "please call " + tool}); err != nil {
		t.Fatal(err)
	}
	for {
		ev := w.w.next()
		if r, ok := ev.(*protocol.ToolCallResult); ok {
			result = r.Content.String()
		}
		if ev.EventType() == protocol.TypeRunFinished || ev.EventType() == protocol.TypeRunError {
			break
		}
	}
	for _, spec := range rec.requests()[n].Tools {
		offered = append(offered, spec.Name)
	}
	return offered, result
}

func TestToolsHideShowRegisterUnregister(t *testing.T) {
	rec := &recorder{}
	m := rogue(t, "api", "[[provides.tools]]\nname = \"rogue_echo\"\ndescription = \"echoes\"\n")
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{m}}, func(c *kernel.Config) {
		recording(rec)(c)
		c.AutoApprove = true
	})
	w.w.until(placed("main", "up"))

	offered, result := w.runTools(t, rec, "rogue_echo")
	if !slices.Contains(offered, "rogue_echo") || !strings.HasPrefix(result, "rogue got") {
		t.Fatalf("before tools/hide: offered %v, result %q; want rogue_echo offered and called", offered, result)
	}

	if got := w.call(t, "hide"); got != "ok" {
		t.Fatalf("tools/hide = %v", got)
	}
	if got := w.s.ExtToolNames(); len(got) != 0 {
		t.Errorf("ExtToolNames() after tools/hide = %v, want none", got)
	}
	offered, result = w.runTools(t, rec, "rogue_echo")
	if slices.Contains(offered, "rogue_echo") || result != "" {
		t.Errorf("after tools/hide: offered %v, result %q; want rogue_echo neither offered nor called", offered, result)
	}

	if got := w.call(t, "show"); got != "ok" {
		t.Fatalf("tools/show = %v", got)
	}
	offered, _ = w.runTools(t, rec, "rogue_echo")
	if !slices.Contains(offered, "rogue_echo") {
		t.Errorf("after tools/show: offered %v, want rogue_echo again", offered)
	}

	if got := w.call(t, "register"); got != "ok" {
		t.Fatalf("ext/register = %v", got)
	}
	if got := w.s.ExtToolNames(); !slices.Equal(got, []string{"rogue_echo", "rogue_extra"}) {
		t.Errorf("ExtToolNames() after ext/register = %v, want rogue_echo and rogue_extra", got)
	}
	offered, result = w.runTools(t, rec, "rogue_extra")
	if !slices.Contains(offered, "rogue_extra") || result != "extra ran" {
		t.Errorf("after ext/register: offered %v, result %q; want rogue_extra called and answered by the extension", offered, result)
	}
	reqs := rec.requests()
	for _, spec := range reqs[len(reqs)-1].Tools {
		if spec.Name == "rogue_extra" && (!spec.ReadOnly || !strings.Contains(string(spec.Parameters), `"n"`)) {
			t.Errorf("registered tool = %+v, want read_only and its parameters as sent", spec)
		}
	}

	if got := w.call(t, "unregister"); got != "ok" {
		t.Fatalf("ext/unregister = %v", got)
	}
	if got := w.s.ExtToolNames(); !slices.Equal(got, []string{"rogue_echo"}) {
		t.Errorf("ExtToolNames() after ext/unregister = %v, want rogue_echo", got)
	}
	// A second unregister is refused with the fix; so is a declared tool.
	if got := fmt.Sprint(w.call(t, "unregister")); !strings.Contains(got, "registered no tool") {
		t.Errorf("ext/unregister of a tool not registered = %v, want a refusal", got)
	}
	offered, _ = w.runTools(t, rec, "rogue_extra")
	if slices.Contains(offered, "rogue_extra") {
		t.Errorf("after ext/unregister: offered %v, want no rogue_extra", offered)
	}
}

func TestSessionAppendReadAndModelComplete(t *testing.T) {
	rec := &recorder{}
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{rogue(t, "api", "")}}, recording(rec))
	w.w.until(placed("main", "up"))

	// session/append: a host message that starts no turn, which the model
	// reads on its next one.
	if got := w.call(t, "append"); got != "ok" {
		t.Fatalf("session/append = %v", got)
	}
	for _, ev := range w.w.all {
		if ev.EventType() == protocol.TypeRunStarted {
			t.Fatal("session/append started a run")
		}
	}
	if len(rec.requests()) != 0 {
		t.Fatalf("the model was called %d times before any prompt", len(rec.requests()))
	}
	if _, err := w.s.Send(context.Background(), kernel.SendInput{Text: "how is the build?"}); err != nil {
		t.Fatal(err)
	}
	w.w.until(func(ev protocol.Event) bool { return ev.EventType() == protocol.TypeRunFinished })
	reqs := rec.requests()
	if len(reqs) == 0 {
		t.Fatal("the model was not called")
	}
	var read []string
	for _, m := range reqs[0].Messages {
		read = append(read, string(m.Role)+": "+m.Content.String())
	}
	if !slices.ContainsFunc(read, func(s string) bool { return strings.Contains(s, "[ext:rogue] the build is green") }) {
		t.Errorf("the model read %q, want the appended [ext:rogue] the build is green", read)
	}
	if i := slices.IndexFunc(read, func(s string) bool { return strings.Contains(s, "how is the build?") }); i < 0 || strings.Contains(read[i], "build is green") {
		t.Errorf("the model read %q, want the person's prompt apart from the host message", read)
	}

	// session/read: the frames exactly as logged, and the head.
	var got struct {
		Frames []json.RawMessage `json:"frames"`
		Head   uint64            `json:"head"`
	}
	raw, _ := json.Marshal(w.call(t, "read"))
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("session/read answered %s: %v", raw, err)
	}
	frames, _, err := w.s.Read(context.Background(), 0, int(got.Head))
	if err != nil {
		t.Fatal(err)
	}
	if got.Head == 0 || len(got.Frames) != int(got.Head) || len(frames) != len(got.Frames) {
		t.Fatalf("session/read = %d frames, head %d; the log holds %d up to that head", len(got.Frames), got.Head, len(frames))
	}
	for i, f := range frames {
		var a, b any
		_ = json.Unmarshal(f.Data, &a)
		_ = json.Unmarshal(got.Frames[i], &b)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("session/read frame %d = %s, want the logged %s", i+1, got.Frames[i], f.Data)
		}
	}

	// model/complete: the session's model (offline), with no tools, not
	// logged.
	head := w.s.Head()
	text := fmt.Sprint(w.call(t, "complete"))
	if !strings.Contains(text, `You said: "summarize the build"`) {
		t.Errorf("model/complete = %q, want the offline model's answer to the prompt", text)
	}
	last := rec.requests()[len(rec.requests())-1]
	if len(last.Tools) != 0 || last.Messages[len(last.Messages)-1].Content.String() != "summarize the build" {
		t.Errorf("model/complete sent %+v, want the prompt alone and no tools", last)
	}
	frames, _, _ = w.s.Read(context.Background(), head, 100)
	for _, f := range frames {
		if f.Type == string(protocol.TypeRunStarted) || f.Type == string(protocol.TypeTextMessageContent) {
			t.Errorf("model/complete was logged: %s", f.Data)
		}
	}
}

func TestParkedExtensionRestartsOnDemand(t *testing.T) {
	m := manifest(t, `[extension]
api = "orrery-ext/1"
name = "rogue"
version = "0.1.0"
runtime = "binary"
command = "x"

[[provides.placements]]
id = "main"
placement = "pane.left"

[[provides.tools]]
name = "rogue_echo"
description = "echoes"
`, filepath.Join(bin, "rogue"), "api")
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{m}, Heartbeat: 20 * time.Millisecond, Idle: 200 * time.Millisecond},
		func(c *kernel.Config) { c.AutoApprove = true })
	w.w.until(placed("main", "up"))
	first := waitState(t, w, ext.StateRunning).PID

	// Quiet: it parks, with no notice and nothing drawn as stopped.
	waitState(t, w, ext.StateParked)
	if st := w.h.List(w.s.ID())[0]; st.PID != 0 || st.Restarts != 0 || st.Error != "" {
		t.Errorf("List() parked = %+v, want no process, no restart, no error", st)
	}

	// A tool call starts it again.
	if _, err := w.s.Send(context.Background(), kernel.SendInput{Text: "please call rogue_echo"}); err != nil {
		t.Fatal(err)
	}
	if got := toolResult(w.w).Content.String(); !strings.HasPrefix(got, "rogue got") {
		t.Errorf("tool result after parking = %q, want the extension's answer", got)
	}
	second := w.h.List(w.s.ID())[0].PID
	if second == 0 || second == first {
		t.Errorf("PID after the tool call = %d (first %d), want a new process", second, first)
	}

	// Parked again, a committed action starts it too.
	waitState(t, w, ext.StateParked)
	if got := w.call(t, "append"); got != "ok" {
		t.Errorf("ui/event after parking: %v", got)
	}
	for _, ev := range w.w.all {
		if notice("stopped")(ev) {
			t.Errorf("parking was reported as a stop: %s", ev.(*protocol.Custom).Value)
		}
	}
}

// noneManifest is a runtime "none" extension whose placement draws its
// declared component, with a button whose press runs an action.
func noneManifest(t *testing.T) *ext.Manifest {
	return manifest(t, `[extension]
api = "orrery-ext/1"
name = "tests"
version = "0.1.0"
runtime = "none"

[[provides.placements]]
id = "panel"
placement = "band"
title = "Tests"
component = "panel"
data = {label = "Run the tests"}

[[provides.components]]
name = "panel"
structure = '{"type":"button","label":"${/label}","on":{"press":"rerun"}}'
schema = '{"type":"object","properties":{"label":{"type":"string"}}}'

[provides.actions.rerun]
command = ["sh", "-c", "{ cat; echo; echo \"$ORRERY_ACTION $ORRERY_ID $ORRERY_EXT\"; } > ran.txt"]

[provides.actions.broken]
command = ["sh", "-c", "exit 3"]
`)
}

func TestRuntimeNoneActionRuns(t *testing.T) {
	ws := t.TempDir()
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{noneManifest(t)}, Workspace: ws}, nil)
	w.w.until(placed("panel", "Run the tests"))
	if st := w.h.List(w.s.ID()); len(st) != 1 || st[0].State != ext.StateNone {
		t.Fatalf("List() = %+v, want tests with no process", st)
	}
	if err := w.s.Intent(context.Background(), "placed:ext:tests:panel", "rerun", json.RawMessage(`{"which":"unit"}`)); err != nil {
		t.Fatalf("Intent(rerun) = %v", err)
	}
	w.w.until(notice("action rerun of extension tests finished"))
	got, err := os.ReadFile(filepath.Join(ws, "ran.txt"))
	if err != nil {
		t.Fatalf("the action did not run in the workspace: %v", err)
	}
	if want := "{\"which\":\"unit\"}\nrerun panel tests\n"; string(got) != want {
		t.Errorf("the action wrote %q, want %q (the value on stdin, then its environment)", got, want)
	}
	// An action the manifest declares but the structure does not emit is
	// refused by the kernel, before any command runs.
	if err := w.s.Intent(context.Background(), "placed:ext:tests:panel", "broken", nil); err == nil {
		t.Error("Intent(broken) = nil, want a refusal: the button emits only rerun")
	}
	// A failing command is a warning notice naming where its output went.
	owner, _ := ui.ExtOwner("tests")
	if err := w.h.RunAction(context.Background(), kernel.Intent{Session: w.s.ID(), Owner: owner, ID: "panel", Action: "broken"}); err != nil {
		t.Fatalf("RunAction(broken) = %v", err)
	}
	w.w.until(notice("action broken of extension tests failed (exit status 3): see orrery ext logs tests"))
}

// TestIntentOverControl presses a component's button the way a client does,
// with ui.intent on POST /control, and sees the press reach the extension
// as ui/event (it answers with new data).
func TestIntentOverControl(t *testing.T) {
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{example(t, "button")}}, nil)
	w.w.until(placed("counter", "pressed 0 times"))
	srv := server.New(server.Config{Kernel: w.k})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		hs.Close()
	})
	control := func(body string) (int, string) {
		resp, err := http.Post(hs.URL+"/control", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	press := fmt.Sprintf(`{"t":"ui.intent","id":"q1","session":%q,"node":"placed:ext:button:counter","action":"press"}`, w.s.ID())
	if code, body := control(press); code != http.StatusOK {
		t.Fatalf("ui.intent = %d %s, want 200", code, body)
	}
	w.w.untilData("ext:button", "counter", func(d map[string]any) bool { return d["presses"] == float64(1) })

	// Unloaded, the extension is not running: the press is refused with
	// the fix.
	if err := w.h.Unload(context.Background(), w.s.ID(), "button"); err != nil {
		t.Fatal(err)
	}
	w.w.until(custom(kernel.UnplacedEvent, nil))
	code, body := control(press)
	if code == http.StatusOK || !strings.Contains(body, "nothing is placed") {
		t.Errorf("ui.intent after unload = %d %s, want a refusal", code, body)
	}
}

func TestExtListAndRestartOverControl(t *testing.T) {
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{rogue(t, "plain", "")}}, nil)
	first := waitState(t, w, ext.StateRunning).PID
	srv := server.New(server.Config{Kernel: w.k, Extensions: w.h})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		hs.Close()
	})
	control := func(body string, out any) (int, string) {
		resp, err := http.Post(hs.URL+"/control", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		if out != nil {
			if err := json.Unmarshal(b.Bytes(), out); err != nil {
				t.Fatalf("%s answered %s: %v", body, b.String(), err)
			}
		}
		return resp.StatusCode, b.String()
	}
	var list protocol.ExtListReply
	if code, body := control(fmt.Sprintf(`{"t":"ext.list","id":"q","session":%q}`, w.s.ID()), &list); code != http.StatusOK ||
		len(list.Extensions) != 1 || list.Extensions[0].Name != "rogue" || list.Extensions[0].State != ext.StateRunning || list.Extensions[0].PID != first {
		t.Fatalf("ext.list = %d %s, want rogue running as pid %d", code, body, first)
	}
	if code, body := control(fmt.Sprintf(`{"t":"ext.restart","id":"q","session":%q,"name":"rogue"}`, w.s.ID()), nil); code != http.StatusOK {
		t.Fatalf("ext.restart = %d %s, want 200", code, body)
	}
	if st := waitState(t, w, ext.StateRunning); st.PID == first || st.PID == 0 {
		t.Errorf("after ext.restart the pid is %d (was %d), want a new process", st.PID, first)
	}
	if code, body := control(fmt.Sprintf(`{"t":"ext.restart","id":"q","session":%q,"name":"ghost"}`, w.s.ID()), nil); code != http.StatusBadRequest || !strings.Contains(body, "orrery ext list") {
		t.Errorf("ext.restart of an unknown extension = %d %s, want 400 naming orrery ext list", code, body)
	}
	if code, _ := control(`{"t":"ext.list","id":"q","session":"nosuch"}`, nil); code != http.StatusNotFound {
		t.Errorf("ext.list of an unknown session = %d, want 404", code)
	}
}

func TestHubMethods(t *testing.T) {
	hb := hub.New()
	w := newWorld(t, "offline", ext.Config{Extensions: []*ext.Manifest{rogue(t, "hub", "")}, Hub: hb}, nil)
	if got := stateValue(t, w.w.until(stateKey("ext:rogue/subscribed"))); got != "<nil>" {
		t.Fatalf("hub/subscribe = %v", got)
	}
	got := make(chan hub.Message, 4)
	detach, err := hb.Attach("client://test", func(m hub.Message) { got <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer detach()

	// A publish on the topic reaches the extension (hub/message), which
	// posts it back (hub/post).
	rep, err := hb.Publish("client://test", "builds", json.RawMessage(`{"n":1}`), "")
	if err != nil || rep.Delivered != 1 {
		t.Fatalf("Publish() = %+v, %v; want delivered to ext://rogue", rep, err)
	}
	select {
	case m := <-got:
		if m.From != "ext://rogue" || string(m.Payload) != `{"got":{"n":1},"topic":"builds"}` {
			t.Errorf("the extension posted %+v, want its copy of the relay from ext://rogue", m)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the extension posted nothing back")
	}

	// A send waits for the extension's hub/reply.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reply, err := hb.Send(ctx, "client://test", "ext://rogue", json.RawMessage(`"ping"`), 0, "")
	if err != nil || string(reply.Payload) != `"pong"` {
		t.Errorf("Send() = %+v, %v; want the extension's pong", reply, err)
	}

	// Unloaded, the extension gives its seat up.
	if err := w.h.Unload(context.Background(), w.s.ID(), "rogue"); err != nil {
		t.Fatal(err)
	}
	if err := hb.Post("client://test", "ext://rogue", json.RawMessage(`1`)); err == nil {
		t.Error("Post() to an unloaded extension = nil, want nobody at that address")
	}
}
