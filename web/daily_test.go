package web_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/getorrery/orrery/kernel"
)

// TestEmptyStateExamples: a thread with nothing in it says what to do and
// offers three prompts, and each one works on the offline model: the first
// creates the session it runs in.
func TestEmptyStateExamples(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	run(t, ctx, "load the page", chromedp.Navigate(r.http.URL+"/"), chromedp.WaitVisible(chromedp.CSS(".empty .examples")))
	if n := count(t, ctx, ".empty .examples button"); n != 3 {
		t.Fatalf("example prompts = %d, want 3", n)
	}
	screenshot(t, ctx, "empty", "the first screen: what to do, and three prompts to try")
	for i, want := range []string{
		`[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes('You said: "hello"'))`,
		`[...document.querySelectorAll(".tool")].some(e => e.textContent.includes("clock") && e.textContent.includes("✓ ok"))`,
		`document.querySelector(".consent button[data-option=allow_once]") !== null`,
	} {
		if i > 0 {
			run(t, ctx, "press New session", chromedp.Click(chromedp.ID("new-session")))
			until(t, ctx, "the new session shows the examples", `document.querySelectorAll(".empty .examples button").length === 3`)
		}
		label := evalJS[string](t, ctx, `document.querySelectorAll(".empty .examples button")[`+js(i)+`].textContent`)
		run(t, ctx, "press the example "+label, chromedp.Click(chromedp.CSS(".empty .examples button:nth-child("+js(i+1)+")")))
		until(t, ctx, "the example "+label+" works on the offline model", want)
		if n := count(t, ctx, ".empty"); n != 0 {
			t.Errorf("after the example %s the empty state is still shown", label)
		}
	}
}

