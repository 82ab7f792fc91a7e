package protocol_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getorrery/orrery/protocol"
)

func meta(seq uint64) *protocol.Metadata {
	return &protocol.Metadata{Orrery: &protocol.OrreryMeta{Seq: seq}}
}

func base(seq uint64) protocol.Base {
	return protocol.Base{Timestamp: 1767225600000, Metadata: meta(seq)}
}

func sub(id string) protocol.Attributed { return protocol.Attributed{SubagentRunID: id} }

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// objectContent returns an activity's object content as decoding makes it.
func objectContent(s string) protocol.Content {
	var c protocol.Content
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		panic(err)
	}
	return c
}

// fullEvents has one event of every type with every field set, in the form
// DecodeEvent produces (compact raw JSON, non-nil required lists).
func fullEvents() []protocol.Event {
	yes := false
	input := &protocol.RunAgentInput{
		ThreadID: "t1", RunID: "r1", ProtocolVersion: "1.0",
		State:          raw(`{"ui":{}}`),
		Messages:       []protocol.Message{{ID: "u1", Role: protocol.RoleUser, Content: protocol.TextContent("Hello")}},
		Tools:          []protocol.Tool{{Name: "search", Description: "Search the web", Parameters: raw(`{"type":"object"}`)}},
		Context:        []protocol.Context{{Description: "cwd", Value: "/tmp"}},
		ForwardedProps: raw(`{}`),
		Resume:         []protocol.ResumeEntry{{InterruptID: "i1", Status: "resolved", Payload: raw(`{"ok":true}`)}},
	}
	usage := []protocol.TokenUsage{{Provider: "openai", Model: "gpt", InputTokens: 10, OutputTokens: 5, TotalTokens: 15}}
	evs := []protocol.Event{
		&protocol.TextMessageStart{Base: base(1), Attributed: sub("s1"), MessageID: "m1", Role: protocol.RoleAssistant, Name: "writer"},
		&protocol.TextMessageContent{Base: base(2), Attributed: sub("s1"), MessageID: "m1", Delta: "Hel"},
		&protocol.TextMessageEnd{Base: base(3), Attributed: sub("s1"), MessageID: "m1"},
		&protocol.TextMessageChunk{Base: base(4), Attributed: sub("s1"), MessageID: "m2", Role: protocol.RoleAssistant, Delta: "lo", Name: "writer"},
		&protocol.ToolCallStart{Base: base(5), Attributed: sub("s1"), ToolCallID: "c1", ToolCallName: "search", ParentMessageID: "m1"},
		&protocol.ToolCallArgs{Base: base(6), Attributed: sub("s1"), ToolCallID: "c1", Delta: `{"q":"go"}`},
		&protocol.ToolCallEnd{Base: base(7), Attributed: sub("s1"), ToolCallID: "c1"},
		&protocol.ToolCallChunk{Base: base(8), Attributed: sub("s1"), ToolCallID: "c2", ToolCallName: "search", ParentMessageID: "m1", Delta: "{}"},
		&protocol.ToolCallResult{Base: base(9), Attributed: sub("s1"), MessageID: "tm1", ToolCallID: "c1",
			Content: protocol.PartsContent([]protocol.ContentPart{{Type: "text", Text: "found"}}), Role: protocol.RoleTool},
		&protocol.StateSnapshot{Base: base(10), Attributed: sub("s1"), Snapshot: raw(`{"ui":{"nodes":{}},"surfaces":{}}`)},
		&protocol.StateDelta{Base: base(11), Attributed: sub("s1"), Delta: []protocol.PatchOp{
			{Op: "add", Path: "/data", Value: raw(`null`)},
			{Op: "move", From: "/a", Path: "/b"},
			{Op: "remove", Path: "/c"},
		}},
		&protocol.MessagesSnapshot{Base: base(12), Messages: []protocol.Message{
			{ID: "u1", Role: protocol.RoleUser, Content: protocol.TextContent("Hello")},
			{ID: "m1", Role: protocol.RoleAssistant, Content: protocol.TextContent("Hi"), Metadata: raw(`{"orrery":{"seq":3}}`),
				ToolCalls: []protocol.ToolCall{{ID: "c1", Type: "function", Function: protocol.FunctionCall{Name: "search", Arguments: `{"q":"go"}`}}}},
			{ID: "tm1", Role: protocol.RoleTool, ToolCallID: "c1", Content: protocol.TextContent("found"), Error: "partial"},
			{ID: "a1", Role: protocol.RoleActivity, ActivityType: "plan", Content: objectContent(`{"steps":[]}`)},
		}},
		&protocol.ActivitySnapshot{Base: base(13), Attributed: sub("s1"), MessageID: "a1", ActivityType: "plan", Content: raw(`{"steps":["a"]}`), Replace: &yes},
		&protocol.ActivityDelta{Base: base(14), Attributed: sub("s1"), MessageID: "a1", ActivityType: "plan",
			Patch: []protocol.PatchOp{{Op: "replace", Path: "/steps/0", Value: raw(`"b"`)}}},
		&protocol.Raw{Base: base(15), Attributed: sub("s1"), Event: raw(`{"kind":"x"}`), Source: "acp"},
		&protocol.Custom{Base: base(16), Attributed: sub("s1"), Name: "orrery.notice", Value: raw(`{"level":"info","text":"hi"}`)},
		&protocol.RunStarted{Base: base(17), ThreadID: "t1", RunID: "r1", ProtocolVersion: "1.0", ParentRunID: "r0", Input: input},
		&protocol.RunFinished{Base: base(18), ThreadID: "t1", RunID: "r1", Result: raw(`{"micro_usd":12,"inputTokens":10,"outputTokens":5}`),
			Outcome: &protocol.Outcome{Type: protocol.OutcomeInterrupt, Interrupts: []protocol.Interrupt{{
				ID: "i1", Reason: "consent", Message: "Allow?", ToolCallID: "c1", ResponseSchema: raw(`{"type":"object"}`),
				ExpiresAt: "2026-01-01T00:00:00Z", Metadata: raw(`{"k":1}`), SubagentRunID: "s1",
			}}},
			Usage: usage},
		&protocol.RunError{Base: base(19), Message: "provider failed", Code: "provider", Usage: usage},
		&protocol.StepStarted{Base: base(20), Attributed: sub("s1"), StepName: "plan"},
		&protocol.StepFinished{Base: base(21), Attributed: sub("s1"), StepName: "plan"},
		&protocol.ReasoningStart{Base: base(22), Attributed: sub("s1"), MessageID: "rs1"},
		&protocol.ReasoningMessageStart{Base: base(23), Attributed: sub("s1"), MessageID: "rm1", Role: protocol.RoleReasoning},
		&protocol.ReasoningMessageContent{Base: base(24), Attributed: sub("s1"), MessageID: "rm1", Delta: "thinking"},
		&protocol.ReasoningMessageEnd{Base: base(25), Attributed: sub("s1"), MessageID: "rm1"},
		&protocol.ReasoningMessageChunk{Base: base(26), Attributed: sub("s1"), MessageID: "rm2", Delta: "more"},
		&protocol.ReasoningEnd{Base: base(27), Attributed: sub("s1"), MessageID: "rs1"},
		&protocol.ReasoningEncryptedValue{Base: base(28), Attributed: sub("s1"), Subtype: "message", EntityID: "rm1", EncryptedValue: "b64"},
		&protocol.SubagentStarted{Base: base(29), SubagentRunID: "s1", Name: "researcher", Description: "finds things",
			ParentSubagentRunID: "s0", ParentToolCallID: "c1", ParentMessageID: "m1"},
		&protocol.SubagentFinished{Base: base(30), SubagentRunID: "s1", Result: raw(`"done"`),
			Outcome: &protocol.Outcome{Type: "suspended", InterruptIDs: []string{"i1"}}},
		&protocol.SubagentError{Base: base(31), SubagentRunID: "s1", Message: "gave up", Code: "limit"},
	}
	for _, ev := range evs {
		protocol.Stamp(ev)
	}
	return evs
}

