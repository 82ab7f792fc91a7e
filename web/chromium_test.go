package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
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
