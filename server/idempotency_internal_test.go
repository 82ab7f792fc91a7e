package server

import (
	"crypto/sha256"
	"fmt"
	"net/http/httptest"
	"testing"
)

// TestIdempotencyBounded: however many keys arrive, the answers kept stay
// within idemMax keys and idemMaxBytes of bodies, the oldest going first,
// and an answer that never started a turn is not kept.
func TestIdempotencyBounded(t *testing.T) {
	var m idempotency
	body := make([]byte, 256<<10) // a 256 KiB answer each: the bytes bind before the keys do
	for i := range 3 * idemMax {
		key := fmt.Sprint("k", i)
		e, first := m.begin(key, sha256.Sum256([]byte(key)))
		if !first {
			t.Fatalf("begin(%s) found an entry for a new key", key)
		}
		rec := &idemRecorder{ResponseWriter: httptest.NewRecorder(), turned: i%10 != 0}
		rec.Write(body)
		m.finish(key, e, rec, false)
		if n := len(m.entries); n > idemMax+1 {
			t.Fatalf("after %d keys %d entries are kept, want at most %d", i+1, n, idemMax+1)
		}
		if m.bytes > idemMaxBytes+len(body) {
			t.Fatalf("after %d keys %d bytes are kept, want at most %d", i+1, m.bytes, idemMaxBytes)
		}
	}
	if _, first := m.begin("k10", sha256.Sum256([]byte("k10"))); !first {
		t.Error("an answer that never started a turn was kept")
	}
	last := fmt.Sprint("k", 3*idemMax-1)
	if _, first := m.begin(last, sha256.Sum256([]byte(last))); first {
		t.Error("the newest answer was forgotten")
	}
}

// TestIdempotencyKeepsOnlyWholeAnswers: an answer is not kept when its
// client went away or nothing was written (a replay would write status 0,
// which panics), so the key may be sent again and run.
func TestIdempotencyKeepsOnlyWholeAnswers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write bool
		gone  bool
	}{{"nothing written", false, false}, {"the client went away", true, true}} {
		var m idempotency
		e, _ := m.begin("k", [32]byte{})
		rec := &idemRecorder{ResponseWriter: httptest.NewRecorder(), turned: true}
		if tc.write {
			rec.Write([]byte("partial"))
		}
		m.finish("k", e, rec, tc.gone)
		if e.kept {
			t.Errorf("%s: the answer was kept", tc.name)
		}
		if _, first := m.begin("k", [32]byte{}); !first {
			t.Errorf("%s: the key was remembered", tc.name)
		}
	}
}