// TestLongWordWraps: a 400-character word in a prompt and in the answer
// that echoes it wraps; the thread never scrolls sideways.
func TestLongWordWraps(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 900, 700)
	openNewSession(t, ctx, r.http.URL)
	word := strings.Repeat("x", 400)
	prompt(t, ctx, "hello "+word)
	until(t, ctx, "the answer has streamed in", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("to talk to a real model."))`)
	if w := evalJS[[]int](t, ctx, `(t => [t.scrollWidth, t.clientWidth])(document.getElementById("thread"))`); w[0] > w[1] {
		t.Errorf("the thread is %d px wide inside %d: a long word does not wrap", w[0], w[1])
	}
}

// TestToastsKeepOffTheControls: an error toast sits in its own row, never
// over the prompt, Send or Stop; it stays until dismissed, and it belongs
// to its session: switching clears it.
func TestToastsKeepOffTheControls(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	openNewSession(t, ctx, r.http.URL)
	for i := range 3 {
		prompt(t, ctx, "/nosuch"+js(i))
	}
	until(t, ctx, "three error toasts are shown", `document.querySelectorAll("#toasts .toast-error").length === 3`)
	overlap := `(() => {
		const r = (e) => e.getBoundingClientRect();
		const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
		const controls = ["prompt", "send", "stop", "new-session"].map((id) => document.getElementById(id)).filter((e) => e.offsetParent !== null);
		return [...document.querySelectorAll("#toasts .toast")].some((t) => controls.some((c) => hit(r(t), r(c))));
	})()`
	if evalJS[bool](t, ctx, overlap) {
		t.Error("a toast covers the prompt, Send, Stop or New session")
	}
	if got := textOf(t, ctx, "#toasts .toast"); !strings.Contains(got, "is not a command here") {
		t.Errorf("the toasts = %q, want the error", got)
	}
	screenshot(t, ctx, "toasts", "three error toasts in their row above the composer, each with its dismiss button")
	run(t, ctx, "dismiss the first toast", chromedp.Click(chromedp.CSS("#toasts .toast .toast-close")))
	until(t, ctx, "one toast is gone", `document.querySelectorAll("#toasts .toast").length === 2`)
	run(t, ctx, "press New session", chromedp.Click(chromedp.ID("new-session")))
	until(t, ctx, "the other session shows no toast", `document.querySelectorAll("#toasts .toast").length === 0 && window.orrery.view.session !== ""`)
}

// TestUnknownSession: a link to a session the kernel does not have says so
// and offers a new session, instead of reconnecting forever.
func TestUnknownSession(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	run(t, ctx, "load a link to an unknown session", chromedp.Navigate(r.http.URL+"/#session=ses_nosuch"))
	until(t, ctx, "the page says the session is not there", `document.querySelector("#thread .missing") !== null`)
	if got := textOf(t, ctx, "#thread .missing"); !strings.Contains(got, "There is no session ses_nosuch on this kernel") || !strings.Contains(got, "New session") {
		t.Errorf("the explanation = %q, want the session named and the way out", got)
	}
	if got := textOf(t, ctx, "#conn"); !strings.Contains(got, "no such session") {
		t.Errorf("the connection state = %q, want no such session", got)
	}
	screenshot(t, ctx, "unknown-session", "a link to a session the kernel does not have: what happened and a New session button")
	run(t, ctx, "press the explanation's New session", chromedp.Click(chromedp.CSS("#thread .missing button")))
	until(t, ctx, "a new session is live", `document.getElementById("conn").dataset.state === "live" && window.orrery.view.session.startsWith("ses_") && window.orrery.view.session !== "ses_nosuch"`)
}

// TestContrast runs axe-core's color-contrast rule in the page, in the
// light and the dark scheme, over a thread with an answer, a tool call,
// a consent prompt and the buttons: every text has at least 4.5:1 (AA).
func TestContrast(t *testing.T) {
	axe, err := os.ReadFile(filepath.Join("node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("ORRERY_REQUIRE_NODE") != "" {
			t.Fatalf("axe-core is not installed: run npm ci in web/ (%v)", err)
		}
		t.Skipf("axe-core is not installed: run npm ci in web/ to check contrast (%v)", err)
	}
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	openNewSession(t, ctx, r.http.URL)
	prompt(t, ctx, "hello")
	until(t, ctx, "the answer has streamed in", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("to talk to a real model."))`)
	prompt(t, ctx, "/nosuch")
	until(t, ctx, "an error toast is shown", `document.querySelector("#toasts .toast-error") !== null`)
	prompt(t, ctx, "run `echo hi`")
	until(t, ctx, "the consent prompt is shown", `document.querySelector(".consent button[data-option=allow_once]") !== null`)
	showStopped(t, r, evalJS[string](t, ctx, `window.orrery.view.session`), true)
	until(t, ctx, "the stopped surface is shown", `document.querySelector("#pane-right .placed.stopped") !== null`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](string(axe)+";\ntypeof axe.run === 'function'")); err != nil {
		t.Fatalf("load axe-core: %v", err)
	}
	for _, scheme := range []string{"light", "dark"} {
		run(t, ctx, "emulate the "+scheme+" scheme", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
			return err
		}))
		if got := evalJS[bool](t, ctx, `matchMedia("(prefers-color-scheme: dark)").matches`); got != (scheme == "dark") {
			t.Fatalf("the page does not see the %s scheme", scheme)
		}
		cctx, cancel := context.WithTimeout(ctx, waitFor)
		violations, err := chromedp.Run(cctx, chromedp.Evaluate[[]string](`axe.run(document, { runOnly: ["color-contrast"], resultTypes: ["violations"] }).then((r) =>
			r.violations.flatMap((v) => v.nodes.map((n) => n.target.join(" ") + ": " + n.failureSummary.replace(/\s+/g, " "))))`, chromedp.EvalAwaitPromise))
		cancel()
		if err != nil {
			t.Fatalf("run axe-core: %v", err)
		}
		for _, v := range violations {
			t.Errorf("%s scheme: contrast below 4.5:1 at %s", scheme, v)
		}
		screenshot(t, ctx, "contrast-"+scheme, "the thread, a tool call, a consent prompt and a toast in the "+scheme+" scheme, as axe-core checked it")
	}
}

