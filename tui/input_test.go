package tui_test

import (
	"context"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
)

// TestKernelQuestion draws the questions the kernel puts to the person
// (orrery.input.requested, appended here as an agent's run would log it)
// in the host's style, answers a choice with a digit and a text question
// from the composer (prefilled with the suggested value), each as
// input.answer {session, request, value}, and clears the prompt when the
// kernel says the question was resolved. What the kernel replies is shown:
// the test sends the same request itself and compares.
func TestKernelQuestion(t *testing.T) {
	l := startLive(t, "offline")
	s := l.until("an idle session", contains("orrery · ses_", "idle"))
	id := sessionOf(t, s)
	sess, err := l.k.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	appendCustom := func(name, value string) {
		t.Helper()
		if err := sess.Append(context.Background(), &protocol.Custom{Name: name, Value: []byte(value)}); err != nil {
			t.Fatal(err)
		}
	}
	type inputAnswer struct {
		protocol.Envelope
		Session string `json:"session"`
		Request string `json:"request"`
		Value   string `json:"value"`
	}
	// reply is what the kernel says to an answer, as the screen shows it.
	reply := func(request, value string) string {
		_, err := l.cl.Do(context.Background(), &inputAnswer{Envelope: protocol.Envelope{T: "input.answer"}, Session: id, Request: request, Value: value})
		if err != nil {
			return "answer: " + termtext.StripLine(err.Error())[:30]
		}
		return "answered " + value
	}

	appendCustom(kernel.InputRequestedEvent, `{"request":"input_c","inputKind":"choice","prompt":"Which colour?","choices":["red","blue"],"defaultValue":"red"}`)
	l.until("the question", contains("? QUESTION · the agent asks: Which colour?", "❯ [1] red", "[2] blue", "waiting for your answer"))
	l.press(keyF6) // nothing placed: the keys stay the question's
	l.press(tea.KeyPressMsg{Code: '2', Text: "2"})
	l.until("the kernel's reply", contains(reply("input_c", "blue")))
	appendCustom(kernel.InputResolvedEvent, `{"request":"input_c","outcome":"answered","value":"blue"}`)
	l.until("the question gone", func(s string) bool {
		return contains("question answered: blue", "idle")(s) && !contains("Which colour?")(s)
	})

	appendCustom(kernel.InputRequestedEvent, `{"request":"input_t","inputKind":"text","prompt":"Branch name?","defaultValue":"main"}`)
	l.until("the text question", contains("? QUESTION · the agent asks: Branch name?", "type your answer below", "› main"))
	l.typeText("-2")
	l.press(keyEnter)
	l.until("the kernel's reply", contains(reply("input_t", "main-2")))
	appendCustom(kernel.InputResolvedEvent, `{"request":"input_t","outcome":"answered","value":"main-2"}`)
	l.until("the question gone", func(s string) bool { return !contains("Branch name?")(s) })
	// With no question pending, the composer's Enter is a prompt again.
	l.typeText("hello")
	l.press(keyEnter)
	l.until("the prompt answered", contains(`You said: "hello"`))
}
