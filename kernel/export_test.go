package kernel

import (
	"context"
	"fmt"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
)

// Hooks for the checkpoint tests of package kernel_test: a checkpoint must
// hold every field a load rebuilds, which no API shows at once.

// TestSession is a session outside any kernel's map: built, loaded and
// compared by the tests, never started.
type TestSession struct{ s *Session }

// NewTestSession returns a session of k on info, not loaded.
func NewTestSession(k *Kernel, info store.Session) TestSession {
	return TestSession{newSession(k, info)}
}

// Load loads it as Kernel.Session does, and returns how many frames it
// read after the checkpoint it used (all of them without one).
func (t TestSession) Load(ctx context.Context) (int, error) {
	err := t.s.load(ctx)
	return t.s.ckptFrames, err
}

// Replay folds frames into it as a load reads them.
func (t TestSession) Replay(frames ...store.Frame) error {
	for _, f := range frames {
		ev, err := protocol.DecodeEvent(f.Data)
		if err != nil {
			return err
		}
		t.s.replay(f, ev)
	}
	return nil
}

// Checkpoint writes its checkpoint now, as the writer goroutine would.
func (t TestSession) Checkpoint() { t.s.writeCheckpoint(t.s.takeCheckpoint()) }

// EncodeCheckpoint returns its checkpoint as stored, as if it were of
// session id and its head frame's data were head (both as they are when
// empty).
func (t TestSession) EncodeCheckpoint(id string, head []byte) ([]byte, uint64, error) {
	c := t.s.takeCheckpoint()
	if id != "" {
		c.session = id
	}
	if head != nil {
		c.headSum = frameSum(head)
	}
	data, err := c.encode()
	return data, c.head, err
}

// CheckpointVersion is the format version checkpoints are written in.
const CheckpointVersion = checkpointVersion

// Reduced is everything a load rebuilds, as comparable text: the encoded
// checkpoint (state document, messages with the hidden ones, run ids, the
// open run and what it left open, extension state, head and its frame's
// fingerprint), the seq-0 snapshots a subscriber starts with, the hub's
// head and document, the open run and the cost of the session's record.
func (t TestSession) Reduced() (string, error) {
	s := t.s
	frames, keep := s.ckptFrames, s.ckptBytes
	enc, err := s.takeCheckpoint().encode()
	s.ckptFrames, s.ckptBytes = frames, keep
	if err != nil {
		return "", err
	}
	snaps, err := s.snapshotFrames()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("checkpoint %x\nstate %s\nmessages %s\nhub %d %s\nopenRun %q orphan %+v\ncost %d",
		enc, snaps[0].Data, snaps[1].Data, s.hub.published, s.hub.state, s.info.OpenRun, s.orphan, s.info.MicroUSD), nil
}
