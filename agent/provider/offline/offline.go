// Package offline is Orrery's built-in model. It needs no network and no
// key, and it answers deterministically: the same conversation gets the same
// reasoning, text and tool calls. It exists so that a fresh install shows the
// whole event vocabulary (reasoning, streamed text, tool calls and results)
// before any real model is configured.
//
// What it understands, for a newcomer to try:
//   - "what time is it", "echo TEXT": the clock and echo tools;
//   - "run `CMD`" (or "run a command"): the shell tool, whose output streams
//     onto a surface after the consent prompt;
//   - "write a file NAME" and "edit NAME replace OLD with NEW": the file
//     tools, whose result is a diff;
//   - "show …" and "show me a chart of …": a table or a chart placed in the
//     right pane, through tools.search and ui.show.
package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/protocol"
)

var _ agent.Provider = (*Model)(nil)

// Model is the offline model. The zero value is ready to use.
type Model struct{}

// New returns the offline model.
func New() *Model { return &Model{} }

// Name implements agent.Provider.
func (*Model) Name() string { return "offline" }

// Model implements agent.Provider.
func (*Model) Model() string { return "offline" }

// Stream implements agent.Provider. It answers the latest message: it
// reports tool results, calls a tool the prompt names, or replies in text.
func (m *Model) Stream(ctx context.Context, req agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	usage := agent.Usage{InputTokens: countTokens(req.Messages)}
	plan := m.plan(req)
	var out int64
	send := func(d agent.Delta) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		out += int64(len(strings.Fields(d.Text)))
		return emit(d)
	}
	if plan.reasoning != "" {
		for _, piece := range chunks(plan.reasoning, 6) {
			if err := send(agent.Delta{Kind: agent.DeltaReasoning, Text: piece}); err != nil {
				return usage, err
			}
		}
	}
	for _, piece := range chunks(plan.text, 4) {
		if err := send(agent.Delta{Kind: agent.DeltaText, Text: piece}); err != nil {
			return usage, err
		}
	}
	for _, c := range plan.calls {
		if err := send(agent.Delta{Kind: agent.DeltaToolCall, ToolName: c.name}); err != nil {
			return usage, err
		}
		if err := send(agent.Delta{Kind: agent.DeltaToolArgs, Text: c.args}); err != nil {
			return usage, err
		}
	}
	usage.OutputTokens = out + int64(len(plan.calls))
	return usage, nil
}

type plannedCall struct{ name, args string }

type plan struct {
	reasoning string
	text      string
	calls     []plannedCall
}

func (m *Model) plan(req agent.Request) plan {
	if len(req.Messages) == 0 {
		return plan{text: "Hello. I am Orrery's offline model. Send me a prompt."}
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == protocol.RoleTool {
		if p, ok := planShow(req); ok {
			return p
		}
		return planToolReport(req.Messages)
	}
	prompt := strings.TrimSpace(lastUserText(req.Messages))
	if calls := planCalls(prompt, req); len(calls) > 0 {
		names := make([]string, len(calls))
		for i, c := range calls {
			names[i] = c.name
		}
		return plan{
			reasoning: fmt.Sprintf("The prompt asks for %s, which a tool can answer. I will call it.", strings.Join(names, " and ")),
			text:      fmt.Sprintf("Calling %s.", strings.Join(names, " and ")),
			calls:     calls,
		}
	}
	return plan{
		reasoning: fmt.Sprintf("The person wrote %d words. I have no network and no real model, so I will answer plainly and say how to get a real one.", len(strings.Fields(prompt))),
		text: fmt.Sprintf("You said: %q. I am Orrery's offline model: I run with no network and no API key, "+
			"so I can echo text, tell the time and show how a run streams. Set OPENAI_API_KEY or ANTHROPIC_API_KEY, "+
			"or pass --model, to talk to a real model.", prompt),
	}
}

// planCalls picks the tools a prompt names: "time"/"clock"/"date" → clock,
// "echo REST" → echo with REST, and any offered tool named as a word.
func planCalls(prompt string, req agent.Request) []plannedCall {
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(prompt), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' && r != '.'
	}) {
		words[w] = true
	}
	var calls []plannedCall
	if (words["show"] || words["display"] || words["chart"]) && offered(req, "tools.search") && !offered(req, "ui.show") {
		// ui.show is not in every request: find it first.
		return []plannedCall{{name: "tools.search", args: `{"query":"show surface"}`}}
	}
	if c, ok := planWork(prompt, words, req); ok {
		return []plannedCall{c}
	}
	for _, spec := range req.Tools {
		name := spec.Name
		switch {
		case name == "echo" && words["echo"]:
			rest := prompt
			if i := strings.Index(strings.ToLower(prompt), "echo"); i >= 0 {
				rest = strings.TrimSpace(prompt[i+len("echo"):])
			}
			args, _ := json.Marshal(map[string]string{"text": strings.Trim(rest, ":\"' ")})
			calls = append(calls, plannedCall{name: name, args: string(args)})
		case name == "clock" && (words["time"] || words["clock"] || words["date"]):
			calls = append(calls, plannedCall{name: name, args: "{}"})
		case name != "echo" && name != "clock" && words[strings.ToLower(name)]:
			calls = append(calls, plannedCall{name: name, args: "{}"})
		}
	}
	return calls
}

