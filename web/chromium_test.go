package web_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/ui"
)

func TestPromptStreamsAnswer(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	session := openNewSession(t, ctx, r.http.URL)

	prompt(t, ctx, "hello")
	until(t, ctx, "the answer has streamed in", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("to talk to a real model."))`)
	if got := textOf(t, ctx, ".msg.user .body"); got != "hello" {
		t.Errorf("the person's message = %q, want %q", got, "hello")
	}
	answer := textOf(t, ctx, ".msg.assistant .body")
	if !strings.Contains(answer, `You said: "hello". I am Orrery's offline model`) {
		t.Errorf("the answer = %q, want the offline model's reply to hello", answer)
	}
	if n := count(t, ctx, "details.reasoning"); n != 1 {
		t.Errorf("reasoning blocks = %d, want 1 (collapsible)", n)
	}
	if evalJS[bool](t, ctx, `document.querySelector("details.reasoning").open`) {
		t.Error("the reasoning is open, want it collapsed")
	}
	until(t, ctx, "the session list shows it, idle", `[...document.querySelectorAll("#sessions .session")].some(b => b.dataset.session === `+js(session)+` && b.textContent.includes("idle") && b.textContent.includes("$0.0000"))`)
	if got := textOf(t, ctx, "#run-state"); !strings.Contains(got, "idle") {
		t.Errorf("run state = %q, want idle", got)
	}
	screenshot(t, ctx, "thread", "a session with the prompt hello, its collapsed reasoning and the streamed answer; the session list on the left, live connection top right")
}

func TestConsentThenToolRuns(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	openNewSession(t, ctx, r.http.URL)

	prompt(t, ctx, "run `echo hi`")
	until(t, ctx, "the consent prompt is shown", `document.querySelector(".consent button[data-option=allow_once]") !== null`)
	q := textOf(t, ctx, ".consent")
	for _, want := range []string{"Allow shell", "echo hi", "Allow once", "Deny"} {
		if !strings.Contains(q, want) {
			t.Errorf("the consent prompt = %q, want it to contain %q", q, want)
		}
	}
	screenshot(t, ctx, "consent", "the shell tool call with its arguments and the consent prompt: Allow once, Allow shell for this session, Deny")
	run(t, ctx, "press Allow once", chromedp.Click(chromedp.CSS(".consent button[data-option=allow_once]")))
	until(t, ctx, "the command's output is shown", `[...document.querySelectorAll(".tool .k-stream")].some(e => e.textContent === "hi\n")`)
	until(t, ctx, "the run has finished", `window.orrery.view.runId === "" && document.querySelector(".msg.assistant:last-of-type") !== null && document.body.textContent.includes("exit status 0")`)
	if n := count(t, ctx, ".consent"); n != 0 {
		t.Errorf("consent prompts left = %d, want 0 once answered", n)
	}
	if got := textOf(t, ctx, ".decision"); !strings.Contains(got, "allowed (allow once) by web") {
		t.Errorf("the decision line = %q, want it to say allowed by web", got)
	}
	if got := textOf(t, ctx, ".tool .tool-args"); !strings.Contains(got, `"command": "echo hi"`) {
		t.Errorf("the tool's arguments = %q, want the command", got)
	}
	screenshot(t, ctx, "tool-output", "the shell call allowed once, its streamed output hi, and the agent's report")
}

func TestConsentAnsweredElsewhereDisappears(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	session := openNewSession(t, ctx, r.http.URL)

	prompt(t, ctx, "run `echo elsewhere`")
	until(t, ctx, "the consent prompt is shown", `window.orrery.view.consent.size === 1 && document.querySelector(".consent") !== null`)
	request := evalJS[string](t, ctx, `[...window.orrery.view.consent.keys()][0]`)
	// Another client that draws consent answers first.
	v, status := control(t, r.http.URL, "?client=tui&draws=thread,tools,consent",
		`{"t":"consent.answer","id":"x","session":"`+session+`","request":"`+request+`","option":"deny"}`)
	if status != 200 {
		t.Fatalf("consent.answer from another client = %d %v, want 200", status, v)
	}
	until(t, ctx, "the prompt is gone", `document.querySelector(".consent") === null`)
	until(t, ctx, "the denial is shown", `[...document.querySelectorAll(".decision")].some(e => e.textContent.includes("denied") && e.textContent.includes("by tui"))`)
}