// TestNarrowLayout: at 500 px one view shows at a time, picked with tabs,
// so a placed pane never sits below the composer, off screen: the thread
// and its composer fill the screen, the right pane's tab shows the chart
// placed there, and the sessions have a tab of their own.
func TestNarrowLayout(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 500, 800)
	run(t, ctx, "load the page", chromedp.Navigate(r.http.URL+"/"), chromedp.WaitVisible(chromedp.ID("prompt")))
	if n := count(t, ctx, ".empty .examples button"); n != 3 {
		t.Errorf("the narrow first screen shows %d example prompts, want 3", n)
	}
	prompt(t, ctx, "show me a chart of apples pears")
	until(t, ctx, "the chart is placed in the right pane, with a tab", `document.querySelector("#pane-right .placed canvas") !== null && !document.querySelector("#tabs [data-tab=pane-right]").hidden`)
	inView := func(sel string) string {
		return `(() => { const e = document.querySelector(` + js(sel) + `); if (!e || e.offsetParent === null) return false;
			const r = e.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight + 1 && r.width > 0; })()`
	}
	shown := func(sel string) bool { return evalJS[bool](t, ctx, inView(sel)) }
	if !shown("#composer") || !shown("#thread") || shown("#pane-right") {
		t.Errorf("on the thread's tab: composer shown %v, thread %v, right pane %v; want the thread and its composer alone", shown("#composer"), shown("#thread"), shown("#pane-right"))
	}
	screenshot(t, ctx, "narrow-thread", "500 px wide: the tabs row, the thread and its composer")
	run(t, ctx, "press the right pane's tab", chromedp.Click(chromedp.CSS(`#tabs [data-tab=pane-right]`)))
	until(t, ctx, "the chart is on screen", inView("#pane-right .placed canvas"))
	if shown("#composer") {
		t.Error("the composer is shown beside the right pane, want one view at a time")
	}
	screenshot(t, ctx, "narrow-pane", "500 px wide: the right pane's tab, with its chart on screen")
	run(t, ctx, "press the sessions tab", chromedp.Click(chromedp.CSS(`#tabs [data-tab=sessions]`)))
	until(t, ctx, "the session list is on screen, with the session the prompt made", inView("#new-session")+` && document.querySelectorAll("#sessions .session").length === 1`)
	run(t, ctx, "press the thread's tab", chromedp.Click(chromedp.CSS(`#tabs [data-tab=thread]`)))
	until(t, ctx, "the composer is back", inView("#composer"))
	if w := evalJS[[]int](t, ctx, `[document.documentElement.scrollWidth, innerWidth]`); w[0] > w[1] {
		t.Errorf("the page is %d px wide in a %d px window: it scrolls sideways", w[0], w[1])
	}
}

