package kernel

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/getorrery/orrery/protocol"
)

// UserMessageEvent is the CUSTOM name of a person's prompt or steer.
const UserMessageEvent = "orrery.user.message"

// UserMessage is the value of an orrery.user.message event.
type UserMessage struct {
	ID      string           `json:"id"`
	Role    string           `json:"role"`
	Content protocol.Content `json:"content"`
	// RunID is the run the message started or steered.
	RunID string `json:"runId,omitempty"`
	// Steer is true when the message joined a run in flight.
	Steer bool `json:"steer,omitempty"`
}

// transcript is a session's conversation, rebuilt from its frames with the
// same message ids the frames carry. It is what the model reads and what a
// MESSAGES_SNAPSHOT sends. It is owned by the session actor.
type transcript struct {
	msgs  []protocol.Message
	index map[string]int // message id → position in msgs
	// text holds the growing text of streamed messages, so that appending a
	// delta costs its own length; snapshot copies it into msgs.
	text map[string]*strings.Builder
	// hidden are the ids of host messages the model reads but the thread
	// clients draw leaves out.
	hidden map[string]bool
}

// appendText appends delta to message id's text.
func (t *transcript) appendText(m *protocol.Message, delta string) {
	if t.text == nil {
		t.text = make(map[string]*strings.Builder)
	}
	b, ok := t.text[m.ID]
	if !ok {
		b = &strings.Builder{}
		b.WriteString(m.Content.String())
		t.text[m.ID] = b
	}
	b.WriteString(delta)
}

// flush copies streamed text into the messages.
func (t *transcript) flush() {
	for id, b := range t.text {
		if m := t.get(id); m != nil {
			m.Content = protocol.TextContent(b.String())
		}
	}
}

func (t *transcript) has(id string) bool {
	_, ok := t.index[id]
	return ok
}

func (t *transcript) add(m protocol.Message) *protocol.Message {
	if i, ok := t.index[m.ID]; ok {
		return &t.msgs[i]
	}
	if t.index == nil {
		t.index = make(map[string]int)
	}
	t.index[m.ID] = len(t.msgs)
	t.msgs = append(t.msgs, m)
	return &t.msgs[len(t.msgs)-1]
}

func (t *transcript) get(id string) *protocol.Message {
	if i, ok := t.index[id]; ok {
		return &t.msgs[i]
	}
	return nil
}

// assistant returns the assistant message id, creating it when missing.
func (t *transcript) assistant(id string) *protocol.Message {
	if m := t.get(id); m != nil {
		return m
	}
	return t.add(protocol.Message{ID: id, Role: protocol.RoleAssistant})
}

// apply folds one sequenced event into the conversation.
func (t *transcript) apply(ev protocol.Event) {
	if attributed(ev) {
		return // a sub-agent's conversation is its own
	}
	switch e := ev.(type) {
	case *protocol.Custom:
		if e.Name == HostMessageEvent {
			t.hostMessage(e.Value)
			return
		}
		if e.Name != UserMessageEvent {
			return
		}
		var um UserMessage
		if json.Unmarshal(e.Value, &um) != nil || um.ID == "" {
			return
		}
		t.add(protocol.Message{ID: um.ID, Role: protocol.RoleUser, Content: um.Content})
	case *protocol.RunStarted:
		if e.Input == nil {
			return
		}
		for _, m := range e.Input.Messages {
			if !t.has(m.ID) {
				t.add(m)
			}
		}
	case *protocol.TextMessageStart:
		m := t.assistant(e.MessageID)
		if m.Content.IsZero() {
			m.Content = protocol.TextContent("")
		}
	case *protocol.TextMessageContent:
		t.appendText(t.assistant(e.MessageID), e.Delta)
	case *protocol.ToolCallStart:
		parent := e.ParentMessageID
		if parent == "" {
			parent = e.ToolCallID
		}
		m := t.assistant(parent)
		m.ToolCalls = append(m.ToolCalls, protocol.ToolCall{
			ID: e.ToolCallID, Type: "function",
			Function: protocol.FunctionCall{Name: e.ToolCallName},
		})
	case *protocol.ToolCallArgs:
		for i := len(t.msgs) - 1; i >= 0; i-- {
			calls := t.msgs[i].ToolCalls
			for j := range calls {
				if calls[j].ID == e.ToolCallID {
					calls[j].Function.Arguments += e.Delta
					return
				}
			}
		}
	case *protocol.ToolCallResult:
		t.add(protocol.ToolResultMessage(e))
	case *protocol.ReasoningMessageStart:
		t.add(protocol.Message{ID: e.MessageID, Role: protocol.RoleReasoning, Content: protocol.TextContent("")})
	case *protocol.ReasoningMessageContent:
		if m := t.get(e.MessageID); m != nil {
			t.appendText(m, e.Delta)
		}
	}
}

// hostMessage adds a host message as a developer message: the model reads
// it as the host's word, never as the person's.
func (t *transcript) hostMessage(value json.RawMessage) {
	var hm HostMessage
	if json.Unmarshal(value, &hm) != nil || hm.ID == "" || t.has(hm.ID) {
		return
	}
	t.add(protocol.Message{ID: hm.ID, Role: protocol.RoleDeveloper, Content: protocol.TextContent(hm.Text)})
	if hm.Hidden {
		if t.hidden == nil {
			t.hidden = make(map[string]bool)
		}
		t.hidden[hm.ID] = true
	}
}

// thread returns the conversation as clients draw it (MESSAGES_SNAPSHOT):
// snapshot without the hidden host messages. The result is never nil.
func (t *transcript) thread() []protocol.Message {
	msgs := t.snapshot()
	if len(t.hidden) == 0 {
		return msgs
	}
	return slices.DeleteFunc(msgs, func(m protocol.Message) bool { return t.hidden[m.ID] })
}

// snapshot returns a copy of the conversation that later events do not
// change, as the model reads it. The result is never nil.
func (t *transcript) snapshot() []protocol.Message {
	t.flush()
	out := make([]protocol.Message, len(t.msgs))
	copy(out, t.msgs)
	for i := range out {
		out[i].ToolCalls = slices.Clone(out[i].ToolCalls)
	}
	return out
}