func TestChartPlacedAndMoved(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	session := openNewSession(t, ctx, r.http.URL)

	prompt(t, ctx, "show me a chart of apples pears")
	until(t, ctx, "the chart is drawn in the right pane", `(() => {
		const c = document.querySelector("#pane-right .placed canvas");
		const chart = c && window.orreryCharts && window.orreryCharts(c);
		return chart && JSON.stringify(chart.data.datasets[0].data) === "[6,5]";
	})()`)
	head := textOf(t, ctx, "#pane-right .placed-head")
	for _, want := range []string{"Letters per word", "agent"} {
		if !strings.Contains(head, want) {
			t.Errorf("the pane's header = %q, want it to contain %q", head, want)
		}
	}
	if got := textOf(t, ctx, "#pane-right .chart-caption"); got != "letters: apples 6, pears 5" {
		t.Errorf("the chart's caption = %q, want the values in words", got)
	}
	screenshot(t, ctx, "chart-pane", "the offline model's bar chart of apples and pears placed in the right pane, labelled with its owner agent and title")

	// The person moves it to the band with the pane's own control.
	run(t, ctx, "move it to the band", chromedp.SetValue(chromedp.CSS("#pane-right .placed select.move"), "band"))
	until(t, ctx, "the chart is in the band", `document.querySelector("#band .placed canvas") !== null && document.getElementById("pane-right").hidden`)
	moves := r.sent("ui.move")
	if len(moves) != 1 || moves[0]["node"] != "placed:agent:offline-chart" || moves[0]["placement"] != "band" || moves[0]["session"] != session {
		t.Errorf("ui.move sent = %v, want one move of placed:agent:offline-chart to band", moves)
	}
	// And hides it.
	run(t, ctx, "hide it", chromedp.Click(chromedp.CSS("#band .placed .placed-tools button")))
	until(t, ctx, "the chart is gone", `document.querySelector(".placed canvas") === null`)
}

// ciStructure is a component over orrery/1 with a chart bound to its data,
// a text, and a button that presses "retry" while something failed.
const ciStructure = `{"type": "stack", "children": [
	{"type": "text", "value": "${/failed} failed of ${/runs|count:run}, ${/passRate|percent} green"},
	{"type": "chart", "kind": "columns", "labels": "${/days}", "series": [{"label": "build", "values": "${/times}"}], "unit": "s"},
	{"type": "table", "columns": ["Run", "Status"], "rows": "${/rows}", "on": {"select": "rerun"}},
	{"type": "button", "label": "Retry ${/failed|count:failure}", "when": "${/failed > 0}", "on": {"press": "retry"}},
	{"type": "button", "label": "CI dashboard", "href": "${/url}"}
]}`

const ciData = `{"failed": 2, "runs": 5, "passRate": 0.6, "days": ["mon", "tue", "wed"], "times": [212, 198, 240],
	"rows": [["lint", "ok"], ["unit", "failed"]], "url": "https://ci.example.com/main"}`

// ciOwner is the extension that shows the component in these tests.
const ciOwner = ui.Owner("ext:ci")

