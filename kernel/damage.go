package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/getorrery/orrery/store"
)

// DamagedError refuses a session whose log is damaged. Every request that
// names the session gets it, and nothing of the session is served: a
// client shown the frames up to the damage could not tell them from the
// whole log. Undamaged sessions are served as usual.
type DamagedError struct {
	Session string
	// After is the last seq up to which the session's log is whole.
	After uint64
	// Why says what is wrong, for the log and orrery db check.
	Why string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("session %s's log is damaged after seq %d: restore it from a backup or run `orrery db repair`", e.Session, e.After)
}

// Is reports the error as store.ErrDamaged.
func (e *DamagedError) Is(target error) bool { return target == store.ErrDamaged }

// StoreDamagedError refuses to open a kernel on a store whose session
// records are damaged (or which is not a database at all): no session's
// record can be trusted.
type StoreDamagedError struct {
	// Path is the store's file, or "".
	Path string
	// Problem is the first thing the check found.
	Problem string
}

func (e *StoreDamagedError) Error() string {
	what := "the session log"
	if e.Path != "" {
		what += " " + e.Path
	}
	return fmt.Sprintf("%s is damaged (%s): run `orrery db check` to see what is lost, then restore it from a backup or run `orrery db repair`", what, e.Problem)
}

// Is reports the error as store.ErrDamaged.
func (e *StoreDamagedError) Is(target error) bool { return target == store.ErrDamaged }

// StoreCheck says how Open checks a store that is a store.Checker.
type StoreCheck int

const (
	// CheckBackground, the zero value: before Open returns, the quick
	// check, whose cost grows with the number of sessions, not with the
	// log (the session records, and each session's first and last frame
	// against its head); after, on a goroutine that Close stops, the full
	// check (every page, every session's frame count), whose findings
	// refuse the sessions they name from then on.
	CheckBackground StoreCheck = iota
	// CheckFull runs the full check before Open returns.
	CheckFull
	// CheckQuick runs only the quick check.
	CheckQuick
)

// Whatever the check, loading a session reads its whole log, and a gap, a
// frame that does not read or decode, or a log that ends before its
// record's head refuses the session then (Session.load).

// checkStore runs the check Open runs before it returns.
func (k *Kernel) checkStore(ctx context.Context) error {
	c, ok := k.cfg.Store.(store.Checker)
	if !ok {
		return nil
	}
	rep, err := c.Check(ctx, store.CheckOptions{Full: k.cfg.StoreCheck == CheckFull})
	if err != nil {
		return fmt.Errorf("check the session log: %w", err)
	}
	return k.apply(rep, true)
}