func offered(req agent.Request, name string) bool {
	for _, t := range req.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// demoCommand is what "run a command" runs when the prompt names none: a
// few lines spaced out in time, so the stream is visible.
const demoCommand = "for i in 1 2 3; do echo \"step $i of 3\"; sleep 0.3; done; echo done"

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	editRE     = regexp.MustCompile(`(?i)\bedit\s+(\S+)\s+replace\s+"?(.+?)"?\s+with\s+"?(.*?)"?\s*$`)
	fileName   = regexp.MustCompile(`[\w./-]+\.[A-Za-z0-9]+`)
)

// planWork picks the coding tool a prompt asks for: shell for "run",
// write_file for "write a file", edit_file for "edit PATH replace A with B".
func planWork(prompt string, words map[string]bool, req agent.Request) (plannedCall, bool) {
	marshal := func(name string, v any) (plannedCall, bool) {
		args, _ := json.Marshal(v)
		return plannedCall{name: name, args: string(args)}, true
	}
	if m := editRE.FindStringSubmatch(prompt); m != nil && offered(req, "edit_file") {
		return marshal("edit_file", map[string]string{"path": m[1], "old_string": m[2], "new_string": m[3]})
	}
	if words["write"] && words["file"] && offered(req, "write_file") {
		path := "orrery-demo.txt"
		if f := fileName.FindString(prompt); f != "" {
			path = f
		}
		return marshal("write_file", map[string]string{"path": path, "content": "Hello from Orrery's offline model.\n"})
	}
	if (words["run"] || words["shell"] || words["execute"]) && offered(req, "shell") {
		cmd := demoCommand
		if m := backticked.FindStringSubmatch(prompt); m != nil {
			cmd = m[1]
		}
		return marshal("shell", map[string]string{"command": cmd})
	}
	return plannedCall{}, false
}

// planShow follows a tools.search that found ui.show: it shows the words of
// the prompt as a table in the right pane, or, when the prompt asks for a
// chart, their lengths as a bar chart.
func planShow(req agent.Request) (plan, bool) {
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	var called string
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			if tc.ID == last.ToolCallID {
				called = tc.Function.Name
			}
		}
	}
	if called != "tools.search" || !offered(req, "ui.show") {
		return plan{}, false
	}
	prompt := lastUserText(msgs)
	if strings.Contains(strings.ToLower(prompt), "chart") {
		return planChart(prompt), true
	}
	rows := [][]string{}
	for i, w := range strings.Fields(prompt) {
		rows = append(rows, []string{fmt.Sprint(i + 1), w})
	}
	args, _ := json.Marshal(map[string]any{
		"id": "offline-demo", "placement": "pane.right", "title": "Your prompt, word by word",
		"surface": map[string]any{"kind": map[string]any{"t": "table", "columns": []string{"#", "word"}, "rows": rows}},
	})
	return plan{
		reasoning: "The search found ui.show. I will put the prompt's words in a table in the right pane.",
		text:      "Showing your prompt as a table.",
		calls:     []plannedCall{{name: "ui.show", args: string(args)}},
	}, true
}