// showStopped has the kernel place ext:ci's surface as the extension host
// draws it once the extension stopped (stopped), or again once it runs.
func showStopped(t *testing.T, r *rig, session string, stopped bool) {
	t.Helper()
	sess, err := r.k.Session(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	text := "42 tests passed"
	if stopped {
		text = "stopped: exit status 2. Restart it with /ext restart ci"
	}
	surface, _ := json.Marshal(map[string]any{"kind": map[string]any{"t": "text", "value": text}})
	if err := sess.Show(context.Background(), ciOwner, kernel.ShowInput{ID: "ci", Placement: "pane.right", Title: "CI", Surface: surface, Stopped: stopped}); err != nil {
		t.Fatalf("Show(stopped %v) = %v", stopped, err)
	}
}

// TestStoppedSurface: an extension's surface drawn once the extension
// stopped is marked stopped and set apart (dashed, muted), with the
// restart command; drawn again once it runs, the mark goes.
func TestStoppedSurface(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	session := openNewSession(t, ctx, r.http.URL)
	showStopped(t, r, session, false)
	until(t, ctx, "the running surface is shown", `[...document.querySelectorAll("#pane-right .placed")].some(e => e.textContent.includes("42 tests passed"))`)
	if n := count(t, ctx, "#pane-right .placed.stopped"); n != 0 {
		t.Fatalf("a running extension's surface is marked stopped")
	}
	showStopped(t, r, session, true)
	until(t, ctx, "the surface is marked stopped", `document.querySelector("#pane-right .placed.stopped .stopped-tag") !== null`)
	if got := textOf(t, ctx, "#pane-right .placed.stopped"); !strings.Contains(got, "⏸ stopped") || !strings.Contains(got, "/ext restart ci") {
		t.Errorf("the stopped card = %q, want the stopped mark and the restart command", got)
	}
	if style := evalJS[string](t, ctx, `getComputedStyle(document.querySelector("#pane-right .placed.stopped")).borderTopStyle`); style != "dashed" {
		t.Errorf("the stopped card's border is %s, want it set apart (dashed)", style)
	}
	screenshot(t, ctx, "stopped-surface", "an extension's surface once it stopped: dashed, muted, marked stopped, naming /ext restart ci")
	showStopped(t, r, session, false)
	until(t, ctx, "the mark goes once it runs again", `document.querySelector("#pane-right .placed.stopped") === null && document.querySelector("#pane-right .placed") !== null`)
}

// TestConsentModal: a question is the page's modal. The composer is
// disabled with its draft kept, the focus starts on Deny, keys that are
// not an answer answer nothing, the whole command is shown wrapped with
// the part that decided marked, Enter takes the focused option and Esc
// denies.
func TestConsentModal(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1000, 800)
	session := openNewSession(t, ctx, r.http.URL)
	typeKeys(t, ctx, "my draft")
	command := "echo start; " + strings.Repeat("printf 'a long line of output' ; ", 9) + "rm -rf ./important"
	sendAsOther := func(text string) {
		body, _ := json.Marshal(map[string]any{"t": "run.send", "id": "x", "session": session, "input": map[string]any{"text": text}})
		if v, status := control(t, r.http.URL, "?client=cli", string(body)); status != 200 {
			t.Fatalf("run.send from another client = %d %v", status, v)
		}
	}
	sendAsOther("run `" + command + "`")
	until(t, ctx, "the question holds the focus, on Deny", `document.activeElement.matches(".consent button[data-option=deny]")`)
	if !evalJS[bool](t, ctx, `document.getElementById("prompt").disabled && document.getElementById("prompt").value === "my draft" && document.getElementById("send").disabled`) {
		t.Error("while the question waits, want the composer disabled with its draft kept")
	}
	args := textOf(t, ctx, ".consent .consent-args")
	if !strings.Contains(args, "rm -rf ./important") || strings.Contains(args, "…") {
		t.Errorf("the question shows %q, want the whole command, never cut", args)
	}
	if w := evalJS[[]int](t, ctx, `(e => [e.scrollWidth, e.clientWidth])(document.querySelector(".consent .consent-args"))`); w[0] > w[1] {
		t.Errorf("the command is %d px wide in %d: want it wrapped", w[0], w[1])
	}
	if m := textOf(t, ctx, ".consent .consent-args mark"); m == "" || !strings.Contains(command, m) {
		t.Errorf("the marked part = %q, want a part of the command", m)
	}
	screenshot(t, ctx, "consent-modal", "a 300-character shell line asked about: all of it wrapped, the deciding part marked, the focus on Deny, the composer disabled with its draft")
	typeKeys(t, ctx, "stay y a")
	if n := len(r.sent("consent.answer")); n != 0 || count(t, ctx, ".consent") != 1 {
		t.Fatalf("typing during the question sent %d answers, want none and the question still up", n)
	}
	press(t, ctx, "\r")
	until(t, ctx, "Enter took Deny", `[...document.querySelectorAll(".decision")].some(e => e.textContent.includes("denied") && e.textContent.includes("by web"))`)
	until(t, ctx, "the composer is back with its draft", `!document.getElementById("prompt").disabled && document.getElementById("prompt").value === "my draft"`)
	if answers := r.sent("consent.answer"); len(answers) != 1 || answers[0]["option"] != "deny" {
		t.Errorf("consent.answer requests = %v, want one deny", answers)
	}
	until(t, ctx, "the run has ended", `window.orrery.view.runId === ""`)

	sendAsOther("run `echo again`")
	until(t, ctx, "the second question holds the focus", `document.activeElement.matches(".consent button[data-option=deny]")`)
	press(t, ctx, kb.Escape)
	until(t, ctx, "Esc denied it", `document.querySelector(".consent") === null && [...document.querySelectorAll(".decision")].filter(e => e.textContent.includes("denied")).length === 2`)
	if answers := r.sent("consent.answer"); len(answers) != 2 || answers[1]["option"] != "deny" {
		t.Errorf("consent.answer requests = %v, want the second a deny", answers)
	}
}