// startFullCheck starts the background full check (CheckBackground).
func (k *Kernel) startFullCheck() {
	c, ok := k.cfg.Store.(store.Checker)
	if !ok || k.cfg.StoreCheck != CheckBackground {
		close(k.checked)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	k.stopCheck = cancel
	go func() {
		defer close(k.checked)
		rep, err := c.Check(ctx, store.CheckOptions{Full: true})
		if err != nil {
			if ctx.Err() == nil {
				k.log.Warn("the full check of the session log failed", "err", err, "fix", "run orrery db check")
			}
			return
		}
		_ = k.apply(rep, false)
		if rep.OK() {
			k.log.Debug("session log checked", "sessions", rep.Sessions, "frames", rep.Frames)
		}
	}()
}

// StoreChecked returns a channel closed when the full check Open started
// has ended (at once when it started none).
func (k *Kernel) StoreChecked() <-chan struct{} { return k.checked }

// apply refuses the damaged sessions rep names and logs the rest of it.
// On open, damaged session records refuse the start.
func (k *Kernel) apply(rep store.Report, opening bool) error {
	if rep.RecordsDamaged() {
		problem := rep.Unreadable
		if problem == "" {
			for _, p := range rep.Problems {
				if p.Where == store.WhereSessions {
					problem = p.Text
					break
				}
			}
		}
		err := &StoreDamagedError{Path: rep.Path, Problem: problem}
		if opening {
			return err
		}
		k.log.Error(err.Error())
	}
	for _, d := range rep.Damaged {
		k.markDamaged(&DamagedError{Session: d.Session, After: d.Intact, Why: d.Why})
	}
	if len(rep.Damaged) == 0 {
		for _, p := range rep.Problems {
			if p.Where != store.WhereSessions {
				k.log.Warn("the session log has damage that no session's frames show", "where", p.Where, "problem", p.Text, "fix", "run orrery db check")
				break
			}
		}
	}
	for _, u := range rep.Unrecorded {
		k.log.Warn("the session log has frames whose session record is lost", "session", u.Session, "frames", u.Frames, "fix", "run orrery db repair")
	}
	return nil
}

// markDamaged refuses the session d names from now on. A session already
// in memory is left serving: its load read its whole log and found it
// whole, so the damage came after.
func (k *Kernel) markDamaged(d *DamagedError) {
	k.mu.Lock()
	_, live := k.sessions[d.Session]
	first := k.damaged[d.Session] == nil
	if first {
		k.damaged[d.Session] = d
	}
	k.mu.Unlock()
	if !first {
		return
	}
	if live {
		k.log.Error("the log of a session in memory is damaged on disk: requests naming it are refused from now on; what is running goes on",
			"session", d.Session, "after", d.After, "why", d.Why, "fix", "stop the server, run orrery db check")
		return
	}
	k.log.Error("a session's log is damaged: every request naming it is refused", "session", d.Session, "after", d.After, "why", d.Why,
		"fix", "restore it from a backup or run orrery db repair")
}

// damageLocked returns the refusal of id when its log is damaged, or nil.
// k.mu must be held.
func (k *Kernel) damageLocked(id string) error {
	if d := k.damaged[id]; d != nil {
		return d
	}
	return nil
}

// loadedFrame checks that f comes next in the log being loaded. Runs
// before the actor starts.
func (s *Session) loadedFrame(f store.Frame) error {
	if f.Seq != s.head+1 {
		why := fmt.Sprintf("seq %d is missing", s.head+1)
		if f.Seq <= s.head {
			why = fmt.Sprintf("seq %d comes again after seq %d", f.Seq, s.head)
		}
		return &DamagedError{Session: s.id, After: s.head, Why: why}
	}
	return nil
}

// undecodable is the refusal of a frame that does not decode.
func (s *Session) undecodable(f store.Frame, err error) error {
	return &DamagedError{Session: s.id, After: f.Seq - 1, Why: fmt.Sprintf("seq %d is not an AG-UI event (%v)", f.Seq, err)}
}

// loaded turns what loading the log met into a refusal when it shows the
// log damaged: a read the store found damaged, or a log that ends
// elsewhere than its record's head.
func (s *Session) loaded(err error) error {
	var d *DamagedError
	switch {
	case errors.As(err, &d):
		return d
	case errors.Is(err, store.ErrDamaged):
		return &DamagedError{Session: s.id, After: s.head, Why: fmt.Sprintf("seq %d does not read (%v)", s.head+1, err)}
	case err != nil:
		return err
	case s.head < s.info.Head:
		return &DamagedError{Session: s.id, After: s.head, Why: fmt.Sprintf("the log ends at seq %d, but its record says head %d", s.head, s.info.Head)}
	case s.head > s.info.Head:
		return &DamagedError{Session: s.id, After: s.head, Why: fmt.Sprintf("its record says head %d, but the log goes on to seq %d", s.info.Head, s.head)}
	}
	return nil
}

// readLogged reads up to limit frames with seq > since from the log, as
// the log's readers do (a backlog, session.read, a state rebuilt at a
// seq), and refuses them unless they are the log's next frames, whole:
// seqs since+1, since+2 … with no hole, none missing before want frames
// came, each one JSON object. A session loaded from a checkpoint has not
// read the log before it, so this is where damage there is found: the
// session is then refused by name (a *DamagedError), never served
// truncated. want is how many frames the head says there are (at most
// limit); checking each frame's JSON fully would cost a replay about a
// third, so only its ends are checked.
func (s *Session) readLogged(ctx context.Context, since uint64, limit int, want int) ([]store.Frame, error) {
	frames, err := s.k.cfg.Store.Read(ctx, s.id, since, limit)
	if errors.Is(err, store.ErrDamaged) {
		d := &DamagedError{Session: s.id, After: since, Why: fmt.Sprintf("seq %d does not read (%v)", since+1, err)}
		s.k.markDamaged(d)
		return nil, d
	}
	if err != nil {
		return nil, err
	}
	for i, f := range frames {
		at := since + uint64(i)
		var why string
		switch {
		case f.Seq != at+1:
			why = fmt.Sprintf("seq %d is missing", at+1)
		case len(f.Data) < 2 || f.Data[0] != '{' || f.Data[len(f.Data)-1] != '}':
			why = fmt.Sprintf("seq %d is not an AG-UI event (not one JSON object)", f.Seq)
		}
		if why != "" {
			d := &DamagedError{Session: s.id, After: at, Why: why}
			s.k.markDamaged(d)
			return nil, d
		}
	}
	if len(frames) < want {
		at := since + uint64(len(frames))
		d := &DamagedError{Session: s.id, After: at, Why: fmt.Sprintf("the log ends at seq %d, but its head is past it", at)}
		s.k.markDamaged(d)
		return nil, d
	}
	return frames, nil
}
