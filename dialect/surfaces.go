package dialect

import (
	"encoding/json"

	"github.com/getorrery/orrery/dialect/a2ui"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// WithA2UI returns an encoder that adds the A2UI face to inner (nil: the
// frames as logged): before each orrery.placed frame that carries a
// surface, an ACTIVITY_SNAPSHOT {activityType: "a2ui-surface"} with the
// surface projected to A2UI v0.9 (surfaceId placed:<owner>:<id>), and before
// each orrery.unplaced, one whose operations delete that surface. The
// snapshot has the placed frame's seq and no type of its own (it continues
// that seq), and goes through inner like any frame. A placement whose
// surface does not project is left as it is. A surface shown as an a2ui
// form is sent as the messages it was shown with.
func WithA2UI(inner kernel.Encoder) kernel.Encoder {
	return a2uiEncoder{inner: inner}
}

type a2uiEncoder struct {
	inner kernel.Encoder
}

var _ kernel.Encoder = a2uiEncoder{}

func (e a2uiEncoder) Name() string {
	if e.inner == nil {
		return "a2ui"
	}
	return e.inner.Name() + "+a2ui"
}

func (e a2uiEncoder) encode(dst []kernel.Frame, f kernel.Frame) []kernel.Frame {
	if e.inner == nil {
		return append(dst, f)
	}
	return e.inner.Encode(dst, f)
}

func (e a2uiEncoder) Encode(dst []kernel.Frame, f kernel.Frame) []kernel.Frame {
	if f.Type == string(protocol.TypeCustom) {
		if act, ok := activityFor(f); ok {
			start := len(dst)
			dst = e.encode(dst, act)
			for i := start; i < len(dst); i++ {
				dst[i].Type = ""
			}
		}
	}
	return e.encode(dst, f)
}

// activityFor returns the A2UI activity frame a placement frame stands
// for, with its seq and session.
func activityFor(f kernel.Frame) (kernel.Frame, bool) {
	ev, err := protocol.DecodeEvent(f.Data)
	if err != nil {
		return kernel.Frame{}, false
	}
	c, ok := ev.(*protocol.Custom)
	if !ok || (c.Name != kernel.PlacedEvent && c.Name != kernel.UnplacedEvent) {
		return kernel.Frame{}, false
	}
	var v struct {
		ID      string          `json:"id"`
		Owner   string          `json:"owner"`
		Surface json.RawMessage `json:"surface"`
		A2UI    json.RawMessage `json:"a2ui"`
	}
	if json.Unmarshal(c.Value, &v) != nil || v.ID == "" || v.Owner == "" {
		return kernel.Frame{}, false
	}
	id := "placed:" + v.Owner + ":" + v.ID
	var msgs []a2ui.Message
	if c.Name == kernel.UnplacedEvent {
		msgs = []a2ui.Message{a2ui.Delete(id)}
	} else if len(v.A2UI) > 0 {
		// Shown as an a2ui form: its own messages, checked when shown.
		if json.Unmarshal(v.A2UI, &msgs) != nil {
			return kernel.Frame{}, false
		}
	} else {
		if len(v.Surface) == 0 {
			return kernel.Frame{}, false
		}
		if msgs, err = a2ui.ProjectSurface(id, v.Surface); err != nil {
			return kernel.Frame{}, false
		}
	}
	act, err := a2ui.Activity(id, msgs)
	if err != nil {
		return kernel.Frame{}, false
	}
	act.Timestamp = c.Timestamp
	meta := act.Orrery()
	meta.Seq = f.Seq
	if h := c.Header(); h.Metadata != nil && h.Metadata.Orrery != nil {
		meta.Session = h.Metadata.Orrery.Session
	}
	data, err := json.Marshal(act)
	if err != nil {
		return kernel.Frame{}, false
	}
	return kernel.Frame{Seq: f.Seq, Type: string(protocol.TypeActivitySnapshot), Run: f.Run, Data: data}, true
}
