package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/acp"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/auth"
	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/internal/logbuf"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// waitFor bounds each wait on the page. It only guards against a hang: no
// test asserts how fast anything happens.
const waitFor = 30 * time.Second

// offlineOnly resolves the offline model and refuses every other spec.
func offlineOnly(spec string) (agent.Provider, error) {
	if spec != "" && spec != "offline" {
		return nil, fmt.Errorf("model %q is not served by this test: use offline", spec)
	}
	return models.Resolve("offline")
}

// rig is a real kernel, with the coding tools in a fresh workspace, on a
// real SQLite file, behind the real server on a loopback listener. It
// records the bodies of POST /control requests, to show what the page
// sent.
type rig struct {
	k         *kernel.Kernel
	srv       *server.Server
	http      *httptest.Server
	workspace string
	tokens    *auth.Store
	logs      *logbuf.Buffer

	mu       sync.Mutex
	controls []map[string]any // guarded by mu
	urls     []string         // every request's URL, guarded by mu

	// intents are the committed actions the kernel delivered to
	// extension owners.
	intents chan kernel.Intent

	// liveDown, while set, refuses GET /api/live with 503, as a kernel
	// that cannot be reached would; lives counts the page's GET /api/live
	// requests.
	liveDown atomic.Bool
	lives    atomic.Int32
}

// intentSink is the extension host's side of intents, for the tests: it
// records what reaches an owner.
type intentSink chan kernel.Intent

func (c intentSink) Intent(ctx context.Context, in kernel.Intent) error {
	select {
	case c <- in:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c intentSink) RunAction(ctx context.Context, in kernel.Intent) error { return c.Intent(ctx, in) }

type rigOptions struct {
	// remote makes every request look as if it came from off loopback.
	remote bool
	// acp serves the model "acp:test" with the ACP test agent
	// (agent/acp/testdata/agent), a real node process.
	acp bool
	// armed leaves the trust boundary as the only defence, as on a machine
	// where every client is trusted to run commands: a request may name
	// any spec ([server] allow_agent_commands), an acp:COMMAND spec runs
	// COMMAND with sh -c, and [permissions] allows every shell call of
	// touch. A request that got past the boundary could run a command.
	armed bool
	// seen, when set, is told of every request with the status the server
	// answered, before the answer's first byte is sent.
	seen func(req *http.Request, status int)
	// dataDir, when set, is where the log is kept (a test's own disk);
	// otherwise a fresh temporary dir.
	dataDir string
}

// acpAgentDir holds the ACP test agent.
const acpAgentDir = "../agent/acp/testdata/agent"

// acpTestAgent returns the ACP test agent as a provider whose updates
// outside a turn are appended to the kernel *k holds, or skips the test
// when node or the agent's packages are missing (fails when
// ORRERY_REQUIRE_NODE is set).
func acpTestAgent(t *testing.T, k **kernel.Kernel) agent.Provider {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(acpAgentDir, "node_modules/@agentclientprotocol/sdk/package.json"))
	}
	if err != nil {
		if os.Getenv("ORRERY_REQUIRE_NODE") != "" {
			t.Fatalf("node and the ACP test agent are required: %v; run npm ci --prefix agent/acp/testdata/agent", err)
		}
		t.Skipf("node or the ACP test agent is missing (%v): run npm ci --prefix agent/acp/testdata/agent", err)
	}
	script, _ := filepath.Abs(filepath.Join(acpAgentDir, "agent.mjs"))
	a, err := acp.New(acp.Config{Name: "test", Command: node, Args: []string{script},
		CancelTimeout: time.Second, StopTimeout: time.Second,
		Outside: func(ctx context.Context, session string, evs ...protocol.Event) error {
			s, err := (*k).Session(ctx, session)
			if err != nil {
				return err
			}
			return s.Append(ctx, evs...)
		}})
	if err != nil {
		t.Fatalf("acp.New() = %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Close(ctx)
	})
	return a
}

