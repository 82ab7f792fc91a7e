package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/protocol"
)

// Names of the CUSTOM events of a question put to the person.
const (
	InputRequestedEvent = "orrery.input.requested"
	InputResolvedEvent  = "orrery.input.resolved"
	// UsageEvent reports each model call's usage and the run's total, in a
	// run started with SendInput.UsageEvents.
	UsageEvent = "orrery.usage"
)

// InputRequested is the value of orrery.input.requested: an agent's
// question, or a crew task that declared human input.
type InputRequested struct {
	Request         string   `json:"request"`
	InputKind       string   `json:"inputKind"`
	Prompt          string   `json:"prompt"`
	Choices         []string `json:"choices,omitempty"`
	DefaultValue    string   `json:"defaultValue,omitempty"`
	TaskDescription string   `json:"taskDescription,omitempty"`
	CrewID          string   `json:"crewId,omitempty"`
	AgentID         string   `json:"agentId,omitempty"`
}

// InputResolved is the value of orrery.input.resolved.
type InputResolved struct {
	Request string `json:"request"`
	// Outcome is answered, refused (declined), unanswered (the program
	// that could answer stopped listening) or cancelled.
	Outcome string `json:"outcome"`
	Value   string `json:"value,omitempty"`
	Client  string `json:"client,omitempty"`
}

// Usage is the value of orrery.usage: one model call's usage, on the
// model that made it (a sub-agent's own), and the run's totals so far.
// The event carries the subagentRunId of a sub-agent's call.
type Usage struct {
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	InputTokens  int64  `json:"inputTokens"`
	OutputTokens int64  `json:"outputTokens"`
	// TotalTokens is the run's cumulative input and output tokens.
	TotalTokens int64 `json:"totalTokens"`
	// MicroUSD is the run's cumulative cost, each model's usage priced
	// against that model.
	MicroUSD int64 `json:"micro_usd"`
}

// pendingInput is a question waiting for its answer.
type pendingInput struct {
	id     string
	q      agent.Question
	answer chan agent.Answer // buffered: resolved exactly once
}

var _ agent.Asker = (*turn)(nil)

// Ask implements agent.Asker: it puts q to the clients that draw consent
// and waits for the first answer. With no such client, or when the run
// ends first, the question is refused, never granted.
func (t *turn) Ask(ctx context.Context, q agent.Question) (agent.Answer, error) {
	var p *pendingInput
	var refused *agent.Answer
	var err error
	if derr := t.s.do(ctx, func() {
		if t.s.run != t.r {
			err = agent.ErrStopped
			return
		}
		if !t.s.anyConsenter() {
			refused = &agent.Answer{Refused: true, Unattended: true, Why: "no client that can answer is attached, so the question is refused"}
			return
		}
		p, err = t.s.askInput(q)
	}); derr != nil {
		return agent.Answer{}, derr
	}
	if err != nil {
		return agent.Answer{}, err
	}
	if refused != nil {
		return *refused, nil
	}
	select {
	case a := <-p.answer:
		return a, nil
	case <-ctx.Done():
		_ = t.s.do(context.WithoutCancel(ctx), func() { t.s.resolveInput(p, "cancelled", "", Caller{}) })
		return agent.Answer{Refused: true, Why: "the run ended before an answer came"}, ctx.Err()
	}
}

// askInput logs the question and records it pending. Runs on the actor.
func (s *Session) askInput(q agent.Question) (*pendingInput, error) {
	s.assertActor()
	p := &pendingInput{id: newID("input"), q: q, answer: make(chan agent.Answer, 1)}
	value, err := json.Marshal(InputRequested{Request: p.id, InputKind: q.Kind, Prompt: q.Prompt, Choices: q.Choices,
		DefaultValue: q.Default, TaskDescription: q.TaskDescription, CrewID: q.CrewID, AgentID: q.AgentID})
	if err != nil {
		return nil, fmt.Errorf("encode question: %w", err)
	}
	if err := s.emit(s.runID(), &protocol.Custom{Name: InputRequestedEvent, Value: value}); err != nil {
		return nil, err
	}
	if s.inputs == nil {
		s.inputs = make(map[string]*pendingInput)
	}
	s.inputs[p.id] = p
	return p, nil
}

