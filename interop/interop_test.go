// Package interop_test checks Orrery against the official AG-UI 1.0 client.
// Each scenario starts a real kernel on a real SQLite file behind a real
// listener, with a scripted model, and runs agui.mjs, which drives POST /run
// with @ag-ui/client's HttpAgent and checks every event, the state, the
// messages and the log; this test then asserts the values it reports
// against the script.
//
// It needs node and interop/node_modules (run npm ci in interop/). Without
// them the test skips, or fails when CI is set.
package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/agent/provider/script"
	"github.com/getorrery/orrery/agent/subagent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// nodeTimeout bounds one run of agui.mjs.
const nodeTimeout = 90 * time.Second

// prices makes the script model cost something, so that micro_usd is a
// value to check rather than a zero: 2 USD per million input tokens, 10 per
// million output tokens.
var prices = agent.PriceTable{"script:*": {Input: 2_000_000, Output: 10_000_000}}

func cost(in, out int64) int64 { return (in*2_000_000 + out*10_000_000) / 1_000_000 }

// result is the JSON line agui.mjs prints.
type result struct {
	OK       bool        `json:"ok"`
	Scenario string      `json:"scenario"`
	ThreadID string      `json:"threadId"`
	Runs     []runResult `json:"runs"`
	Messages []message   `json:"messages"`
	Log      struct {
		Head       uint64   `json:"head"`
		Types      []string `json:"types"`
		RunStarted []struct {
			RunID         string    `json:"runId"`
			Seq           uint64    `json:"seq"`
			InputMessages []message `json:"inputMessages"`
		} `json:"runStarted"`
	} `json:"log"`
	// client-tool
	ClientTool string  `json:"clientTool"`
	CallID     string  `json:"callId"`
	Answer     message `json:"answer"`
	// cancel
	// subagent, subagent-cancel: each event as the client delivered it
	Subagent struct {
		Events []struct {
			Type          string `json:"type"`
			SubagentRunID string `json:"subagentRunId"`
			MessageID     string `json:"messageId"`
		} `json:"events"`
		// ClientMessages are the sub-agent's messages the client put in
		// agent.messages, which the kernel's thread leaves out.
		ClientMessages []string `json:"clientMessages"`
	} `json:"subagent"`
	CancelReply struct {
		Status int             `json:"status"`
		Value  json.RawMessage `json:"value"`
	} `json:"cancelReply"`
}

type runResult struct {
	RunID    string   `json:"runId"`
	Types    []string `json:"types"`
	FirstSeq uint64   `json:"firstSeq"`
	LastSeq  uint64   `json:"lastSeq"`
	Terminal terminal `json:"terminal"`
	Finished *struct {
		Outcome            string   `json:"outcome"`
		PendingToolCallIDs []string `json:"pendingToolCallIds"`
	} `json:"finished"`
	Result         *protocol.RunResult `json:"result"`
	NewMessageIDs  []string            `json:"newMessageIds"`
	OpenAtTerminal []string            `json:"openAtTerminal"`
	Texts          []streamed          `json:"texts"`
	Reasoning      []streamed          `json:"reasoning"`
	ToolCalls      []struct {
		ToolCallID      string `json:"toolCallId"`
		ToolCallName    string `json:"toolCallName"`
		ParentMessageID string `json:"parentMessageId"`
		Args            string `json:"args"`
		Ended           bool   `json:"ended"`
	} `json:"toolCalls"`
	ToolResults []struct {
		MessageID  string          `json:"messageId"`
		ToolCallID string          `json:"toolCallId"`
		Content    string          `json:"content"`
		Role       string          `json:"role"`
		Outcome    json.RawMessage `json:"outcome"`
	} `json:"toolResults"`
	StateDeltas [][]protocol.PatchOp `json:"stateDeltas"`
	State       json.RawMessage      `json:"state"`
	KernelState json.RawMessage      `json:"kernelState"`
}