// TestToolMarksSurviveReload: a denied call and a call stopped mid-run
// are marked so live (⊘ denied, ⊘ cancelled, never running) and keep
// their marks after the page is reloaded.
func TestToolMarksSurviveReload(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	session := openNewSession(t, ctx, r.http.URL)
	prompt(t, ctx, "run `echo no`")
	until(t, ctx, "the consent prompt is shown", `document.activeElement.matches(".consent button[data-option=deny]")`)
	press(t, ctx, "\r")
	until(t, ctx, "the denied call is marked", `[...document.querySelectorAll(".tool .tool-status")].some(e => e.textContent === "⊘ denied")`)
	until(t, ctx, "the run has ended", `window.orrery.view.runId === ""`)
	prompt(t, ctx, "run `sleep 20`")
	allowOnce(t, ctx)
	until(t, ctx, "the command runs", `[...document.querySelectorAll(".tool .tool-status")].some(e => e.textContent === "◐ running")`)
	run(t, ctx, "press Stop", chromedp.Click(chromedp.ID("stop")))
	marks := `[...document.querySelectorAll(".tool .tool-status")].map(e => e.textContent).join(",")`
	want := "⊘ denied,⊘ cancelled"
	until(t, ctx, "the stopped call is marked cancelled", marks+` === `+js(want))
	run(t, ctx, "reload the page", chromedp.Navigate(r.http.URL+"/#session="+session), chromedp.Reload())
	until(t, ctx, "the reloaded page is live", `document.getElementById("conn").dataset.state === "live" && document.querySelectorAll(".tool").length === 2`)
	if got := evalJS[string](t, ctx, marks); got != want {
		t.Errorf("after a reload the calls are marked %q, want %q", got, want)
	}
	screenshot(t, ctx, "marks-after-reload", "after a reload: the denied call and the stopped one keep their marks")
}

// TestToolOutputSurvivesReload: what a tool showed while it ran (a write's
// diff, a command's output) is what it shows after later runs and after
// the page is reloaded, though each run starts the state's surfaces anew.
func TestToolOutputSurvivesReload(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	session := openNewSession(t, ctx, r.http.URL)
	prompt(t, ctx, "write a file notes.md")
	allowOnce(t, ctx)
	until(t, ctx, "the diff is shown", `document.querySelector(".tool .diff") !== null && window.orrery.view.runId === ""`)
	prompt(t, ctx, "run `echo out`")
	allowOnce(t, ctx)
	until(t, ctx, "the output is shown", `[...document.querySelectorAll(".tool .k-stream")].some(e => e.textContent === "out\n") && window.orrery.view.runId === ""`)
	prompt(t, ctx, "hello")
	until(t, ctx, "the third run has ended", `document.querySelectorAll(".msg.user").length === 3 && window.orrery.view.runId === ""`)
	shown := `[document.querySelectorAll(".tool .diff").length, [...document.querySelectorAll(".tool .k-stream")].filter(e => e.textContent === "out\n").length]`
	if got := evalJS[[]int](t, ctx, shown); got[0] != 1 || got[1] != 1 {
		t.Fatalf("after a later run: diffs %d, outputs %d; want the diff and the output still shown", got[0], got[1])
	}
	run(t, ctx, "reload the page", chromedp.Navigate(r.http.URL+"/#session="+session), chromedp.Reload())
	until(t, ctx, "the reloaded page is live", `document.getElementById("conn").dataset.state === "live" && document.querySelectorAll(".msg.user").length === 3`)
	if got := evalJS[[]int](t, ctx, shown); got[0] != 1 || got[1] != 1 {
		t.Errorf("after a reload: diffs %d, outputs %d; want the diff and the output as they were shown live", got[0], got[1])
	}
	screenshot(t, ctx, "output-after-reload", "after a reload: the write's diff and the command's output as they were shown live")
}

