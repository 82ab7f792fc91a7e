package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Message roles, as AG-UI 1.0 defines them.
const (
	RoleDeveloper = "developer"
	RoleSystem    = "system"
	RoleAssistant = "assistant"
	RoleUser      = "user"
	RoleTool      = "tool"
	RoleActivity  = "activity"
	RoleReasoning = "reasoning"
)

// RunAgentInput is the body a stock AG-UI client posts to start a run. Unknown
// fields are tolerated; an absent tools or context list reads as empty and a
// null state as absent.
type RunAgentInput struct {
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	ParentRunID     string          `json:"parentRunId,omitempty"`
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	State           json.RawMessage `json:"state,omitempty"`
	Messages        []Message       `json:"messages"`
	Tools           []Tool          `json:"tools"`
	Context         []Context       `json:"context"`
	ForwardedProps  json.RawMessage `json:"forwardedProps,omitempty"`
	Resume          []ResumeEntry   `json:"resume,omitempty"`
}

// UnmarshalJSON decodes an input, normalising absent lists to empty ones and
// a null state or forwardedProps to absent.
func (in *RunAgentInput) UnmarshalJSON(data []byte) error {
	type plain RunAgentInput
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	if bytes.Equal(bytes.TrimSpace(p.State), []byte("null")) {
		p.State = nil
	}
	if bytes.Equal(bytes.TrimSpace(p.ForwardedProps), []byte("null")) {
		p.ForwardedProps = nil
	}
	if p.Messages == nil {
		p.Messages = []Message{}
	}
	if p.Tools == nil {
		p.Tools = []Tool{}
	}
	if p.Context == nil {
		p.Context = []Context{}
	}
	*in = RunAgentInput(p)
	return nil
}

// MarshalJSON writes the input with nil messages, tools and context as
// empty arrays, since AG-UI 1.0 refuses null for them.
func (in RunAgentInput) MarshalJSON() ([]byte, error) {
	type plain RunAgentInput
	p := plain(in)
	if p.Messages == nil {
		p.Messages = []Message{}
	}
	if p.Tools == nil {
		p.Tools = []Tool{}
	}
	if p.Context == nil {
		p.Context = []Context{}
	}
	return json.Marshal(p)
}

// Validate reports the first required field that is missing, as a sentence
// that says what to send.
func (in *RunAgentInput) Validate() error {
	switch {
	case in.ThreadID == "":
		return errors.New("threadId is missing: send the session id as threadId (any new id creates a session)")
	case in.RunID == "":
		return errors.New("runId is missing: send a fresh id for this run as runId")
	}
	for i := range in.Messages {
		if err := in.Messages[i].Validate(); err != nil {
			return fmt.Errorf("messages[%d]: %w", i, err)
		}
	}
	for i, t := range in.Tools {
		if t.Name == "" {
			return fmt.Errorf("tools[%d]: name is missing: every tool needs a name", i)
		}
	}
	return nil
}

// Tool is a tool the client offers the agent; the client runs it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// Context is a piece of context the client gives the agent.
type Context struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// ResumeEntry answers an interrupt of an earlier run.
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// Message is one entry of a conversation. Which fields apply depends on Role:
// user and tool content may be a string or a list of parts; an activity's
// content is an object.
type Message struct {
	ID             string          `json:"id"`
	Role           string          `json:"role"`
	Content        Content         `json:"content,omitzero"`
	Name           string          `json:"name,omitempty"`
	ToolCalls      []ToolCall      `json:"toolCalls,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	Error          string          `json:"error,omitempty"`
	ActivityType   string          `json:"activityType,omitempty"`
	EncryptedValue string          `json:"encryptedValue,omitempty"`
	SubagentRunID  string          `json:"subagentRunId,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
}

// Validate checks the fields Role requires.
func (m *Message) Validate() error {
	if m.ID == "" {
		return errors.New("id is missing: every message needs an id")
	}
	switch m.Role {
	case RoleUser, RoleDeveloper, RoleSystem, RoleReasoning:
		if m.Content.IsZero() {
			return fmt.Errorf("a %s message needs content", m.Role)
		}
	case RoleAssistant:
	case RoleTool:
		if m.ToolCallID == "" {
			return errors.New("a tool message needs toolCallId: name the tool call it answers")
		}
	case RoleActivity:
		if m.ActivityType == "" {
			return errors.New("an activity message needs activityType")
		}
	case "":
		return errors.New("role is missing: use user, assistant, tool, system, developer, reasoning or activity")
	default:
		return fmt.Errorf("role %q is unknown: use user, assistant, tool, system, developer, reasoning or activity", m.Role)
	}
	return nil
}

