package server

import (
	"crypto/sha256"
	"net/http"
	"sync"
	"time"
)

// An Idempotency-Key on a request that starts a turn (POST
// /v1/chat/completions) makes the server remember its answer: the same key
// again, from the same caller, gets that answer back instead of a second
// turn, and waits for it while the first is still running. This is what
// lets a client retry a request whose answer it never got (a dropped
// connection, a timeout) without running the agent twice.
const (
	// idemMax bounds the answers remembered; the oldest go first.
	idemMax = 1024
	// idemTTL is how long an answer is remembered.
	idemTTL = 24 * time.Hour
	// idemMaxBody bounds a remembered answer's body; a longer answer is
	// not kept, and its key answers 409 while it is remembered.
	idemMaxBody = 4 << 20
	// idemMaxBytes bounds the bodies remembered in all; past it the
	// oldest answers are forgotten first.
	idemMaxBytes = 64 << 20
)

// idempotency holds the answers of requests that carried an
// Idempotency-Key, by caller and key.
type idempotency struct {
	mu      sync.Mutex
	entries map[string]*idemEntry
	order   []string // keys, oldest first
	bytes   int      // the bodies remembered
}

// idemEntry is one key's request and, once done is closed, its answer.
type idemEntry struct {
	sum  [32]byte // the request body's hash
	at   time.Time
	done chan struct{}
	// Set before done is closed.
	kept   bool // the answer is remembered; false: forget the key
	tooBig bool
	status int
	header http.Header
	body   []byte
}

// claim runs the Idempotency-Key protocol for r, a request that starts a
// turn, with its body. It answers w itself and returns a nil rec when the
// key has an answer (a replay), names another body (422), is too long
// (400), or r's caller left while waiting for the key's first request.
// Otherwise r is the key's first: it writes its answer through rec, sets
// rec.turned once its turn began, and calls done at its end. Keys are the
// caller's own: another token holder's key is another key.
func (m *idempotency) claim(w http.ResponseWriter, r *http.Request, key string, body []byte) (rec *idemRecorder, done func()) {
	if len(key) > 255 {
		writeOAError(w, http.StatusBadRequest, "", "invalid_request", "the Idempotency-Key header is longer than 255 characters: send a shorter key (a UUID, say)")
		return nil, nil
	}
	scoped := peerOf(r.Context()).token + "\x00" + key
	sum := sha256.Sum256(body)
	for {
		e, first := m.begin(scoped, sum)
		if first {
			rec := &idemRecorder{ResponseWriter: w}
			return rec, func() { m.finish(scoped, e, rec, r.Context().Err() != nil) }
		}
		if e.sum != sum {
			writeOAError(w, http.StatusUnprocessableEntity, "", "idempotency_key_reused", "this Idempotency-Key was sent with another request body: send a new key for a new request")
			return nil, nil
		}
		select {
		case <-e.done:
		case <-r.Context().Done():
			return nil, nil
		}
		if e.kept {
			e.replay(w)
			return nil, nil
		}
		// The first never started its turn: this one may.
	}
}

// begin looks key up. With first, the caller runs the request and must
// call finish; otherwise e is another request's, which may still be
// running (wait on e.done). sum is the request body's hash.
func (m *idempotency) begin(key string, sum [32]byte) (e *idemEntry, first bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[string]*idemEntry{}
	}
	now := time.Now()
	for len(m.order) > 0 {
		old := m.entries[m.order[0]]
		if old != nil && len(m.order) <= idemMax && m.bytes <= idemMaxBytes && now.Sub(old.at) < idemTTL {
			break
		}
		if old != nil && old.isDone() {
			delete(m.entries, m.order[0])
			m.bytes -= len(old.body)
		} else if old != nil {
			break // still running: kept until it ends
		}
		m.order = m.order[1:]
	}
	if e := m.entries[key]; e != nil {
		return e, false
	}
	e = &idemEntry{sum: sum, at: now, done: make(chan struct{})}
	m.entries[key] = e
	m.order = append(m.order, key)
	return e, true
}

// finish records the answer rec holds for key's entry e, or forgets the
// key when there is no whole answer to give again: the request never
// started a turn, or its client went away (gone; the turn was cancelled
// with it) before an answer was written. A client may then send it again
// and have it run.
func (m *idempotency) finish(key string, e *idemEntry, rec *idemRecorder, gone bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer close(e.done)
	e.kept = rec.turned && !gone && rec.status != 0
	if !e.kept {
		if m.entries[key] == e {
			delete(m.entries, key)
		}
		return
	}
	e.tooBig, e.status, e.body = rec.tooBig, rec.status, rec.body
	e.header = rec.ResponseWriter.Header().Clone()
	m.bytes += len(e.body)
}

func (e *idemEntry) isDone() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// idemRecorder passes an answer through and keeps a copy.
type idemRecorder struct {
	http.ResponseWriter
	status int
	body   []byte
	tooBig bool
	// turned is set once the request started a turn: only then is its
	// answer remembered.
	turned bool
}

func (r *idemRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *idemRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if !r.tooBig {
		if len(r.body)+len(p) > idemMaxBody {
			r.tooBig, r.body = true, nil
		} else {
			r.body = append(r.body, p...)
		}
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines).
func (r *idemRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// replay answers with e's remembered answer.
func (e *idemEntry) replay(w http.ResponseWriter) {
	if e.tooBig {
		writeOAError(w, http.StatusConflict, "", "idempotency_key_in_use", "the answer to this Idempotency-Key was too long to keep, and its turn has run: send a new key to run another")
		return
	}
	h := w.Header()
	for k, v := range e.header {
		h[k] = v
	}
	h.Set("Idempotent-Replayed", "true")
	w.WriteHeader(e.status)
	w.Write(e.body)
}
