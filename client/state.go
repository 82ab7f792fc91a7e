package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/getorrery/orrery/protocol"
)

// UserMessageEvent is the CUSTOM name under which Orrery logs a person's
// prompt or steer; its value is {id, role, content, runId?, steer?}.
const UserMessageEvent = "orrery.user.message"

// State folds a session's frames into what a client shows: the
// conversation (as a MESSAGES_SNAPSHOT would send it, with the same message
// ids) and the shared state document. Apply the frames of a Stream in the
// order received; seq-0 snapshots replace what the State holds. The zero
// State is empty and ready to use. A State is not safe for concurrent use.
type State struct {
	msgs  []protocol.Message
	index map[string]int // message id → position in msgs
	// text holds the growing text of streamed messages, so that a delta
	// costs its own length; Messages copies it into msgs.
	text map[string]*strings.Builder
	// chunkText, chunkCall and chunkReasoning are the ids the last chunk
	// events named, which a chunk without an id continues.
	chunkText, chunkCall, chunkReasoning string
	doc                                  json.RawMessage
	seq                                  uint64
}

// NewState returns an empty State.
func NewState() *State { return &State{} }

// Seq returns the seq of the last frame applied that had one.
func (s *State) Seq() uint64 { return s.seq }

// Messages returns the conversation. The result is a copy that later
// frames do not change; it is never nil.
func (s *State) Messages() []protocol.Message {
	s.flush()
	out := make([]protocol.Message, len(s.msgs))
	copy(out, s.msgs)
	for i := range out {
		out[i].ToolCalls = slices.Clone(out[i].ToolCalls)
	}
	return out
}

// Shared returns the shared state document, or nil before any
// STATE_SNAPSHOT. The result is a copy.
func (s *State) Shared() json.RawMessage {
	if s.doc == nil {
		return nil
	}
	return bytes.Clone(s.doc)
}

// Apply folds one frame in. It decodes f.Data when f.Event is nil (and
// reads the seq from it when f.Seq is 0); a frame of a type this client
// does not know is skipped. A STATE_DELTA that does
// not apply is an error and leaves the state as it was.
func (s *State) Apply(f Frame) error {
	ev := f.Event
	if ev == nil {
		var err error
		if ev, err = protocol.DecodeEvent(f.Data); err != nil {
			return nil // unknown to this client: skip it
		}
	}
	seq := f.Seq
	if seq == 0 {
		seq = ev.Header().Seq()
	}
	if err := s.ApplyEvent(ev); err != nil {
		return fmt.Errorf("apply frame %d: %w", seq, err)
	}
	if seq > 0 {
		s.seq = seq
	}
	return nil
}

// patchOptions apply RFC 6902 exactly as the kernel does: no negative
// array indices.
var patchOptions = func() *jsonpatch.ApplyOptions {
	o := jsonpatch.NewApplyOptions()
	o.SupportNegativeIndices = false
	return o
}()

// ApplyEvent folds one decoded event in.
func (s *State) ApplyEvent(ev protocol.Event) error {
	switch e := ev.(type) {
	case *protocol.StateSnapshot:
		if !json.Valid(e.Snapshot) {
			return fmt.Errorf("STATE_SNAPSHOT: the snapshot is not valid JSON")
		}
		s.doc = bytes.Clone(e.Snapshot)
	case *protocol.StateDelta:
		next, err := applyPatch(s.doc, e.Delta)
		if err != nil {
			return fmt.Errorf("STATE_DELTA: %w", err)
		}
		s.doc = next
	case *protocol.MessagesSnapshot:
		s.msgs, s.index, s.text = nil, nil, nil
		for _, m := range e.Messages {
			s.add(m)
		}
	case *protocol.Custom:
		if e.Name != UserMessageEvent {
			return nil // unknown custom events are ignored
		}
		var um struct {
			ID      string           `json:"id"`
			Content protocol.Content `json:"content"`
		}
		if json.Unmarshal(e.Value, &um) != nil || um.ID == "" {
			return nil
		}
		s.add(protocol.Message{ID: um.ID, Role: protocol.RoleUser, Content: um.Content})
	case *protocol.RunStarted:
		if e.Input != nil {
			for _, m := range e.Input.Messages {
				s.add(m)
			}
		}
	case *protocol.TextMessageStart:
		i := s.ensure(e.MessageID, e.Role)
		if s.msgs[i].Content.IsZero() {
			s.msgs[i].Content = protocol.TextContent("")
		}
	case *protocol.TextMessageContent:
		s.appendText(s.ensure(e.MessageID, ""), e.Delta)
	case *protocol.TextMessageChunk:
		id := e.MessageID
		if id == "" {
			id = s.chunkText
		}
		if id == "" {
			return nil
		}
		s.chunkText = id
		i := s.ensure(id, e.Role)
		if e.Name != "" {
			s.msgs[i].Name = e.Name
		}
		s.appendText(i, e.Delta)
	case *protocol.ToolCallStart:
		s.startCall(e.ToolCallID, e.ToolCallName, e.ParentMessageID)
	case *protocol.ToolCallArgs:
		s.appendArgs(e.ToolCallID, e.Delta)
	case *protocol.ToolCallChunk:
		id := e.ToolCallID
		if id == "" {
			id = s.chunkCall
		}
		if id == "" {
			return nil
		}
		s.chunkCall = id
		if s.findCall(id) == nil {
			s.startCall(id, e.ToolCallName, e.ParentMessageID)
		}
		s.appendArgs(id, e.Delta)
	case *protocol.ToolCallResult:
		s.add(protocol.ToolResultMessage(e))
	case *protocol.ReasoningMessageStart:
		s.add(protocol.Message{ID: e.MessageID, Role: protocol.RoleReasoning, Content: protocol.TextContent("")})
	case *protocol.ReasoningMessageContent:
		if i, ok := s.index[e.MessageID]; ok {
			s.appendText(i, e.Delta)
		}
	case *protocol.ReasoningMessageChunk:
		id := e.MessageID
		if id == "" {
			id = s.chunkReasoning
		}
		if id == "" {
			return nil
		}
		s.chunkReasoning = id
		i, ok := s.index[id]
		if !ok {
			i = s.add(protocol.Message{ID: id, Role: protocol.RoleReasoning, Content: protocol.TextContent("")})
		}
		s.appendText(i, e.Delta)
	case *protocol.ReasoningEncryptedValue:
		if e.Subtype == "tool-call" {
			if c := s.findCall(e.EntityID); c != nil {
				c.EncryptedValue = e.EncryptedValue
			}
		} else if i, ok := s.index[e.EntityID]; ok {
			s.msgs[i].EncryptedValue = e.EncryptedValue
		}
	case *protocol.ActivitySnapshot:
		i, ok := s.index[e.MessageID]
		if !ok {
			s.add(protocol.Message{ID: e.MessageID, Role: protocol.RoleActivity, ActivityType: e.ActivityType, Content: objectContent(e.Content)})
		} else if e.Replace == nil || *e.Replace {
			s.msgs[i].ActivityType = e.ActivityType
			s.msgs[i].Content = objectContent(e.Content)
		}
	case *protocol.ActivityDelta:
		i, ok := s.index[e.MessageID]
		if !ok {
			return nil
		}
		next, err := applyPatch(s.msgs[i].Content.Object, e.Patch)
		if err != nil {
			return fmt.Errorf("ACTIVITY_DELTA %s: %w", e.MessageID, err)
		}
		s.msgs[i].Content = objectContent(next)
	}
	return nil
}