func TestEventRoundTrip(t *testing.T) {
	evs := fullEvents()
	var covered []protocol.EventType
	for _, ev := range evs {
		covered = append(covered, ev.EventType())
	}
	if !slices.Equal(covered, protocol.EventTypes()) {
		t.Fatalf("fullEvents() types = %v, want %v", covered, protocol.EventTypes())
	}
	for _, want := range evs {
		t.Run(string(want.EventType()), func(t *testing.T) {
			data, err := json.Marshal(want)
			if err != nil {
				t.Fatalf("json.Marshal() error = %v", err)
			}
			got, err := protocol.DecodeEvent(data)
			if err != nil {
				t.Fatalf("DecodeEvent(%s) error = %v", data, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("DecodeEvent(%s) = %#v, want %#v", data, got, want)
			}
			again, err := json.Marshal(got)
			if err != nil {
				t.Fatalf("json.Marshal(decoded) error = %v", err)
			}
			if !bytes.Equal(again, data) {
				t.Errorf("json.Marshal(decoded) = %s, want %s", again, data)
			}
		})
	}
}

func TestNewEvent(t *testing.T) {
	for _, et := range protocol.EventTypes() {
		ev := protocol.NewEvent(et)
		if ev == nil {
			t.Errorf("NewEvent(%s) = nil, want an event", et)
			continue
		}
		if got := ev.EventType(); got != et {
			t.Errorf("NewEvent(%s).EventType() = %s, want %s", et, got, et)
		}
	}
	for _, et := range []protocol.EventType{"", "THINKING_START", "text_message_start"} {
		if ev := protocol.NewEvent(et); ev != nil {
			t.Errorf("NewEvent(%q) = %T, want nil", et, ev)
		}
	}
}

// TestZeroEventJSON pins the JSON of every zero event: the fields AG-UI 1.0
// requires and nothing else. Optional fields are omitted, required arrays
// are [], and null appears only where the field is any JSON (§1.3).
func TestZeroEventJSON(t *testing.T) {
	tests := []struct {
		typ       protocol.EventType
		want      string
		nullField string // the one field whose zero value is null, if any
	}{
		{protocol.TypeTextMessageStart, `{"type":"TEXT_MESSAGE_START","messageId":""}`, ""},
		{protocol.TypeTextMessageContent, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"","delta":""}`, ""},
		{protocol.TypeTextMessageEnd, `{"type":"TEXT_MESSAGE_END","messageId":""}`, ""},
		{protocol.TypeTextMessageChunk, `{"type":"TEXT_MESSAGE_CHUNK"}`, ""},
		{protocol.TypeToolCallStart, `{"type":"TOOL_CALL_START","toolCallId":"","toolCallName":""}`, ""},
		{protocol.TypeToolCallArgs, `{"type":"TOOL_CALL_ARGS","toolCallId":"","delta":""}`, ""},
		{protocol.TypeToolCallEnd, `{"type":"TOOL_CALL_END","toolCallId":""}`, ""},
		{protocol.TypeToolCallChunk, `{"type":"TOOL_CALL_CHUNK"}`, ""},
		{protocol.TypeToolCallResult, `{"type":"TOOL_CALL_RESULT","messageId":"","toolCallId":"","content":""}`, ""},
		{protocol.TypeStateSnapshot, `{"type":"STATE_SNAPSHOT","snapshot":null}`, "snapshot"},
		{protocol.TypeStateDelta, `{"type":"STATE_DELTA","delta":[]}`, ""},
		{protocol.TypeMessagesSnapshot, `{"type":"MESSAGES_SNAPSHOT","messages":[]}`, ""},
		{protocol.TypeActivitySnapshot, `{"type":"ACTIVITY_SNAPSHOT","messageId":"","activityType":"","content":{}}`, ""},
		{protocol.TypeActivityDelta, `{"type":"ACTIVITY_DELTA","messageId":"","activityType":"","patch":[]}`, ""},
		{protocol.TypeRaw, `{"type":"RAW","event":null}`, "event"},
		{protocol.TypeCustom, `{"type":"CUSTOM","name":"","value":null}`, "value"},
		{protocol.TypeRunStarted, `{"type":"RUN_STARTED","threadId":"","runId":""}`, ""},
		{protocol.TypeRunFinished, `{"type":"RUN_FINISHED","threadId":"","runId":""}`, ""},
		{protocol.TypeRunError, `{"type":"RUN_ERROR","message":""}`, ""},
		{protocol.TypeStepStarted, `{"type":"STEP_STARTED","stepName":""}`, ""},
		{protocol.TypeStepFinished, `{"type":"STEP_FINISHED","stepName":""}`, ""},
		{protocol.TypeReasoningStart, `{"type":"REASONING_START","messageId":""}`, ""},
		{protocol.TypeReasoningMessageStart, `{"type":"REASONING_MESSAGE_START","messageId":"","role":"reasoning"}`, ""},
		{protocol.TypeReasoningMessageContent, `{"type":"REASONING_MESSAGE_CONTENT","messageId":"","delta":""}`, ""},
		{protocol.TypeReasoningMessageEnd, `{"type":"REASONING_MESSAGE_END","messageId":""}`, ""},
		{protocol.TypeReasoningMessageChunk, `{"type":"REASONING_MESSAGE_CHUNK"}`, ""},
		{protocol.TypeReasoningEnd, `{"type":"REASONING_END","messageId":""}`, ""},
		{protocol.TypeReasoningEncryptedValue, `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"","entityId":"","encryptedValue":""}`, ""},
		{protocol.TypeSubagentStarted, `{"type":"SUBAGENT_STARTED","subagentRunId":"","name":""}`, ""},
		{protocol.TypeSubagentFinished, `{"type":"SUBAGENT_FINISHED","subagentRunId":""}`, ""},
		{protocol.TypeSubagentError, `{"type":"SUBAGENT_ERROR","subagentRunId":"","message":""}`, ""},
	}
	var covered []protocol.EventType
	for _, tt := range tests {
		covered = append(covered, tt.typ)
		t.Run(string(tt.typ), func(t *testing.T) {
			data, err := json.Marshal(protocol.NewEvent(tt.typ))
			if err != nil {
				t.Fatalf("json.Marshal(NewEvent(%s)) error = %v", tt.typ, err)
			}
			if string(data) != tt.want {
				t.Errorf("json.Marshal(NewEvent(%s)) = %s, want %s", tt.typ, data, tt.want)
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(data, &fields); err != nil {
				t.Fatalf("json.Unmarshal(%s) error = %v", data, err)
			}
			for name, v := range fields {
				if string(v) == "null" && name != tt.nullField {
					t.Errorf("json.Marshal(NewEvent(%s)) has %s: null, want it omitted or a value", tt.typ, name)
				}
			}
		})
	}
	if !slices.Equal(covered, protocol.EventTypes()) {
		t.Errorf("tested types = %v, want %v", covered, protocol.EventTypes())
	}
}

func TestRequiredArraysEmpty(t *testing.T) {
	tests := []struct {
		typ   protocol.EventType
		field string
	}{
		{protocol.TypeStateDelta, "delta"},
		{protocol.TypeMessagesSnapshot, "messages"},
		{protocol.TypeActivityDelta, "patch"},
	}
	for _, tt := range tests {
		data, err := json.Marshal(protocol.NewEvent(tt.typ))
		if err != nil {
			t.Fatalf("json.Marshal(NewEvent(%s)) error = %v", tt.typ, err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data, &fields); err != nil {
			t.Fatalf("json.Unmarshal(%s) error = %v", data, err)
		}
		if got := string(fields[tt.field]); got != "[]" {
			t.Errorf("NewEvent(%s) %s = %s, want []", tt.typ, tt.field, got)
		}
	}

	// A RunAgentInput built in Go, as echoed in RUN_STARTED.input.
	data, err := json.Marshal(protocol.RunAgentInput{ThreadID: "t", RunID: "r"})
	if err != nil {
		t.Fatalf("json.Marshal(RunAgentInput) error = %v", err)
	}
	if want := `{"threadId":"t","runId":"r","messages":[],"tools":[],"context":[]}`; string(data) != want {
		t.Errorf("json.Marshal(RunAgentInput{}) = %s, want %s", data, want)
	}
}

func TestMetadataKeepsOtherKeys(t *testing.T) {
	const frame = `{"type":"TEXT_MESSAGE_CONTENT","metadata":{"orrery":{"seq":7},"other":1},"messageId":"m1","delta":"Hel"}`
	ev, err := protocol.DecodeEvent([]byte(frame))
	if err != nil {
		t.Fatalf("DecodeEvent() error = %v", err)
	}
	if got := ev.Header().Seq(); got != 7 {
		t.Errorf("Seq() = %d, want 7", got)
	}
	if got := string(ev.Header().Metadata.Extra["other"]); got != "1" {
		t.Errorf("Metadata.Extra[other] = %s, want 1", got)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatalf("json.Marshal() error = %v", err)
	}
	if string(data) != frame {
		t.Errorf("json.Marshal(DecodeEvent(frame)) = %s, want %s", data, frame)
	}

	// Orrery writing its seq keeps the producer's keys.
	ev.Header().Orrery().Seq = 8
	data, err = json.Marshal(ev.Header().Metadata)
	if err != nil {
		t.Fatalf("json.Marshal(Metadata) error = %v", err)
	}
	if want := `{"orrery":{"seq":8},"other":1}`; string(data) != want {
		t.Errorf("json.Marshal(Metadata) = %s, want %s", data, want)
	}
}

func TestMetadataRefusesNonObject(t *testing.T) {
	for _, md := range []string{`[]`, `1`, `"x"`, `{"orrery":[]}`} {
		frame := `{"type":"RUN_ERROR","message":"x","metadata":` + md + `}`
		if _, err := protocol.DecodeEvent([]byte(frame)); err == nil {
			t.Errorf("DecodeEvent(%s) error = nil, want an error", frame)
		}
	}
}

// clientBody is what @ag-ui/client 1.0's HttpAgent posts (agui.md §2.1).
const clientBody = `{"threadId":"t","runId":"r","protocolVersion":"1.0","state":{},"messages":[{"id":"u1","role":"user","content":"Hello"}],"tools":[],"context":[],"forwardedProps":{}}`

func TestDecodeRunAgentInputAccepts(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		check func(t *testing.T, in *protocol.RunAgentInput)
	}{
		{"stock client", clientBody, func(t *testing.T, in *protocol.RunAgentInput) {
			if in.ThreadID != "t" || in.RunID != "r" || in.ProtocolVersion != "1.0" {
				t.Errorf("ids = %q %q %q, want t r 1.0", in.ThreadID, in.RunID, in.ProtocolVersion)
			}
			if string(in.State) != "{}" || string(in.ForwardedProps) != "{}" {
				t.Errorf("state, forwardedProps = %s, %s, want {}, {}", in.State, in.ForwardedProps)
			}
			if len(in.Messages) != 1 || in.Messages[0].Content.String() != "Hello" {
				t.Errorf("Messages = %+v, want one user message Hello", in.Messages)
			}
		}},
		{"unknown fields", `{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":"x","future":1}],"extra":{"a":1},"seq":7}`,
			func(t *testing.T, in *protocol.RunAgentInput) {
				if len(in.Messages) != 1 {
					t.Errorf("len(Messages) = %d, want 1", len(in.Messages))
				}
			}},
		{"metadata on messages and tool calls", `{"threadId":"t","runId":"r","messages":[{"id":"m1","role":"assistant","content":"Hi","metadata":{"orrery":{"seq":14}},"toolCalls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},"encryptedValue":"e","metadata":{"orrery":{"seq":12}}}]}]}`,
			func(t *testing.T, in *protocol.RunAgentInput) {
				m := in.Messages[0]
				if string(m.Metadata) != `{"orrery":{"seq":14}}` {
					t.Errorf("Messages[0].Metadata = %s, want {\"orrery\":{\"seq\":14}}", m.Metadata)
				}
				if len(m.ToolCalls) != 1 || string(m.ToolCalls[0].Metadata) != `{"orrery":{"seq":12}}` || m.ToolCalls[0].EncryptedValue != "e" {
					t.Errorf("Messages[0].ToolCalls = %+v, want one call with metadata seq 12", m.ToolCalls)
				}
			}},
		{"developer and reasoning roles", `{"threadId":"t","runId":"r","messages":[{"id":"d1","role":"developer","content":"Be brief"},{"id":"r1","role":"reasoning","content":"hmm","encryptedValue":"e"}]}`,
			func(t *testing.T, in *protocol.RunAgentInput) {
				var roles []string
				for _, m := range in.Messages {
					roles = append(roles, m.Role)
				}
				if want := []string{"developer", "reasoning"}; !slices.Equal(roles, want) {
					t.Errorf("roles = %v, want %v", roles, want)
				}
			}},
		{"content as parts", `{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":[{"type":"text","text":"Look"},{"type":"image","source":{"type":"url","value":"https://x/y.png","mimeType":"image/png"}}]},{"id":"tm1","role":"tool","toolCallId":"c1","content":[{"type":"text","text":"done"}]}]}`,
			func(t *testing.T, in *protocol.RunAgentInput) {
				user, tool := in.Messages[0].Content, in.Messages[1].Content
				if len(user.Parts) != 2 || user.Parts[1].Source == nil || user.Parts[1].Source.Value != "https://x/y.png" {
					t.Errorf("user content = %+v, want a text and an image part", user)
				}
				if got := tool.String(); got != "done" {
					t.Errorf("tool content String() = %q, want done", got)
				}
			}},
		{"absent tools and context", `{"threadId":"t","runId":"r","messages":[]}`, func(t *testing.T, in *protocol.RunAgentInput) {
			if in.Tools == nil || len(in.Tools) != 0 {
				t.Errorf("Tools = %#v, want empty and non-nil", in.Tools)
			}
			if in.Context == nil || len(in.Context) != 0 {
				t.Errorf("Context = %#v, want empty and non-nil", in.Context)
			}
		}},
		{"absent messages", `{"threadId":"t","runId":"r"}`, func(t *testing.T, in *protocol.RunAgentInput) {
			if in.Messages == nil || len(in.Messages) != 0 {
				t.Errorf("Messages = %#v, want empty and non-nil", in.Messages)
			}
		}},
		{"null state", `{"threadId":"t","runId":"r","messages":[],"state":null,"forwardedProps":null}`, func(t *testing.T, in *protocol.RunAgentInput) {
			if in.State != nil {
				t.Errorf("State = %s, want absent", in.State)
			}
			if in.ForwardedProps != nil {
				t.Errorf("ForwardedProps = %s, want absent", in.ForwardedProps)
			}
			data, err := json.Marshal(in)
			if err != nil {
				t.Fatalf("json.Marshal() error = %v", err)
			}
			if bytes.Contains(data, []byte("null")) {
				t.Errorf("json.Marshal() = %s, want no null", data)
			}
		}},
		{"resume", `{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"i1","status":"resolved","payload":{"ok":true},"metadata":{"k":1}}]}`,
			func(t *testing.T, in *protocol.RunAgentInput) {
				if len(in.Resume) != 1 || in.Resume[0].InterruptID != "i1" || in.Resume[0].Status != "resolved" {
					t.Errorf("Resume = %+v, want one resolved entry for i1", in.Resume)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := protocol.DecodeRunAgentInput([]byte(tt.body))
			if err != nil {
				t.Fatalf("DecodeRunAgentInput(%s) error = %v", tt.body, err)
			}
			tt.check(t, in)
		})
	}
}

// TestRunAgentInputEcho checks that the stock client's body survives being
// echoed as RUN_STARTED.input unchanged.
func TestRunAgentInputEcho(t *testing.T) {
	in, err := protocol.DecodeRunAgentInput([]byte(clientBody))
	if err != nil {
		t.Fatalf("DecodeRunAgentInput() error = %v", err)
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("json.Marshal() error = %v", err)
	}
	const want = `{"threadId":"t","runId":"r","protocolVersion":"1.0","state":{},"messages":[{"id":"u1","role":"user","content":"Hello"}],"tools":[],"context":[],"forwardedProps":{}}`
	if string(data) != want {
		t.Errorf("json.Marshal(DecodeRunAgentInput(body)) = %s, want %s", data, want)
	}
}

func TestDecodeRunAgentInputRefuses(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string // a part of the error sentence, naming the field
	}{
		{"malformed", `{"threadId":"t",`, "not valid JSON"},
		{"empty", ``, "not valid JSON"},
		{"not an object", `[]`, "must be a JSON object"},
		{"threadId a number", `{"threadId":1,"runId":"r"}`, "field threadId is a number but must be a string"},
		{"messages an object", `{"threadId":"t","runId":"r","messages":{}}`, "field messages is an object but must be an array"},
		{"tools a string", `{"threadId":"t","runId":"r","tools":"x"}`, "field tools"},
		{"part type a number", `{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":[{"type":5}]}]}`, "field messages.content.type"},
		{"content a number", `{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":5}]}`, "content must be"},
		{"missing threadId", `{"runId":"r","messages":[]}`, "threadId is missing"},
		{"missing runId", `{"threadId":"t","messages":[]}`, "runId is missing"},
		{"message without id", `{"threadId":"t","runId":"r","messages":[{"role":"user","content":"x"}]}`, "messages[0]: id is missing"},
		{"unknown role", `{"threadId":"t","runId":"r","messages":[{"id":"x","role":"robot","content":"x"}]}`, `role "robot" is unknown`},
		{"user without content", `{"threadId":"t","runId":"r","messages":[{"id":"x","role":"user"}]}`, "needs content"},
		{"tool without toolCallId", `{"threadId":"t","runId":"r","messages":[{"id":"x","role":"tool","content":"x"}]}`, "toolCallId"},
		{"tool without name", `{"threadId":"t","runId":"r","tools":[{"description":"d"}]}`, "tools[0]: name is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := protocol.DecodeRunAgentInput([]byte(tt.body))
			if err == nil {
				t.Fatalf("DecodeRunAgentInput(%s) = %+v, want an error containing %q", tt.body, in, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeRunAgentInput(%s) error = %q, want it to contain %q", tt.body, err, tt.want)
			}
		})
	}
}

