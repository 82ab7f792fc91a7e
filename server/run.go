package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/dialect"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// handleRun serves POST /run: one AG-UI run for a stock client. The body is
// a RunAgentInput whose threadId names the session (an unknown one creates
// it). Only the messages the session does not hold yet are the run's input.
// The response streams RUN_STARTED, the turn's STATE_SNAPSHOT, the run's
// events and its terminal event, then closes. A client that goes away
// before the end cancels the run: for a stock client the request is the run.
// ?stream_mode= picks the dialect of the stream (package dialect), and
// ?a2ui=1 adds the A2UI face. An A2UI action in forwardedProps.a2uiAction
// .userAction goes to the owner of its surface (checked as a2ui.action is)
// before the run starts; a refused one starts nothing.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	enc, err := encoderFor(r.URL.Query().Get("stream_mode"), r.URL.Query().Get("a2ui") == "1")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	in, err := protocol.DecodeRunAgentInput(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if in.ProtocolVersion == "" {
		// An AG-UI 0.0.x client sends no protocolVersion, and its schema
		// refuses outcomes 1.0 added.
		enc = dialect.ForAGUI0(enc)
	}
	action, err := forwardedAction(in.ForwardedProps)
	if err != nil {
		s.kernelError(w, r, err)
		return
	}
	if in.ThreadID != "" {
		r = r.WithContext(agent.WithSession(r.Context(), in.ThreadID))
	}
	sess, err := s.sessionForRun(r.Context(), in.ThreadID)
	if err != nil {
		s.kernelError(w, r, err)
		return
	}
	if action != nil {
		// The action reaches its owner before the run starts, so the run
		// it asks for reads it (the agent's note), as an A2UI renderer
		// for AG-UI expects.
		if sess.Running() {
			writeError(w, http.StatusConflict, "session "+sess.ID()+" is busy with a run, so the A2UI action was not applied: send it with a2ui.action on POST /control, which needs no run, or wait for the run to finish")
			return
		}
		if err := s.a2uiAction(r.Context(), sess, action); err != nil {
			s.kernelError(w, r, err)
			return
		}
	}
	res, err := sess.Send(r.Context(), kernel.SendInput{
		RunID:     in.RunID,
		Messages:  in.Messages,
		Tools:     in.Tools,
		Context:   in.Context,
		State:     in.State,
		Subscribe: true,
		Encoder:   enc,
	})
	if err != nil {
		s.kernelError(w, r, err)
		return
	}
	sub := res.Sub
	defer sub.Close()
	if !s.track() {
		sess.Cancel(context.WithoutCancel(r.Context()), res.RunID)
		writeError(w, http.StatusServiceUnavailable, "the server is shutting down: retry in a moment")
		return
	}
	defer s.wg.Done()

	sw := newSSEWriter(w)
	done, err := s.stream(r.Context(), sw, sub, func(f kernel.Frame) bool {
		return f.Run == res.RunID && protocol.EventType(f.Type).Terminal()
	})
	if done {
		return
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Info("run stream ended early", "session", sess.ID(), "run", res.RunID, "err", err)
	}
	if r.Context().Err() != nil {
		// The client went away: cancel its run.
		if cerr := sess.Cancel(context.WithoutCancel(r.Context()), res.RunID); cerr == nil {
			s.log.Info("client left; run cancelled", "session", sess.ID(), "run", res.RunID)
		}
	}
}

// sessionForRun returns the session a RunAgentInput names, creating it when
// the id is new, since stock clients make up their own thread ids.
func (s *Server) sessionForRun(ctx context.Context, id string) (*kernel.Session, error) {
	if err := kernel.ValidateSessionID(id); err != nil {
		return nil, err
	}
	sess, err := s.k.Session(ctx, id)
	if !errors.Is(err, kernel.ErrUnknownSession) {
		return sess, err
	}
	sess, err = s.k.CreateSession(ctx, kernel.SessionOptions{ID: id})
	var reqErr *kernel.RequestError
	if errors.As(err, &reqErr) {
		// Created by a concurrent request: use it.
		return s.k.Session(ctx, id)
	}
	return sess, err
}

// parseSince reads a since value; it reports false after answering a bad one.
func parseSince(w http.ResponseWriter, name, v string) (uint64, bool) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, name+" must be a whole number, the last seq received (got "+strconv.Quote(v)+")")
		return 0, false
	}
	return n, true
}
