package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// liveSnapshot is the first event of GET /api/live: the session list as it
// stands.
type liveSnapshot struct {
	Type     string                    `json:"type"` // "snapshot"
	Sessions []protocol.SessionSummary `json:"sessions"`
}

// liveChange is one session-list change: type is created, title, cost,
// running, ended or deleted; session is the session's summary after it;
// seq orders the changes of one server process (it restarts with it).
type liveChange struct {
	Type    string                  `json:"type"`
	Seq     uint64                  `json:"seq"`
	Session protocol.SessionSummary `json:"session"`
}

// handleLive serves GET /api/live: the live entity channel for session
// lists. It sends the current list as one "snapshot" event, then every
// change as it happens, until the client leaves. Nothing of it is durable:
// a client that reconnects (after a drop or a restart) gets a fresh
// snapshot, then changes, so it never needs what it missed.
func (s *Server) handleLive(w http.ResponseWriter, r *http.Request) {
	// Watch first, then read the list, so that no change falls between.
	watch := s.k.WatchSessions()
	defer watch.Close()
	list, err := s.k.Sessions(r.Context())
	if err != nil {
		s.kernelError(w, r, err)
		return
	}
	if !s.track() {
		writeError(w, http.StatusServiceUnavailable, "the server is shutting down: retry in a moment")
		return
	}
	defer s.wg.Done()
	sw := newSSEWriter(w)
	defer s.cutOff(r.Context(), sw)()
	write := func(v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return sw.frame(kernel.Frame{Data: data})
	}
	if err := write(liveSnapshot{Type: "snapshot", Sessions: list}); err != nil {
		return
	}
	if err := sw.flush(); err != nil {
		return
	}
	tick := time.NewTicker(s.cfg.KeepAlive)
	defer tick.Stop()
	var changes []kernel.SessionChange
	for {
		select {
		case <-watch.Ready():
			changes = watch.Take(changes[:0])
			for _, c := range changes {
				if err := write(liveChange{Type: c.Kind, Seq: c.Seq, Session: c.Session}); err != nil {
					return
				}
			}
			if err := sw.flush(); err != nil {
				return
			}
		case <-watch.Done():
			if err := watch.Err(); err != nil && !errors.Is(err, context.Canceled) {
				s.log.Info("live channel ended", "err", err)
			}
			return
		case <-tick.C:
			if !sw.wrote {
				if err := sw.keepalive(); err != nil {
					return
				}
			}
			sw.wrote = false
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}
