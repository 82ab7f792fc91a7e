package tui

import (
	"encoding/json"
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
)

// Names of the CUSTOM events of a question the kernel puts to the person
// (the agent's ask tool, a crew task that declared human input).
const (
	inputRequestedEvent = "orrery.input.requested"
	inputResolvedEvent  = "orrery.input.resolved"
)

// inputReq is a question waiting for the person's answer, from
// orrery.input.requested. Only a client that draws consent may answer it,
// with input.answer.
type inputReq struct {
	Request      string   `json:"request"`
	InputKind    string   `json:"inputKind"` // text, confirm or choice
	Prompt       string   `json:"prompt"`
	Choices      []string `json:"choices"`
	DefaultValue string   `json:"defaultValue"`
}

// inputAnswer is the input.answer request.
type inputAnswer struct {
	protocol.Envelope
	Session string `json:"session"`
	Request string `json:"request"`
	Value   string `json:"value"`
}

// askInput shows a question the kernel asks. A text question takes its
// answer from the composer, prefilled with the suggested value.
func (m *Model) askInput(value json.RawMessage) {
	var q inputReq
	if json.Unmarshal(value, &q) != nil || q.Request == "" {
		return
	}
	m.scr.question, m.scr.questionChoice = &q, 0
	if q.InputKind == "choice" {
		for i, c := range q.Choices {
			if c == q.DefaultValue {
				m.scr.questionChoice = i
			}
		}
	}
	if q.InputKind != "choice" && q.InputKind != "confirm" && q.DefaultValue != "" && len(m.input.buf) == 0 {
		m.input.set(termtext.StripLine(q.DefaultValue))
	}
	m.scr.focus = ""
}

// inputResolved ends the question the kernel says was resolved.
func (m *Model) inputResolved(value json.RawMessage) {
	var r struct {
		Request string `json:"request"`
		Outcome string `json:"outcome"`
		Value   string `json:"value"`
	}
	if json.Unmarshal(value, &r) != nil || m.scr.question == nil || m.scr.question.Request != r.Request {
		return
	}
	m.scr.question = nil
	text := "question " + termtext.StripLine(r.Outcome)
	if r.Value != "" {
		text += ": " + termtext.StripLine(r.Value)
	}
	m.info(text)
}

// inputKey answers the pending question with a key: for a choice 1–9
// or ←/→ and Enter; for a confirm y or n. A text question is answered by
// the composer's Enter (answerText). Other keys are left to the composer.
func (m *Model) inputKey(s string) (tea.Cmd, bool) {
	q := m.scr.question
	switch q.InputKind {
	case "choice":
		n := len(q.Choices)
		if n == 0 {
			return nil, false
		}
		switch s {
		case "left", "shift+tab":
			m.scr.questionChoice = (m.scr.questionChoice + n - 1) % n
			return nil, true
		case "right", "tab":
			m.scr.questionChoice = (m.scr.questionChoice + 1) % n
			return nil, true
		case "enter":
			return m.answerInput(q.Choices[min(m.scr.questionChoice, n-1)]), true
		}
		if len(s) == 1 && s[0] >= '1' && s[0] <= '9' && int(s[0]-'1') < n {
			m.scr.questionChoice = int(s[0] - '1')
			return m.answerInput(q.Choices[m.scr.questionChoice]), true
		}
	case "confirm":
		switch s {
		case "y":
			return m.answerInput("yes"), true
		case "n":
			return m.answerInput("no"), true
		}
	}
	return nil, false
}

// answerInput sends value as the answer to the pending question.
func (m *Model) answerInput(value string) tea.Cmd {
	q := m.scr.question
	req := &inputAnswer{Envelope: protocol.Envelope{T: "input.answer"}, Session: m.session, Request: q.Request, Value: value}
	return m.do("answer", req, "answered "+termtext.StripLine(value))
}

// drawQuestion draws the pending question in the host's own style, as
// consent is drawn: full width, never inside a box.
func (s *screen) drawQuestion(w int) []string {
	q := s.question
	if q == nil {
		return nil
	}
	out := []string{hostConsent.Render(fit(" ? QUESTION · the agent asks: "+termtext.StripLine(q.Prompt), w))}
	switch q.InputKind {
	case "choice":
		var opts []string
		for i, c := range q.Choices {
			label := fmt.Sprintf("[%d] %s", i+1, termtext.StripLine(c))
			if i == s.questionChoice {
				label = hostConsent.Render("❯ " + label)
			} else {
				label = "  " + label
			}
			opts = append(opts, label)
		}
		out = append(out, fit("  "+strings.Join(opts, "  ")+"   ←/→ Enter", w))
	case "confirm":
		out = append(out, fit("  [y] Yes  [n] No", w))
	default:
		out = append(out, styleDim.Render(fit("   type your answer below and press Enter", w)))
	}
	return out
}