// TestFoldingIsThePersonsChoice: a command's call is open while it runs
// and shows its output; folded by a click while the output still streams,
// it stays folded through every later delta and the result; a click opens
// it again; after a reload it is drawn by the same default as live.
func TestFoldingIsThePersonsChoice(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	session := openNewSession(t, ctx, r.http.URL)
	prompt(t, ctx, "run `for i in 1 2 3 4 5 6; do echo step $i; sleep 0.3; done`")
	allowOnce(t, ctx)
	until(t, ctx, "the output streams in an open call", `(() => { const d = document.querySelector("details.tool"); return d && d.open && d.textContent.includes("step 1"); })()`)
	run(t, ctx, "fold it", chromedp.Click(chromedp.CSS("details.tool > summary")))
	until(t, ctx, "the run has ended", `window.orrery.view.runId === "" && document.querySelector("details.tool").textContent.includes("step 6")`)
	if open := evalJS[bool](t, ctx, `document.querySelector("details.tool").open`); open {
		t.Fatal("the call folded by a click while it ran was opened again by a later delta or its result")
	}
	run(t, ctx, "open it again", chromedp.Click(chromedp.CSS("details.tool > summary")))
	prompt(t, ctx, "hello")
	until(t, ctx, "the next run has ended", `document.querySelectorAll(".msg.user").length === 2 && window.orrery.view.runId === ""`)
	if open := evalJS[bool](t, ctx, `document.querySelector("details.tool").open`); !open {
		t.Error("the call opened again by a click is folded")
	}
	run(t, ctx, "reload the page", chromedp.Navigate(r.http.URL+"/#session="+session), chromedp.Reload())
	until(t, ctx, "the reloaded page is live", `document.getElementById("conn").dataset.state === "live" && document.querySelectorAll(".msg.user").length === 2`)
	if open := evalJS[bool](t, ctx, `document.querySelector("details.tool").open`); !open {
		t.Error("after a reload the call with output is folded; live, its default was open")
	}
}

// TestReloadMidRun reloads the page while a command streams its output:
// the reloaded page shows the output so far and the call running, then
// follows the rest of the stream live to the command's end.
func TestReloadMidRun(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	session := openNewSession(t, ctx, r.http.URL)
	prompt(t, ctx, "run `for i in 1 2 3 4 5 6 7 8; do echo step $i; sleep 0.3; done`")
	allowOnce(t, ctx)
	until(t, ctx, "the output streams", `(document.querySelector(".tool .k-stream")?.textContent || "").includes("step 2")`)
	run(t, ctx, "reload the page mid-run", chromedp.Navigate(r.http.URL+"/#session="+session), chromedp.Reload())
	until(t, ctx, "the reloaded page shows the output so far, still running", `document.getElementById("conn").dataset.state === "live" &&
		(document.querySelector(".tool .k-stream")?.textContent || "").includes("step 2") &&
		[...document.querySelectorAll(".tool .tool-status")].some(e => e.textContent === "◐ running")`)
	until(t, ctx, "the rest of the output, live, to the end", `window.orrery.view.runId === "" && [...document.querySelectorAll(".tool .tool-status")].some(e => e.textContent === "✓ ok")`)
	want := "step 1\nstep 2\nstep 3\nstep 4\nstep 5\nstep 6\nstep 7\nstep 8\n"
	if got := evalJS[string](t, ctx, `document.querySelector(".tool .k-stream").textContent`); got != want {
		t.Errorf("after a reload mid-run the output is %q, want %q", got, want)
	}
}

// allowOnce waits for the consent prompt and clicks Allow once.
func allowOnce(t *testing.T, ctx context.Context) {
	t.Helper()
	until(t, ctx, "the consent prompt is shown", `document.querySelector(".consent button[data-option=allow_once]") !== null`)
	run(t, ctx, "allow it", chromedp.Click(chromedp.CSS(".consent button[data-option=allow_once]")))
}
