package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui"
)

// Extensions is the extension host as the server serves it (ext.list and
// ext.restart); *ext.Host implements it.
type Extensions interface {
	// List returns the extensions of session, or of every session in
	// memory when session is "".
	List(session string) []protocol.ExtStatus
	// Restart stops session's extension name, if it runs, and starts it
	// again.
	Restart(ctx context.Context, session, name string) error
}

// doExt serves the requests on extensions and shared state keys. ok is
// false for any other request.
func (s *Server) doExt(ctx context.Context, req protocol.Request) (value any, ok bool, err error) {
	switch q := req.(type) {
	case *protocol.ExtList:
		// An unknown session is refused whether or not any extension
		// runs: an empty list would hide a mistyped id.
		if q.Session != "" {
			if _, err := s.k.Session(ctx, q.Session); err != nil {
				return nil, true, err
			}
		}
		if s.cfg.Extensions == nil {
			return protocol.ExtListReply{Extensions: []protocol.ExtStatus{}}, true, nil
		}
		list := s.cfg.Extensions.List(q.Session)
		if list == nil {
			list = []protocol.ExtStatus{}
		}
		return protocol.ExtListReply{Extensions: list}, true, nil
	case *protocol.ExtRestart:
		if q.Session == "" || q.Name == "" {
			return nil, true, &kernel.RequestError{Msg: "ext.restart needs session and name: name the session and one of the extensions ext.list shows in it"}
		}
		if s.cfg.Extensions == nil {
			return nil, true, &kernel.RequestError{Msg: "this server runs no extensions: add one under .orrery/extensions/ (or with orrery ext add PATH) and start the server again"}
		}
		if _, err := s.k.Session(ctx, q.Session); err != nil {
			return nil, true, err
		}
		if err := s.cfg.Extensions.Restart(ctx, q.Session, q.Name); err != nil {
			var re *kernel.RequestError
			if !errors.As(err, &re) && ctx.Err() == nil {
				err = &kernel.RequestError{Msg: err.Error()}
			}
			return nil, true, err
		}
		return protocol.Empty{}, true, nil
	case *protocol.StateWatch:
		return nil, true, &kernel.RequestError{Msg: "state.watch works only on a connection (GET /ws or a pipe); over HTTP, follow a session with GET /events?session=<id>&watch=<key>,<key>"}
	}
	return nil, false, nil
}

// watchValues returns the current values of the watched keys of sess that
// are set (a "<owner>/*" key names none: its values come as they change).
func watchValues(ctx context.Context, sess *kernel.Session, keys []string) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, k := range keys {
		owner, key, _ := strings.Cut(k, "/")
		if key == "*" {
			continue
		}
		v, ok, err := sess.State(ctx, ui.Owner(owner), key)
		if err != nil {
			return nil, err
		}
		if ok {
			out[k] = v
		}
	}
	return out, nil
}