// ToolCall is a call an assistant message made. Arguments is JSON text.
type ToolCall struct {
	ID             string          `json:"id"`
	Type           string          `json:"type"`
	Function       FunctionCall    `json:"function"`
	EncryptedValue string          `json:"encryptedValue,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
}

// FunctionCall names the tool and carries its argument text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Content is a message's content: plain text, a list of parts, or (for an
// activity message) an object. The zero Content is absent.
type Content struct {
	// Text is the content when it was given as a string.
	Text string
	// Parts is the content when it was given as a list; nil otherwise.
	Parts []ContentPart
	// Object is an activity message's content object.
	Object json.RawMessage
	set    bool
}

// TextContent returns a Content holding s as a string.
func TextContent(s string) Content { return Content{Text: s, set: true} }

// PartsContent returns a Content holding parts as a list.
func PartsContent(parts []ContentPart) Content {
	if parts == nil {
		parts = []ContentPart{}
	}
	return Content{Parts: parts, set: true}
}

// IsZero reports whether the content is absent.
func (c Content) IsZero() bool { return !c.set && c.Text == "" && c.Parts == nil && c.Object == nil }

// String returns the text of the content: the string itself, or the text
// parts joined by newlines.
func (c Content) String() string {
	if c.Parts == nil {
		return c.Text
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p.Type != "text" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// MarshalJSON writes the content in the form it was given.
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.Object != nil:
		return c.Object, nil
	case c.Parts != nil:
		return json.Marshal(c.Parts)
	default:
		return json.Marshal(c.Text)
	}
}

// UnmarshalJSON accepts a string, a list of parts or an object.
func (c *Content) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return errors.New("content is empty")
	}
	switch data[0] {
	case '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*c = TextContent(s)
	case '[':
		var parts []ContentPart
		if err := json.Unmarshal(data, &parts); err != nil {
			return err
		}
		*c = PartsContent(parts)
	case '{':
		*c = Content{Object: append(json.RawMessage(nil), data...), set: true}
	case 'n':
		*c = Content{}
	default:
		return errors.New("content must be a string, a list of parts or an object")
	}
	return nil
}

// ContentPart is one part of multimodal content: text, or an image, audio,
// video or document with a source.
type ContentPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	Source   *Source         `json:"source,omitempty"`
	ID       string          `json:"id,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// MarshalJSON writes the part, keeping "text" on a text part even when it is
// empty: AG-UI 1.0 requires it there.
func (p ContentPart) MarshalJSON() ([]byte, error) {
	type plain ContentPart
	if p.Type != "text" || p.Text != "" {
		return json.Marshal(plain(p))
	}
	return json.Marshal(struct {
		plain
		Text string `json:"text"`
	}{plain(p), ""})
}

// Source says where a part's bytes are: inline base64 data, a URL, a
// provider file, or (type "path", Orrery's own) a file of the session's
// workspace, by its path relative to the workspace root.
type Source struct {
	Type     string `json:"type"`
	Value    string `json:"value"`
	MimeType string `json:"mimeType,omitempty"`
	Provider string `json:"provider,omitempty"`
}

// TokenUsage is AG-UI's token accounting for one model; every field is
// optional and every count is a total or a part of one.
type TokenUsage struct {
	Provider              string `json:"provider,omitempty"`
	Model                 string `json:"model,omitempty"`
	InputTokens           int64  `json:"inputTokens,omitempty"`
	OutputTokens          int64  `json:"outputTokens,omitempty"`
	TotalTokens           int64  `json:"totalTokens,omitempty"`
	ReasoningTokens       int64  `json:"reasoningTokens,omitempty"`
	CachedInputTokens     int64  `json:"cachedInputTokens,omitempty"`
	CacheWriteInputTokens int64  `json:"cacheWriteInputTokens,omitempty"`
}

// RunResult is Orrery's usage of one run: its cost in micro-USD and its
// token counts. It is RUN_FINISHED.result, and a failed run's
// metadata.orrery.result.
type RunResult struct {
	MicroUSD              int64 `json:"micro_usd"`
	InputTokens           int64 `json:"inputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	CachedInputTokens     int64 `json:"cachedInputTokens,omitempty"`
	ReasoningTokens       int64 `json:"reasoningTokens,omitempty"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens,omitempty"`
}

// Outcome is how a run (or subagent) finished.
type Outcome struct {
	// Type is success, interrupt or cancelled (suspended for a subagent).
	Type               string      `json:"type"`
	PendingToolCallIDs []string    `json:"pendingToolCallIds,omitempty"`
	Interrupts         []Interrupt `json:"interrupts,omitempty"`
	InterruptIDs       []string    `json:"interruptIds,omitempty"`
}

// Outcome types.
const (
	OutcomeSuccess   = "success"
	OutcomeInterrupt = "interrupt"
	OutcomeCancelled = "cancelled"
)

// Interrupt is a pause a run asks the client to resolve.
type Interrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	ExpiresAt      string          `json:"expiresAt,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	SubagentRunID  string          `json:"subagentRunId,omitempty"`
}

// PatchOp is one RFC 6902 operation. Value is required for add, replace and
// test; a JSON null is written as the four bytes null.
type PatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// ToolResultMessage is the conversation's message for a tool call's
// result: its content and, when the event carries one, the outcome Orrery
// logged with it (ok, error, denied, the rule that decided) under
// metadata.orrery.outcome, so that a client that starts from a
// MESSAGES_SNAPSHOT marks the call as a client that watched it live does.
func ToolResultMessage(e *ToolCallResult) Message {
	m := Message{ID: e.MessageID, Role: RoleTool, ToolCallID: e.ToolCallID, Content: e.Content}
	if md := e.Metadata; md != nil && md.Orrery != nil && len(md.Orrery.Outcome) > 0 {
		if b, err := json.Marshal(map[string]map[string]json.RawMessage{"orrery": {"outcome": md.Orrery.Outcome}}); err == nil {
			m.Metadata = b
		}
	}
	return m
}
