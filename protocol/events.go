// Package protocol holds Orrery's wire types: the AG-UI 1.0 events a client
// receives as frames, the RunAgentInput a stock client posts, and the
// request/reply envelope clients use to steer a session.
//
// The types are written by hand after @ag-ui/core 1.0. Optional fields are
// omitted rather than sent as null, because the 1.0 client rejects optional
// nulls; required arrays are never nil. protocol.schema.json and protocol.d.ts
// are generated from these types by go generate.
package protocol

//go:generate go run ./internal/gen -out .

import (
	"bytes"
	"encoding/json"
	"sort"
)

// EventType names an AG-UI event. The wire value equals the constant's text.
type EventType string

// The 31 AG-UI 1.0 event types.
const (
	TypeTextMessageStart        EventType = "TEXT_MESSAGE_START"
	TypeTextMessageContent      EventType = "TEXT_MESSAGE_CONTENT"
	TypeTextMessageEnd          EventType = "TEXT_MESSAGE_END"
	TypeTextMessageChunk        EventType = "TEXT_MESSAGE_CHUNK"
	TypeToolCallStart           EventType = "TOOL_CALL_START"
	TypeToolCallArgs            EventType = "TOOL_CALL_ARGS"
	TypeToolCallEnd             EventType = "TOOL_CALL_END"
	TypeToolCallChunk           EventType = "TOOL_CALL_CHUNK"
	TypeToolCallResult          EventType = "TOOL_CALL_RESULT"
	TypeStateSnapshot           EventType = "STATE_SNAPSHOT"
	TypeStateDelta              EventType = "STATE_DELTA"
	TypeMessagesSnapshot        EventType = "MESSAGES_SNAPSHOT"
	TypeActivitySnapshot        EventType = "ACTIVITY_SNAPSHOT"
	TypeActivityDelta           EventType = "ACTIVITY_DELTA"
	TypeRaw                     EventType = "RAW"
	TypeCustom                  EventType = "CUSTOM"
	TypeRunStarted              EventType = "RUN_STARTED"
	TypeRunFinished             EventType = "RUN_FINISHED"
	TypeRunError                EventType = "RUN_ERROR"
	TypeStepStarted             EventType = "STEP_STARTED"
	TypeStepFinished            EventType = "STEP_FINISHED"
	TypeReasoningStart          EventType = "REASONING_START"
	TypeReasoningMessageStart   EventType = "REASONING_MESSAGE_START"
	TypeReasoningMessageContent EventType = "REASONING_MESSAGE_CONTENT"
	TypeReasoningMessageEnd     EventType = "REASONING_MESSAGE_END"
	TypeReasoningMessageChunk   EventType = "REASONING_MESSAGE_CHUNK"
	TypeReasoningEnd            EventType = "REASONING_END"
	TypeReasoningEncryptedValue EventType = "REASONING_ENCRYPTED_VALUE"
	TypeSubagentStarted         EventType = "SUBAGENT_STARTED"
	TypeSubagentFinished        EventType = "SUBAGENT_FINISHED"
	TypeSubagentError           EventType = "SUBAGENT_ERROR"
)

// Terminal reports whether t ends a run.
func (t EventType) Terminal() bool { return t == TypeRunFinished || t == TypeRunError }

// Event is any AG-UI event. Every concrete event type embeds Base, which
// implements Event's unexported part; its Type field is filled by
// NewEvent and by the constructors, and checked by Validate.
type Event interface {
	// EventType returns the event's wire type.
	EventType() EventType
	// Header returns the event's base fields for reading and writing.
	Header() *Base
}

// Base holds the fields every AG-UI event has. Metadata is open by key;
// Orrery's own data rides under metadata.orrery.
type Base struct {
	Type      EventType       `json:"type"`
	Timestamp int64           `json:"timestamp,omitempty"`
	RawEvent  json.RawMessage `json:"rawEvent,omitempty"`
	Metadata  *Metadata       `json:"metadata,omitempty"`
}

// EventType returns b.Type.
func (b *Base) EventType() EventType { return b.Type }

// Header returns b itself.
func (b *Base) Header() *Base { return b }

// Orrery returns the event's Orrery metadata, creating it when absent.
func (b *Base) Orrery() *OrreryMeta {
	if b.Metadata == nil {
		b.Metadata = &Metadata{}
	}
	if b.Metadata.Orrery == nil {
		b.Metadata.Orrery = &OrreryMeta{}
	}
	return b.Metadata.Orrery
}

// Seq returns the frame's seq, or 0 when the event carries none.
func (b *Base) Seq() uint64 {
	if b.Metadata == nil || b.Metadata.Orrery == nil {
		return 0
	}
	return b.Metadata.Orrery.Seq
}

// Metadata is AG-UI's open metadata object. Orrery writes only the "orrery"
// key; other keys a producer set are kept in Extra and written back.
type Metadata struct {
	Orrery *OrreryMeta                `json:"orrery,omitempty"`
	Extra  map[string]json.RawMessage `json:"-"`
}

