// Package auth decides who may talk to a kernel. A connection from the
// loopback interface (or a Unix socket) is trusted; any other must present a
// node token. Tokens are made by `orrery node token create`, kept in the data
// dir only as SHA-256 hashes, and compared in constant time.
package auth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Errors a caller branches on.
var (
	// ErrNoToken means a request that needs a token presented none.
	ErrNoToken = errors.New("a token is required from this address: send Authorization: Bearer <token>, ?token=, or token in hello; make one with orrery node token create")
	// ErrBadToken means the token is unknown or revoked.
	ErrBadToken = errors.New("the token is not valid (unknown or revoked): make a new one with orrery node token create")
	// ErrUnknownToken means Revoke found no token with that id or name.
	ErrUnknownToken = errors.New("no such token")
)

// tokenPrefix starts every token, so a leaked one is easy to recognise.
const tokenPrefix = "orr_"

// Token describes a token without its secret.
type Token struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// Hash is the hex SHA-256 of the whole token.
	Hash string `json:"hash"`
}

// Store is the set of tokens in one file. It re-reads the file when it
// changes, so a token revoked by the CLI stops working on a running server.
type Store struct {
	path string

	mu     sync.Mutex // guards tokens, raw and gen
	tokens []Token
	raw    []byte // the file's bytes when tokens were read
	gen    uint64 // counts the times tokens changed
}

// Open returns the token store at path (tokens.json in the data dir). A
// missing file is an empty store.
func Open(path string) (*Store, error) {
	s := &Store{path: path}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// Path returns the file the store keeps its tokens in.
func (s *Store) Path() string { return s.path }

// reloadLocked re-reads the file. It compares the bytes, not the time and
// size: a revoke and a create within one timestamp tick can leave both
// unchanged (and a reused inode number), and a revoked token must stop
// working at once. The file is small.
func (s *Store) reloadLocked() error {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		if s.tokens != nil || s.gen == 0 {
			s.gen++
		}
		s.tokens, s.raw = nil, nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("read tokens: %w", err)
	}
	if s.tokens != nil && bytes.Equal(data, s.raw) {
		return nil
	}
	var tokens []Token
	if err := json.Unmarshal(data, &tokens); err != nil {
		return fmt.Errorf("read tokens %s: %w", s.path, err)
	}
	if tokens == nil {
		tokens = []Token{}
	}
	s.tokens, s.raw = tokens, data
	s.gen++
	return nil
}

func (s *Store) saveLocked() error {
	data, err := json.MarshalIndent(s.tokens, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("save tokens: %w", err)
	}
	// A fresh temporary file is 0600 whatever the umask; a fixed name
	// would keep the mode of a stale one left by a crash.
	f, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("save tokens: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("save tokens: %w", err)
	}
	return s.reloadLocked()
}

var enc = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return enc.EncodeToString(b)
}

func hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Create makes a token named name and returns it whole. The secret is shown
// only here: the store keeps its hash.
func (s *Store) Create(name string) (string, Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return "", Token{}, err
	}
	for _, t := range s.tokens {
		if name != "" && t.Name == name {
			return "", Token{}, fmt.Errorf("a token named %q exists: revoke it first, or pick another name", name)
		}
	}
	id := random(5)
	secret := tokenPrefix + id + "_" + random(20)
	t := Token{ID: id, Name: name, Created: time.Now().UTC().Truncate(time.Second), Hash: hash(secret)}
	s.tokens = append(s.tokens, t)
	if err := s.saveLocked(); err != nil {
		return "", Token{}, err
	}
	return secret, t, nil
}

// List returns the tokens, oldest first, without secrets.
func (s *Store) List() ([]Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return nil, err
	}
	return append([]Token{}, s.tokens...), nil
}

// Len returns how many tokens exist.
func (s *Store) Len() (int, error) {
	list, err := s.List()
	return len(list), err
}

// Revoke deletes the token whose id or name is key.
func (s *Store) Revoke(key string) (Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return Token{}, err
	}
	for i, t := range s.tokens {
		if t.ID == key || (t.Name != "" && t.Name == key) {
			s.tokens = append(s.tokens[:i], s.tokens[i+1:]...)
			return t, s.saveLocked()
		}
	}
	return Token{}, fmt.Errorf("revoke %q: %w (list them with orrery node token list)", key, ErrUnknownToken)
}