// showComponent has the kernel place the component, as the extension host
// does for ext:ci's ui/show: an inline structure with its first data, in
// the right pane of session.
func showComponent(t *testing.T, r *rig, session string) {
	t.Helper()
	sess, err := r.k.Session(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	err = sess.Show(context.Background(), ciOwner, kernel.ShowInput{ID: "ci", Placement: "pane.right", Title: "CI",
		Structure: json.RawMessage(ciStructure), Data: json.RawMessage(ciData)})
	if err != nil {
		t.Fatalf("Show(component) = %v", err)
	}
}

func TestComponentChartUpdatesWithData(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	session := openNewSession(t, ctx, r.http.URL)
	showComponent(t, r, session)

	until(t, ctx, "the component is drawn", `document.querySelector("#pane-right [data-node='placed:ext:ci:ci'] canvas") !== null`)
	body := textOf(t, ctx, "#pane-right .placed-body")
	for _, want := range []string{"2 failed of 5 runs, 60% green", "build: mon 212 s, tue 198 s, wed 240 s", "Retry 2 failures", "CI dashboard (https://ci.example.com/main)", "unit"} {
		if !strings.Contains(body, want) {
			t.Errorf("the component = %q, want it to contain %q", body, want)
		}
	}
	until(t, ctx, "Chart.js holds the bound values", `JSON.stringify(window.orreryCharts(document.querySelector("#pane-right canvas")).data.datasets[0].data) === "[212,198,240]"`)
	screenshot(t, ctx, "component", "a component in the right pane: text, a column chart, a table, a Retry button and a link, all bound to its data")

	// The owner changes the data (ui/data patch); the kernel sends the
	// change as a STATE_DELTA under /data.
	sess, err := r.k.Session(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	patch := `[{"op":"replace","path":"/times/2","value":120},{"op":"replace","path":"/failed","value":0}]`
	if err := sess.Data(context.Background(), ciOwner, "ci", kernel.DataUpdate{Patch: json.RawMessage(patch)}); err != nil {
		t.Fatalf("Data(patch) = %v", err)
	}
	until(t, ctx, "the chart shows the new value", `JSON.stringify(window.orreryCharts(document.querySelector("#pane-right canvas")).data.datasets[0].data) === "[212,198,120]"`)
	body = textOf(t, ctx, "#pane-right .placed-body")
	if !strings.Contains(body, "wed 120 s") || !strings.Contains(body, "0 failed of 5 runs") {
		t.Errorf("after the update the component = %q, want wed 120 s and 0 failed", body)
	}
	if strings.Contains(body, "Retry") {
		t.Errorf("after the update the component = %q, want the Retry button hidden (when /failed > 0 is false)", body)
	}
}

func TestComponentPressSendsIntent(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	session := openNewSession(t, ctx, r.http.URL)
	showComponent(t, r, session)

	until(t, ctx, "the Retry button is drawn", `[...document.querySelectorAll("#pane-right button")].some(b => b.textContent === "Retry 2 failures")`)
	_ = evalJS[bool](t, ctx, `[...document.querySelectorAll("#pane-right button")].find(b => b.textContent === "Retry 2 failures").click(), true`)
	_ = evalJS[bool](t, ctx, `[...document.querySelectorAll("#pane-right tr.actionable")][1].click(), true`)
	_ = evalJS[bool](t, ctx, `document.querySelector("#pane-right .link-button").click(), true`)

	// The press and the choice reach the owner; the link's open is the
	// host's (it names the target in a notice), so it never does.
	got := map[string]string{}
	for len(got) < 2 {
		select {
		case in := <-r.intents:
			if in.Owner != ciOwner || in.ID != "ci" || in.Session != session {
				t.Errorf("intent %+v, want one for ext:ci's ci in %s", in, session)
			}
			got[in.Action] = string(in.Value)
		case <-time.After(waitFor):
			t.Fatalf("the owner received %v, want retry and rerun", got)
		}
	}
	if v, ok := got["retry"]; !ok || v != "" {
		t.Errorf("retry reached the owner with %q (present %v), want no value", v, ok)
	}
	if v := got["rerun"]; !jsonSame(v, `["unit","failed"]`) {
		t.Errorf("rerun reached the owner with %s, want the chosen row", v)
	}
	until(t, ctx, "the link's notice", `document.body.textContent.includes("https://ci.example.com/main")`)
	select {
	case in := <-r.intents:
		t.Errorf("the link's open reached the owner: %+v", in)
	case <-time.After(200 * time.Millisecond):
	}
}

func jsonSame(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func TestMaliciousMarkdownIsInert(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	openNewSession(t, ctx, r.http.URL)
	const evil = "<script>window.pwned=1</script> [click](javascript:window.pwned=2) <img src=x onerror=\"window.pwned=3\"> " +
		"<a href=\"javascript:window.pwned=4\">a</a> ![pic](javascript:window.pwned=5)"

	// Through the model: the offline model quotes the prompt back.
	prompt(t, ctx, evil)
	until(t, ctx, "the answer has streamed in", `[...document.querySelectorAll(".msg.assistant")].some(e => e.textContent.includes("to talk to a real model."))`)
	// And as an agent's markdown exactly as written, in the thread and on a
	// placed markdown surface.
	frames := []string{
		`{"type":"TEXT_MESSAGE_START","metadata":{"orrery":{"seq":0}},"messageId":"evil","role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","metadata":{"orrery":{"seq":0}},"messageId":"evil","delta":` + js(evil) + `}`,
		`{"type":"TEXT_MESSAGE_END","metadata":{"orrery":{"seq":0}},"messageId":"evil"}`,
		`{"type":"STATE_DELTA","metadata":{"orrery":{"seq":0}},"delta":[{"op":"add","path":"/ui/nodes/placed:ext:evil:md","value":
			{"placement":"band","title":` + js(evil) + `,"owner":"ext:evil","surface":{"kind":{"t":"markdown","value":` + js(evil) + `}}}}]}`,
	}
	for _, f := range frames {
		_ = evalJS[bool](t, ctx, `window.orrery.ingest(`+f+`), true`)
	}
	until(t, ctx, "the markdown is drawn", `document.querySelector("[data-node='placed:ext:evil:md'] .k-markdown") !== null && document.querySelectorAll(".msg.assistant").length === 2`)
	screenshot(t, ctx, "malicious-markdown", "script tags, javascript: links and an img onerror from an agent, drawn as inert text")

	if got := evalJS[string](t, ctx, `String(window.pwned)`); got != "undefined" {
		t.Errorf("window.pwned = %s, want undefined: agent text ran as code", got)
	}
	for _, sel := range []string{".thread script", ".band script", ".thread img", ".band img", "a[href^='javascript']", "[onerror]"} {
		if n := count(t, ctx, sel); n != 0 {
			t.Errorf("elements matching %s = %d, want 0", sel, n)
		}
	}
	for _, where := range []string{".msg.assistant .body", "[data-node='placed:ext:evil:md'] .k-markdown"} {
		if got := textOf(t, ctx, where); !strings.Contains(got, "<script>window.pwned=1</script>") {
			t.Errorf("the text of %s = %q, want the script tag shown as text", where, got)
		}
	}
	if got := textOf(t, ctx, ".msg.user .body"); got != evil {
		t.Errorf("the person's message = %q, want it as typed", got)
	}
}

func TestSteerAndStop(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	openNewSession(t, ctx, r.http.URL)

	prompt(t, ctx, "run `sleep 20`")
	run(t, ctx, "allow it", chromedp.Click(chromedp.CSS(".consent button[data-option=allow_once]")))
	until(t, ctx, "the composer offers Steer and Stop", `document.getElementById("send").textContent === "Steer" && !document.getElementById("stop").hidden && !document.getElementById("prompt").disabled`)
	prompt(t, ctx, "also say when done")
	until(t, ctx, "the steer is in the thread", `[...document.querySelectorAll(".msg.user.steer")].some(e => e.textContent.includes("You (steer)") && e.textContent.includes("also say when done"))`)
	screenshot(t, ctx, "steer", "a run in flight with the person's steer in the thread and the Stop button")
	run(t, ctx, "press Stop", chromedp.Click(chromedp.ID("stop")))
	until(t, ctx, "the run has stopped", `window.orrery.view.runId === "" && document.body.textContent.includes("Stopped.") && document.getElementById("stop").hidden`)
	sends := r.sent("run.send")
	if len(sends) != 2 || sends[1]["target"] != "steer" {
		t.Errorf("run.send requests = %v, want the second with target steer", sends)
	}
	if n := len(r.sent("run.cancel")); n != 1 {
		t.Errorf("run.cancel requests = %d, want 1", n)
	}
}

func TestPhoneWidth(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := browser(t, 390, 844)
	run(t, ctx, "load the page", chromedp.Navigate(r.http.URL+"/"), chromedp.WaitVisible(chromedp.ID("prompt")))
	prompt(t, ctx, "show me a chart of apples pears")
	until(t, ctx, "the chart is drawn, with its pane's tab", `document.querySelector("#pane-right canvas") !== null && !document.querySelector("#tabs [data-tab=pane-right]").hidden`)
	run(t, ctx, "press the right pane's tab", chromedp.Click(chromedp.CSS(`#tabs [data-tab=pane-right]`)))
	until(t, ctx, "the chart is on screen", `document.querySelector("#pane-right canvas").getBoundingClientRect().width > 0`)
	// Nothing is wider than the screen: one view at a time.
	if w := evalJS[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("page width = %d at a 390-pixel screen, want no horizontal scroll", w)
	}
	screenshot(t, ctx, "phone", "the chart pane's tab at phone width (390×844)")
}