func TestCheckDraws(t *testing.T) {
	tests := []struct {
		draws []string
		want  string // "" means accepted
	}{
		{nil, ""},
		{[]string{"thread", "tools"}, ""},
		{[]string{"thread", "tools", "consent", "unknown-later-element"}, ""},
		{[]string{"thread"}, `lacks "tools"`},
		{[]string{"consent"}, `lacks "thread"`},
	}
	for _, tt := range tests {
		err := protocol.CheckDraws("tui", tt.draws)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckDraws(%v) = %v, want nil", tt.draws, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckDraws(%v) = %v, want an error containing %s", tt.draws, err, tt.want)
		}
	}
}

func TestDecodeRequest(t *testing.T) {
	since := uint64(4)
	env := func(kind string) protocol.Envelope { return protocol.Envelope{T: kind, ID: "q1"} }
	tests := []struct {
		body string
		want protocol.Request
	}{
		{`{"t":"session.new","id":"q1","cwd":"/w","title":"T","model":"m"}`,
			&protocol.SessionNew{Envelope: env("session.new"), Cwd: "/w", Title: "T", Model: "m"}},
		{`{"t":"session.list","id":"q1"}`, &protocol.SessionList{Envelope: env("session.list")}},
		{`{"t":"session.read","id":"q1","session":"s","since":4,"limit":10}`,
			&protocol.SessionRead{Envelope: env("session.read"), Session: "s", Since: &since, Limit: 10}},
		{`{"t":"run.send","id":"q1","session":"s","input":{"text":"hi","attachments":[{"type":"text","text":"x"}]},"target":"steer"}`,
			&protocol.RunSend{Envelope: env("run.send"), Session: "s", Target: protocol.TargetSteer,
				Input: protocol.RunInput{Text: "hi", Attachments: []protocol.ContentPart{{Type: "text", Text: "x"}}}}},
		{`{"t":"run.send","id":"q1","session":"s","input":{"text":"hi"},"usageEvents":true}`,
			&protocol.RunSend{Envelope: env("run.send"), Session: "s", Input: protocol.RunInput{Text: "hi"}, UsageEvents: true}},
		{`{"t":"run.cancel","id":"q1","session":"s","runId":"r1"}`,
			&protocol.RunCancel{Envelope: env("run.cancel"), Session: "s", RunID: "r1"}},
		{`{"t":"hello","id":"q1","token":"tok","client":"web","draws":["thread","tools"]}`,
			&protocol.Hello{Envelope: env("hello"), Token: "tok", Client: "web", Draws: []string{"thread", "tools"}}},
		{`{"t":"session.attach","id":"q1","session":"s","since":4,"coalesce":true}`,
			&protocol.SessionAttach{Envelope: env("session.attach"), Session: "s", Since: &since, Coalesce: true}},
		{`{"t":"session.detach","id":"q1","session":"s"}`,
			&protocol.SessionDetach{Envelope: env("session.detach"), Session: "s"}},
		{`{"t":"ui.move","id":"q1","session":"s","node":"placed:agent:todo","placement":"band"}`,
			&protocol.UIMove{Envelope: env("ui.move"), Session: "s", Node: "placed:agent:todo", Placement: "band"}},
		{`{"t":"ui.hide","id":"q1","session":"s","node":"placed:agent:todo"}`,
			&protocol.UIHide{Envelope: env("ui.hide"), Session: "s", Node: "placed:agent:todo"}},
		{`{"t":"ui.save","id":"q1","session":"s","node":"placed:agent:todo"}`,
			&protocol.UISave{Envelope: env("ui.save"), Session: "s", Node: "placed:agent:todo"}},
		{`{"t":"ui.intent","id":"q1","session":"s","node":"placed:ext:ci:runs","action":"rerun","value":{"row":"lint"}}`,
			&protocol.UIIntent{Envelope: env("ui.intent"), Session: "s", Node: "placed:ext:ci:runs", Action: "rerun", Value: json.RawMessage(`{"row":"lint"}`)}},
		{`{"t":"a2ui.action","id":"q1","session":"s","message":{"version":"v0.9","action":{"name":"done","surfaceId":"placed:agent:todo"}}}`,
			&protocol.A2UIAction{Envelope: env("a2ui.action"), Session: "s", Message: json.RawMessage(`{"version":"v0.9","action":{"name":"done","surfaceId":"placed:agent:todo"}}`)}},
		{`{"t":"consent.answer","id":"q1","session":"s","request":"consent_1","option":"allow_once"}`,
			&protocol.ConsentAnswer{Envelope: env("consent.answer"), Session: "s", Request: "consent_1", Option: "allow_once"}},
		{`{"t":"hub.post","id":"q1","to":"agent://s1/main","payload":{"n":1}}`,
			&protocol.HubPost{Envelope: env("hub.post"), To: "agent://s1/main", Payload: json.RawMessage(`{"n":1}`)}},
		{`{"t":"hub.send","id":"q1","to":"agent://s1/main","payload":"go?","timeoutMs":500,"correlationId":"c-1"}`,
			&protocol.HubSend{Envelope: env("hub.send"), To: "agent://s1/main", Payload: json.RawMessage(`"go?"`), TimeoutMS: 500, CorrelationID: "c-1"}},
		{`{"t":"hub.publish","id":"q1","topic":"run.progress","payload":50,"retainAs":"last"}`,
			&protocol.HubPublish{Envelope: env("hub.publish"), Topic: "run.progress", Payload: json.RawMessage(`50`), RetainAs: "last"}},
		{`{"t":"hub.reply","id":"q1","correlationId":"c-1","payload":true}`,
			&protocol.HubReply{Envelope: env("hub.reply"), CorrelationID: "c-1", Payload: json.RawMessage(`true`)}},
		{`{"t":"hub.subscribe","id":"q1","topic":"run.progress"}`, &protocol.HubSubscribe{Envelope: env("hub.subscribe"), Topic: "run.progress"}},
		{`{"t":"hub.unsubscribe","id":"q1","topic":"run.progress"}`, &protocol.HubUnsubscribe{Envelope: env("hub.unsubscribe"), Topic: "run.progress"}},
		{`{"t":"input.answer","id":"q1","session":"s","request":"input_1","value":"blue"}`,
			&protocol.InputAnswer{Envelope: env("input.answer"), Session: "s", Request: "input_1", Value: "blue"}},
		{`{"t":"input.refuse","id":"q1","session":"s","request":"input_1"}`,
			&protocol.InputRefuse{Envelope: env("input.refuse"), Session: "s", Request: "input_1"}},
		{`{"t":"workspace.files","id":"q1","session":"s","prefix":"src/ma","limit":20}`,
			&protocol.WorkspaceFiles{Envelope: env("workspace.files"), Session: "s", Prefix: "src/ma", Limit: 20}},
		{`{"t":"workspace.files","id":"q1","session":"s","query":"conn","limit":20}`,
			&protocol.WorkspaceFiles{Envelope: env("workspace.files"), Session: "s", Query: "conn", Limit: 20}},
		{`{"t":"ext.list","id":"q1","session":"s"}`, &protocol.ExtList{Envelope: env("ext.list"), Session: "s"}},
		{`{"t":"ext.restart","id":"q1","session":"s","name":"ci"}`, &protocol.ExtRestart{Envelope: env("ext.restart"), Session: "s", Name: "ci"}},
		{`{"t":"state.watch","id":"q1","session":"s","keys":["ext:ci/failed","ext:ci/*"]}`,
			&protocol.StateWatch{Envelope: env("state.watch"), Session: "s", Keys: []string{"ext:ci/failed", "ext:ci/*"}}},
	}
	var kinds []string
	for _, tt := range tests {
		kinds = append(kinds, tt.want.Head().T)
		got, err := protocol.DecodeRequest([]byte(tt.body))
		if err != nil {
			t.Errorf("DecodeRequest(%s) error = %v", tt.body, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("DecodeRequest(%s) = %+v, want %+v", tt.body, got, tt.want)
		}
		data, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("json.Marshal() error = %v", err)
		}
		if string(data) != tt.body {
			t.Errorf("json.Marshal(DecodeRequest(body)) = %s, want %s", data, tt.body)
		}
	}
	slices.Sort(kinds)
	kinds = slices.Compact(kinds) // a kind may have several forms
	if !slices.Equal(kinds, protocol.RequestKinds()) {
		t.Errorf("tested kinds = %v, want %v", kinds, protocol.RequestKinds())
	}
}

