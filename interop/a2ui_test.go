package interop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/dialect/a2ui"
)

// requireChromium returns the browser and the esbuild of interop/a2ui, or
// skips (fails under CI) when either is missing.
func requireChromium(t *testing.T, dir string) (browser, esbuild string) {
	t.Helper()
	var err error
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if browser, err = exec.LookPath(name); err == nil {
			break
		}
	}
	esbuild = filepath.Join(dir, "a2ui", "node_modules", ".bin", "esbuild")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "a2ui", "node_modules", "@a2ui", "lit", "package.json"))
	}
	if err == nil {
		_, err = os.Stat(esbuild)
	}
	if err != nil {
		msg := fmt.Sprintf("the A2UI rendering test needs chromium and interop/a2ui/node_modules (%v): install chromium and run npm ci in interop/a2ui/", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return browser, esbuild
}

var resultPre = regexp.MustCompile(`(?s)<pre id="result">(.*?)</pre>`)

// TestA2UIRenderer draws a component projected by dialect/a2ui with the
// official @a2ui/lit renderer in headless Chromium, presses its button, and
// turns the action the renderer sends back into the owner's intent.
func TestA2UIRenderer(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	browser, esbuild := requireChromium(t, dir)
	bundle := filepath.Join(t.TempDir(), "bundle.js")
	if out, err := exec.Command(esbuild, filepath.Join(dir, "a2ui", "render.mjs"), "--bundle", "--format=esm", "--log-level=warning", "--outfile="+bundle).CombinedOutput(); err != nil {
		t.Fatalf("esbuild: %v\n%s", err, out)
	}
	structure := `{"type":"stack","children":[
	  {"type":"text","value":"${/left} tasks left"},
	  {"type":"progress","value":"${/done}","max":5,"label":"tests"},
	  {"type":"button","label":"Deploy ${/env}","on":{"press":"deploy"}}]}`
	msgs, err := a2ui.ProjectComponent("placed:agent:deploy", json.RawMessage(structure), json.RawMessage(`{"left":3,"done":4,"env":"prod"}`))
	if err != nil {
		t.Fatal(err)
	}
	msgJSON, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	page := `<!doctype html><html><head><meta charset="utf-8"></head><body><div id="app"></div><pre id="result"></pre>` +
		`<script id="messages" type="application/json">` + strings.ReplaceAll(string(msgJSON), "</", `<\/`) + `</script>` +
		`<script type="module" src="/bundle.js"></script></body></html>`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bundle.js" {
			w.Header().Set("Content-Type", "text/javascript")
			http.ServeFile(w, r, bundle)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(page))
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=20000", "--dump-dom", srv.URL+"/")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, out)
	}
	m := resultPre.FindSubmatch(out)
	if m == nil || len(m[1]) == 0 {
		t.Fatalf("the page wrote no result; DOM:\n%s", out)
	}
	var res struct {
		OK      bool              `json:"ok"`
		Error   string            `json:"error"`
		Text    []string          `json:"text"`
		Tags    []string          `json:"tags"`
		Pressed bool              `json:"pressed"`
		Actions []json.RawMessage `json:"actions"`
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &res); err != nil {
		t.Fatalf("result %s: %v", m[1], err)
	}
	if !res.OK {
		t.Fatalf("the renderer failed: %s", res.Error)
	}
	text := strings.Join(res.Text, " | ")
	for _, want := range []string{"3 tasks left", "tests [████████████████░░░░] 4/5 (80%)", "Deploy prod"} {
		if !strings.Contains(text, want) {
			t.Errorf("drawn text %q lacks %q", text, want)
		}
	}
	if !strings.Contains(strings.Join(res.Tags, " "), "button") {
		t.Errorf("drawn elements %v have no button", res.Tags)
	}
	if !res.Pressed || len(res.Actions) != 1 {
		t.Fatalf("pressed=%v, actions %s; want one action from the button", res.Pressed, res.Actions)
	}
	t.Logf("the renderer sent %s", res.Actions[0])
	act, err := a2ui.ParseAction(res.Actions[0])
	if err != nil {
		t.Fatalf("ParseAction(%s) = %v", res.Actions[0], err)
	}
	in, err := a2ui.ToIntent(act, func(id string) ([]string, bool) {
		return []string{"deploy"}, id == "placed:agent:deploy"
	})
	if err != nil {
		t.Fatalf("ToIntent() = %v", err)
	}
	if in.Node != "placed:agent:deploy" || in.Action != "deploy" {
		t.Errorf("intent = %+v, want deploy on placed:agent:deploy", in)
	}
}
