package acp

import (
	"encoding/json"
	"strings"

	"github.com/getorrery/orrery/protocol"
)

// Projector turns a session's frames into ACP session updates, for faces
// that speak ACP to their clients (the ori relay, orrery acp). A frame the
// bridge made from an agent's update gives back that update verbatim (its
// metadata.acp); the frames of the built-in agent are projected: text and
// reasoning become message and thought chunks, tool calls become
// tool_call and tool_call_update, orrery.commands becomes
// available_commands_update, orrery.context a usage_update (without cost)
// and a task surface at /surfaces/plan a plan.
// The zero Projector is ready to use; use one per session stream.
type Projector struct {
	calls map[string]*projectedCall
}

type projectedCall struct {
	name string
	args strings.Builder
}

// RawUpdate returns the ACP update a frame made by the bridge carries, and
// whether the frame is the bridge's at all (frames that follow from an
// update carry true, and give no update).
func RawUpdate(ev protocol.Event) (json.RawMessage, bool) {
	h := ev.Header()
	if h.Metadata == nil || h.Metadata.Extra == nil {
		return nil, false
	}
	v, ok := h.Metadata.Extra[MetaKey]
	if !ok {
		return nil, false
	}
	if len(v) > 0 && v[0] == '{' {
		return v, true
	}
	return nil, true
}

// Updates returns the ACP session updates ev stands for, in order; none
// for frames that have no ACP counterpart.
func (p *Projector) Updates(ev protocol.Event) []json.RawMessage {
	if raw, ok := RawUpdate(ev); ok {
		if raw == nil {
			return nil
		}
		return []json.RawMessage{raw}
	}
	if p.calls == nil {
		p.calls = make(map[string]*projectedCall)
	}
	switch e := ev.(type) {
	case *protocol.TextMessageContent:
		return one(map[string]any{"sessionUpdate": "agent_message_chunk", "messageId": e.MessageID, "content": textBlock(e.Delta)})
	case *protocol.ReasoningMessageContent:
		return one(map[string]any{"sessionUpdate": "agent_thought_chunk", "messageId": e.MessageID, "content": textBlock(e.Delta)})
	case *protocol.ToolCallStart:
		p.calls[e.ToolCallID] = &projectedCall{name: e.ToolCallName}
		return one(map[string]any{"sessionUpdate": "tool_call", "toolCallId": e.ToolCallID, "title": e.ToolCallName, "kind": ToolKind(e.ToolCallName), "status": "pending"})
	case *protocol.ToolCallArgs:
		if c := p.calls[e.ToolCallID]; c != nil {
			c.args.WriteString(e.Delta)
		}
	case *protocol.ToolCallEnd:
		c := p.calls[e.ToolCallID]
		if c == nil {
			return nil
		}
		u := map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": e.ToolCallID, "status": "in_progress"}
		if args := c.args.String(); json.Valid([]byte(args)) {
			u["rawInput"] = json.RawMessage(args)
		}
		return one(u)
	case *protocol.ToolCallResult:
		delete(p.calls, e.ToolCallID)
		status := "completed"
		var o struct {
			Status string `json:"status"`
		}
		if e.Metadata != nil && e.Metadata.Orrery != nil {
			_ = json.Unmarshal(e.Orrery().Outcome, &o)
		}
		if o.Status != "" && o.Status != "ok" {
			status = "failed"
		}
		return one(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": e.ToolCallID, "status": status,
			"content": []any{map[string]any{"type": "content", "content": textBlock(e.Content.String())}}})
	case *protocol.Custom:
		if e.Name == ContextEvent {
			var v ContextWindow
			if json.Unmarshal(e.Value, &v) == nil {
				return one(map[string]any{"sessionUpdate": "usage_update", "used": v.Used, "size": v.Size})
			}
		}
		if e.Name == CommandsEvent {
			var v struct {
				Commands json.RawMessage `json:"commands"`
			}
			if json.Unmarshal(e.Value, &v) == nil && len(v.Commands) > 0 {
				return one(map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": v.Commands})
			}
		}
	case *protocol.StateDelta:
		for _, op := range e.Delta {
			if op.Path == "/surfaces/plan" && op.Op == "add" {
				if u := planUpdate(op.Value); u != nil {
					return one(u)
				}
			}
		}
	}
	return nil
}

func one(u map[string]any) []json.RawMessage {
	data, err := json.Marshal(u)
	if err != nil {
		return nil
	}
	return []json.RawMessage{data}
}

func textBlock(s string) map[string]string { return map[string]string{"type": "text", "text": s} }

// planUpdate turns a task surface into an ACP plan.
func planUpdate(surface json.RawMessage) map[string]any {
	var s struct {
		Kind struct {
			T     string `json:"t"`
			Steps []struct {
				Title  string `json:"title"`
				Status string `json:"status"`
			} `json:"steps"`
		} `json:"kind"`
	}
	if json.Unmarshal(surface, &s) != nil || s.Kind.T != "task" {
		return nil
	}
	entries := make([]map[string]string, 0, len(s.Kind.Steps))
	for _, st := range s.Kind.Steps {
		status := "pending"
		switch st.Status {
		case "running":
			status = "in_progress"
		case "done", "failed", "cancelled":
			status = "completed"
		}
		entries = append(entries, map[string]string{"content": st.Title, "priority": "medium", "status": status})
	}
	return map[string]any{"sessionUpdate": "plan", "entries": entries}
}

// ToolKind is the ACP tool kind of an Orrery tool.
func ToolKind(name string) string {
	switch name {
	case "read_file":
		return "read"
	case "list_files", "tools.search":
		return "search"
	case "write_file", "edit_file":
		return "edit"
	case "shell":
		return "execute"
	}
	return "other"
}
