package store

import (
	"context"
	"errors"
)

// ErrDamaged marks an error from a read that found the store's own data
// damaged: a page that does not decode, a file that is not a database. A
// Checker's Report says which sessions it touches.
var ErrDamaged = errors.New("the log is damaged")

// Checker is a Log that can look for damage in itself. A kernel checks its
// store on open when the store is one.
type Checker interface {
	// Check reports the damage it finds. It fails only when it could not
	// check at all; damage is in the Report.
	Check(ctx context.Context, opts CheckOptions) (Report, error)
}

// CheckOptions say how much a check reads.
type CheckOptions struct {
	// Full reads every page of the store and counts every session's
	// frames, which costs time in proportion to the store's size. The
	// zero value checks only what costs in proportion to the number of
	// sessions: the session records, and each session's first and last
	// frame against its head.
	Full bool
	// Frame, when set, is called in a full check with each frame's data;
	// an error makes that frame damaged (the frames after it are then lost
	// to a repair too). It lets the caller check what the store cannot
	// know, such as that every frame is an AG-UI event.
	Frame func(data []byte) error
	// Progress, when set, is told what a long check is doing.
	Progress func(Progress)
}

// Progress is how far a check or repair is.
type Progress struct {
	// Stage names the work, as a phrase: "checking pages".
	Stage string
	// Done of Total units (pages, frames, sessions) are done; Total is 0
	// when unknown.
	Done, Total int64
	// Unit names what is counted: "pages", "frames", "sessions".
	Unit string
}

// Report is what a check found. A Report with no Problems, no Damaged and
// no Unrecorded found nothing wrong.
type Report struct {
	// Path is the file checked, when the store is a file.
	Path string `json:"path,omitempty"`
	// Full is whether every page and frame was read (CheckOptions.Full).
	Full bool `json:"full"`
	// Unreadable, when set, says why the store cannot be opened at all
	// (its header or schema is damaged); nothing else was checked.
	Unreadable string `json:"unreadable,omitempty"`
	// Sessions counts the session records; Frames counts the frames (in a
	// full check only).
	Sessions int   `json:"sessions"`
	Frames   int64 `json:"frames,omitempty"`
	// Problems are the damage the store's own integrity check found, in
	// its words.
	Problems []Problem `json:"problems,omitempty"`
	// Damaged are the sessions whose logs are damaged, in the order of
	// their records.
	Damaged []Damage `json:"damaged,omitempty"`
	// Unrecorded are frames whose session has no readable record.
	Unrecorded []Unrecorded `json:"unrecorded,omitempty"`
}

// OK reports whether the check found nothing wrong.
func (r Report) OK() bool {
	return r.Unreadable == "" && len(r.Problems) == 0 && len(r.Damaged) == 0 && len(r.Unrecorded) == 0
}

// RecordsDamaged reports whether the problems found touch the session
// records themselves (their table or its index), so that no session's
// record can be trusted: a kernel refuses to start on such a store.
func (r Report) RecordsDamaged() bool {
	if r.Unreadable != "" {
		return true
	}
	for _, p := range r.Problems {
		if p.Where == WhereSessions {
			return true
		}
	}
	return false
}

// Where a Problem is.
const (
	// WhereSessions is the session records (their table and its index).
	WhereSessions = "sessions"
	// WhereFrames is the frames; the sessions they belong to are in
	// Report.Damaged.
	WhereFrames = "frames"
	// WhereFile is the file as a whole: pages no table owns, the free list.
	WhereFile = "file"
)

// Problem is one finding of the store's integrity check.
type Problem struct {
	// Where is WhereSessions, WhereFrames, WhereFile, or the name of
	// another table.
	Where string `json:"where"`
	// Text is what the check said.
	Text string `json:"text"`
}

// Damage is one damaged session. Its seqs 1..Intact are all present and
// intact; what comes after is missing, unreadable or out of order.
type Damage struct {
	Session string `json:"session"`
	// Intact is the last seq up to which the log is whole.
	Intact uint64 `json:"intact"`
	// Head is the head the session's record says.
	Head uint64 `json:"head"`
	// Last is the highest seq that could still be read, 0 when none could.
	Last uint64 `json:"last,omitempty"`
	// Why says what is wrong, as a clause: "seq 195 does not read
	// (database disk image is malformed)".
	Why string `json:"why"`
	// OpenRun is the run the record shows in flight, or "".
	OpenRun string `json:"openRun,omitempty"`
}

// Lost returns the first and last seq a repair drops: those after Intact
// up to the highest the record or the log names. It returns 0, 0 when
// nothing is lost but the record's head (which a repair corrects).
func (d Damage) Lost() (from, to uint64) {
	to = max(d.Head, d.Last)
	if to <= d.Intact {
		return 0, 0
	}
	return d.Intact + 1, to
}

// Unrecorded are frames whose session has no readable record.
type Unrecorded struct {
	// Key is the store's own key for the session (SQLite's sid).
	Key int64 `json:"key"`
	// Session is the id its frames name (a RUN_STARTED's threadId), or "".
	Session string `json:"session,omitempty"`
	// Frames counts them; Last is the highest seq.
	Frames int64  `json:"frames"`
	Last   uint64 `json:"last"`
}

// RepairOptions say how a repair checks frames and reports progress.
type RepairOptions struct {
	// Frame is as in CheckOptions: a frame it refuses is damaged.
	Frame func(data []byte) error
	// Progress, when set, is told what a long repair is doing.
	Progress func(Progress)
}

// RepairReport says what a repair did and what it lost.
type RepairReport struct {
	// Before is what the check before the repair found; After what the
	// check of the repaired store found (OK unless the repair failed).
	Before Report `json:"before"`
	After  Report `json:"after"`
	// Repaired is false when there was nothing to repair.
	Repaired bool `json:"repaired"`
	// Kept is where the damaged file was kept, unchanged.
	Kept string `json:"kept,omitempty"`
	// Sessions are what happened to each damaged or unrecorded session.
	Sessions []Repaired `json:"sessions,omitempty"`
	// Frames counts the frames the repaired store holds.
	Frames int64 `json:"frames"`
	// Notes say what else was lost, as sentences.
	Notes []string `json:"notes,omitempty"`
}

// Repaired is what a repair did to one session.
type Repaired struct {
	Session string `json:"session"`
	// Head is its head after the repair.
	Head uint64 `json:"head"`
	// LostFrom..LostTo are the seqs dropped (0, 0 when none).
	LostFrom uint64 `json:"lostFrom,omitempty"`
	LostTo   uint64 `json:"lostTo,omitempty"`
	// Readable counts the dropped frames that could still be read: they
	// followed the damage. They are in the kept file.
	Readable int64 `json:"readable,omitempty"`
	// OpenRun is the run left in flight at Head, which the caller closes.
	OpenRun string `json:"openRun,omitempty"`
	// Note says what else changed: "its record was rebuilt from its
	// frames; its title, model, cwd and cost are lost".
	Note string `json:"note,omitempty"`
}
