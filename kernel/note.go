package kernel

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/getorrery/orrery/protocol"
)

// Names of the CUSTOM events for host messages and notices.
const (
	// HostMessageEvent is a message from the host or an extension (not the
	// person) that the model reads on its next turn.
	HostMessageEvent = "orrery.host.message"
	// NoticeEvent is a notice for the person: {ext, level, text}.
	NoticeEvent = "orrery.notice"
)

// HostMessage is the value of an orrery.host.message event. The model reads
// Text as a developer message; it is never the person's message and starts
// no turn.
type HostMessage struct {
	ID string `json:"id"`
	// From is who sent it: "ui" for an action on the agent's component,
	// or an extension's id.
	From string `json:"from"`
	Text string `json:"text"`
	// Hidden keeps it out of the thread clients draw (MESSAGES_SNAPSHOT):
	// the person already saw what it reports.
	Hidden bool `json:"hidden,omitempty"`
}

// Notice is the value of an orrery.notice event.
type Notice struct {
	// Ext is the extension the notice is about, or empty for the host's
	// own.
	Ext   string `json:"ext,omitempty"`
	Level string `json:"level"`
	Text  string `json:"text"`
}

// Notice levels.
const (
	NoticeInfo = "info"
	NoticeWarn = "warning"
)

// AppendHostMessage adds a host message from from to the conversation: the
// model reads it on its next turn (the turn in flight reads it at its next
// model step). It starts no turn. A hidden one stays out of the thread
// clients draw.
func (s *Session) AppendHostMessage(ctx context.Context, from, text string, hidden bool) error {
	var err error
	if derr := s.do(ctx, func() { _, err = s.hostMessage(from, text, hidden) }); derr != nil {
		return derr
	}
	return err
}

// hostMessage logs a host message and returns its id. Runs on the actor.
func (s *Session) hostMessage(from, text string, hidden bool) (string, error) {
	s.assertActor()
	id := newID("host")
	value, err := json.Marshal(HostMessage{ID: id, From: from, Text: text, Hidden: hidden})
	if err != nil {
		return "", fmt.Errorf("encode host message: %w", err)
	}
	return id, s.emit(s.runID(), &protocol.Custom{Name: HostMessageEvent, Value: value})
}

// notice logs a notice for the person. Runs on the actor.
func (s *Session) notice(level, ext, text string) error {
	s.assertActor()
	value, err := json.Marshal(Notice{Ext: ext, Level: level, Text: text})
	if err != nil {
		return fmt.Errorf("encode notice: %w", err)
	}
	return s.emit(s.runID(), &protocol.Custom{Name: NoticeEvent, Value: value})
}
