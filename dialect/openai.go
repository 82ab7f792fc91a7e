package dialect

import (
	"encoding/json"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// Chunk is an OpenAI chat.completion.chunk, with Orrery's extension under
// "orrery".
type Chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
	Orrery  *ChunkOrrery  `json:"orrery,omitempty"`
}

// ChunkChoice is one choice of a chunk. FinishReason is null until the
// choice ends, as OpenAI sends it.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// Delta is what a chunk adds to its choice's message. ReasoningContent is
// the reasoning text, named as the OpenAI-compatible servers that stream
// reasoning name it.
type Delta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ToolCallDelta is a piece of a tool call in a chunk.
type ToolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function FunctionDelta `json:"function"`
}

// FunctionDelta is a tool call's name (first piece) and a fragment of its
// JSON arguments.
type FunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Usage is OpenAI's token usage.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// ChunkOrrery is Orrery's extension of a chunk: the frame's seq and AG-UI
// type, the session and merged_from when the frame had them, and, for a
// frame with no chat counterpart, the whole AG-UI event, kept for
// inspection and never interpreted.
type ChunkOrrery struct {
	Seq        uint64          `json:"seq"`
	Type       string          `json:"type"`
	Session    string          `json:"session,omitempty"`
	MergedFrom uint64          `json:"merged_from,omitempty"`
	Event      json.RawMessage `json:"event,omitempty"`
}

// openAIEncoder writes each frame as one chat.completion.chunk. Every AG-UI
// message becomes its own completion: text and reasoning messages have the
// id chatcmpl-<messageId>, a tool call chatcmpl-<toolCallId> with the call at
// index 0, so the encoding needs no memory of earlier frames. A frame with
// no chat counterpart is a chunk with no choices whose orrery.event holds
// the AG-UI event; RUN_FINISHED and RUN_ERROR also carry usage.
type openAIEncoder struct {
	model string
}

var _ kernel.Encoder = openAIEncoder{}

func (e openAIEncoder) Name() string { return string(OpenAI) + ":" + e.model }

func (e openAIEncoder) Encode(dst []kernel.Frame, f kernel.Frame) []kernel.Frame {
	data, _ := e.chunk(f, true)
	return append(dst, kernel.Frame{Seq: f.Seq, Type: f.Type, Run: f.Run, Data: data})
}

// chatChunk returns f's chunk when f has a chat counterpart (text,
// reasoning, tool call pieces, a run's usage).
func (e openAIEncoder) chatChunk(f kernel.Frame) ([]byte, bool) {
	return e.chunk(f, false)
}

func strPtr(s string) *string { return &s }

// chatTypes are the frame types with a chat counterpart (or usage).
var chatTypes = map[string]bool{
	string(protocol.TypeTextMessageStart): true, string(protocol.TypeTextMessageContent): true, string(protocol.TypeTextMessageEnd): true,
	string(protocol.TypeReasoningMessageStart): true, string(protocol.TypeReasoningMessageContent): true, string(protocol.TypeReasoningMessageEnd): true,
	string(protocol.TypeToolCallStart): true, string(protocol.TypeToolCallArgs): true, string(protocol.TypeToolCallEnd): true,
	string(protocol.TypeRunFinished): true, string(protocol.TypeRunError): true,
}