// resolveInput ends a pending question; the first resolution wins. Runs on
// the actor.
func (s *Session) resolveInput(p *pendingInput, outcome, value string, by Caller) {
	s.assertActor()
	if s.inputs[p.id] != p {
		return
	}
	delete(s.inputs, p.id)
	resolved, _ := json.Marshal(InputResolved{Request: p.id, Outcome: outcome, Value: value, Client: by.Client})
	if err := s.emit(s.runID(), &protocol.Custom{Name: InputResolvedEvent, Value: resolved}); err != nil {
		s.k.log.Error("resolve question", "session", s.id, "request", p.id, "err", err)
	}
	a := agent.Answer{Value: value}
	switch outcome {
	case "answered":
	case "cancelled":
		a = agent.Answer{Refused: true, Why: "the run ended before an answer came"}
	case "unanswered":
		a = agent.Answer{Refused: true, Why: "nobody answered: the watching program stopped listening, so the answer is no"}
	default:
		a = agent.Answer{Refused: true, Value: value, Why: "the person declined"}
	}
	p.answer <- a
}

// yesWords are the answers that accept a confirm.
var yesWords = []string{"yes", "y", "true", "ok", "allow", "allow_once", "approve", "approved", "confirm"}

// AnswerInput answers a pending question with value. Only a caller that
// draws consent may answer. A confirm is accepted by yes (or y, true, ok,
// allow, approve) and refused by anything else; a choice must be one of
// its choices.
func (s *Session) AnswerInput(ctx context.Context, by Caller, request, value string) error {
	if !by.DrawsConsent() {
		return &RequestError{Msg: "this client does not draw consent, so it cannot answer a question: declare draws including \"consent\""}
	}
	var err error
	if derr := s.do(ctx, func() {
		p, ok := s.inputs[request]
		if !ok {
			err = &RequestError{Msg: fmt.Sprintf("no question %q is pending in session %s: it was answered or cancelled, or never asked", request, s.id)}
			return
		}
		outcome := "answered"
		switch p.q.Kind {
		case agent.QuestionConfirm:
			if slices.Contains(yesWords, strings.ToLower(strings.TrimSpace(value))) {
				value = "yes"
			} else {
				outcome, value = "refused", "no"
			}
		case agent.QuestionChoice:
			if len(p.q.Choices) > 0 && !slices.Contains(p.q.Choices, value) {
				err = &RequestError{Msg: fmt.Sprintf("%q is not one of the choices: answer with one of %s", value, strings.Join(p.q.Choices, ", "))}
				return
			}
		}
		s.resolveInput(p, outcome, value, by)
	}); derr != nil {
		return derr
	}
	return err
}

// PendingInputs returns the ids of the questions waiting for an answer.
func (s *Session) PendingInputs(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.do(ctx, func() {
		for id := range s.inputs {
			ids = append(ids, id)
		}
	})
	slices.Sort(ids)
	return ids, err
}

// attributed reports whether ev, one of the events a transcript folds,
// belongs to a sub-agent: its messages are the sub-agent's own, not the
// session's conversation.
func attributed(ev protocol.Event) bool {
	switch e := ev.(type) {
	case *protocol.TextMessageStart:
		return e.SubagentRunID != ""
	case *protocol.TextMessageContent:
		return e.SubagentRunID != ""
	case *protocol.ToolCallStart:
		return e.SubagentRunID != ""
	case *protocol.ToolCallArgs:
		return e.SubagentRunID != ""
	case *protocol.ToolCallResult:
		return e.SubagentRunID != ""
	case *protocol.ReasoningMessageStart:
		return e.SubagentRunID != ""
	case *protocol.ReasoningMessageContent:
		return e.SubagentRunID != ""
	case *protocol.Custom:
		return e.SubagentRunID != ""
	}
	return false
}

// RefuseInput refuses a pending question, as when the only program that
// could answer it stopped listening. Only a caller that draws consent may.
func (s *Session) RefuseInput(ctx context.Context, by Caller, request string) error {
	if !by.DrawsConsent() {
		return &RequestError{Msg: "this client does not draw consent, so it cannot answer a question: declare draws including \"consent\""}
	}
	var err error
	if derr := s.do(ctx, func() {
		p, ok := s.inputs[request]
		if !ok {
			err = &RequestError{Msg: fmt.Sprintf("no question %q is pending in session %s", request, s.id)}
			return
		}
		s.resolveInput(p, "unanswered", "", by)
	}); derr != nil {
		return derr
	}
	return err
}
