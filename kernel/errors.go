package kernel

import (
	"fmt"

	"github.com/getorrery/orrery/store"
)

// ErrUnknownSession means no session has the id asked for.
var ErrUnknownSession = store.ErrUnknownSession

// RequestError is a refusal of a client's request; Msg says what to do
// instead. Nothing was written.
type RequestError struct {
	Msg string
}

func (e *RequestError) Error() string { return e.Msg }

// BusyError refuses a new run while another is in flight.
type BusyError struct {
	Session string
	RunID   string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("session %s is busy with run %s: to add to that run, send run.send with target:\"steer\" (POST /control); "+
		"to stop it, send run.cancel; or wait for it to finish", e.Session, e.RunID)
}

// SinceError refuses a since the session has not reached.
type SinceError struct {
	Session     string
	Since, Head uint64
}

func (e *SinceError) Error() string {
	return fmt.Sprintf("since %d is beyond the head of session %s (%d): resume from a seq you received, or omit since to start from a snapshot",
		e.Since, e.Session, e.Head)
}
