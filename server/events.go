package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
)

// handleEvents serves GET /events?session=ID[&since=N]: the session's whole
// stream (every prompt, run and notice) as SSE, until the client leaves.
// since, or the Last-Event-ID header, resumes after that seq; without either
// the stream starts with a STATE_SNAPSHOT and a MESSAGES_SNAPSHOT of seq 0.
// client and draws declare the client: a declaration that lacks a required
// element is refused. coalesce=1 merges runs of deltas in the replay;
// snapshot=1 with since starts the replay with the state as it stood at
// since. stream_mode picks the dialect (package dialect); a2ui=1 adds the
// A2UI face of placed surfaces.
// watch=KEY,KEY passes orrery.state.changed of those shared state keys
// ("<owner>/<key>" or "<owner>/*"); without it none is passed.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("session")
	if id == "" {
		writeError(w, http.StatusBadRequest, "session is missing: call GET /events?session=<id>")
		return
	}
	caller, status, err := queryCaller(r)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	enc, err := encoderFor(q.Get("stream_mode"), q.Get("a2ui") == "1")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var watch []string
	if v := q.Get("watch"); v != "" {
		watch = strings.Split(v, ",")
		if err := checkWatch(watch); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	var since *uint64
	for _, v := range []struct{ name, value string }{
		{"since", q.Get("since")},
		{"Last-Event-ID", r.Header.Get("Last-Event-ID")},
	} {
		if v.value == "" {
			continue
		}
		n, ok := parseSince(w, v.name, v.value)
		if !ok {
			return
		}
		since = &n
		break
	}
	r = r.WithContext(agent.WithSession(r.Context(), id))
	sess, err := s.k.Session(r.Context(), id)
	if err != nil {
		s.kernelError(w, r, err)
		return
	}
	sub, err := sess.SubscribeWith(r.Context(), kernel.SubscribeOptions{
		Since: since, Coalesce: q.Get("coalesce") == "1", Caller: caller,
		Encoder: enc, Snapshot: since != nil && q.Get("snapshot") == "1",
	})
	if err != nil {
		s.kernelError(w, r, err)
		return
	}
	defer sub.Close()
	defer s.subscribed("sse")()
	if !s.track() {
		writeError(w, http.StatusServiceUnavailable, "the server is shutting down: retry in a moment")
		return
	}
	defer s.wg.Done()
	sw := newSSEWriter(w)
	sw.watch.set(watch)
	if _, err := s.stream(r.Context(), sw, sub, nil); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Info("event stream ended", "session", id, "err", err)
	}
}
