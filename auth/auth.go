// Package auth decides who may talk to a kernel. A connection from the
// loopback interface (or a Unix socket) is trusted; any other must present a
// node token. Tokens are made by `orrery node token create`, kept only as
// SHA-256 hashes (in the data dir, or in a Backend the nodes of a cluster
// share), and compared in constant time.
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
	mrand "math/rand/v2"
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

// Backend is where a Store keeps its tokens: a file in the data dir
// (Open), or a key the nodes of a cluster share (OpenBackend with the
// cluster's). A backend holds the JSON of the token list, and saving is a
// compare-and-set on the version it was loaded at, so two processes that
// create or revoke at once never lose each other's change.
type Backend interface {
	// Load returns the stored bytes, nil when there are none yet, and the
	// version to Save against.
	Load() (data []byte, version uint64, err error)
	// Save replaces the bytes if they are still at version; otherwise it
	// returns an error that is ErrConflict.
	Save(data []byte, version uint64) error
	// String names the place, for messages.
	String() string
}

// Refresher is a Backend whose Load answers from a copy kept up to date in
// the background; Refresh reads the source itself. A Store refreshes when
// a token is not found, so a token created a moment ago on another node
// works at once.
type Refresher interface {
	Refresh() error
}

// Notifier is a Backend that says when its bytes change (a cluster's KV
// watch): Watch then acts at once instead of at its next tick, so a
// revocation on one node ends the token's connections on all of them
// within moments.
type Notifier interface {
	Changed() <-chan struct{}
}

// ErrConflict means a Save found the bytes changed since they were loaded.
var ErrConflict = errors.New("the tokens changed meanwhile")

// Store is the set of tokens in a Backend. It re-reads the backend when it
// changes, so a token revoked by the CLI stops working on a running server.
type Store struct {
	b Backend

	mu     sync.Mutex // guards tokens, raw, ver and gen
	tokens []Token
	raw    []byte // the backend's bytes when tokens were read
	ver    uint64 // their version, to save against
	gen    uint64 // counts the times tokens changed

	refreshMu sync.Mutex // one refresh for lookups at a time: misses share it
	refreshed time.Time  // when the last one began; guarded by refreshMu
}

// Open returns the token store at path (tokens.json in the data dir). A
// missing file is an empty store.
func Open(path string) (*Store, error) {
	return OpenBackend(fileBackend(path))
}