// applyPatch applies RFC 6902 ops to doc (null when doc is nil), all or
// none.
func applyPatch(doc json.RawMessage, ops []protocol.PatchOp) (json.RawMessage, error) {
	data, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encode the patch: %w", err)
	}
	patch, err := jsonpatch.DecodePatch(data)
	if err != nil {
		return nil, fmt.Errorf("decode the patch: %w", err)
	}
	if doc == nil {
		doc = json.RawMessage("null")
	}
	next, err := patch.ApplyWithOptions(doc, patchOptions)
	if err != nil {
		return nil, fmt.Errorf("the patch does not apply (the state keeps its last good value): %w", err)
	}
	return next, nil
}

func objectContent(obj json.RawMessage) protocol.Content {
	var c protocol.Content
	if err := c.UnmarshalJSON(obj); err != nil || c.Object == nil {
		return protocol.Content{}
	}
	return c
}

// add appends m unless a message with its id is held, and returns the
// position of the message with that id.
func (s *State) add(m protocol.Message) int {
	if i, ok := s.index[m.ID]; ok {
		return i
	}
	if s.index == nil {
		s.index = make(map[string]int)
	}
	s.index[m.ID] = len(s.msgs)
	m.ToolCalls = slices.Clone(m.ToolCalls)
	s.msgs = append(s.msgs, m)
	return len(s.msgs) - 1
}

// ensure returns the position of message id, creating it with role
// (assistant when empty) when missing.
func (s *State) ensure(id, role string) int {
	if i, ok := s.index[id]; ok {
		return i
	}
	if role == "" {
		role = protocol.RoleAssistant
	}
	return s.add(protocol.Message{ID: id, Role: role})
}

func (s *State) appendText(i int, delta string) {
	if s.text == nil {
		s.text = make(map[string]*strings.Builder)
	}
	m := &s.msgs[i]
	b, ok := s.text[m.ID]
	if !ok {
		b = &strings.Builder{}
		b.WriteString(m.Content.String())
		s.text[m.ID] = b
	}
	b.WriteString(delta)
}

// flush copies streamed text into the messages.
func (s *State) flush() {
	for id, b := range s.text {
		if i, ok := s.index[id]; ok {
			s.msgs[i].Content = protocol.TextContent(b.String())
		}
	}
}

// startCall adds a tool call to its parent assistant message (the call's
// own id when it names no parent).
func (s *State) startCall(id, name, parent string) {
	if parent == "" {
		parent = id
	}
	i := s.ensure(parent, protocol.RoleAssistant)
	s.msgs[i].ToolCalls = append(s.msgs[i].ToolCalls, protocol.ToolCall{
		ID: id, Type: "function", Function: protocol.FunctionCall{Name: name},
	})
}

// findCall returns the latest tool call with id, or nil.
func (s *State) findCall(id string) *protocol.ToolCall {
	for i := len(s.msgs) - 1; i >= 0; i-- {
		calls := s.msgs[i].ToolCalls
		for j := range calls {
			if calls[j].ID == id {
				return &calls[j]
			}
		}
	}
	return nil
}

func (s *State) appendArgs(id, delta string) {
	if c := s.findCall(id); c != nil {
		c.Function.Arguments += delta
	}
}
