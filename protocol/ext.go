package protocol

import "encoding/json"

// ExtList lists the extensions loaded in Session, or in every session the
// kernel holds in memory when Session is empty.
type ExtList struct {
	Envelope
	Session string `json:"session,omitempty"`
}

// ExtListReply is the value of an ExtList reply, sorted by session then
// name.
type ExtListReply struct {
	Extensions []ExtStatus `json:"extensions"`
}

// ExtStatus describes one extension in one session.
type ExtStatus struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Runtime string `json:"runtime"`
	Session string `json:"session"`
	// State is idle (not started yet), starting, running, parked (a
	// non-resident extension after a quiet spell), stopped (the supervisor
	// will restart it), failed (restart it by hand) or none (runtime "none":
	// no process).
	State    string `json:"state"`
	Resident bool   `json:"resident,omitempty"`
	Restarts int    `json:"restarts,omitempty"`
	PID      int    `json:"pid,omitempty"`
	// Error is why it last stopped.
	Error string `json:"error,omitempty"`
}

// ExtRestart stops Session's extension Name, if it runs, and starts it
// again with a fresh restart count (what /ext restart NAME does).
type ExtRestart struct {
	Envelope
	Session string `json:"session"`
	Name    string `json:"name"`
}

// StateWatch chooses the shared state keys whose orrery.state.changed
// events this connection receives for Session: a key is "<owner>/<key>"
// (such as "ext:ci/failed"), or "<owner>/*" for all of an owner's keys. It
// replaces the connection's earlier choice for the session; an empty Keys
// receives none (the default).
type StateWatch struct {
	Envelope
	Session string   `json:"session"`
	Keys    []string `json:"keys"`
}

// StateWatchReply is the value of a StateWatch reply: the current value of
// each watched key that is set.
type StateWatchReply struct {
	Values map[string]json.RawMessage `json:"values"`
}

func init() {
	requestKinds["ext.list"] = func() Request { return new(ExtList) }
	requestKinds["ext.restart"] = func() Request { return new(ExtRestart) }
	requestKinds["state.watch"] = func() Request { return new(StateWatch) }
}
