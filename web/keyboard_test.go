package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// focusShown is a JavaScript expression: the focused element draws a
// focus ring of at least 2 pixels that is not the page's background.
const focusShown = `(() => {
	const e = document.activeElement;
	if (!e || e === document.body) return false;
	const s = getComputedStyle(e);
	return s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2 && s.outlineColor !== getComputedStyle(document.body).backgroundColor;
})()`

// describeFocus is a JavaScript expression naming the focused element.
const describeFocus = `(() => { const e = document.activeElement; return e ? e.tagName + "#" + e.id + "." + e.className + " " + (e.textContent || "").slice(0, 30) : "none"; })()`

// press sends one key through Chromium's input pipeline, with modifiers.
func press(t *testing.T, ctx context.Context, key string, mods ...chromedp.Modifier) {
	t.Helper()
	var opts []chromedp.KeyOption
	if len(mods) > 0 {
		opts = append(opts, chromedp.KeyModifiers(mods...))
	}
	if key == "\r" && len(mods) == 0 {
		run(t, ctx, "press Enter", enterKey())
		return
	}
	run(t, ctx, fmt.Sprintf("press %q", key), chromedp.KeyEvent(key, opts...))
}

// tabTo presses Tab (Shift+Tab when back) until the focused element
// matches selector, checking at each stop that the focus is drawn.
func tabTo(t *testing.T, ctx context.Context, selector string, back bool) {
	t.Helper()
	var mods []chromedp.Modifier
	if back {
		mods = append(mods, chromedp.ModifierShift)
	}
	for range 40 {
		press(t, ctx, "\t", mods...)
		if !evalJS[bool](t, ctx, focusShown) {
			t.Errorf("the focus on %s is not drawn, want an outline", evalJS[string](t, ctx, describeFocus))
		}
		if evalJS[bool](t, ctx, fmt.Sprintf(`document.activeElement.matches(%q)`, selector)) {
			return
		}
	}
	t.Fatalf("40 presses of Tab (back %v) never reached %s; the focus is on %s", back, selector, evalJS[string](t, ctx, describeFocus))
}

// typeKeys types text into the focused element key by key.
func typeKeys(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	run(t, ctx, "type "+text, chromedp.KeyEvent(text))
}

// TestKeyboardOnly drives a session with the keyboard alone: a new session,
// a prompt, its consent, a steer, a stop, and a pane moved with /ui and
// with its placement control. The focus is drawn at every stop, and each
// state is written in words and glyphs, never shown by colour alone.
func TestKeyboardOnly(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	run(t, ctx, "load the page", chromedp.Navigate(r.http.URL+"/"), chromedp.WaitVisible(chromedp.ID("new-session")))

	// The first Tab reaches the skip link, the next the New session button.
	tabTo(t, ctx, ".skip", false)
	tabTo(t, ctx, "#new-session", false)
	press(t, ctx, "\r")
	until(t, ctx, "the new session is live, the prompt focused", `document.getElementById("conn").dataset.state === "live" && window.orrery.view.session !== "" && document.activeElement.id === "prompt"`)
	if !evalJS[bool](t, ctx, focusShown) {
		t.Error("the focused prompt has no visible focus ring")
	}
	if got := textOf(t, ctx, "#conn"); got != "● live" {
		t.Errorf("the connection state = %q, want it in words (● live)", got)
	}

	typeKeys(t, ctx, "run `sleep 20`")
	press(t, ctx, "\r")
	until(t, ctx, "the consent prompt is shown", `document.querySelector(".consent button[data-option=allow_once]") !== null`)
	if got := textOf(t, ctx, ".consent .consent-q"); !strings.HasPrefix(got, "Consent needed: allow shell") {
		t.Errorf("the consent prompt = %q, want it to say in words that consent is needed", got)
	}
	if got := evalJS[string](t, ctx, `document.querySelector(".consent").getAttribute("role")`); got != "alertdialog" {
		t.Errorf("the consent prompt's role = %q, want alertdialog", got)
	}
	// The question takes the focus, on Deny; Shift+Tab moves back to Allow once.
	until(t, ctx, "the focus is on Deny", `document.activeElement.matches(".consent button[data-option=deny]")`)
	tabTo(t, ctx, ".consent button[data-option=allow_once]", true)
	screenshot(t, ctx, "keyboard-consent", "the consent prompt's Allow once reached with Shift+Tab, its focus ring drawn")
	press(t, ctx, "\r")
	until(t, ctx, "the command runs and the focus is back in the prompt", `document.querySelector(".consent") === null && document.getElementById("send").textContent === "Steer" && document.activeElement.id === "prompt"`)
	if got := textOf(t, ctx, "#run-state"); got != "◐ running" {
		t.Errorf("the run state = %q, want it in words (◐ running)", got)
	}
	if got := textOf(t, ctx, ".decision"); !strings.Contains(got, "allowed (allow once) by web") {
		t.Errorf("the decision line = %q, want the answer in words", got)
	}

	typeKeys(t, ctx, "also say when done")
	press(t, ctx, "\r")
	until(t, ctx, "the steer is in the thread", `[...document.querySelectorAll(".msg.user.steer")].some(e => e.textContent.includes("You (steer)") && e.textContent.includes("also say when done"))`)
	press(t, ctx, kb.Escape)
	until(t, ctx, "Esc stopped the run", `window.orrery.view.runId === "" && document.body.textContent.includes("Stopped.")`)
	if got := textOf(t, ctx, "#run-state"); got != "○ idle" {
		t.Errorf("the run state = %q, want ○ idle", got)
	}
	if n := len(r.sent("run.cancel")); n != 1 {
		t.Errorf("run.cancel requests = %d, want 1", n)
	}
	if sends := r.sent("run.send"); len(sends) != 2 || sends[1]["target"] != "steer" {
		t.Errorf("run.send requests = %v, want the second a steer", sends)
	}

	// A chart in the right pane, moved to the band with /ui, then to the
	// left pane with its own placement control.
	typeKeys(t, ctx, "show me a chart of apples pears")
	press(t, ctx, "\r")
	until(t, ctx, "the chart is in the right pane", `document.querySelector("#pane-right .placed canvas") !== null && window.orrery.view.runId === ""`)
	typeKeys(t, ctx, "/ui move offline-chart band")
	press(t, ctx, "\r")
	until(t, ctx, "the chart is in the band", `document.querySelector("#band .placed canvas") !== null && document.getElementById("pane-right").hidden`)
	tabTo(t, ctx, "#band .placed select.move", true)
	press(t, ctx, kb.ArrowDown)
	until(t, ctx, "the chart is in the left pane", `document.querySelector("#pane-left .placed canvas") !== null && document.getElementById("band").hidden`)
	moves := r.sent("ui.move")
	if len(moves) != 2 || moves[0]["placement"] != "band" || moves[1]["placement"] != "pane.left" {
		t.Errorf("ui.move requests = %v, want band then pane.left", moves)
	}
	if got := textOf(t, ctx, "#pane-left .chart-caption"); got != "letters: apples 6, pears 5" {
		t.Errorf("the chart's caption = %q, want its values in words", got)
	}
	if got := textOf(t, ctx, "#sessions .session[aria-current=true] .session-meta"); !strings.HasPrefix(got, "○ idle") {
		t.Errorf("the session's state in the list = %q, want it in words (○ idle)", got)
	}
	if got := textOf(t, ctx, "#sessions-state"); got != "● list live" {
		t.Errorf("the list's connection state = %q, want it in words", got)
	}
	screenshot(t, ctx, "keyboard-moved", "the chart moved to the left pane with the keyboard alone")
}