type terminal struct {
	Type     string                `json:"type"`
	RunID    string                `json:"runId"`
	Message  string                `json:"message"`
	Code     string                `json:"code"`
	Outcome  json.RawMessage       `json:"outcome"`
	Result   *protocol.RunResult   `json:"result"`
	Usage    []protocol.TokenUsage `json:"usage"`
	Metadata struct {
		Orrery struct {
			Seq    uint64              `json:"seq"`
			Result *protocol.RunResult `json:"result"`
		} `json:"orrery"`
	} `json:"metadata"`
}

type streamed struct {
	MessageID string   `json:"messageId"`
	Role      string   `json:"role"`
	Deltas    []string `json:"deltas"`
	Content   string   `json:"content"`
}

type message struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"toolCalls,omitempty"`
}

func (m message) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) != nil {
		return ""
	}
	return s
}

type scenario struct {
	name string
	// query is added to POST /run's URL; as is the agui.mjs scenario run
	// (name when empty).
	query, as string
	// script is the default model's script; nil means the offline model.
	script *script.File
	check  func(t *testing.T, sc scenario, res result)
}

func TestAGUIClient(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	node := requireNode(t, dir)

	cancelChunks := make([]string, 60)
	for i := range cancelChunks {
		cancelChunks[i] = fmt.Sprintf("word%d ", i)
	}

	scenarios := []scenario{
		{
			name: "text",
			script: &script.File{Turns: []script.Turn{
				{Text: []string{"Hel", "lo, ", "wor", "ld!"}, Usage: &script.Usage{InputTokens: 12, OutputTokens: 7}},
			}},
			check: func(t *testing.T, sc scenario, res result) {
				run := oneRun(t, res)
				turn := sc.script.Turns[0]
				wantTypes := []string{"RUN_STARTED", "STATE_SNAPSHOT", "TEXT_MESSAGE_START",
					"TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT",
					"TEXT_MESSAGE_END", "RUN_FINISHED"}
				if !slices.Equal(run.Types, wantTypes) {
					t.Errorf("event types = %v, want %v", run.Types, wantTypes)
				}
				checkText(t, run, 0, turn.Text)
				checkFinished(t, run, `{"type":"success"}`)
				checkUsage(t, run.Terminal.Result, turn.Usage.InputTokens, turn.Usage.OutputTokens)
				checkUsage(t, run.Result, turn.Usage.InputTokens, turn.Usage.OutputTokens)
				checkTokenUsage(t, run.Terminal.Usage, turn.Usage.InputTokens, turn.Usage.OutputTokens)
				checkLastAssistant(t, res, strings.Join(turn.Text, ""))
				checkLogEndsWith(t, res, run)
			},
		},
		{
			name: "reasoning",
			script: &script.File{Turns: []script.Turn{
				{Reasoning: "The person wants a short answer.", Text: []string{"Forty", "-two."}, Usage: &script.Usage{InputTokens: 20, OutputTokens: 9}},
			}},
			check: func(t *testing.T, sc scenario, res result) {
				run := oneRun(t, res)
				turn := sc.script.Turns[0]
				for _, typ := range []string{"REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END"} {
					if !slices.Contains(run.Types, typ) {
						t.Errorf("event types = %v, want a %s", run.Types, typ)
					}
				}
				if len(run.Reasoning) != 1 || run.Reasoning[0].Content != turn.Reasoning {
					t.Fatalf("reasoning messages = %+v, want one with %q", run.Reasoning, turn.Reasoning)
				}
				var found bool
				for _, m := range res.Messages {
					if m.ID == run.Reasoning[0].MessageID {
						found = true
						if m.Role != "reasoning" || m.text() != turn.Reasoning {
							t.Errorf("agent.messages[%s] = %s %q, want reasoning %q", m.ID, m.Role, m.text(), turn.Reasoning)
						}
					}
				}
				if !found {
					t.Errorf("agent.messages = %+v, want the reasoning message %s", res.Messages, run.Reasoning[0].MessageID)
				}
				checkText(t, run, 0, turn.Text)
				checkFinished(t, run, `{"type":"success"}`)
				checkUsage(t, run.Terminal.Result, turn.Usage.InputTokens, turn.Usage.OutputTokens)
				checkLastAssistant(t, res, strings.Join(turn.Text, ""))
			},
		},
		{
			name: "server-tool",
			script: &script.File{Turns: []script.Turn{
				{ToolCalls: []script.ToolCall{{Name: "echo", Args: json.RawMessage(`{"text":"ping"}`)}}, Usage: &script.Usage{InputTokens: 30, OutputTokens: 5}},
				{Text: []string{"The echo ", "said ping."}, Usage: &script.Usage{InputTokens: 40, OutputTokens: 4}},
			}},
			check: func(t *testing.T, sc scenario, res result) {
				run := oneRun(t, res)
				if len(run.ToolCalls) != 1 {
					t.Fatalf("tool calls = %+v, want one", run.ToolCalls)
				}
				call := run.ToolCalls[0]
				if call.ToolCallName != "echo" || !jsonEqual(call.Args, `{"text":"ping"}`) || !call.Ended {
					t.Errorf("tool call = %+v, want echo {\"text\":\"ping\"}, ended", call)
				}
				if len(run.ToolResults) != 1 || run.ToolResults[0].ToolCallID != call.ToolCallID || run.ToolResults[0].Content != "ping" {
					t.Fatalf("tool results = %+v, want one answering %s with \"ping\"", run.ToolResults, call.ToolCallID)
				}
				if !jsonEqual(string(run.ToolResults[0].Outcome), fmt.Sprintf(`{"status":"ok","surface":%q,"rule":"default: tools that only read are allowed"}`, call.ToolCallID)) {
					t.Errorf("TOOL_CALL_RESULT metadata.orrery.outcome = %s, want status ok, surface %s, and the default rule that allowed it", run.ToolResults[0].Outcome, call.ToolCallID)
				}
				wantDelta := fmt.Sprintf(`[{"op":"add","path":"/surfaces/%s","value":{"kind":{"t":"text","value":"ping"}}}]`, call.ToolCallID)
				if len(run.StateDeltas) != 1 || !jsonEqual(mustJSON(t, run.StateDeltas[0]), wantDelta) {
					t.Errorf("state deltas = %s, want %s", mustJSON(t, run.StateDeltas), wantDelta)
				}
				wantState := fmt.Sprintf(`{"ui":{"nodes":{},"components":{}},"surfaces":{%q:{"kind":{"t":"text","value":"ping"}}}}`, call.ToolCallID)
				if !jsonEqual(string(run.State), wantState) || !jsonEqual(string(run.KernelState), wantState) {
					t.Errorf("state = %s, kernel state = %s, want both %s", run.State, run.KernelState, wantState)
				}
				checkText(t, run, 0, sc.script.Turns[1].Text)
				checkFinished(t, run, `{"type":"success"}`)
				in := sc.script.Turns[0].Usage.InputTokens + sc.script.Turns[1].Usage.InputTokens
				out := sc.script.Turns[0].Usage.OutputTokens + sc.script.Turns[1].Usage.OutputTokens
				checkUsage(t, run.Terminal.Result, in, out)
				checkTokenUsage(t, run.Terminal.Usage, in, out)
				checkLastAssistant(t, res, strings.Join(sc.script.Turns[1].Text, ""))
				checkLogEndsWith(t, res, run)
			},
		},
		{
			name: "client-tool",
			script: &script.File{Turns: []script.Turn{
				{ToolCalls: []script.ToolCall{{Name: "confirm", Args: json.RawMessage(`{"question":"Delete the draft?"}`)}}, Usage: &script.Usage{InputTokens: 15, OutputTokens: 3}},
				{Text: []string{"Con", "firmed: ", "deleting it."}, Usage: &script.Usage{InputTokens: 25, OutputTokens: 6}},
			}},
			check: func(t *testing.T, sc scenario, res result) {
				if len(res.Runs) != 2 {
					t.Fatalf("runs = %d, want 2", len(res.Runs))
				}
				first, second := res.Runs[0], res.Runs[1]
				if len(first.ToolCalls) != 1 || first.ToolCalls[0].ToolCallName != "confirm" || !jsonEqual(first.ToolCalls[0].Args, `{"question":"Delete the draft?"}`) {
					t.Fatalf("first run's tool calls = %+v, want confirm {\"question\":\"Delete the draft?\"}", first.ToolCalls)
				}
				callID := first.ToolCalls[0].ToolCallID
				if res.CallID != callID || res.ClientTool != "confirm" {
					t.Errorf("reported call = %s %s, want confirm %s", res.ClientTool, res.CallID, callID)
				}
				if len(first.ToolResults) != 0 {
					t.Errorf("first run's tool results = %+v, want none: the client answers its own tool", first.ToolResults)
				}
				checkFinished(t, first, fmt.Sprintf(`{"type":"success","pendingToolCallIds":[%q]}`, callID))
				if first.Finished == nil || !slices.Equal(first.Finished.PendingToolCallIDs, []string{callID}) {
					t.Errorf("first run's onRunFinishedEvent = %+v, want pendingToolCallIds [%s]", first.Finished, callID)
				}
				checkUsage(t, first.Terminal.Result, 15, 3)

				checkText(t, second, 0, sc.script.Turns[1].Text)
				checkFinished(t, second, `{"type":"success"}`)
				checkUsage(t, second.Terminal.Result, 25, 6)
				if second.FirstSeq <= first.LastSeq {
					t.Errorf("second run starts at seq %d, want after the first run's %d", second.FirstSeq, first.LastSeq)
				}

				// The kernel takes only the messages it lacks: the tool answer.
				if len(res.Log.RunStarted) != 2 {
					t.Fatalf("logged RUN_STARTED = %+v, want 2", res.Log.RunStarted)
				}
				in := res.Log.RunStarted[1].InputMessages
				if len(in) != 1 || in[0].ID != res.Answer.ID || in[0].Role != "tool" || in[0].ToolCallID != callID || in[0].text() != res.Answer.text() {
					t.Errorf("second RUN_STARTED.input.messages = %s, want only the tool answer %s", mustJSON(t, in), mustJSON(t, res.Answer))
				}

				var ids []string
				for _, m := range res.Messages {
					ids = append(ids, m.ID)
				}
				wantIDs := []string{"user-1", first.ToolCalls[0].ParentMessageID, res.Answer.ID, second.Texts[0].MessageID}
				if !slices.Equal(ids, wantIDs) {
					t.Errorf("agent.messages ids = %v, want %v (each once)", ids, wantIDs)
				}
				checkLastAssistant(t, res, strings.Join(sc.script.Turns[1].Text, ""))
				checkLogEndsWith(t, res, second)
			},
		},
		{
			name: "subagent",
			script: &script.File{Turns: []script.Turn{
				{ToolCalls: []script.ToolCall{{Name: "task", Args: json.RawMessage(`{"description":"Say hello.","role":"greeter"}`)}}, Usage: &script.Usage{InputTokens: 10, OutputTokens: 4}},
				{Text: []string{"Hel", "lo"}, Usage: &script.Usage{InputTokens: 6, OutputTokens: 2}},
				{Text: []string{"Done."}, Usage: &script.Usage{InputTokens: 20, OutputTokens: 1}},
			}},
			check: func(t *testing.T, sc scenario, res result) {
				run := oneRun(t, res)
				sub := checkSubagentSpan(t, res, "SUBAGENT_FINISHED")
				var subTexts []string
				for _, e := range res.Subagent.Events {
					if e.Type == "TEXT_MESSAGE_CONTENT" && e.SubagentRunID == sub {
						subTexts = append(subTexts, e.Type)
					}
				}
				if len(subTexts) != 2 {
					t.Errorf("the sub-agent's TEXT_MESSAGE_CONTENT as the client delivered them = %d, want 2 with subagentRunId %s", len(subTexts), sub)
				}
				if len(run.ToolResults) != 1 || run.ToolResults[0].Content != "Hello" {
					t.Errorf("tool results = %+v, want the task's answer Hello", run.ToolResults)
				}
				checkFinished(t, run, `{"type":"success"}`)
				checkUsage(t, run.Terminal.Result, 36, 7)
				checkLastAssistant(t, res, "Done.")
				// The stock client keeps the sub-agent's message with the
				// thread's; the kernel's thread does not (agui.mjs checks
				// that nothing else differs).
				if len(res.Subagent.ClientMessages) != 1 {
					t.Errorf("sub-agent messages in agent.messages = %v, want the greeter's one", res.Subagent.ClientMessages)
				}
			},
		},
		{
			name: "subagent-cancel",
			script: &script.File{Turns: []script.Turn{
				{ToolCalls: []script.ToolCall{{Name: "task", Args: json.RawMessage(`{"description":"Think forever.","role":"thinker"}`)}}},
				{Text: []string{"half a thought"}, Hang: true},
			}},
			check: func(t *testing.T, sc scenario, res result) {
				run := oneRun(t, res)
				sub := checkSubagentSpan(t, res, "SUBAGENT_ERROR")
				var openID string
				for _, e := range res.Subagent.Events {
					if e.Type == "TEXT_MESSAGE_START" && e.SubagentRunID == sub {
						openID = e.MessageID
					}
				}
				var closer bool
				for _, e := range res.Subagent.Events {
					if e.Type == "TEXT_MESSAGE_END" && e.MessageID == openID {
						closer = true
						if e.SubagentRunID != sub {
							t.Errorf("the closer TEXT_MESSAGE_END %s has subagentRunId %q, want %s", openID, e.SubagentRunID, sub)
						}
					}
				}
				if openID == "" || !closer {
					t.Errorf("the sub-agent's message %q was not closed before the terminal event", openID)
				}
				checkFinished(t, run, `{"type":"cancelled"}`)
			},
		},
		{
			name: "cancel",
			script: &script.File{Turns: []script.Turn{
				{Text: cancelChunks, DelayMS: 100, Usage: &script.Usage{InputTokens: 10, OutputTokens: 60}},
			}},
			check: func(t *testing.T, sc scenario, res result) {
				run := oneRun(t, res)
				if res.CancelReply.Status != 200 || !jsonEqual(string(res.CancelReply.Value), `{}`) {
					t.Errorf("run.cancel reply = %d %s, want 200 {}", res.CancelReply.Status, res.CancelReply.Value)
				}
				checkFinished(t, run, `{"type":"cancelled"}`)
				if run.Finished == nil || run.Finished.Outcome != "cancelled" {
					t.Errorf("onRunFinishedEvent = %+v, want outcome cancelled", run.Finished)
				}
				if run.Result != nil {
					t.Errorf("runAgent result = %+v, want none for a cancelled run", run.Result)
				}
				if len(run.Texts) != 1 {
					t.Fatalf("text messages = %+v, want one", run.Texts)
				}
				got := run.Texts[0]
				if n := len(got.Deltas); n < 1 || n >= len(cancelChunks) {
					t.Errorf("streamed %d of %d chunks, want the run cut short", n, len(cancelChunks))
				}
				if want := strings.Join(cancelChunks[:len(got.Deltas)], ""); got.Content != want {
					t.Errorf("partial text = %q, want %q", got.Content, want)
				}
				if len(run.Types) < 2 || run.Types[len(run.Types)-2] != "TEXT_MESSAGE_END" {
					t.Errorf("event types = %v, want TEXT_MESSAGE_END right before RUN_FINISHED", run.Types)
				}
				if run.Terminal.Result == nil || run.Terminal.Result.MicroUSD != cost(run.Terminal.Result.InputTokens, run.Terminal.Result.OutputTokens) {
					t.Errorf("RUN_FINISHED.result = %+v, want micro_usd priced from its tokens", run.Terminal.Result)
				}
				checkLastAssistant(t, res, got.Content)
				checkLogEndsWith(t, res, run)
			},
		},
		{
			name: "provider-error",
			script: &script.File{Turns: []script.Turn{
				{Text: []string{"Let me ", "try"}, Error: "boom", Usage: &script.Usage{InputTokens: 8, OutputTokens: 2}},
			}},
			check: func(t *testing.T, sc scenario, res result) {
				run := oneRun(t, res)
				term := run.Terminal
				if term.Type != "RUN_ERROR" {
					t.Fatalf("terminal = %s, want RUN_ERROR", term.Type)
				}
				if n := count(run.Types, "RUN_ERROR"); n != 1 {
					t.Errorf("RUN_ERROR count = %d, want 1", n)
				}
				if slices.Contains(run.Types, "RUN_FINISHED") {
					t.Errorf("event types = %v, want no RUN_FINISHED", run.Types)
				}
				if !strings.Contains(term.Message, "boom") {
					t.Errorf("RUN_ERROR.message = %q, want it to contain boom", term.Message)
				}
				if term.Code == "" {
					t.Errorf("RUN_ERROR.code is empty, want a code")
				}
				checkUsage(t, term.Metadata.Orrery.Result, 8, 2)
				checkTokenUsage(t, term.Usage, 8, 2)
				if run.Result != nil {
					t.Errorf("runAgent result = %+v, want none for a failed run", run.Result)
				}
				checkText(t, run, 0, sc.script.Turns[0].Text)
				checkLogEndsWith(t, res, run)
			},
		},
		{
			name: "offline",
			check: func(t *testing.T, sc scenario, res result) {
				run := oneRun(t, res)
				if len(run.ToolCalls) != 1 || run.ToolCalls[0].ToolCallName != "echo" || !jsonEqual(run.ToolCalls[0].Args, `{"text":"hello"}`) {
					t.Fatalf("tool calls = %+v, want echo {\"text\":\"hello\"}", run.ToolCalls)
				}
				if len(run.ToolResults) != 1 || run.ToolResults[0].Content != "hello" || run.ToolResults[0].ToolCallID != run.ToolCalls[0].ToolCallID {
					t.Errorf("tool results = %+v, want one with \"hello\"", run.ToolResults)
				}
				checkFinished(t, run, `{"type":"success"}`)
				if len(run.Texts) < 2 {
					t.Fatalf("text messages = %+v, want one before the call and an answer after it", run.Texts)
				}
				answer := run.Texts[len(run.Texts)-1].Content
				if !strings.Contains(answer, `"hello"`) {
					t.Errorf("answer = %q, want it to report \"hello\"", answer)
				}
				checkLastAssistant(t, res, answer)
				if r := run.Terminal.Result; r == nil || r.InputTokens <= 0 || r.OutputTokens <= 0 || r.MicroUSD != 0 {
					t.Errorf("RUN_FINISHED.result = %+v, want token counts and micro_usd 0 (the offline model is free)", r)
				}
				checkLogEndsWith(t, res, run)
			},
		},
	}

	// The text scenario again with stream_mode=agui_spec named, and the
	// A2UI face on: the official client reads the same stream.
	explicit := scenarios[0]
	explicit.name, explicit.as, explicit.query = "text-agui-spec-a2ui", "text", "stream_mode=agui_spec&a2ui=1"
	scenarios = append(scenarios, explicit)

	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			url := startKernel(t, sc)
			as := sc.name
			if sc.as != "" {
				as = sc.as
			}
			res := runNode(t, node, dir, url, as, sc.query)
			if !res.OK || res.Scenario != as {
				t.Fatalf("result ok=%v scenario=%q, want ok for %q", res.OK, res.Scenario, as)
			}
			sc.check(t, sc, res)
		})
	}
}

// requireNode returns the path of node, or skips (fails under CI) when node
// or interop/node_modules is missing.
func requireNode(t *testing.T, dir string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@ag-ui", "client", "package.json"))
	}
	if err != nil {
		msg := fmt.Sprintf("the AG-UI interop test needs node and interop/node_modules (%v): run npm ci in interop/", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node
}

// startKernel starts a kernel on a SQLite file in a temp dir, with the
// scenario's script as its default model, behind a real listener, and
// returns the server's URL. Cleanup shuts it all down and checks each step.
func startKernel(t *testing.T, sc scenario) string {
	t.Helper()
	dir := t.TempDir()
	model := models.Default
	if sc.script != nil {
		path := filepath.Join(dir, "script.json")
		data, err := json.Marshal(sc.script)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		model = "script:" + path
	}
	url, _ := serveKernel(t, dir, model)
	return url
}

// startKernelWith starts a kernel on the offline model and returns the
// server's URL and the kernel, for tests that act on it directly.
func startKernelWith(t *testing.T) (string, *kernel.Kernel) {
	t.Helper()
	return serveKernel(t, t.TempDir(), models.Default)
}

// serveKernel starts a kernel with model on a SQLite file in dir behind a
// real listener. Cleanup shuts it all down and checks each step.
func serveKernel(t *testing.T, dir, model string) (string, *kernel.Kernel) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))

	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatalf("sqlite.Open() = %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("store Close() = %v, want nil", err)
		}
	})
	k := kernel.New(kernel.Config{
		Store:        st,
		Models:       models.Resolve,
		DefaultModel: model,
		Tools:        tool.NewSet(tool.Clock{}, tool.Echo{}, subagent.TaskTool{}),
		Prices:       prices,
		DebugActor:   true,
		Logger:       log,
	})
	if err := k.Open(context.Background()); err != nil {
		t.Fatalf("kernel Open() = %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := k.Close(ctx); err != nil {
			t.Errorf("kernel Close() = %v, want nil", err)
		}
	})
	srv := server.New(server.Config{Kernel: k, Logger: log})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("server Close() = %v, want nil", err)
		}
		ts.Close()
	})
	return ts.URL, k
}

// runNode runs agui.mjs for one scenario and returns its result line.
func runNode(t *testing.T, node, dir, url, name, query string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	args := []string{"agui.mjs", "--url", url, "--scenario", name}
	if query != "" {
		args = append(args, "--query", query)
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "SUPPRESS_TRANSFORMATION_WARNINGS=")
	})
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node agui.mjs --scenario %s: %v (context: %v)\nstdout:\n%s\nstderr:\n%s", name, err, ctx.Err(), stdout.Bytes(), stderr.Bytes())
	}
	if stderr.Len() > 0 {
		t.Logf("node stderr:\n%s", stderr.Bytes())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res result
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("node agui.mjs --scenario %s printed %q: %v, want one JSON line", name, stdout.Bytes(), err)
	}
	return res
}

func oneRun(t *testing.T, res result) runResult {
	t.Helper()
	if len(res.Runs) != 1 {
		t.Fatalf("runs = %d, want 1", len(res.Runs))
	}
	return res.Runs[0]
}

// checkText checks that text message i streamed the script's chunks, one
// delta per chunk, and that the client's message holds them joined.
func checkText(t *testing.T, run runResult, i int, chunks []string) {
	t.Helper()
	if len(run.Texts) <= i {
		t.Fatalf("run %s text messages = %+v, want at least %d", run.RunID, run.Texts, i+1)
	}
	got := run.Texts[i]
	if !slices.Equal(got.Deltas, chunks) {
		t.Errorf("run %s text deltas = %q, want %q", run.RunID, got.Deltas, chunks)
	}
	if want := strings.Join(chunks, ""); got.Content != want {
		t.Errorf("run %s message %s content = %q, want %q", run.RunID, got.MessageID, got.Content, want)
	}
	if got.Role != "assistant" {
		t.Errorf("run %s TEXT_MESSAGE_START.role = %q, want assistant", run.RunID, got.Role)
	}
}

func checkFinished(t *testing.T, run runResult, outcome string) {
	t.Helper()
	if run.Terminal.Type != "RUN_FINISHED" {
		t.Fatalf("run %s terminal = %s %q, want RUN_FINISHED", run.RunID, run.Terminal.Type, run.Terminal.Message)
	}
	if !jsonEqual(string(run.Terminal.Outcome), outcome) {
		t.Errorf("run %s RUN_FINISHED.outcome = %s, want %s", run.RunID, run.Terminal.Outcome, outcome)
	}
	if run.Terminal.RunID != run.RunID {
		t.Errorf("RUN_FINISHED.runId = %s, want %s", run.Terminal.RunID, run.RunID)
	}
}

func checkUsage(t *testing.T, got *protocol.RunResult, in, out int64) {
	t.Helper()
	want := protocol.RunResult{MicroUSD: cost(in, out), InputTokens: in, OutputTokens: out}
	if got == nil || *got != want {
		t.Errorf("usage result = %+v, want %+v", got, want)
	}
}

func checkTokenUsage(t *testing.T, got []protocol.TokenUsage, in, out int64) {
	t.Helper()
	if len(got) != 1 || got[0].Provider != "script" || got[0].InputTokens != in || got[0].OutputTokens != out || got[0].TotalTokens != in+out {
		t.Errorf("usage[] = %+v, want one script entry with %d+%d=%d tokens", got, in, out, in+out)
	}
}

func checkLastAssistant(t *testing.T, res result, want string) {
	t.Helper()
	for i := len(res.Messages) - 1; i >= 0; i-- {
		if m := res.Messages[i]; m.Role == "assistant" {
			if m.text() != want {
				t.Errorf("last assistant message %s = %q, want %q", m.ID, m.text(), want)
			}
			return
		}
	}
	t.Errorf("agent.messages = %+v, want an assistant message %q", res.Messages, want)
}

// checkLogEndsWith checks that the log's head is run's terminal event.
func checkLogEndsWith(t *testing.T, res result, run runResult) {
	t.Helper()
	if res.Log.Head != run.LastSeq || run.Terminal.Metadata.Orrery.Seq != run.LastSeq {
		t.Errorf("log head = %d, terminal seq = %d, want both %d", res.Log.Head, run.Terminal.Metadata.Orrery.Seq, run.LastSeq)
	}
	if n := len(res.Log.Types); n == 0 || res.Log.Types[n-1] != run.Terminal.Type {
		t.Errorf("log types = %v, want it to end with %s", res.Log.Types, run.Terminal.Type)
	}
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkSubagentSpan checks the sub-agent frames the official client
// delivered: one SUBAGENT_STARTED, then frames carrying its subagentRunId,
// then its end (endType), with nothing outside the span attributed. It
// returns the subagentRunId.
func checkSubagentSpan(t *testing.T, res result, endType string) string {
	t.Helper()
	var sub string
	inside, ended := false, false
	for i, e := range res.Subagent.Events {
		switch {
		case e.Type == "SUBAGENT_STARTED":
			if sub != "" || e.SubagentRunID == "" {
				t.Fatalf("event %d: SUBAGENT_STARTED with subagentRunId %q after %q, want exactly one, with an id", i, e.SubagentRunID, sub)
			}
			sub, inside = e.SubagentRunID, true
		case e.Type == endType && e.SubagentRunID == sub && inside:
			inside, ended = false, true
		case inside && e.SubagentRunID != sub && e.Type != "CUSTOM": // orrery.task.completed is the parent's
			t.Errorf("event %d %s inside the sub-agent has subagentRunId %q, want %s", i, e.Type, e.SubagentRunID, sub)
		case !inside && e.SubagentRunID != "" && !strings.HasPrefix(e.Type, "SUBAGENT_"):
			t.Errorf("event %d %s outside the sub-agent has subagentRunId %q", i, e.Type, e.SubagentRunID)
		}
	}
	if sub == "" || !ended {
		t.Fatalf("sub-agent %q started, ended with %s: %v; want both", sub, endType, ended)
	}
	return sub
}