// MarshalJSON writes Orrery's key and every extra key.
func (m Metadata) MarshalJSON() ([]byte, error) {
	if len(m.Extra) == 0 {
		return json.Marshal(struct {
			Orrery *OrreryMeta `json:"orrery,omitempty"`
		}{m.Orrery})
	}
	// "orrery" first, then the other keys sorted, so that Orrery's key has
	// a fixed place in every frame.
	var b bytes.Buffer
	b.WriteByte('{')
	if m.Orrery != nil {
		o, err := json.Marshal(m.Orrery)
		if err != nil {
			return nil, err
		}
		b.WriteString(`"orrery":`)
		b.Write(o)
	}
	keys := make([]string, 0, len(m.Extra))
	for k := range m.Extra {
		if k != "orrery" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		v := m.Extra[k]
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the "orrery" key and keeps every other key in Extra.
func (m *Metadata) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw == nil {
		return &json.UnmarshalTypeError{Value: "null", Type: nil, Field: "metadata"}
	}
	*m = Metadata{}
	for k, v := range raw {
		if k == "orrery" {
			var o OrreryMeta
			if err := json.Unmarshal(v, &o); err != nil {
				return err
			}
			m.Orrery = &o
			continue
		}
		if m.Extra == nil {
			m.Extra = make(map[string]json.RawMessage)
		}
		m.Extra[k] = v
	}
	return nil
}

// OrreryMeta is what Orrery adds to an event, under metadata.orrery.
type OrreryMeta struct {
	// Seq is the frame's place in its session; 0 marks a snapshot sent
	// outside the session's order.
	Seq uint64 `json:"seq"`
	// MergedFrom is, on a coalesced frame, the first seq it stands for.
	MergedFrom uint64 `json:"merged_from,omitempty"`
	// Session names the session on transports that carry several.
	Session string `json:"session,omitempty"`
	// Run names the run a frame sent outside the order (seq 0) belongs
	// to: the end of a run whose store failed, which carries no run id of
	// its own in AG-UI.
	Run string `json:"run,omitempty"`
	// Result is a failed run's usage, on RUN_ERROR.
	Result *RunResult `json:"result,omitempty"`
	// Outcome is a tool's full outcome, on TOOL_CALL_RESULT.
	Outcome json.RawMessage `json:"outcome,omitempty"`
}

// Attributed carries the optional subagent a nested event belongs to.
type Attributed struct {
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// Attribution returns a itself. Every event that can belong to a
// sub-agent embeds Attributed, so it has this method: an event ev belongs
// to a sub-agent when ev.(AttributedEvent) holds a non-empty SubagentRunID.
func (a *Attributed) Attribution() *Attributed { return a }

// AttributedEvent is an event that can belong to a sub-agent.
type AttributedEvent interface {
	Event
	Attribution() *Attributed
}

// TextMessageStart opens an assistant (or other) text message.
type TextMessageStart struct {
	Base
	Attributed
	MessageID string `json:"messageId"`
	Role      string `json:"role,omitempty"`
	Name      string `json:"name,omitempty"`
}

// TextMessageContent appends Delta to an open text message.
type TextMessageContent struct {
	Base
	Attributed
	MessageID string `json:"messageId"`
	Delta     string `json:"delta"`
}

// TextMessageEnd closes a text message.
type TextMessageEnd struct {
	Base
	Attributed
	MessageID string `json:"messageId"`
}

// TextMessageChunk is the self-opening shorthand of a text message.
type TextMessageChunk struct {
	Base
	Attributed
	MessageID string `json:"messageId,omitempty"`
	Role      string `json:"role,omitempty"`
	Delta     string `json:"delta,omitempty"`
	Name      string `json:"name,omitempty"`
}

// ToolCallStart opens a tool call inside the assistant message ParentMessageID.
type ToolCallStart struct {
	Base
	Attributed
	ToolCallID      string `json:"toolCallId"`
	ToolCallName    string `json:"toolCallName"`
	ParentMessageID string `json:"parentMessageId,omitempty"`
}

// ToolCallArgs appends a fragment of the call's JSON argument text.
type ToolCallArgs struct {
	Base
	Attributed
	ToolCallID string `json:"toolCallId"`
	Delta      string `json:"delta"`
}

// ToolCallEnd closes a tool call's arguments.
type ToolCallEnd struct {
	Base
	Attributed
	ToolCallID string `json:"toolCallId"`
}

// ToolCallChunk is the self-opening shorthand of a tool call.
type ToolCallChunk struct {
	Base
	Attributed
	ToolCallID      string `json:"toolCallId,omitempty"`
	ToolCallName    string `json:"toolCallName,omitempty"`
	ParentMessageID string `json:"parentMessageId,omitempty"`
	Delta           string `json:"delta,omitempty"`
}

// ToolCallResult is a tool's result; MessageID is the tool message it mints.
type ToolCallResult struct {
	Base
	Attributed
	MessageID  string  `json:"messageId"`
	ToolCallID string  `json:"toolCallId"`
	Content    Content `json:"content"`
	Role       string  `json:"role,omitempty"`
}

// StateSnapshot replaces the shared state. Snapshot is any JSON, null included.
type StateSnapshot struct {
	Base
	Attributed
	Snapshot json.RawMessage `json:"snapshot"`
}

// StateDelta changes the shared state by RFC 6902 operations.
type StateDelta struct {
	Base
	Attributed
	Delta []PatchOp `json:"delta"`
}

// MessagesSnapshot replaces the conversation as the client holds it.
type MessagesSnapshot struct {
	Base
	Messages []Message `json:"messages"`
}

// ActivitySnapshot sets an activity message's content, an object.
type ActivitySnapshot struct {
	Base
	Attributed
	MessageID    string          `json:"messageId"`
	ActivityType string          `json:"activityType"`
	Content      json.RawMessage `json:"content"`
	Replace      *bool           `json:"replace,omitempty"`
}

// ActivityDelta patches an activity message's content.
type ActivityDelta struct {
	Base
	Attributed
	MessageID    string    `json:"messageId"`
	ActivityType string    `json:"activityType"`
	Patch        []PatchOp `json:"patch"`
}

// Raw passes through an event from another system.
type Raw struct {
	Base
	Attributed
	Event  json.RawMessage `json:"event"`
	Source string          `json:"source,omitempty"`
}

// Custom is an application event; Orrery's own are named orrery.*.
type Custom struct {
	Base
	Attributed
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// RunStarted opens a run. Input echoes what the run was started with.
type RunStarted struct {
	Base
	ThreadID        string         `json:"threadId"`
	RunID           string         `json:"runId"`
	ProtocolVersion string         `json:"protocolVersion,omitempty"`
	ParentRunID     string         `json:"parentRunId,omitempty"`
	Input           *RunAgentInput `json:"input,omitempty"`
}

// RunFinished ends a run that did not fail. Result is Orrery's RunResult.
type RunFinished struct {
	Base
	ThreadID string          `json:"threadId"`
	RunID    string          `json:"runId"`
	Result   json.RawMessage `json:"result,omitempty"`
	Outcome  *Outcome        `json:"outcome,omitempty"`
	Usage    []TokenUsage    `json:"usage,omitempty"`
}

// RunError ends a run that failed.
type RunError struct {
	Base
	Message string       `json:"message"`
	Code    string       `json:"code,omitempty"`
	Usage   []TokenUsage `json:"usage,omitempty"`
}

// StepStarted opens a named step.
type StepStarted struct {
	Base
	Attributed
	StepName string `json:"stepName"`
}

// StepFinished closes a named step.
type StepFinished struct {
	Base
	Attributed
	StepName string `json:"stepName"`
}

// ReasoningStart opens a reasoning span.
type ReasoningStart struct {
	Base
	Attributed
	MessageID string `json:"messageId"`
}

// ReasoningMessageStart opens a reasoning message; Role is always "reasoning".
type ReasoningMessageStart struct {
	Base
	Attributed
	MessageID string `json:"messageId"`
	Role      string `json:"role"`
}

// ReasoningMessageContent appends to an open reasoning message.
type ReasoningMessageContent struct {
	Base
	Attributed
	MessageID string `json:"messageId"`
	Delta     string `json:"delta"`
}

// ReasoningMessageEnd closes a reasoning message.
type ReasoningMessageEnd struct {
	Base
	Attributed
	MessageID string `json:"messageId"`
}

// ReasoningMessageChunk is the self-opening shorthand of a reasoning message.
type ReasoningMessageChunk struct {
	Base
	Attributed
	MessageID string `json:"messageId,omitempty"`
	Delta     string `json:"delta,omitempty"`
}

// ReasoningEnd closes a reasoning span.
type ReasoningEnd struct {
	Base
	Attributed
	MessageID string `json:"messageId"`
}

// ReasoningEncryptedValue attaches an opaque encrypted value to a message or tool call.
type ReasoningEncryptedValue struct {
	Base
	Attributed
	Subtype        string `json:"subtype"`
	EntityID       string `json:"entityId"`
	EncryptedValue string `json:"encryptedValue"`
}

// SubagentStarted opens a subagent run inside the current run.
type SubagentStarted struct {
	Base
	SubagentRunID       string `json:"subagentRunId"`
	Name                string `json:"name"`
	Description         string `json:"description,omitempty"`
	ParentSubagentRunID string `json:"parentSubagentRunId,omitempty"`
	ParentToolCallID    string `json:"parentToolCallId,omitempty"`
	ParentMessageID     string `json:"parentMessageId,omitempty"`
}

// SubagentFinished ends a subagent run.
type SubagentFinished struct {
	Base
	SubagentRunID string          `json:"subagentRunId"`
	Result        json.RawMessage `json:"result,omitempty"`
	Outcome       *Outcome        `json:"outcome,omitempty"`
}

// SubagentError ends a subagent run that failed.
type SubagentError struct {
	Base
	SubagentRunID string `json:"subagentRunId"`
	Message       string `json:"message"`
	Code          string `json:"code,omitempty"`
}