func newRig(t *testing.T, opts rigOptions) *rig {
	t.Helper()
	r := &rig{logs: &logbuf.Buffer{}, workspace: t.TempDir(), intents: make(chan kernel.Intent, 16)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server logs:\n%s", r.logs.String())
		}
	})
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := os.WriteFile(filepath.Join(r.workspace, "notes.txt"), []byte("apples\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := opts.dataDir
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatalf("sqlite.Open() = %v, want nil", err)
	}
	resolve := offlineOnly
	if opts.armed {
		resolve = shAgents(t, log)
	}
	if opts.acp {
		a := acpTestAgent(t, &r.k)
		next := resolve
		resolve = func(spec string) (agent.Provider, error) {
			if spec == "acp:test" {
				return a, nil
			}
			return next(spec)
		}
	}
	var rules consent.Rules
	policy := models.RequestPolicy{Defined: []string{"acp:test"}}
	if opts.armed {
		rules.Allow = []string{"shell(touch *)"}
		policy.AllowCommands = true
	}
	r.k = kernel.New(kernel.Config{
		Store: st, Models: resolve, DefaultModel: "offline", DebugActor: true, Logger: log,
		Tools:     tool.NewSet(append([]tool.Tool{tool.Clock{}, tool.Echo{}}, tool.Coding(tool.Shell{})...)...),
		Workspace: tool.Workspace{Root: r.workspace},
		Intents:   intentSink(r.intents),
		Consent:   rules,
	})
	if err := r.k.Open(context.Background()); err != nil {
		st.Close()
		t.Fatalf("kernel.Open() = %v, want nil", err)
	}
	if r.tokens, err = auth.Open(filepath.Join(dir, "tokens.json")); err != nil {
		t.Fatalf("auth.Open() = %v, want nil", err)
	}
	// The ACP test agent is named as a kernel started with --agent
	// acp:test would define it.
	r.srv = server.New(server.Config{Kernel: r.k, Tokens: r.tokens, Logger: log, Node: "web-test", KeepAlive: time.Second,
		CheckSpec: policy.Check})
	r.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.urls = append(r.urls, req.URL.String())
		r.mu.Unlock()
		if req.URL.Path == "/control" && req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
			var m map[string]any
			if json.Unmarshal(body, &m) == nil {
				r.mu.Lock()
				r.controls = append(r.controls, m)
				r.mu.Unlock()
			}
		}
		if req.URL.Path == "/api/live" {
			r.lives.Add(1)
			if r.liveDown.Load() {
				http.Error(w, "the kernel is down for this test: retry", http.StatusServiceUnavailable)
				return
			}
		}
		if opts.remote {
			req.RemoteAddr = "203.0.113.7:40000"
		}
		if opts.seen != nil {
			sw := &statusWriter{ResponseWriter: w, tell: func(status int) { opts.seen(req, status) }}
			r.srv.ServeHTTP(sw, req)
			sw.report(http.StatusOK) // a handler that wrote nothing is answered 200
			return
		}
		r.srv.ServeHTTP(w, req)
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.http.CloseClientConnections()
		r.srv.Close(ctx)
		r.http.Close()
		r.k.Close(ctx)
		st.Close()
	})
	return r
}

// statusWriter tells the status of an answer once, when its header is
// written, so whoever has seen the answer arrive finds it told. Unwrap
// leaves flushing and hijacking to the writer below.
type statusWriter struct {
	http.ResponseWriter
	told bool
	tell func(status int)
}

func (w *statusWriter) report(status int) {
	if !w.told {
		w.told = true
		w.tell(status)
	}
}

func (w *statusWriter) WriteHeader(status int) {
	w.report(status)
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.report(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// shAgents resolves every acp:COMMAND spec as an ACP agent whose process
// is sh -c COMMAND, and every other spec as offlineOnly does. The agents
// are stopped when the test ends, and log to log.
func shAgents(t *testing.T, log *slog.Logger) func(string) (agent.Provider, error) {
	var mu sync.Mutex
	var agents []*acp.Agent
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		mu.Lock()
		defer mu.Unlock()
		for _, a := range agents {
			_ = a.Close(ctx)
		}
	})
	return func(spec string) (agent.Provider, error) {
		line, ok := strings.CutPrefix(spec, "acp:")
		if !ok {
			return offlineOnly(spec)
		}
		a, err := acp.New(acp.Config{Name: line, Command: "sh", Args: []string{"-c", line},
			CancelTimeout: time.Second, StopTimeout: time.Second, Logger: log})
		if err != nil {
			return nil, err
		}
		mu.Lock()
		agents = append(agents, a)
		mu.Unlock()
		return a, nil
	}
}