func TestDecodeRequestRefuses(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string // a part of the error sentence, naming the field
	}{
		{"malformed", `{"t":"session.list"`, "not valid JSON"},
		{"empty", ``, "not valid JSON"},
		{"not an object", `[1]`, "must be a JSON object, not an array"},
		{"t a number", `{"t":5,"id":"q1"}`, "field t is a number but must be a string"},
		{"id a number", `{"t":"session.list","id":5}`, "field id"},
		{"missing t", `{"id":"q1"}`, "t is missing: send one of a2ui.action, consent.answer, ext.list, ext.restart, hello"},
		{"unknown t", `{"t":"session.explode","id":"q1"}`, `t "session.explode" is not a request`},
		{"session a number", `{"t":"session.read","id":"q1","session":5}`, "field session is a number but must be a string"},
		{"since negative", `{"t":"session.read","id":"q1","session":"s","since":-1}`, "field since"},
		{"input a string", `{"t":"run.send","id":"q1","session":"s","input":"hi"}`, "field input is a string but must be an object"},
		{"attachments an object", `{"t":"run.send","id":"q1","session":"s","input":{"text":"hi","attachments":{}}}`, "field input.attachments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := protocol.DecodeRequest([]byte(tt.body))
			if err == nil {
				t.Fatalf("DecodeRequest(%s) = %+v, want an error containing %q", tt.body, req, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeRequest(%s) error = %q, want it to contain %q", tt.body, err, tt.want)
			}
		})
	}
}

func TestContentPartKeepsEmptyText(t *testing.T) {
	tests := []struct {
		part protocol.ContentPart
		want string
	}{
		{protocol.ContentPart{Type: "text"}, `{"type":"text","text":""}`},
		{protocol.ContentPart{Type: "text", Text: "hi", ID: "p1"}, `{"type":"text","text":"hi","id":"p1"}`},
		{protocol.ContentPart{Type: "image", Source: &protocol.Source{Type: "url", Value: "https://x"}}, `{"type":"image","source":{"type":"url","value":"https://x"}}`},
	}
	for _, tt := range tests {
		data, err := json.Marshal(tt.part)
		if err != nil {
			t.Fatalf("json.Marshal(%+v) error = %v", tt.part, err)
		}
		if string(data) != tt.want {
			t.Errorf("json.Marshal(%+v) = %s, want %s", tt.part, data, tt.want)
		}
	}
}
