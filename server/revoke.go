package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/getorrery/orrery/auth"
)

// DefaultRevokeCheck is how often the server reads the token file for
// revocations when Config.RevokeCheck is 0.
const DefaultRevokeCheck = 500 * time.Millisecond

// tokenHolds are the requests and connections in progress that presented
// each token, by token id, so that revoking a token ends what it opened:
// SSE streams, WebSockets and pipes whose hello gave it.
type tokenHolds struct {
	mu   sync.Mutex // guards byID
	byID map[string]map[*tokenHold]struct{}
}

// tokenHold is one request or connection that presented a token.
type tokenHold struct {
	id  string
	end func(cause error) // ends it; called at most once
}

// holdToken ties end to the token id: end is called, with a *closeError
// that says why, when the token is revoked. It returns the function that
// unties them, which the caller calls when it is over. It reports false
// (and holds nothing) when the token is already gone: a revocation that
// came between the caller's Lookup and now.
func (s *Server) holdToken(id string, end func(cause error)) (release func(), ok bool) {
	h := &tokenHold{id: id, end: end}
	s.holds.mu.Lock()
	if s.holds.byID == nil {
		s.holds.byID = make(map[string]map[*tokenHold]struct{})
	}
	set := s.holds.byID[id]
	if set == nil {
		set = make(map[*tokenHold]struct{})
		s.holds.byID[id] = set
	}
	set[h] = struct{}{}
	s.holds.mu.Unlock()
	release = func() {
		s.holds.mu.Lock()
		defer s.holds.mu.Unlock()
		if set := s.holds.byID[id]; set != nil {
			delete(set, h)
			if len(set) == 0 {
				delete(s.holds.byID, id)
			}
		}
	}
	// Registered first, checked second: a revocation the watcher reports
	// from now on finds the hold, and one it reported before shows here.
	if !s.cfg.Tokens.HasID(id) {
		release()
		return nil, false
	}
	return release, true
}

// revokedError is why a connection of a revoked token ends.
func revokedError(id string) *closeError {
	return &closeError{closeAuth, fmt.Sprintf("the token %s was revoked: reconnect with another (orrery node token create)", id)}
}

// tokensChanged ends every hold whose token is not among current. The
// token store's Watch calls it.
func (s *Server) tokensChanged(current []auth.Token) {
	live := make(map[string]bool, len(current))
	for _, t := range current {
		live[t.ID] = true
	}
	var ended []*tokenHold
	s.holds.mu.Lock()
	for id, set := range s.holds.byID {
		if live[id] {
			continue
		}
		for h := range set {
			ended = append(ended, h)
		}
		delete(s.holds.byID, id)
	}
	s.holds.mu.Unlock()
	counts := map[string]int{}
	for _, h := range ended {
		counts[h.id]++
		h.end(revokedError(h.id))
	}
	for id, n := range counts {
		s.log.Info("token revoked: its connections end", "token", id, "connections", n)
	}
}

// watchTokens runs the token store's Watch until the server closes.
func (s *Server) watchTokens() {
	defer close(s.watched)
	interval := s.cfg.RevokeCheck
	if interval <= 0 {
		interval = DefaultRevokeCheck
	}
	s.cfg.Tokens.Watch(s.ctx, interval, s.tokensChanged)
}