// planChart charts the words after "chart of" (or the whole prompt): one
// bar per word, as long as the word.
func planChart(prompt string) plan {
	subject := prompt
	if i := strings.Index(strings.ToLower(prompt), "chart of"); i >= 0 {
		subject = prompt[i+len("chart of"):]
	}
	var labels []string
	var values []int
	for _, w := range strings.Fields(subject) {
		w = strings.Trim(w, ".,;:!?\"'")
		if w == "" || len(labels) == 32 {
			continue
		}
		labels = append(labels, w)
		values = append(values, len([]rune(w)))
	}
	if len(labels) == 0 {
		labels, values = []string{"empty"}, []int{0}
	}
	args, _ := json.Marshal(map[string]any{
		"id": "offline-chart", "placement": "pane.right", "title": "Letters per word",
		"surface": map[string]any{"kind": map[string]any{
			"t": "chart", "kind": "bars", "labels": labels,
			"series": []map[string]any{{"label": "letters", "values": values}},
		}},
	})
	return plan{
		reasoning: "The search found ui.show. I will chart how many letters each word has, in the right pane.",
		text:      "Charting your words in the right pane.",
		calls:     []plannedCall{{name: "ui.show", args: string(args)}},
	}
}

// planToolReport answers the tool results that end the conversation.
func planToolReport(msgs []protocol.Message) plan {
	names := map[string]string{}
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Function.Name
		}
	}
	var parts []string
	failed := false
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role == protocol.RoleTool; i-- {
		name := names[msgs[i].ToolCallID]
		if name == "" {
			name = "a tool"
		}
		verb := "returned"
		switch status := outcomeStatus(msgs[i]); status {
		case "", "ok":
		case "denied":
			verb, failed = "was denied:", true
		case "error":
			verb, failed = "failed:", true
		default:
			verb, failed = "did not finish ("+status+"):", true
		}
		parts = append([]string{fmt.Sprintf("%s %s %q", name, verb, msgs[i].Content.String())}, parts...)
	}
	if failed {
		return plan{
			reasoning: "A tool call did not succeed. I will say so rather than claim it is done.",
			text:      "Not done: " + strings.Join(parts, "; ") + ".",
		}
	}
	return plan{
		reasoning: "The tool results are in. I will report them as they are.",
		text:      "Done: " + strings.Join(parts, "; ") + ".",
	}
}

// outcomeStatus is a tool message's outcome as Orrery logged it
// (metadata.orrery.outcome.status: ok, error, denied, cancelled, …), or
// "" when it carries none.
func outcomeStatus(m protocol.Message) string {
	var md struct {
		Orrery struct {
			Outcome struct {
				Status string `json:"status"`
			} `json:"outcome"`
		} `json:"orrery"`
	}
	if len(m.Metadata) == 0 || json.Unmarshal(m.Metadata, &md) != nil {
		return ""
	}
	return md.Orrery.Outcome.Status
}

func lastUserText(msgs []protocol.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == protocol.RoleUser {
			return msgs[i].Content.String()
		}
	}
	return ""
}

// chunks splits s into pieces of n words, keeping the spaces, so that the
// pieces joined give s back exactly.
func chunks(s string, n int) []string {
	var out []string
	words := 0
	start := 0
	inWord := false
	for i, r := range s {
		if unicode.IsSpace(r) {
			if inWord {
				words++
				inWord = false
				if words == n {
					out = append(out, s[start:i])
					start = i
					words = 0
				}
			}
			continue
		}
		inWord = true
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func countTokens(msgs []protocol.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += int64(len(strings.Fields(m.Content.String()))) + 4
		for _, tc := range m.ToolCalls {
			n += int64(len(strings.Fields(tc.Function.Arguments))) + 4
		}
	}
	return n
}
