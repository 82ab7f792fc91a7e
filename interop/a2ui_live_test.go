package interop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/dialect/a2ui"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/ui"
)

// liveWait bounds each wait for the page.
const liveWait = 30 * time.Second

// TestA2UIRendererLive draws, with the official @a2ui/lit renderer in
// headless Chromium, a component the kernel placed, following the
// session's A2UI face (GET /events?a2ui=1) as it changes: the drawn text
// follows each data update, the button's action goes back with a2ui.action
// and reaches the owner (the agent's note), and hiding the component
// removes its surface. Every operation the page received passes the
// official v0.9 schema.
func TestA2UIRendererLive(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	browserPath, esbuild := requireChromium(t, dir)
	bundle := filepath.Join(t.TempDir(), "live.js")
	if out, err := exec.Command(esbuild, filepath.Join(dir, "a2ui", "live.mjs"), "--bundle", "--format=esm", "--log-level=warning", "--outfile="+bundle).CombinedOutput(); err != nil {
		t.Fatalf("esbuild: %v\n%s", err, out)
	}

	st, err := sqlite.Open(filepath.Join(t.TempDir(), "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(kernel.Config{Store: st, Models: models.Resolve, DefaultModel: models.Default, Tools: tool.Builtins(), DebugActor: true})
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Kernel: k})
	// The page and the Orrery server share one origin.
	mux := http.NewServeMux()
	mux.HandleFunc("/a2ui/live.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		http.ServeFile(w, r, bundle)
	})
	mux.HandleFunc("/a2ui/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><meta charset="utf-8"></head><body><div id="app"></div><script type="module" src="/a2ui/live.js"></script></body></html>`)
	})
	mux.Handle("/", srv)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close(ctx)
		hs.Close()
		k.Close(ctx)
		st.Close()
	})

	ctx := context.Background()
	s, err := k.CreateSession(ctx, kernel.SessionOptions{ID: "live-a2ui"})
	if err != nil {
		t.Fatal(err)
	}
	structure := `{"type":"stack","children":[
	  {"type":"text","value":"${/left} tasks left"},
	  {"type":"progress","value":"${/done}","max":5,"label":"tests"},
	  {"type":"button","label":"Deploy ${/env}","on":{"press":"deploy"}}]}`
	if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "deploy", Placement: "pane.right", Structure: json.RawMessage(structure), Data: json.RawMessage(`{"left":3,"done":4,"env":"staging"}`)}); err != nil {
		t.Fatal(err)
	}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browserPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	defer cancelTab()
	eval := func(expr string, out any) {
		t.Helper()
		cctx, cancel := context.WithTimeout(tab, liveWait)
		defer cancel()
		v, err := chromedp.Run(cctx, chromedp.Evaluate[json.RawMessage](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		if out != nil {
			if err := json.Unmarshal(v, out); err != nil {
				t.Fatalf("evaluate %s = %s: %v", expr, v, err)
			}
		}
	}
	until := func(what, expr string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(tab, liveWait+5*time.Second)
		defer cancel()
		if _, err := chromedp.Run(cctx, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingTimeout(liveWait))); err != nil {
			var text string
			var errs []string
			eval(`window.a2uiPage ? window.a2uiPage.text() : ""`, &text)
			eval(`window.a2uiPage ? window.a2uiPage.errors : []`, &errs)
			t.Fatalf("wait until %s: %v (drawn %q, page errors %q)", what, err, text, errs)
		}
	}
	const node = "placed:agent:deploy"
	drawn := `window.a2uiPage.text(` + fmt.Sprintf("%q", node) + `)`

	if _, err := chromedp.Run(tab, chromedp.Navigate(hs.URL+"/a2ui/?session="+s.ID())); err != nil {
		t.Fatalf("open the page: %v", err)
	}
	until("the component is drawn", drawn+`.includes("3 tasks left") && `+drawn+`.includes("Deploy staging")`)
	var text string
	eval(drawn, &text)
	if !strings.Contains(text, "tests [████████████████░░░░] 4/5 (80%)") {
		t.Errorf("drawn %q, want the progress in its text form", text)
	}

	// The owner changes the data: the drawn surface follows, in place.
	if err := s.Data(ctx, ui.OwnerAgent, "deploy", kernel.DataUpdate{Set: json.RawMessage(`{"left":1,"done":5,"env":"prod"}`)}); err != nil {
		t.Fatal(err)
	}
	until("the update is drawn", drawn+`.includes("1 tasks left") && `+drawn+`.includes("Deploy prod") && !`+drawn+`.includes("3 tasks left")`)
	eval(drawn, &text)
	if !strings.Contains(text, "5/5 (100%)") {
		t.Errorf("drawn %q after the update, want the progress at 5/5", text)
	}
	var surfaces int
	eval(`document.querySelectorAll("a2ui-surface").length`, &surfaces)
	if surfaces != 1 {
		t.Errorf("the page draws %d surfaces, want the one component's", surfaces)
	}

	// The person presses the button: the renderer's action goes back
	// with a2ui.action and reaches the agent as a note.
	head := settleHead(t, s)
	var pressed bool
	eval(`window.a2uiPage.press(`+fmt.Sprintf("%q", node)+`)`, &pressed)
	if !pressed {
		t.Fatal("the drawn component has no button to press")
	}
	until("the action is answered", `window.a2uiPage.replies.length === 1`)
	var replies []struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	}
	eval(`window.a2uiPage.replies`, &replies)
	if replies[0].Status != 200 || string(replies[0].Body) != "{}" {
		t.Errorf("a2ui.action answered %d %s, want 200 {}", replies[0].Status, replies[0].Body)
	}
	settleHead(t, s)
	frames, _, err := s.Read(ctx, head, 0)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, f := range frames {
		ev, err := protocol.DecodeEvent(f.Data)
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := ev.(*protocol.Custom); ok && c.Name == kernel.HostMessageEvent {
			var m kernel.HostMessage
			json.Unmarshal(c.Value, &m)
			notes = append(notes, m.Text)
		}
	}
	if want := []string{"[ext:ui] deploy: deploy"}; !slices.Equal(notes, want) {
		t.Errorf("notes after the press = %q, want %q", notes, want)
	}

	// Hidden, the surface goes.
	if err := s.Hide(ctx, ui.OwnerAgent, "deploy"); err != nil {
		t.Fatal(err)
	}
	until("the surface is removed", `document.querySelectorAll("a2ui-surface").length === 0`)

	var ops []json.RawMessage
	eval(`window.a2uiPage.ops`, &ops)
	var errs []string
	eval(`window.a2uiPage.errors`, &errs)
	if len(errs) > 0 {
		t.Errorf("the page reported errors: %q", errs)
	}
	if len(ops) < 7 {
		t.Errorf("the page received %d operations, want the first drawing, the update and the removal", len(ops))
	}
	for _, op := range ops {
		if err := a2ui.CheckSchema(op); err != nil {
			t.Errorf("operation %s fails the official v0.9 schema: %v", op, err)
		}
	}
}

// settleHead waits until every frame the session has sequenced is
// published, and returns its head.
func settleHead(t *testing.T, s *kernel.Session) uint64 {
	t.Helper()
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(liveWait)
	for s.Head() < info.Head {
		if time.Now().After(deadline) {
			t.Fatalf("head stayed at %d, want %d", s.Head(), info.Head)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return info.Head
}
