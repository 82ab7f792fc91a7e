package kernel

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
)

// Cluster is what a kernel needs to share its store with other nodes:
// whether another node writes a session now, and a feed of the frames
// that node writes. A kernel with a Cluster loads such a session as a
// follower: it serves the session's subscribers and reads from the frames
// the feed brings, and writes nothing, until Promote.
type Cluster interface {
	// Claim reports whether this node is to write the session as it
	// loads: it holds the session's lease, or has just taken it (its own
	// from before a restart, or a free one of a session whose log shows a
	// run left open). Otherwise the session loads as a follower.
	Claim(ctx context.Context, session string, openRun bool) (bool, error)
	// Follow calls fn with each frame of the session after seq after, in
	// order and once each, from its own goroutine, until stop is called;
	// stop returns once fn has returned for the last time. It calls gone
	// (again, while it lasts) when the owner seems to have died.
	Follow(session string, after uint64, fn func(Frame), gone func()) (stop func(), err error)
	// Acquire takes the session's lease for this node, waiting out a
	// dead owner's; it fails when a live node holds it.
	Acquire(ctx context.Context, session string) error
	// ReportConsenters tells the session's owner how many clients that
	// draw consent are attached to it here; Consenters is how many the
	// other nodes reported to this one, the owner. A question is put only
	// when some client anywhere can answer it.
	ReportConsenters(session string, n int)
	Consenters(session string) int
	// Release gives up this node's lease of the session, which it
	// unloads after a quiet spell: the session moves to the next node
	// that writes it, and a node renews leases only of the sessions it
	// has loaded.
	Release(ctx context.Context, session string) error
	// SessionChanged tells the other nodes of a change to the session
	// list made on this one; WatchChanges calls fn with theirs until stop
	// is called, so that every node's WatchSessions sees every node's.
	SessionChanged(kind string, sum protocol.SessionSummary)
	WatchChanges(fn func(kind string, sum protocol.SessionSummary)) (stop func(), err error)
}

// consentersChanged passes a follower's count of consent-drawing clients
// on to the owner.
// A client that arrives is reported before it is answered; one that leaves,
// in the background.
func (s *Session) consentersChanged(n int64, arrived bool) {
	c := s.k.cfg.Cluster
	if c == nil || !s.Following() {
		return
	}
	if arrived {
		c.ReportConsenters(s.id, int(n))
	} else {
		go c.ReportConsenters(s.id, int(n))
	}
}

// anyConsenter reports whether a client that draws consent is attached to
// the session here or, in a cluster, on another node.
func (s *Session) anyConsenter() bool {
	if s.consenters.Load() > 0 {
		return true
	}
	c := s.k.cfg.Cluster
	return c != nil && c.Consenters(s.id) > 0
}

// following is a session's follower state. Its mutex is held while the
// feed starts or stops, never while a frame is applied.
type following struct {
	mu   sync.Mutex
	stop func() // the feed's; nil when the session is not a follower
	on   atomic.Bool
	// taking is set while this node tries to take the session over.
	taking atomic.Bool
}

// Following reports whether the session is a follower of another node's.
func (s *Session) Following() bool { return s.follow.on.Load() }

// startFollowing makes the session a follower unless this node claims it
// as it loads, and reports whether it did.
func (s *Session) startFollowing(ctx context.Context) (bool, error) {
	c := s.k.cfg.Cluster
	if c == nil {
		return false, nil
	}
	var after uint64
	var open bool
	if err := s.do(ctx, func() { after, open = s.head, s.info.OpenRun != "" }); err != nil {
		return false, err
	}
	mine, err := c.Claim(ctx, s.id, open)
	if err != nil {
		return false, err
	}
	if mine {
		// The last owner may have written past what the load read.
		return false, s.catchUp(ctx)
	}
	a := s.runningActor()
	s.follow.mu.Lock()
	defer s.follow.mu.Unlock()
	stop, err := c.Follow(s.id, after, func(f Frame) { s.followed(a, f) }, func() { go s.takeOver() })
	if err != nil {
		return false, fmt.Errorf("follow session %s: %w", s.id, err)
	}
	s.follow.stop = stop
	s.follow.on.Store(true)
	if n := s.consenters.Load(); n > 0 {
		c.ReportConsenters(s.id, int(n))
	}
	s.k.log.Debug("following a session another node owns", "session", s.id, "after", after)
	return true, nil
}

// stopFollowing stops the feed, if there is one, and returns once no frame
// of it will be applied any more.
func (s *Session) stopFollowing() {
	if stop := s.takeFollowStop(); stop != nil {
		stop()
	}
}

