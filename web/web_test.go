package web_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/getorrery/orrery/web"
)

func TestPageHeaders(t *testing.T) {
	r := newRig(t, rigOptions{})
	for _, path := range []string{"/", "/assets/app.js", "/assets/app.css"} {
		res, err := http.Get(r.http.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || len(body) == 0 {
			t.Errorf("GET %s = %d with %d bytes, want 200 and the file", path, res.StatusCode, len(body))
		}
		csp := res.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("GET %s: Content-Security-Policy = %q, want scripts from self only, nothing inline", path, csp)
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options = %q, want nosniff", path, got)
		}
	}
	// The page has no inline script for the CSP to allow.
	res, _ := http.Get(r.http.URL + "/")
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if bytes.Contains(page, []byte("<script>")) || regexp.MustCompile(`\son[a-z]+\s*=`).Match(page) {
		t.Errorf("the page has inline script:\n%s", page)
	}
	// Anything else under / is still the server's 404.
	res, _ = http.Get(r.http.URL + "/assets/nothing.js")
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Errorf("GET /assets/nothing.js = %d, want 404", res.StatusCode)
	}
}

func TestTokenEntryOffLoopback(t *testing.T) {
	r := newRig(t, rigOptions{remote: true})
	token, _, err := r.tokens.Create("browser")
	if err != nil {
		t.Fatal(err)
	}
	ctx := browser(t, 1280, 800)
	// The page loads without a token; the first request asks for one.
	run(t, ctx, "load the page", chromedp.Navigate(r.http.URL+"/"))
	until(t, ctx, "the token dialog is open", `document.getElementById("token-dialog").open`)
	screenshot(t, ctx, "token", "the page served off loopback asks for a node token")
	// A wrong token is refused in the dialog, which stays open.
	run(t, ctx, "enter a wrong token",
		chromedp.SetValue(chromedp.ID("token"), "orr_wrong_token"),
		chromedp.Click(chromedp.CSS("#token-form button[type=submit]")))
	until(t, ctx, "the dialog says the token is not valid", `document.getElementById("token-error").textContent.includes("not valid") && document.getElementById("token-dialog").open`)
	run(t, ctx, "enter the token",
		chromedp.SetValue(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS("#token-form button[type=submit]")))
	until(t, ctx, "the dialog closed", `!document.getElementById("token-dialog").open`)
	run(t, ctx, "press New session", chromedp.Click(chromedp.ID("new-session")))
	until(t, ctx, "the session is live with the token", `document.getElementById("conn").dataset.state === "live"`)
	prompt(t, ctx, "hello")
	until(t, ctx, "the answer has streamed in", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("to talk to a real model."))`)

	// The token is in an HttpOnly cookie: no script, no storage and no URL
	// holds it.
	if got := evalJS[string](t, ctx, `JSON.stringify({ls: {...localStorage}, ss: {...sessionStorage}, cookie: document.cookie})`); strings.Contains(got, token) || strings.Contains(got, "orr_") {
		t.Errorf("the page's storage and cookies a script can read = %s, want no token", got)
	}
	r.mu.Lock()
	urls := append([]string(nil), r.urls...)
	r.mu.Unlock()
	for _, u := range urls {
		if strings.Contains(u, token) || strings.Contains(u, "token=") {
			t.Errorf("the page requested %s, want no token in a URL", u)
		}
	}
	// A reload keeps the sign-in: the page does not ask again.
	run(t, ctx, "reload the page", chromedp.Reload())
	until(t, ctx, "the session list is live after the reload", `document.getElementById("sessions-state").dataset.state === "live"`)
	if open := evalJS[bool](t, ctx, `document.getElementById("token-dialog").open`); open {
		t.Errorf("after a reload the token dialog is open, want the cookie to keep the page signed in")
	}
}

func TestGzipWeight(t *testing.T) {
	h := web.New()
	total := 0
	for _, p := range h.Paths() {
		req, _ := http.NewRequest("GET", p, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		w := &recorder{h: http.Header{}}
		h.ServeHTTP(w, req)
		if w.h.Get("Content-Encoding") != "gzip" {
			t.Fatalf("GET %s with gzip: Content-Encoding = %q", p, w.h.Get("Content-Encoding"))
		}
		total += w.body.Len()
		zr, err := gzip.NewReader(&w.body)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		if _, err := io.ReadAll(zr); err != nil {
			t.Fatalf("GET %s: the gzip does not read back: %v", p, err)
		}
	}
	if total != h.GzipBytes() {
		t.Errorf("served gzip bytes = %d, want GzipBytes() = %d", total, h.GzipBytes())
	}
	t.Logf("the page and its assets weigh %d bytes gzipped", total)
}

type recorder struct {
	h    http.Header
	body bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(int)             {}

// TestBuildMatchesCheckedIn rebuilds the assets from the sources and the
// lock file and fails when dist/ differs: rebuild with npm ci && node
// build.mjs in web/, and commit dist/.
func TestBuildMatchesCheckedIn(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("ORRERY_REQUIRE_NODE") != "" {
			t.Fatal("npm is not installed: install nodejs and npm (apt-get install -y nodejs npm) to check the web build")
		}
		t.Skip("npm is not installed: install nodejs and npm to check that web/dist matches its sources")
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "build.mjs"} {
		copyFile(t, f, filepath.Join(dir, f))
	}
	if err := os.CopyFS(filepath.Join(dir, "src"), os.DirFS("src")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"}, {"node", "build.mjs", "out"}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, f := range []string{"index.html", "app.js", "app.css"} {
		want, err := os.ReadFile(filepath.Join("dist", f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "out", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("dist/%s differs from a fresh build (%d bytes built, %d checked in): run npm ci && node build.mjs in web/ and commit dist/", f, len(got), len(want))
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
