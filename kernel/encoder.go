package kernel

import (
	"bytes"
	"context"
	"fmt"

	"github.com/getorrery/orrery/protocol"
)

// Encoder turns frames as logged (AG-UI 1.0 JSON) into another dialect's
// frames. The hub encodes each published batch once per encoder name and
// shares the result among every subscriber of that name, so an Encoder must
// be stateless: the same frame always gives the same bytes, whatever came
// before it.
type Encoder interface {
	// Name identifies the dialect. Two encoders with one name must encode
	// alike.
	Name() string
	// Encode appends to dst the frames f becomes, zero or more, and returns
	// dst. Each keeps f's Seq and Run. When f becomes several frames, all
	// but the last have an empty Type: they continue the last one's seq,
	// so a transport that marks seqs (the SSE id line) marks only the last,
	// and a client resuming from that seq has seen all of them. f.Data must
	// not be kept: it may be reused after Encode returns.
	Encode(dst []Frame, f Frame) []Frame
}

// encodeFrames encodes frames with enc; a nil enc returns them unchanged.
func encodeFrames(enc Encoder, frames []Frame) []Frame {
	if enc == nil {
		return frames
	}
	out := make([]Frame, 0, len(frames))
	for _, f := range frames {
		out = enc.Encode(out, f)
	}
	return out
}

// face is how a subscriber's frames are shaped: tagged with the session or
// not, and in which dialect. The hub encodes each batch once per face.
type face struct {
	tag string
	enc string
}

func (s *Subscription) face() face {
	f := face{tag: s.tag}
	if s.enc != nil {
		f.enc = s.enc.Name()
	}
	return f
}

// shape tags and encodes frames for sub.
func (s *Subscription) shape(frames []Frame) []Frame {
	if s.tag != "" {
		frames = tagFrames(frames, s.tag)
	}
	return encodeFrames(s.enc, frames)
}

// StateAt returns the session's shared state as it stood after the frame
// with seq at, rebuilt from the log: the document a client holds once it
// has applied every frame up to at. at 0 is the state of a new session.
func (s *Session) StateAt(ctx context.Context, at uint64) ([]byte, error) {
	if head := s.hub.head(); at > head {
		return nil, &SinceError{Session: s.id, Since: at, Head: head}
	}
	doc := newStateDoc()
	for from := uint64(0); from < at; {
		frames, err := s.k.cfg.Store.Read(ctx, s.id, from, int(min(backlogPage, at-from)))
		if err != nil {
			return nil, fmt.Errorf("rebuild state at seq %d: %w", at, err)
		}
		if len(frames) == 0 {
			break
		}
		for _, f := range frames {
			if f.Type != string(protocol.TypeStateSnapshot) && f.Type != string(protocol.TypeStateDelta) {
				continue
			}
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				return nil, fmt.Errorf("rebuild state: seq %d: %w", f.Seq, err)
			}
			// A logged delta always applied when it was sequenced.
			if next, err := doc.check(ev); err == nil && next != nil {
				doc.doc = bytes.Clone(next)
			}
		}
		from = frames[len(frames)-1].Seq
	}
	return doc.doc, nil
}

// stateSnapshotFrame is the seq-0 STATE_SNAPSHOT of doc.
func stateSnapshotFrame(doc []byte) (Frame, error) {
	return encodeSnapshot(&protocol.StateSnapshot{Snapshot: doc})
}