// takeFollowStop ends the session's follower state and returns the feed's
// stop, for the caller to call.
func (s *Session) takeFollowStop() func() {
	s.follow.mu.Lock()
	defer s.follow.mu.Unlock()
	stop := s.follow.stop
	s.follow.stop = nil
	if s.follow.on.Swap(false) && s.consenters.Load() > 0 {
		// This node is no longer the owner's: what it reported lapses
		// (and a node that owns the session counts its own).
		s.k.cfg.Cluster.ReportConsenters(s.id, 0)
	}
	return stop
}

// followed applies one frame of the feed on the actor a, waiting for it so
// that frames apply in the feed's order. A frame that comes after the
// actor stopped is dropped: the session reads the log again when it next
// loads.
func (s *Session) followed(a *actor, f Frame) {
	done := make(chan struct{})
	if !s.post(a, func() { defer close(done); s.applyFollowed(f) }) {
		return
	}
	select {
	case <-done:
	case <-a.exited:
	}
}

// applyFollowed folds a frame another node logged into the session, as
// load does, and publishes it to the subscribers here. Runs on the actor.
func (s *Session) applyFollowed(f Frame) {
	s.assertActor()
	if f.Seq != s.head+1 {
		if f.Seq > s.head+1 {
			s.k.log.Warn("a followed session's feed skipped frames; it loads again from the log when next used", "session", s.id, "head", s.head, "got", f.Seq)
		}
		return
	}
	ev, err := protocol.DecodeEvent(f.Data)
	if err != nil {
		s.k.log.Warn("a followed frame is not an AG-UI event", "session", s.id, "seq", f.Seq, "err", err)
		return
	}
	switch f.Type {
	case "RUN_STARTED":
		s.info.OpenRun = f.Run
		s.orphan = openSet{}
	case "RUN_FINISHED", "RUN_ERROR":
		s.info.OpenRun = ""
		s.orphan = openSet{}
	}
	s.replay(f, ev)
	s.info.Head = f.Seq
	s.commits.publishFollowed(commitItem{frame: f, state: s.state.doc})
}

// takeOver makes this node the session's writer when its owner died: the
// recover step then closes the run the owner left open, and every node's
// subscribers see that. Another node may take it first; this one then
// follows that one.
func (s *Session) takeOver() {
	if !s.follow.taking.CompareAndSwap(false, true) {
		return
	}
	defer s.follow.taking.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var open bool
	if err := s.do(ctx, func() { open = s.info.OpenRun != "" }); err != nil || !open {
		return // nothing to close: the session waits for a writer as it is
	}
	if err := s.k.cfg.Cluster.Acquire(ctx, s.id); err != nil {
		s.k.log.Debug("another node took the session over", "session", s.id, "err", err)
		return
	}
	if err := s.Promote(ctx); err != nil {
		s.k.log.Warn("take over a session whose owner died", "session", s.id, "err", err)
	}
}

// Promote makes a follower the session's writer: it stops the feed, reads
// from the log what the feed had not brought, and takes the recover step
// (a run the old owner left open is closed as interrupted). The caller
// holds the session's lease, or the store refuses the writes. A session
// that is not a follower is left as it is.
func (s *Session) Promote(ctx context.Context) error {
	if !s.Following() {
		return nil
	}
	s.stopFollowing()
	if err := s.catchUp(ctx); err != nil {
		return err
	}
	s.k.log.Info("took over a session from another node", "session", s.id)
	if err := s.recover(ctx); err != nil {
		return err
	}
	// The owner runs the session's extensions: this node now.
	if s.k.cfg.SessionLoaded != nil {
		s.k.cfg.SessionLoaded(s)
	}
	return nil
}

// catchUp folds into the session, and publishes, the frames the log holds
// past its head: what another node wrote that this one has not seen.
func (s *Session) catchUp(ctx context.Context) error {
	var head uint64
	if err := s.do(ctx, func() { head = s.head }); err != nil {
		return err
	}
	var frames []Frame
	if err := s.k.cfg.Store.Scan(ctx, s.id, head, func(f store.Frame) error {
		f.Data = append([]byte(nil), f.Data...)
		frames = append(frames, f)
		return nil
	}); err != nil {
		return fmt.Errorf("session %s: read the log past seq %d: %w", s.id, head, err)
	}
	if len(frames) == 0 {
		return nil
	}
	return s.do(ctx, func() {
		for _, f := range frames {
			s.applyFollowed(f)
		}
	})
}
