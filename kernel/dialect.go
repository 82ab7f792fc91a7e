package kernel

import (
	"bytes"
	"encoding/json"

	"github.com/getorrery/orrery/protocol"
)

var (
	orreryMetaKey = []byte(`"metadata":{"orrery":{`)
	rawEventKey   = []byte(`"rawEvent":`)
)

func tagSlow(data []byte, session string) []byte {
	ev, err := protocol.DecodeEvent(data)
	if err != nil {
		return data
	}
	ev.Header().Orrery().Session = session
	out, err := json.Marshal(ev)
	if err != nil {
		return data
	}
	return out
}

// TagSession returns data with "session":"<session>" added to its
// metadata.orrery, as frames are sent on transports that carry several
// sessions. data must be a frame the kernel encoded; anything else is
// returned unchanged.
func TagSession(data []byte, session string) []byte {
	i := bytes.Index(data, orreryMetaKey)
	if i < 0 || bytes.Contains(data[:i], rawEventKey) {
		// No Orrery metadata where the kernel writes it, or a rawEvent
		// before it that could hold the same bytes: decode and re-encode.
		return tagSlow(data, session)
	}
	i += len(orreryMetaKey)
	quoted, _ := json.Marshal(session)
	out := make([]byte, 0, len(data)+len(quoted)+12)
	out = append(out, data[:i]...)
	out = append(out, `"session":`...)
	out = append(out, quoted...)
	out = append(out, ',')
	return append(out, data[i:]...)
}

func tagFrames(frames []Frame, session string) []Frame {
	out := make([]Frame, len(frames))
	for i, f := range frames {
		f.Data = TagSession(f.Data, session)
		out[i] = f
	}
	return out
}

// coalescer merges, in a replayed stream, each run of consecutive
// TEXT_MESSAGE_CONTENT frames of one message (and TOOL_CALL_ARGS of one
// call) into one frame whose seq is the last it covers and whose
// metadata.orrery.merged_from is the first. Applying the merged stream
// gives the same messages and state as the frames it replaces.
type coalescer struct {
	emit func(Frame) error

	// The run being merged: its first frame, and the deltas so far.
	first  Frame
	ev     protocol.Event // the first frame decoded
	id     string
	delta  bytes.Buffer
	last   Frame
	lastTS int64
	n      int
}

// mergeKey returns the message or call a delta frame extends, or "".
func mergeKey(f Frame) (protocol.Event, string, string) {
	if f.Type != string(protocol.TypeTextMessageContent) && f.Type != string(protocol.TypeToolCallArgs) {
		return nil, "", ""
	}
	ev, err := protocol.DecodeEvent(f.Data)
	if err != nil {
		return nil, "", ""
	}
	switch e := ev.(type) {
	case *protocol.TextMessageContent:
		return ev, f.Type + ":" + e.SubagentRunID + ":" + e.MessageID, e.Delta
	case *protocol.ToolCallArgs:
		return ev, f.Type + ":" + e.SubagentRunID + ":" + e.ToolCallID, e.Delta
	}
	return nil, "", ""
}

func (c *coalescer) add(f Frame) error {
	ev, key, delta := mergeKey(f)
	if key != "" && c.n > 0 && key == c.id {
		c.delta.WriteString(delta)
		c.last = f
		c.last.Data = nil // only its seq and timestamp are kept
		c.lastTS = ev.Header().Timestamp
		c.n++
		return nil
	}
	if err := c.flush(); err != nil {
		return err
	}
	if key == "" {
		return c.emit(f)
	}
	c.first = Frame{Seq: f.Seq, Type: f.Type, Run: f.Run, Data: bytes.Clone(f.Data)}
	c.ev, c.id, c.n = ev, key, 1
	c.delta.Reset()
	c.delta.WriteString(delta)
	c.last = c.first
	c.lastTS = ev.Header().Timestamp
	return nil
}

func (c *coalescer) flush() error {
	if c.n == 0 {
		return nil
	}
	n := c.n
	c.n = 0
	if n == 1 {
		return c.emit(c.first)
	}
	switch e := c.ev.(type) {
	case *protocol.TextMessageContent:
		e.Delta = c.delta.String()
	case *protocol.ToolCallArgs:
		e.Delta = c.delta.String()
	}
	h := c.ev.Header()
	h.Timestamp = c.lastTS
	meta := h.Orrery()
	meta.MergedFrom = c.first.Seq
	meta.Seq = c.last.Seq
	data, err := json.Marshal(c.ev)
	if err != nil {
		return err
	}
	return c.emit(Frame{Seq: c.last.Seq, Type: c.first.Type, Run: c.first.Run, Data: data})
}
