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

// StateEncoder is an Encoder whose frames also depend on the session's
// shared state (the A2UI face projects a component from its structure and
// data). The hub, and the replay of a backlog, hand it with each frame the
// state document as it stood right after that frame. That document is a
// function of the log up to the frame, so the same frame still gives the
// same bytes for every subscriber, live or replayed.
type StateEncoder interface {
	Encoder
	// EncodeState is Encode with state, the session's shared state document
	// right after f (for a seq-0 STATE_SNAPSHOT, the document it holds).
	// state must not be modified; it may be kept, since the kernel never
	// changes a document in place.
	EncodeState(dst []Frame, f Frame, state []byte) []Frame
}

// encodeFrames encodes frames with enc; a nil enc returns them unchanged.
// states holds, for a StateEncoder, the state after each frame.
func encodeFrames(enc Encoder, frames []Frame, states [][]byte) []Frame {
	if enc == nil {
		return frames
	}
	out := make([]Frame, 0, len(frames))
	se, withState := enc.(StateEncoder)
	for i, f := range frames {
		if withState && i < len(states) {
			out = se.EncodeState(out, f, states[i])
			continue
		}
		out = enc.Encode(out, f)
	}
	return out
}

// wantsState reports whether enc reads the state with each frame.
func wantsState(enc Encoder) bool {
	_, ok := enc.(StateEncoder)
	return ok
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

// shape tags and encodes frames for sub; states is the state after each
// frame, read only by a StateEncoder (nil when sub has none).
func (s *Subscription) shape(frames []Frame, states [][]byte) []Frame {
	if s.tag != "" {
		frames = tagFrames(frames, s.tag)
	}
	return encodeFrames(s.enc, frames, states)
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
		n := int(min(backlogPage, at-from))
		frames, err := s.readLogged(ctx, from, n, n)
		if err != nil {
			return nil, fmt.Errorf("rebuild state at seq %d: %w", at, err)
		}
		if len(frames) == 0 {
			break
		}
		for _, f := range frames {
			if err := doc.follow(f); err != nil {
				return nil, fmt.Errorf("rebuild state: seq %d: %w", f.Seq, err)
			}
		}
		from = frames[len(frames)-1].Seq
	}
	return doc.doc, nil
}

// follow applies a logged frame to the document when it is a
// STATE_SNAPSHOT or a STATE_DELTA. A logged delta always applied when it
// was sequenced; one that does not now is skipped, as load skips it.
func (s *stateDoc) follow(f Frame) error {
	if f.Type != string(protocol.TypeStateSnapshot) && f.Type != string(protocol.TypeStateDelta) {
		return nil
	}
	ev, err := protocol.DecodeEvent(f.Data)
	if err != nil {
		return err
	}
	if next, err := s.check(ev); err == nil && next != nil {
		s.doc = bytes.Clone(next)
	}
	return nil
}

// stateSnapshotFrame is the seq-0 STATE_SNAPSHOT of doc.
func stateSnapshotFrame(doc []byte) (Frame, error) {
	return encodeSnapshot(&protocol.StateSnapshot{Snapshot: doc})
}