// OpenBackend returns the token store kept in b.
func OpenBackend(b Backend) (*Store, error) {
	s := &Store{b: b}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// Path returns where the store keeps its tokens: the file's path, or the
// name of a cluster's bucket.
func (s *Store) Path() string { return s.b.String() }

// reloadLocked re-reads the backend. It compares the bytes, not a time or
// size: a revoke and a create within one timestamp tick can leave both
// unchanged (and a reused inode number), and a revoked token must stop
// working at once. The list is small.
func (s *Store) reloadLocked() error {
	data, ver, err := s.b.Load()
	if err != nil {
		return fmt.Errorf("read tokens: %w", err)
	}
	s.ver = ver
	if data == nil {
		if s.tokens != nil || s.gen == 0 {
			s.gen++
		}
		s.tokens, s.raw = nil, nil
		return nil
	}
	if s.tokens != nil && bytes.Equal(data, s.raw) {
		return nil
	}
	var tokens []Token
	if err := json.Unmarshal(data, &tokens); err != nil {
		return fmt.Errorf("read tokens %s: %w", s.b, err)
	}
	if tokens == nil {
		tokens = []Token{}
	}
	s.tokens, s.raw = tokens, data
	s.gen++
	return nil
}

// refresh has a backend that keeps a copy read its source (Refresher);
// other backends are read afresh by every reload already.
func (s *Store) refresh() error {
	r, ok := s.b.(Refresher)
	if !ok {
		return nil
	}
	if err := r.Refresh(); err != nil {
		return fmt.Errorf("read tokens: %w", err)
	}
	return nil
}

// change applies edit to the current tokens and saves them, trying again
// from a fresh read when another process saved in between.
func (s *Store) change(edit func(tokens []Token) ([]Token, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for try := 0; ; try++ {
		if try > 0 {
			// Another process saved first: wait a little, longer each
			// time and not in step with it, and start again.
			if time.Now().After(deadline) {
				return fmt.Errorf("save tokens: %w on every try for 10s; try again", ErrConflict)
			}
			backoff := time.Duration(min(try, 10)) * 5 * time.Millisecond
			time.Sleep(backoff/2 + time.Duration(mrand.Int64N(int64(backoff))))
		}
		if err := s.refresh(); err != nil {
			return err
		}
		if err := s.reloadLocked(); err != nil {
			return err
		}
		next, err := edit(append([]Token{}, s.tokens...))
		if err != nil {
			return err
		}
		data, err := json.MarshalIndent(next, "", "  ")
		if err != nil {
			return err
		}
		err = s.b.Save(append(data, '\n'), s.ver)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("save tokens: %w", err)
		}
		return s.reloadLocked()
	}
}

// fileBackend keeps the tokens in a file, written whole through a
// temporary file and a rename. Its versions are all 0: the data dir's lock
// and the CLI are its only writers.
type fileBackend string

func (f fileBackend) String() string { return string(f) }

func (f fileBackend) Load() ([]byte, uint64, error) {
	data, err := os.ReadFile(string(f))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	return data, 0, err
}

func (f fileBackend) Save(data []byte, _ uint64) error {
	path := string(f)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	// A fresh temporary file is 0600 whatever the umask; a fixed name
	// would keep the mode of a stale one left by a crash.
	tf, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := tf.Name()
	_, err = tf.Write(data)
	if cerr := tf.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
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
	id := random(5)
	secret := tokenPrefix + id + "_" + random(20)
	t := Token{ID: id, Name: name, Created: time.Now().UTC().Truncate(time.Second), Hash: hash(secret)}
	err := s.change(func(tokens []Token) ([]Token, error) {
		for _, o := range tokens {
			if name != "" && o.Name == name {
				return nil, fmt.Errorf("a token named %q exists: revoke it first, or pick another name", name)
			}
		}
		return append(tokens, t), nil
	})
	if err != nil {
		return "", Token{}, err
	}
	return secret, t, nil
}

// List returns the tokens, oldest first, without secrets: read afresh
// from a backend that keeps a copy.
func (s *Store) List() ([]Token, error) {
	if err := s.refresh(); err != nil {
		return nil, err
	}
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
	var gone Token
	err := s.change(func(tokens []Token) ([]Token, error) {
		for i, t := range tokens {
			if t.ID == key || (t.Name != "" && t.Name == key) {
				gone = t
				return append(tokens[:i], tokens[i+1:]...), nil
			}
		}
		return nil, fmt.Errorf("revoke %q: %w (list them with orrery node token list)", key, ErrUnknownToken)
	})
	return gone, err
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
	want := []byte(hash(token))
	if t, ok := s.find(want); ok {
		return t, true
	}
	// Not in the copy a cluster's backend keeps: it may have been made a
	// moment ago on another node. Misses at once share one read: one that
	// waited for another's read, begun after it missed, uses that one.
	if _, ok := s.b.(Refresher); !ok {
		return Token{}, false
	}
	missed := time.Now()
	s.refreshMu.Lock()
	if !s.refreshed.After(missed) {
		began := time.Now()
		if s.refresh() != nil {
			s.refreshMu.Unlock()
			return Token{}, false
		}
		s.refreshed = began
	}
	s.refreshMu.Unlock()
	return s.find(want)
}

// find looks for the token whose hash is want among the current tokens,
// comparing in constant time against every one.
func (s *Store) find(want []byte) (Token, bool) {
	s.mu.Lock()
	err := s.reloadLocked()
	tokens := s.tokens
	s.mu.Unlock()
	if err != nil {
		return Token{}, false
	}
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

// Watch re-reads the backend every interval (and at once when it says it
// changed) until ctx ends, and calls changed
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
	var notified <-chan struct{} // nil, which never fires, for a file
	if n, ok := s.b.(Notifier); ok {
		notified = n.Changed()
	}
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
		case <-notified:
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
