package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/getorrery/orrery/auth"
)

// tokenCookieAge is how long a browser keeps the token cookie.
const tokenCookieAge = 30 * 24 * time.Hour

// signIn is the body of POST /auth.
type signIn struct {
	Token string `json:"token"`
}

// signedIn is the answer of POST /auth: the token's id and name, never its
// secret.
type signedIn struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// handleAuth serves POST /auth {"token": "…"}: the web client's sign-in.
// A valid node token is set as an HttpOnly, SameSite=Strict cookie (Secure
// over TLS), so that the page keeps it neither in storage a script can
// read nor in URLs, and every request of the page (EventSource included)
// carries it. The cookie counts only on requests from the server's own
// origin.
func (s *Server) handleAuth(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	var in signIn
	if err := json.Unmarshal(body, &in); err != nil || in.Token == "" {
		writeError(w, http.StatusBadRequest, `POST /auth takes {"token": "<node token>"}: make a token with orrery node token create`)
		return
	}
	t, ok := s.cfg.Tokens.Lookup(in.Token)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="orrery"`)
		writeError(w, http.StatusUnauthorized, auth.ErrBadToken.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{Name: s.guard.tokenCookie, Value: in.Token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(tokenCookieAge / time.Second)})
	writeJSON(w, http.StatusOK, signedIn{ID: t.ID, Name: t.Name})
}

// handleSignOut serves DELETE /auth: the token cookie is cleared.
func (s *Server) handleSignOut(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: s.guard.tokenCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
	writeJSON(w, http.StatusOK, struct{}{})
}
