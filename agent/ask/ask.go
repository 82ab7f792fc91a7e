// Package ask gives the model a tool to ask the person a question: free
// text, or one of a few choices. The question goes through the turn's
// agent.Asker (the kernel's question API, orrery.input.requested), so it
// reaches the clients that draw consent, and the run event bus as
// input.needed. With nobody who can answer, the question is refused, and
// the tool says so: the model is told never to guess the answer.
package ask

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/tool"
)

// Name is the tool's name.
const Name = "ask"

// Tool asks the person watching a question and returns the answer. It is
// meant to be searchable (found with tools.search). The zero Tool is
// ready to use.
type Tool struct{}

var _ tool.Tool = Tool{}

// Spec implements tool.Tool. Asking needs no consent: the person answers
// or declines, and nothing else happens.
func (Tool) Spec() tool.Spec {
	return tool.Spec{
		Name: Name,
		Description: "Asks the person a question and waits for the answer: free text, or one of the choices you give. " +
			"Use it when you cannot go on without their decision. If nobody can answer, you are told so: never guess the answer.",
		ReadOnly: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"question":{"type":"string","description":"the question, complete in itself"},` +
			`"choices":{"type":"array","items":{"type":"string"},"description":"the answers to choose from; omit for a free-text answer"},` +
			`"default":{"type":"string","description":"the answer you suggest"}},` +
			`"required":["question"],"additionalProperties":false}`),
	}
}

// Answer is the tool's result when the person answered.
type Answer struct {
	Answer string `json:"answer"`
}

// Call implements tool.Tool.
func (Tool) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		Question string   `json:"question"`
		Choices  []string `json:"choices"`
		Default  string   `json:"default"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil || strings.TrimSpace(a.Question) == "" {
		return tool.Result{Text: `ask needs {"question": "…"}, with choices for a multiple-choice question`, Error: true}, nil
	}
	q := agent.Question{Kind: agent.QuestionText, Prompt: a.Question, Default: a.Default}
	if len(a.Choices) > 0 {
		for _, ch := range a.Choices {
			if strings.TrimSpace(ch) == "" {
				return tool.Result{Text: "ask: a choice is empty: give each choice some text", Error: true}, nil
			}
		}
		q.Kind, q.Choices = agent.QuestionChoice, a.Choices
	}
	env, _ := agent.EnvFrom(ctx)
	asker, ok := env.Turn.(agent.Asker)
	if !ok {
		return refused("nobody can be asked in this run"), nil
	}
	ans, err := asker.Ask(ctx, q)
	if err != nil {
		if ctx.Err() != nil {
			return tool.Result{}, ctx.Err()
		}
		return tool.Result{}, fmt.Errorf("ask the person: %w", err)
	}
	if ans.Refused {
		return refused(ans.Why), nil
	}
	data, _ := json.Marshal(Answer{Answer: ans.Value})
	return tool.Result{Text: string(data)}, nil
}

func refused(why string) tool.Result {
	return tool.Result{Text: fmt.Sprintf("the person was not asked or did not answer (%s). Do not guess the answer: go on without it, or stop and say what you need to know.", why), Error: true}
}