// chunk encodes f. Without all, it reports false for frames that have no
// chat counterpart instead of wrapping them.
func (e openAIEncoder) chunk(f kernel.Frame, all bool) ([]byte, bool) {
	c := Chunk{Object: "chat.completion.chunk", Model: e.model, Choices: []ChunkChoice{}, Orrery: &ChunkOrrery{Seq: f.Seq, Type: f.Type}}
	if !chatTypes[f.Type] {
		// No chat counterpart: the event rides whole in orrery.event, and
		// only its header is read.
		if !all {
			return nil, false
		}
		var h struct {
			Timestamp int64 `json:"timestamp"`
			Metadata  struct {
				Orrery struct {
					Session    string `json:"session"`
					MergedFrom uint64 `json:"merged_from"`
				} `json:"orrery"`
			} `json:"metadata"`
		}
		c.ID = "chatcmpl-" + f.Run
		if f.Run == "" {
			c.ID = "chatcmpl-orrery"
		}
		if json.Unmarshal(f.Data, &h) == nil {
			c.Created = h.Timestamp / 1000
			c.Orrery.Session = h.Metadata.Orrery.Session
			c.Orrery.MergedFrom = h.Metadata.Orrery.MergedFrom
		}
		if json.Valid(f.Data) {
			c.Orrery.Event = f.Data
		}
		data, err := json.Marshal(c)
		return data, err == nil
	}
	ev, err := protocol.DecodeEvent(f.Data)
	if err != nil {
		if !all {
			return nil, false
		}
		c.ID = "chatcmpl-orrery"
		if json.Valid(f.Data) {
			c.Orrery.Event = f.Data
		}
		data, _ := json.Marshal(c)
		return data, true
	}
	h := ev.Header()
	c.Created = h.Timestamp / 1000
	if h.Metadata != nil && h.Metadata.Orrery != nil {
		c.Orrery.Session = h.Metadata.Orrery.Session
		c.Orrery.MergedFrom = h.Metadata.Orrery.MergedFrom
	}
	choice := func(id string, d Delta, finish string) {
		c.ID = "chatcmpl-" + id
		ch := ChunkChoice{Delta: d}
		if finish != "" {
			ch.FinishReason = strPtr(finish)
		}
		c.Choices = append(c.Choices, ch)
	}
	chat := true
	switch x := ev.(type) {
	case *protocol.TextMessageStart:
		choice(x.MessageID, Delta{Role: "assistant", Content: strPtr("")}, "")
	case *protocol.TextMessageContent:
		choice(x.MessageID, Delta{Content: strPtr(x.Delta)}, "")
	case *protocol.TextMessageEnd:
		choice(x.MessageID, Delta{}, "stop")
	case *protocol.ReasoningMessageStart:
		choice(x.MessageID, Delta{Role: "assistant"}, "")
	case *protocol.ReasoningMessageContent:
		choice(x.MessageID, Delta{ReasoningContent: x.Delta}, "")
	case *protocol.ReasoningMessageEnd:
		choice(x.MessageID, Delta{}, "stop")
	case *protocol.ToolCallStart:
		choice(x.ToolCallID, Delta{Role: "assistant", ToolCalls: []ToolCallDelta{{
			ID: x.ToolCallID, Type: "function", Function: FunctionDelta{Name: x.ToolCallName},
		}}}, "")
	case *protocol.ToolCallArgs:
		choice(x.ToolCallID, Delta{ToolCalls: []ToolCallDelta{{Function: FunctionDelta{Arguments: x.Delta}}}}, "")
	case *protocol.ToolCallEnd:
		choice(x.ToolCallID, Delta{}, "tool_calls")
	case *protocol.RunFinished:
		c.ID = "chatcmpl-" + x.RunID
		c.Usage = usageOf(x.Usage)
		c.Orrery.Event = f.Data
	case *protocol.RunError:
		c.ID = "chatcmpl-" + f.Run
		c.Usage = usageOf(x.Usage)
		c.Orrery.Event = f.Data
	default:
		chat = false
		c.ID = "chatcmpl-" + f.Run
		if f.Run == "" {
			c.ID = "chatcmpl-orrery"
		}
		c.Orrery.Event = f.Data
	}
	if !chat && !all {
		return nil, false
	}
	data, err := json.Marshal(c)
	if err != nil {
		return nil, false
	}
	return data, true
}

// usageOf sums AG-UI token usage into OpenAI's, or returns nil when none
// was reported.
func usageOf(us []protocol.TokenUsage) *Usage {
	if len(us) == 0 {
		return nil
	}
	var u Usage
	for _, x := range us {
		u.PromptTokens += x.InputTokens
		u.CompletionTokens += x.OutputTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return &u
}
