package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// Forwarder sends the requests that change a session to the node that owns
// it, when that is another node of a cluster: the one writer of a
// session's log is the node holding its lease.
type Forwarder interface {
	// Owner returns the id of the live node a write to the session goes
	// to, or "" when this node takes it (it owns the session, or nobody
	// alive does).
	Owner(ctx context.Context, session string) (string, error)
	// Forward sends payload, a request for the session, to the node and
	// returns its answer; or, when the node is gone and this one took the
	// session meanwhile, reports taken, and the request runs here.
	Forward(ctx context.Context, node, session string, payload []byte) (answer []byte, taken bool, err error)
}

// takeHere makes this node, which holds the session's lease, its writer
// (a follower of it is promoted), and has the request run here.
func (s *Server) takeHere(ctx context.Context, session string) (any, bool, error) {
	sess, err := s.k.Session(ctx, session)
	if err == nil && sess.Following() {
		if err := sess.Promote(ctx); err != nil {
			return nil, true, err
		}
	}
	return nil, false, nil
}

// writesSession returns the session a request changes, for the requests a
// cluster sends to the session's owner. Reads (session.read, attach) are
// served where they arrive, from the session's follower.
func writesSession(req protocol.Request) (string, bool) {
	switch req.(type) {
	case *protocol.RunSend, *protocol.RunCancel, *protocol.ConsentAnswer, *protocol.UIIntent,
		*protocol.UIMove, *protocol.UIHide, *protocol.UISave, *protocol.A2UIAction,
		*protocol.InputAnswer, *protocol.InputRefuse:
		id := requestSession(req)
		return id, id != ""
	}
	return "", false
}

// forwarded is a request as one node sends it to another: the request,
// and who asked, as the receiving node judged them.
type forwarded struct {
	Request json.RawMessage `json:"request"`
	Client  string          `json:"client,omitempty"`
	Draws   []string        `json:"draws,omitempty"`
	Peer    forwardedPeer   `json:"peer"`
}

type forwardedPeer struct {
	Local   bool   `json:"local,omitempty"`
	Pipe    bool   `json:"pipe,omitempty"`
	Browser bool   `json:"browser,omitempty"`
	Page    bool   `json:"page,omitempty"`
	Token   string `json:"token,omitempty"`
}

// forwardAnswer is the owner's answer: the reply's value exactly as it
// encoded it, or the refusal with the HTTP status it would have had.
type forwardAnswer struct {
	Value  json.RawMessage `json:"value,omitempty"`
	Status int             `json:"status,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// ForwardedError is a refusal the owning node gave a forwarded request.
type ForwardedError struct {
	Status int
	Msg    string
}

func (e *ForwardedError) Error() string { return e.Msg }

// forwardedKey marks a request another node forwarded: it is handled here,
// never forwarded again, so two nodes that disagree about an owner cannot
// pass a request back and forth.
type forwardedKey struct{}

// route sends req to the session's owner when another node owns it, and
// reports whether it did. When this node takes the request, a session it
// followed becomes this node's to write.
func (s *Server) route(ctx context.Context, caller kernel.Caller, req protocol.Request) (any, bool, error) {
	f := s.cfg.Cluster
	if f == nil || ctx.Value(forwardedKey{}) != nil {
		return nil, false, nil
	}
	session, ok := writesSession(req)
	if !ok {
		return nil, false, nil
	}
	// An unknown session is refused here, before anyone takes a lease for
	// it: a lease is held, and renewed, for as long as its session stays
	// loaded, and one for a session that does not exist never would be
	// let go.
	if _, err := s.k.Session(ctx, session); err != nil {
		return nil, true, err
	}
	node, err := f.Owner(ctx, session)
	if err != nil {
		return nil, true, err
	}
	if node == "" {
		return s.takeHere(ctx, session)
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, true, err
	}
	p := peerOf(ctx)
	payload, err := json.Marshal(forwarded{Request: raw, Client: caller.Client, Draws: caller.Draws,
		Peer: forwardedPeer{Local: p.local, Pipe: p.pipe, Browser: p.browser, Page: p.page, Token: p.token}})
	if err != nil {
		return nil, true, err
	}
	out, taken, err := f.Forward(ctx, node, session, payload)
	if err == nil && taken {
		return s.takeHere(ctx, session)
	}
	if err != nil {
		return nil, true, &kernel.StoreError{Session: session, Err: fmt.Errorf("send the request to node %s, which owns the session: %w", node, err)}
	}
	var ans forwardAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		return nil, true, fmt.Errorf("node %s answered a forwarded request with %q: %w", node, out, err)
	}
	if ans.Status != 0 && ans.Status != http.StatusOK {
		return nil, true, &ForwardedError{Status: ans.Status, Msg: ans.Error}
	}
	return ans.Value, true, nil
}

// HandleForwarded answers a request another node forwarded to this one,
// the session's owner, as if its caller had sent it here.
func (s *Server) HandleForwarded(ctx context.Context, payload []byte) []byte {
	answer := func(a forwardAnswer) []byte {
		out, _ := json.Marshal(a)
		return out
	}
	var fw forwarded
	if err := json.Unmarshal(payload, &fw); err != nil {
		return answer(forwardAnswer{Status: http.StatusBadRequest, Error: "a forwarded request that does not decode: " + err.Error()})
	}
	req, err := protocol.DecodeRequest(fw.Request)
	if err != nil {
		return answer(forwardAnswer{Status: http.StatusBadRequest, Error: err.Error()})
	}
	p := peer{local: fw.Peer.Local, pipe: fw.Peer.Pipe, browser: fw.Peer.Browser, page: fw.Peer.Page, token: fw.Peer.Token}
	ctx = context.WithValue(context.WithValue(ctx, peerKey{}, p), forwardedKey{}, true)
	value, err := s.Do(ctx, kernel.Caller{Client: fw.Client, Draws: fw.Draws}, req)
	if err != nil {
		status, msg := s.errorStatus(ctx, err)
		return answer(forwardAnswer{Status: status, Error: msg})
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return answer(forwardAnswer{Status: http.StatusInternalServerError, Error: "encode reply: " + err.Error()})
	}
	return answer(forwardAnswer{Status: http.StatusOK, Value: raw})
}
