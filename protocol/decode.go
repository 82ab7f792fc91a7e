package protocol

import (
	"encoding/json"
	"fmt"
)

var eventTypes = map[EventType]func() Event{
	TypeTextMessageStart:        func() Event { return new(TextMessageStart) },
	TypeTextMessageContent:      func() Event { return new(TextMessageContent) },
	TypeTextMessageEnd:          func() Event { return new(TextMessageEnd) },
	TypeTextMessageChunk:        func() Event { return new(TextMessageChunk) },
	TypeToolCallStart:           func() Event { return new(ToolCallStart) },
	TypeToolCallArgs:            func() Event { return new(ToolCallArgs) },
	TypeToolCallEnd:             func() Event { return new(ToolCallEnd) },
	TypeToolCallChunk:           func() Event { return new(ToolCallChunk) },
	TypeToolCallResult:          func() Event { return new(ToolCallResult) },
	TypeStateSnapshot:           func() Event { return new(StateSnapshot) },
	TypeStateDelta:              func() Event { return &StateDelta{Delta: []PatchOp{}} },
	TypeMessagesSnapshot:        func() Event { return &MessagesSnapshot{Messages: []Message{}} },
	TypeActivitySnapshot:        func() Event { return &ActivitySnapshot{Content: json.RawMessage("{}")} },
	TypeActivityDelta:           func() Event { return &ActivityDelta{Patch: []PatchOp{}} },
	TypeRaw:                     func() Event { return new(Raw) },
	TypeCustom:                  func() Event { return new(Custom) },
	TypeRunStarted:              func() Event { return new(RunStarted) },
	TypeRunFinished:             func() Event { return new(RunFinished) },
	TypeRunError:                func() Event { return new(RunError) },
	TypeStepStarted:             func() Event { return new(StepStarted) },
	TypeStepFinished:            func() Event { return new(StepFinished) },
	TypeReasoningStart:          func() Event { return new(ReasoningStart) },
	TypeReasoningMessageStart:   func() Event { return &ReasoningMessageStart{Role: RoleReasoning} },
	TypeReasoningMessageContent: func() Event { return new(ReasoningMessageContent) },
	TypeReasoningMessageEnd:     func() Event { return new(ReasoningMessageEnd) },
	TypeReasoningMessageChunk:   func() Event { return new(ReasoningMessageChunk) },
	TypeReasoningEnd:            func() Event { return new(ReasoningEnd) },
	TypeReasoningEncryptedValue: func() Event { return new(ReasoningEncryptedValue) },
	TypeSubagentStarted:         func() Event { return new(SubagentStarted) },
	TypeSubagentFinished:        func() Event { return new(SubagentFinished) },
	TypeSubagentError:           func() Event { return new(SubagentError) },
}

// EventTypes returns every AG-UI 1.0 event type, in the order of the spec.
func EventTypes() []EventType {
	return []EventType{
		TypeTextMessageStart, TypeTextMessageContent, TypeTextMessageEnd, TypeTextMessageChunk,
		TypeToolCallStart, TypeToolCallArgs, TypeToolCallEnd, TypeToolCallChunk, TypeToolCallResult,
		TypeStateSnapshot, TypeStateDelta, TypeMessagesSnapshot,
		TypeActivitySnapshot, TypeActivityDelta,
		TypeRaw, TypeCustom,
		TypeRunStarted, TypeRunFinished, TypeRunError,
		TypeStepStarted, TypeStepFinished,
		TypeReasoningStart, TypeReasoningMessageStart, TypeReasoningMessageContent, TypeReasoningMessageEnd,
		TypeReasoningMessageChunk, TypeReasoningEnd, TypeReasoningEncryptedValue,
		TypeSubagentStarted, TypeSubagentFinished, TypeSubagentError,
	}
}

// NewEvent returns a zero event of type t with its Type field set, or nil
// when t is not an AG-UI 1.0 type. Fields the wire requires in a fixed or
// non-null form start valid: required arrays are empty, not nil, an
// activity's content is {}, and a reasoning message's role is "reasoning".
func NewEvent(t EventType) Event {
	mk, ok := eventTypes[t]
	if !ok {
		return nil
	}
	ev := mk()
	ev.Header().Type = t
	return ev
}

// DecodeEvent decodes one AG-UI event from its JSON.
func DecodeEvent(data []byte) (Event, error) {
	var head struct {
		Type EventType `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	ev := NewEvent(head.Type)
	if ev == nil {
		return nil, fmt.Errorf("decode event: type %q is not an AG-UI 1.0 event", head.Type)
	}
	if err := json.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("decode %s: %w", head.Type, err)
	}
	return ev, nil
}

// Stamp sets ev's Type from its Go type, so callers can build events as
// struct literals without repeating the type name.
func Stamp(ev Event) Event {
	if ev.Header().Type == "" {
		ev.Header().Type = typeOf(ev)
	}
	return ev
}

func typeOf(ev Event) EventType {
	switch ev.(type) {
	case *TextMessageStart:
		return TypeTextMessageStart
	case *TextMessageContent:
		return TypeTextMessageContent
	case *TextMessageEnd:
		return TypeTextMessageEnd
	case *TextMessageChunk:
		return TypeTextMessageChunk
	case *ToolCallStart:
		return TypeToolCallStart
	case *ToolCallArgs:
		return TypeToolCallArgs
	case *ToolCallEnd:
		return TypeToolCallEnd
	case *ToolCallChunk:
		return TypeToolCallChunk
	case *ToolCallResult:
		return TypeToolCallResult
	case *StateSnapshot:
		return TypeStateSnapshot
	case *StateDelta:
		return TypeStateDelta
	case *MessagesSnapshot:
		return TypeMessagesSnapshot
	case *ActivitySnapshot:
		return TypeActivitySnapshot
	case *ActivityDelta:
		return TypeActivityDelta
	case *Raw:
		return TypeRaw
	case *Custom:
		return TypeCustom
	case *RunStarted:
		return TypeRunStarted
	case *RunFinished:
		return TypeRunFinished
	case *RunError:
		return TypeRunError
	case *StepStarted:
		return TypeStepStarted
	case *StepFinished:
		return TypeStepFinished
	case *ReasoningStart:
		return TypeReasoningStart
	case *ReasoningMessageStart:
		return TypeReasoningMessageStart
	case *ReasoningMessageContent:
		return TypeReasoningMessageContent
	case *ReasoningMessageEnd:
		return TypeReasoningMessageEnd
	case *ReasoningMessageChunk:
		return TypeReasoningMessageChunk
	case *ReasoningEnd:
		return TypeReasoningEnd
	case *ReasoningEncryptedValue:
		return TypeReasoningEncryptedValue
	case *SubagentStarted:
		return TypeSubagentStarted
	case *SubagentFinished:
		return TypeSubagentFinished
	case *SubagentError:
		return TypeSubagentError
	}
	return ""
}