// Verify reports whether token is a current token. It compares hashes in
// constant time against every stored token.
func (s *Store) Verify(token string) bool {
	_, ok := s.Lookup(token)
	return ok
}

// Lookup returns the current token whose secret is token, without its
// secret. It compares hashes in constant time against every stored token.
func (s *Store) Lookup(token string) (Token, bool) {
	if s == nil || !strings.HasPrefix(token, tokenPrefix) {
		return Token{}, false
	}
	s.mu.Lock()
	err := s.reloadLocked()
	tokens := s.tokens
	s.mu.Unlock()
	if err != nil {
		return Token{}, false
	}
	want := []byte(hash(token))
	found := -1
	for i, t := range tokens {
		if subtle.ConstantTimeCompare(want, []byte(t.Hash)) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return tokens[found], true
}

// HasID reports whether a token with id is current. Like Lookup, it
// re-reads the file if it changed.
func (s *Store) HasID(id string) bool {
	if s == nil || id == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return false
	}
	for _, t := range s.tokens {
		if t.ID == id {
			return true
		}
	}
	return false
}

// Watch re-reads the file every interval until ctx ends, and calls changed
// with the current tokens on its first read and whenever they changed since
// its last call: a server ends the connections of the tokens that are gone,
// so a token revoked by another process (orrery node token revoke) ends
// what it opened within about one interval. A change that Lookup noticed
// first is reported all the same. A file that cannot be read or parsed is
// not a change (Lookup refuses every token meanwhile). changed runs on
// Watch's goroutine; Watch returns when ctx ends.
func (s *Store) Watch(ctx context.Context, interval time.Duration, changed func(current []Token)) {
	if s == nil {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var seen uint64
	first := true
	for {
		s.mu.Lock()
		err := s.reloadLocked()
		gen := s.gen
		var current []Token
		if err == nil && (first || gen != seen) {
			current = append([]Token{}, s.tokens...)
		}
		s.mu.Unlock()
		if current != nil {
			first, seen = false, gen
			changed(current)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// IsLoopback reports whether remoteAddr (host:port, as in
// http.Request.RemoteAddr) is on the loopback interface. It looks only at
// the connection's own address: headers such as X-Forwarded-For are never
// trusted for this decision.
func IsLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
}

// proxyHeaders are the headers a reverse proxy adds to say whom it
// forwards for. A loopback connection that carries one is a proxy's, not
// a local program's.
var proxyHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip", "X-Forwarded-Host"}

// IsLocalProgram reports whether r came from a program on this machine:
// its connection is on the loopback interface and it carries none of the
// headers a reverse proxy adds. A proxy on this machine forwards requests
// from anywhere over loopback, so such a request needs a token like any
// other. The headers' values are never trusted; only their presence
// counts, and it can only take trust away.
func IsLocalProgram(r *http.Request) bool {
	if !IsLoopback(r.RemoteAddr) {
		return false
	}
	for _, h := range proxyHeaders {
		if _, ok := r.Header[h]; ok {
			return false
		}
	}
	return true
}

// BearerToken returns the token of an Authorization header value, whose
// scheme is matched without regard to case (RFC 9110 §11.1), or "".
func BearerToken(h string) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// RequestToken returns the token an HTTP request presents: the
// Authorization bearer, else the token query parameter.
func RequestToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if tok := BearerToken(h); tok != "" {
			return tok
		}
	}
	return r.URL.Query().Get("token")
}

// Check decides an HTTP request: nil when it may proceed. A request from a
// local program (IsLocalProgram) needs nothing; any other needs a valid
// token.
func (s *Store) Check(r *http.Request) error {
	if IsLocalProgram(r) {
		return nil
	}
	tok := RequestToken(r)
	if tok == "" {
		return ErrNoToken
	}
	if _, ok := s.Lookup(tok); !ok {
		return ErrBadToken
	}
	return nil
}