// sent returns the requests of kind t the page sent to POST /control.
func (r *rig) sent(t string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, m := range r.controls {
		if m["t"] == t {
			out = append(out, m)
		}
	}
	return out
}

// control sends one request as another client would, and returns the reply
// value and status.
func control(t *testing.T, base, query, body string) (map[string]any, int) {
	t.Helper()
	res, err := http.Post(base+"/control"+query, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST /control: %v", err)
	}
	defer res.Body.Close()
	var v map[string]any
	json.NewDecoder(res.Body).Decode(&v)
	return v, res.StatusCode
}

// chromium finds a Chromium binary, or skips the test with the reason
// unless ORRERY_REQUIRE_CHROMIUM is set (CI sets it), then it fails.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ORRERY_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ORRERY_REQUIRE_CHROMIUM") != "" {
		t.Fatal("no Chromium binary was found and ORRERY_REQUIRE_CHROMIUM is set: install it with apt-get install -y chromium, or set ORRERY_CHROMIUM to its path")
	}
	t.Skip("no Chromium binary was found (chromium, chromium-browser, google-chrome): install it with apt-get install -y chromium to run the browser tests")
	return ""
}

// browser starts a headless Chromium at width×height and returns a tab.
// Console errors and uncaught exceptions of the page are logged. flags are
// added to the command line, such as chromedp.Flag("proxy-server", …).
func browser(t *testing.T, width, height int, flags ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(width, height),
		chromedp.UserDataDir(t.TempDir()),
	}
	opts = append(opts, flags...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// run runs chromedp actions with a deadline, failing the test with what
// was being done.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	if err := chromedp.Do(cctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// until polls a JavaScript expression until it is truthy.
func until(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, waitFor+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(cctx, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingTimeout(waitFor))); err != nil {
		t.Fatalf("wait until %s: %v", what, err)
	}
}

// evalJS evaluates a JavaScript expression into a T.
func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	v, err := chromedp.Run(cctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// screenshot saves the page as name.png in the test's artifact directory
// and logs what it shows.
func screenshot(t *testing.T, ctx context.Context, name, shows string) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	png, err := chromedp.Run(cctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("save screenshot: %v", err)
	}
	t.Logf("screenshot %s: %s", path, shows)
}

// textOf returns the text of the elements matching a CSS selector, joined
// by newlines.
func textOf(t *testing.T, ctx context.Context, selector string) string {
	t.Helper()
	return evalJS[string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll(%q)].map(e => e.textContent).join("\n")`, selector))
}

// count returns how many elements match a CSS selector.
func count(t *testing.T, ctx context.Context, selector string) int {
	t.Helper()
	return evalJS[int](t, ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, selector))
}

// openNewSession loads the page and creates a session with its button.
func openNewSession(t *testing.T, ctx context.Context, base string) string {
	t.Helper()
	run(t, ctx, "load the page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("new-session")))
	run(t, ctx, "press New session", chromedp.Click(chromedp.ID("new-session")))
	until(t, ctx, "the new session is live", `document.getElementById("conn").dataset.state === "live" && window.orrery.view.session !== ""`)
	return evalJS[string](t, ctx, `window.orrery.view.session`)
}

// prompt types text into the composer and presses Enter, once the
// composer takes keys (a question waiting disables it).
func prompt(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	until(t, ctx, "the composer takes keys", `!document.getElementById("prompt").disabled`)
	run(t, ctx, "type "+text,
		chromedp.Focus(chromedp.ID("prompt")),
		chromedp.SetValue(chromedp.ID("prompt"), text),
		chromedp.SendKeys(chromedp.ID("prompt"), "\r"))
}

// js quotes a Go value for JavaScript.
func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// enterKey presses Enter as a keyboard does: one keyDown that carries its
// text, so a page that prevents the keydown gets no newline.
// chromedp.KeyEvent("\r") sends the text in a separate char event, which
// inserts a newline into a textarea however the page handled the keydown;
// no browser does that.
func enterKey() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		key := input.DispatchKeyEventParams{Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13}
		down := key
		down.Type, down.Text, down.UnmodifiedText = input.DispatchKeyEventTypeKeyDown, "\r", "\r"
		if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, down); err != nil {
			return err
		}
		key.Type = input.DispatchKeyEventTypeKeyUp
		_, err := cdp.Call(ctx, t, input.DispatchKeyEvent, key)
		return err
	})
}
