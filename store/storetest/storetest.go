// Package storetest is the conformance suite every store.Log implementation
// runs: one test body, many implementations.
//
//	func TestLog(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, dir string) store.Log {
//			l, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			return l
//		})
//	}
package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getorrery/orrery/store"
)

// Run runs the suite. open must return a ready Log kept in dir, failing t if
// it cannot; the suite closes every Log it opens. open is called again on
// the same dir, after Close, to check what persists.
func Run(t *testing.T, open func(t *testing.T, dir string) store.Log) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s *suite)
	}{
		{"CreateSession", testCreateSession},
		{"CreateSessionConcurrentDuplicate", testCreateSessionConcurrentDuplicate},
		{"Sessions", testSessions},
		{"UpdateSession", testUpdateSession},
		{"Read", testRead},
		{"Scan", testScan},
		{"SeqConflict", testSeqConflict},
		{"UnknownSession", testUnknownSession},
		{"OpenRun", testOpenRun},
		{"CostDelta", testCostDelta},
		{"EmptyData", testEmptyData},
		{"ConcurrentAppend", testConcurrentAppend},
		{"Reopen", testReopen},
		{"Close", testClose},
		{"CloseWhileAppending", testCloseWhileAppending},
		{"Check", testCheck},
		{"Checkpoint", testCheckpoint},
		{"WritesAmongAppends", testWritesAmongAppends},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, &suite{open: open})
		})
	}
}

type suite struct {
	open func(t *testing.T, dir string) store.Log
}

// newLog opens a Log in a fresh directory, closed when t ends.
func (s *suite) newLog(t *testing.T) store.Log {
	t.Helper()
	return s.openIn(t, t.TempDir())
}

// openIn opens the Log kept in dir, closed when t ends.
func (s *suite) openIn(t *testing.T, dir string) store.Log {
	t.Helper()
	l := s.open(t, dir)
	t.Cleanup(func() { l.Close() })
	return l
}

// created is the base creation time of the suite's sessions, whole
// milliseconds so that any store's precision keeps it.
var created = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func mustCreate(t *testing.T, l store.Log, ids ...string) {
	t.Helper()
	for i, id := range ids {
		s := store.Session{ID: id, Title: "title " + id, Model: "model-a", Cwd: "/src/" + id, Created: created.Add(time.Duration(i) * time.Second)}
		if err := l.CreateSession(t.Context(), s); err != nil {
			t.Fatalf("CreateSession(%q) = %v, want nil", id, err)
		}
	}
}

func mustAppend(t *testing.T, l store.Log, batches ...store.Batch) {
	t.Helper()
	if err := l.Append(t.Context(), batches...); err != nil {
		t.Fatalf("Append(%s) = %v, want nil", batchesString(batches), err)
	}
}

func mustSession(t *testing.T, l store.Log, id string) store.Session {
	t.Helper()
	s, err := l.Session(t.Context(), id)
	if err != nil {
		t.Fatalf("Session(%q) = %v, want nil", id, err)
	}
	return s
}

func mustRead(t *testing.T, l store.Log, id string, since uint64, limit int) []store.Frame {
	t.Helper()
	fs, err := l.Read(t.Context(), id, since, limit)
	if err != nil {
		t.Fatalf("Read(%q, %d, %d) = %v, want nil", id, since, limit, err)
	}
	return fs
}

// frame returns the frame a session logs at seq: a text delta whose Data is
// unique to (session, seq).
func frame(session string, seq uint64) store.Frame {
	return store.Frame{
		Seq:  seq,
		Type: "TEXT_MESSAGE_CONTENT",
		Run:  "run-1",
		Data: []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-` + session + `","delta":"d` +
			strconv.FormatUint(seq, 10) + `","metadata":{"orrery":{"seq":` + strconv.FormatUint(seq, 10) + `}}}`),
	}
}

// frames returns frame(session, seq) for seq in [from, from+n).
func frames(session string, from, n uint64) []store.Frame {
	fs := make([]store.Frame, 0, n)
	for seq := from; seq < from+n; seq++ {
		fs = append(fs, frame(session, seq))
	}
	return fs
}

// event returns a frame of type typ in run, as the kernel logs run
// lifecycle events.
func event(seq uint64, typ, run string) store.Frame {
	return store.Frame{Seq: seq, Type: typ, Run: run, Data: []byte(`{"type":"` + typ + `","runId":"` + run + `"}`)}
}

func frameString(f store.Frame) string {
	return fmt.Sprintf("{Seq:%d Type:%s Run:%q Data:%q}", f.Seq, f.Type, f.Run, f.Data)
}

func seqsString(fs []store.Frame) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < len(fs); {
		j := i
		for j+1 < len(fs) && fs[j+1].Seq == fs[j].Seq+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if j > i {
			fmt.Fprintf(&b, "%d..%d", fs[i].Seq, fs[j].Seq)
		} else {
			fmt.Fprintf(&b, "%d", fs[i].Seq)
		}
		i = j + 1
	}
	b.WriteByte(']')
	return b.String()
}

func batchesString(bs []store.Batch) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprintf("%s%s", b.Session, seqsString(b.Frames))
	}
	return strings.Join(parts, ", ")
}

// diffFrames returns "" when got and want are equal frame for frame, byte
// for byte, or else "got, want want" describing the first difference.
func diffFrames(got, want []store.Frame) string {
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Type != w.Type || g.Run != w.Run || !bytes.Equal(g.Data, w.Data) {
			return fmt.Sprintf("frame %d %s, want %s", i, frameString(g), frameString(w))
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("seqs %s, want %s", seqsString(got), seqsString(want))
	}
	return ""
}

// diffSession is diffFrames for sessions. Created may lose precision below a
// millisecond and its location.
func diffSession(got, want store.Session) string {
	g, w := got, want
	g.Created, w.Created = time.Time{}, time.Time{}
	d := got.Created.Sub(want.Created)
	if g != w || d <= -time.Millisecond || d >= time.Millisecond {
		return fmt.Sprintf("%+v, want %+v", got, want)
	}
	return ""
}

// within fails t if f does not return within d, so that a hang is reported
// rather than waited out.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

func testCreateSession(t *testing.T, s *suite) {
	l := s.newLog(t)
	ctx := t.Context()
	want := store.Session{ID: "s1", Title: "Fix the build", Model: "gpt-x", Cwd: "/src/orrery", Created: created}
	if err := l.CreateSession(ctx, want); err != nil {
		t.Fatalf("CreateSession(%q) = %v, want nil", want.ID, err)
	}
	if d := diffSession(mustSession(t, l, "s1"), want); d != "" {
		t.Errorf("Session(%q) = %s", "s1", d)
	}

	dup := store.Session{ID: "s1", Title: "other", Model: "other", Created: created.Add(time.Hour)}
	if err := l.CreateSession(ctx, dup); !errors.Is(err, store.ErrSessionExists) {
		t.Errorf("CreateSession(duplicate %q) = %v, want %v", dup.ID, err, store.ErrSessionExists)
	}
	if d := diffSession(mustSession(t, l, "s1"), want); d != "" {
		t.Errorf("Session(%q) after duplicate create = %s", "s1", d)
	}
	if _, err := l.Session(ctx, "nope"); !errors.Is(err, store.ErrUnknownSession) {
		t.Errorf("Session(%q) = %v, want %v", "nope", err, store.ErrUnknownSession)
	}
}

func testCreateSessionConcurrentDuplicate(t *testing.T, s *suite) {
	l := s.newLog(t)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = l.CreateSession(t.Context(), store.Session{ID: "same", Title: strconv.Itoa(i), Created: created})
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrSessionExists):
			t.Errorf("CreateSession(%q) #%d = %v, want nil or %v", "same", i, err, store.ErrSessionExists)
		}
	}
	if ok != 1 {
		t.Errorf("CreateSession(%q) x%d succeeded %d times, want 1", "same", n, ok)
	}
}

func testSessions(t *testing.T, s *suite) {
	l := s.newLog(t)
	ctx := t.Context()
	got, err := l.Sessions(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("Sessions() on an empty log = %+v, %v, want [], nil", got, err)
	}

	// Created out of order: the list is by creation time, not insertion.
	for _, c := range []struct {
		id  string
		age time.Duration
	}{{"middle", 2 * time.Minute}, {"oldest", 3 * time.Minute}, {"newest", time.Minute}} {
		ss := store.Session{ID: c.id, Title: "t-" + c.id, Model: "m", Cwd: "/w", Created: created.Add(-c.age)}
		if err := l.CreateSession(ctx, ss); err != nil {
			t.Fatalf("CreateSession(%q) = %v, want nil", c.id, err)
		}
	}
	mustAppend(t, l,
		store.Batch{Session: "middle", Frames: []store.Frame{event(1, "RUN_STARTED", "r1"), frame("middle", 2)}, CostDelta: 42},
		store.Batch{Session: "oldest", Frames: frames("oldest", 1, 5)},
	)

	want := []store.Session{
		{ID: "newest", Title: "t-newest", Model: "m", Cwd: "/w", Created: created.Add(-time.Minute)},
		{ID: "middle", Title: "t-middle", Model: "m", Cwd: "/w", Created: created.Add(-2 * time.Minute), Head: 2, OpenRun: "r1", MicroUSD: 42},
		{ID: "oldest", Title: "t-oldest", Model: "m", Cwd: "/w", Created: created.Add(-3 * time.Minute), Head: 5},
	}
	got, err = l.Sessions(ctx)
	if err != nil {
		t.Fatalf("Sessions() = %v, want nil", err)
	}
	if len(got) != len(want) {
		t.Fatalf("Sessions() = %+v, want %+v", got, want)
	}
	for i := range want {
		if d := diffSession(got[i], want[i]); d != "" {
			t.Errorf("Sessions()[%d] = %s", i, d)
		}
		if d := diffSession(mustSession(t, l, want[i].ID), want[i]); d != "" {
			t.Errorf("Session(%q) = %s", want[i].ID, d)
		}
	}
}

func testUpdateSession(t *testing.T, s *suite) {
	l := s.newLog(t)
	ctx := t.Context()
	base := store.Session{ID: "s", Title: "old", Model: "m1", Cwd: "/w", Created: created}
	if err := l.CreateSession(ctx, base); err != nil {
		t.Fatalf("CreateSession(%q) = %v, want nil", base.ID, err)
	}
	mustAppend(t, l, store.Batch{Session: "s", Frames: []store.Frame{event(1, "RUN_STARTED", "r1"), frame("s", 2)}, CostDelta: 7})

	tests := []struct {
		name    string
		update  store.Session
		wantErr error
		want    store.Session
	}{{
		name:   "title and model",
		update: store.Session{ID: "s", Title: "new", Model: "m2"},
		want:   store.Session{ID: "s", Title: "new", Model: "m2", Cwd: "/w", Created: created, Head: 2, OpenRun: "r1", MicroUSD: 7},
	}, {
		name:   "same values",
		update: store.Session{ID: "s", Title: "new", Model: "m2"},
		want:   store.Session{ID: "s", Title: "new", Model: "m2", Cwd: "/w", Created: created, Head: 2, OpenRun: "r1", MicroUSD: 7},
	}, {
		// Only title and model are stored: the other fields are the log's.
		name:   "other fields ignored",
		update: store.Session{ID: "s", Title: "t3", Model: "m3", Cwd: "/elsewhere", Created: created.Add(time.Hour), Head: 99, OpenRun: "x", MicroUSD: 1e6},
		want:   store.Session{ID: "s", Title: "t3", Model: "m3", Cwd: "/w", Created: created, Head: 2, OpenRun: "r1", MicroUSD: 7},
	}, {
		name:    "unknown session",
		update:  store.Session{ID: "nope", Title: "t"},
		wantErr: store.ErrUnknownSession,
		want:    store.Session{ID: "s", Title: "t3", Model: "m3", Cwd: "/w", Created: created, Head: 2, OpenRun: "r1", MicroUSD: 7},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := l.UpdateSession(ctx, tt.update); !errors.Is(err, tt.wantErr) {
				t.Errorf("UpdateSession(%+v) = %v, want %v", tt.update, err, tt.wantErr)
			}
			if d := diffSession(mustSession(t, l, "s"), tt.want); d != "" {
				t.Errorf("Session(%q) = %s", "s", d)
			}
		})
	}
	if _, err := l.Session(ctx, "nope"); !errors.Is(err, store.ErrUnknownSession) {
		t.Errorf("Session(%q) after UpdateSession = %v, want %v", "nope", err, store.ErrUnknownSession)
	}
}

func testRead(t *testing.T, s *suite) {
	l := s.newLog(t)
	mustCreate(t, l, "s", "empty")
	// Two appends, so that reads cross a commit boundary.
	all := frames("s", 1, 10)
	mustAppend(t, l, store.Batch{Session: "s", Frames: all[:3]})
	mustAppend(t, l, store.Batch{Session: "s", Frames: all[3:]})
	if h := mustSession(t, l, "s").Head; h != 10 {
		t.Errorf("Session(%q).Head = %d, want 10", "s", h)
	}

	tests := []struct {
		session string
		since   uint64
		limit   int
		want    []store.Frame
	}{
		{"s", 0, 0, all},
		{"s", 0, -1, all},
		{"s", 0, 100, all},
		{"s", 0, 10, all},
		{"s", 0, 4, all[:4]},
		{"s", 0, 1, all[:1]},
		{"s", 3, 0, all[3:]},
		{"s", 3, 2, all[3:5]},
		{"s", 8, 5, all[8:]},
		{"s", 9, 0, all[9:]},
		{"s", 10, 0, []store.Frame{}},
		{"s", 10, 3, []store.Frame{}},
		{"s", 1000, 0, []store.Frame{}},
		{"empty", 0, 0, []store.Frame{}},
		{"empty", 5, 1, []store.Frame{}},
	}
	for _, tt := range tests {
		got := mustRead(t, l, tt.session, tt.since, tt.limit)
		if got == nil {
			t.Errorf("Read(%q, %d, %d) = nil, want non-nil %s", tt.session, tt.since, tt.limit, seqsString(tt.want))
		}
		if d := diffFrames(got, tt.want); d != "" {
			t.Errorf("Read(%q, %d, %d) = %s", tt.session, tt.since, tt.limit, d)
		}
	}

	// Frames Read returns are the caller's: later reads and appends leave
	// them as they were.
	got := mustRead(t, l, "s", 0, 0)
	for i := range got {
		got[i].Data = bytes.Clone(got[i].Data)
	}
	held := mustRead(t, l, "s", 0, 0)
	mustAppend(t, l, store.Batch{Session: "s", Frames: frames("s", 11, 5)})
	mustRead(t, l, "s", 0, 0)
	if d := diffFrames(held, got); d != "" {
		t.Errorf("Read(%q, 0, 0) result after more reads and appends = %s", "s", d)
	}
}

func testScan(t *testing.T, s *suite) {
	l := s.newLog(t)
	ctx := t.Context()
	mustCreate(t, l, "s", "empty")
	all := frames("s", 1, 20)
	mustAppend(t, l, store.Batch{Session: "s", Frames: all[:7]}, store.Batch{Session: "s", Frames: all[7:]})

	scan := func(session string, since uint64) ([]store.Frame, error) {
		var got []store.Frame
		err := l.Scan(ctx, session, since, func(f store.Frame) error {
			f.Data = bytes.Clone(f.Data) // valid only during fn
			got = append(got, f)
			return nil
		})
		return got, err
	}
	tests := []struct {
		session string
		since   uint64
		want    []store.Frame
	}{
		{"s", 0, all},
		{"s", 1, all[1:]},
		{"s", 7, all[7:]},
		{"s", 19, all[19:]},
		{"s", 20, nil},
		{"s", 500, nil},
		{"empty", 0, nil},
	}
	for _, tt := range tests {
		got, err := scan(tt.session, tt.since)
		if err != nil {
			t.Errorf("Scan(%q, %d) = %v, want nil", tt.session, tt.since, err)
			continue
		}
		if d := diffFrames(got, tt.want); d != "" {
			t.Errorf("Scan(%q, %d) = %s", tt.session, tt.since, d)
		}
	}

	// An error from fn stops the scan and is returned.
	errStop := errors.New("stop")
	calls := 0
	err := l.Scan(ctx, "s", 0, func(f store.Frame) error {
		calls++
		if f.Seq == 3 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || calls != 3 {
		t.Errorf("Scan(fn failing at seq 3) = %v after %d calls, want %v after 3", err, calls, errStop)
	}
}

func testSeqConflict(t *testing.T, s *suite) {
	tests := []struct {
		name   string
		head   uint64 // frames logged before the bad append
		frames func(id string) []store.Frame
	}{
		{"gap", 3, func(id string) []store.Frame { return frames(id, 5, 2) }},
		{"duplicate head", 3, func(id string) []store.Frame { return frames(id, 3, 2) }},
		{"restart at 1", 3, func(id string) []store.Frame { return frames(id, 1, 1) }},
		{"seq 0", 3, func(id string) []store.Frame { return []store.Frame{frame(id, 0)} }},
		{"empty session starts at 2", 0, func(id string) []store.Frame { return frames(id, 2, 3) }},
		{"empty session starts at 0", 0, func(id string) []store.Frame { return frames(id, 0, 3) }},
		{"gap inside batch", 3, func(id string) []store.Frame {
			return []store.Frame{frame(id, 4), frame(id, 5), frame(id, 7)}
		}},
		{"duplicate inside batch", 3, func(id string) []store.Frame {
			return []store.Frame{frame(id, 4), frame(id, 5), frame(id, 5), frame(id, 6)}
		}},
		{"descending", 3, func(id string) []store.Frame {
			return []store.Frame{frame(id, 5), frame(id, 4)}
		}},
	}
	l := s.newLog(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad, other := "bad/"+tt.name, "other/"+tt.name
			mustCreate(t, l, bad, other)
			before := frames(bad, 1, tt.head)
			if tt.head > 0 {
				mustAppend(t, l, store.Batch{Session: bad, Frames: before, CostDelta: 10})
			}
			// A good batch of another session travels in the same call, on
			// either side of the bad one.
			batches := []store.Batch{
				{Session: other, Frames: frames(other, 1, 2), CostDelta: 1},
				{Session: bad, Frames: tt.frames(bad), CostDelta: 1000},
				{Session: other, Frames: frames(other, 3, 2), CostDelta: 2},
			}
			if err := l.Append(t.Context(), batches...); !errors.Is(err, store.ErrSeqConflict) {
				t.Errorf("Append(%s) = %v, want %v", batchesString(batches), err, store.ErrSeqConflict)
			}

			wantCost := int64(0)
			if tt.head > 0 {
				wantCost = 10
			}
			if ss := mustSession(t, l, bad); ss.Head != tt.head || ss.MicroUSD != wantCost {
				t.Errorf("Session(%q) = Head %d MicroUSD %d, want Head %d MicroUSD %d", bad, ss.Head, ss.MicroUSD, tt.head, wantCost)
			}
			if d := diffFrames(mustRead(t, l, bad, 0, 0), before); d != "" {
				t.Errorf("Read(%q, 0, 0) = %s", bad, d)
			}
			if ss := mustSession(t, l, other); ss.Head != 4 || ss.MicroUSD != 3 {
				t.Errorf("Session(%q) = Head %d MicroUSD %d, want Head 4 MicroUSD 3", other, ss.Head, ss.MicroUSD)
			}
			if d := diffFrames(mustRead(t, l, other, 0, 0), frames(other, 1, 4)); d != "" {
				t.Errorf("Read(%q, 0, 0) = %s", other, d)
			}

			// The session is not wedged: head+1 still appends.
			next := frames(bad, tt.head+1, 2)
			mustAppend(t, l, store.Batch{Session: bad, Frames: next})
			if d := diffFrames(mustRead(t, l, bad, 0, 0), append(before, next...)); d != "" {
				t.Errorf("Read(%q, 0, 0) after a good append = %s", bad, d)
			}
		})
	}

	// Two batches of one session in one call: the second follows the first.
	t.Run("second batch follows first", func(t *testing.T) {
		mustCreate(t, l, "pair")
		mustAppend(t, l, store.Batch{Session: "pair", Frames: frames("pair", 1, 3)}, store.Batch{Session: "pair", Frames: frames("pair", 4, 3)})
		if d := diffFrames(mustRead(t, l, "pair", 0, 0), frames("pair", 1, 6)); d != "" {
			t.Errorf("Read(%q, 0, 0) = %s", "pair", d)
		}
	})
}

func testUnknownSession(t *testing.T, s *suite) {
	l := s.newLog(t)
	ctx := t.Context()
	mustCreate(t, l, "known")

	batches := []store.Batch{
		{Session: "ghost", Frames: frames("ghost", 1, 2)},
		{Session: "known", Frames: frames("known", 1, 2)},
	}
	if err := l.Append(ctx, batches...); !errors.Is(err, store.ErrUnknownSession) {
		t.Errorf("Append(%s) = %v, want %v", batchesString(batches), err, store.ErrUnknownSession)
	}
	if d := diffFrames(mustRead(t, l, "known", 0, 0), frames("known", 1, 2)); d != "" {
		t.Errorf("Read(%q, 0, 0) = %s", "known", d)
	}
	if _, err := l.Read(ctx, "ghost", 0, 0); !errors.Is(err, store.ErrUnknownSession) {
		t.Errorf("Read(%q, 0, 0) = %v, want %v", "ghost", err, store.ErrUnknownSession)
	}
	calls := 0
	err := l.Scan(ctx, "ghost", 0, func(store.Frame) error { calls++; return nil })
	if !errors.Is(err, store.ErrUnknownSession) || calls != 0 {
		t.Errorf("Scan(%q, 0) = %v after %d calls, want %v after 0", "ghost", err, calls, store.ErrUnknownSession)
	}
	if _, err := l.Session(ctx, "ghost"); !errors.Is(err, store.ErrUnknownSession) {
		t.Errorf("Session(%q) = %v, want %v", "ghost", err, store.ErrUnknownSession)
	}
}

func testOpenRun(t *testing.T, s *suite) {
	l := s.newLog(t)
	mustCreate(t, l, "s")
	tests := []struct {
		name   string
		frames []store.Frame // seqs are assigned in order
		want   string
	}{
		{"no run yet", []store.Frame{{Type: "USER_MESSAGE"}}, ""},
		{"RUN_STARTED opens", []store.Frame{{Type: "RUN_STARTED", Run: "r1"}}, "r1"},
		{"frames inside the run keep it", []store.Frame{{Type: "TEXT_MESSAGE_START", Run: "r1"}, {Type: "TEXT_MESSAGE_CONTENT", Run: "r1"}}, "r1"},
		{"frames outside runs keep it", []store.Frame{{Type: "CUSTOM"}}, "r1"},
		{"RUN_FINISHED closes", []store.Frame{{Type: "RUN_FINISHED", Run: "r1"}}, ""},
		{"RUN_STARTED again", []store.Frame{{Type: "RUN_STARTED", Run: "r2"}, {Type: "TOOL_CALL_START", Run: "r2"}}, "r2"},
		{"RUN_ERROR closes", []store.Frame{{Type: "RUN_ERROR", Run: "r2"}}, ""},
		{"started and finished in one batch", []store.Frame{{Type: "RUN_STARTED", Run: "r3"}, {Type: "TEXT_MESSAGE_CONTENT", Run: "r3"}, {Type: "RUN_FINISHED", Run: "r3"}}, ""},
		{"closed and reopened in one batch", []store.Frame{{Type: "RUN_STARTED", Run: "r4"}, {Type: "RUN_ERROR", Run: "r4"}, {Type: "RUN_STARTED", Run: "r5"}}, "r5"},
	}
	var logged []store.Frame
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := make([]store.Frame, len(tt.frames))
			for i, f := range tt.frames {
				fs[i] = event(uint64(len(logged)+i+1), f.Type, f.Run)
			}
			mustAppend(t, l, store.Batch{Session: "s", Frames: fs})
			logged = append(logged, fs...)
			if got := mustSession(t, l, "s").OpenRun; got != tt.want {
				t.Errorf("Session(%q).OpenRun = %q, want %q", "s", got, tt.want)
			}
			ss, err := l.Sessions(t.Context())
			if err != nil || len(ss) != 1 || ss[0].OpenRun != tt.want {
				t.Errorf("Sessions() = %+v, %v, want OpenRun %q", ss, err, tt.want)
			}
		})
	}
	// Frame.Run and Type are logged as given.
	if d := diffFrames(mustRead(t, l, "s", 0, 0), logged); d != "" {
		t.Errorf("Read(%q, 0, 0) = %s", "s", d)
	}
}

func testCostDelta(t *testing.T, s *suite) {
	l := s.newLog(t)
	mustCreate(t, l, "s", "t")
	tests := []struct {
		name    string
		batches []store.Batch
		wantS   int64
		wantT   int64
	}{
		{"with frames", []store.Batch{{Session: "s", Frames: frames("s", 1, 2), CostDelta: 100}}, 100, 0},
		{"accumulates", []store.Batch{{Session: "s", Frames: frames("s", 3, 1), CostDelta: 250}}, 350, 0},
		{"zero", []store.Batch{{Session: "s", Frames: frames("s", 4, 1)}}, 350, 0},
		{"without frames", []store.Batch{{Session: "s", CostDelta: 50}}, 400, 0},
		{"per session in one call", []store.Batch{
			{Session: "s", Frames: frames("s", 5, 1), CostDelta: 1},
			{Session: "t", Frames: frames("t", 1, 1), CostDelta: 9},
			{Session: "s", CostDelta: 2},
		}, 403, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustAppend(t, l, tt.batches...)
			if got := mustSession(t, l, "s").MicroUSD; got != tt.wantS {
				t.Errorf("Session(%q).MicroUSD = %d, want %d", "s", got, tt.wantS)
			}
			if got := mustSession(t, l, "t").MicroUSD; got != tt.wantT {
				t.Errorf("Session(%q).MicroUSD = %d, want %d", "t", got, tt.wantT)
			}
		})
	}
	if h := mustSession(t, l, "s").Head; h != 5 {
		t.Errorf("Session(%q).Head = %d, want 5", "s", h)
	}
}

// testEmptyData checks that frames with nil or empty Data are logged, and
// do not fail the other batches committed with them.
func testEmptyData(t *testing.T, s *suite) {
	l := s.newLog(t)
	mustCreate(t, l, "s", "t")
	mustAppend(t, l,
		store.Batch{Session: "s", Frames: []store.Frame{{Seq: 1, Type: "CUSTOM"}, {Seq: 2, Type: "CUSTOM", Data: []byte{}}}},
		store.Batch{Session: "t", Frames: frames("t", 1, 1)},
	)
	got := mustRead(t, l, "s", 0, 0)
	if len(got) != 2 || len(got[0].Data) != 0 || len(got[1].Data) != 0 {
		t.Errorf("Read(%q, 0, 0) = %v, want 2 frames with empty Data", "s", got)
	}
	if d := diffFrames(mustRead(t, l, "t", 0, 0), frames("t", 1, 1)); d != "" {
		t.Errorf("Read(%q, 0, 0) = %s", "t", d)
	}
}

func testConcurrentAppend(t *testing.T, s *suite) {
	l := s.newLog(t)
	const (
		sessions = 8
		perSess  = 500
	)
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("c%d", i)
	}
	mustCreate(t, l, ids...)

	var writers, readers sync.WaitGroup
	done := make(chan struct{})
	for i, id := range ids {
		writers.Go(func() {
			for seq, k := uint64(1), i; seq <= perSess; k++ {
				n := min(uint64(1+k%7), perSess-seq+1) // batches of 1 to 7 frames
				if err := l.Append(t.Context(), store.Batch{Session: id, Frames: frames(id, seq, n), CostDelta: 1}); err != nil {
					t.Errorf("Append(%s[%d..%d]) = %v, want nil", id, seq, seq+n-1, err)
					return
				}
				seq += n
			}
		})
		// A reader tails the session as it grows, as a subscriber resuming
		// from its last seq does: it must only ever see whole frames in
		// order with no gaps.
		readers.Go(func() {
			var last uint64
			for {
				select {
				case <-done:
					return
				default:
				}
				got, err := l.Read(t.Context(), id, last, 50)
				if err != nil {
					t.Errorf("Read(%q, %d, 50) = %v, want nil", id, last, err)
					return
				}
				if d := diffFrames(got, frames(id, last+1, uint64(len(got)))); d != "" {
					t.Errorf("Read(%q, %d, 50) while appending = %s", id, last, d)
					return
				}
				last += uint64(len(got))
				if len(got) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	writers.Wait()
	close(done)
	readers.Wait()

	for _, id := range ids {
		if d := diffFrames(mustRead(t, l, id, 0, 0), frames(id, 1, perSess)); d != "" {
			t.Errorf("Read(%q, 0, 0) = %s", id, d)
		}
		if ss := mustSession(t, l, id); ss.Head != perSess {
			t.Errorf("Session(%q).Head = %d, want %d", id, ss.Head, perSess)
		}
	}
}

func testReopen(t *testing.T, s *suite) {
	dir := t.TempDir()
	ctx := t.Context()
	l := s.openIn(t, dir)
	mustCreate(t, l, "a", "b", "empty")
	if err := l.UpdateSession(ctx, store.Session{ID: "a", Title: "renamed", Model: "m2"}); err != nil {
		t.Fatalf("UpdateSession(%q) = %v, want nil", "a", err)
	}
	fa := append(frames("a", 1, 3), event(4, "RUN_STARTED", "run-a"), frame("a", 5))
	fb := append(frames("b", 1, 2), event(3, "RUN_STARTED", "run-b"), event(4, "RUN_FINISHED", "run-b"))
	mustAppend(t, l, store.Batch{Session: "a", Frames: fa[:2], CostDelta: 5}, store.Batch{Session: "b", Frames: fb})
	mustAppend(t, l, store.Batch{Session: "a", Frames: fa[2:], CostDelta: 6})
	wantList, err := l.Sessions(ctx)
	if err != nil {
		t.Fatalf("Sessions() = %v, want nil", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}

	l = s.openIn(t, dir)
	want := map[string]struct {
		head    uint64
		openRun string
		cost    int64
		frames  []store.Frame
	}{
		"a":     {5, "run-a", 11, fa},
		"b":     {4, "", 0, fb},
		"empty": {0, "", 0, []store.Frame{}},
	}
	for id, w := range want {
		ss := mustSession(t, l, id)
		if ss.Head != w.head || ss.OpenRun != w.openRun || ss.MicroUSD != w.cost {
			t.Errorf("Session(%q) after reopen = Head %d OpenRun %q MicroUSD %d, want Head %d OpenRun %q MicroUSD %d",
				id, ss.Head, ss.OpenRun, ss.MicroUSD, w.head, w.openRun, w.cost)
		}
		if d := diffFrames(mustRead(t, l, id, 0, 0), w.frames); d != "" {
			t.Errorf("Read(%q, 0, 0) after reopen = %s", id, d)
		}
	}
	gotList, err := l.Sessions(ctx)
	if err != nil || len(gotList) != len(wantList) {
		t.Fatalf("Sessions() after reopen = %+v, %v, want %+v", gotList, err, wantList)
	}
	for i := range wantList {
		if d := diffSession(gotList[i], wantList[i]); d != "" {
			t.Errorf("Sessions()[%d] after reopen = %s", i, d)
		}
	}
	if got := mustSession(t, l, "a").Title; got != "renamed" {
		t.Errorf("Session(%q).Title after reopen = %q, want %q", "a", got, "renamed")
	}

	// The reopened log knows each head: a stale seq conflicts, head+1 lands,
	// and ids stay taken.
	stale := store.Batch{Session: "a", Frames: frames("a", 5, 1)}
	if err := l.Append(ctx, stale); !errors.Is(err, store.ErrSeqConflict) {
		t.Errorf("Append(%s) after reopen = %v, want %v", batchesString([]store.Batch{stale}), err, store.ErrSeqConflict)
	}
	mustAppend(t, l, store.Batch{Session: "a", Frames: frames("a", 6, 2)}, store.Batch{Session: "empty", Frames: frames("empty", 1, 1)})
	if d := diffFrames(mustRead(t, l, "a", 3, 0), append(fa[3:], frames("a", 6, 2)...)); d != "" {
		t.Errorf("Read(%q, 3, 0) after reopen and append = %s", "a", d)
	}
	if err := l.CreateSession(ctx, store.Session{ID: "b", Created: created}); !errors.Is(err, store.ErrSessionExists) {
		t.Errorf("CreateSession(%q) after reopen = %v, want %v", "b", err, store.ErrSessionExists)
	}
}

func testClose(t *testing.T, s *suite) {
	dir := t.TempDir()
	l := s.openIn(t, dir)
	mustCreate(t, l, "s")
	mustAppend(t, l, store.Batch{Session: "s", Frames: frames("s", 1, 1)})
	for i := range 2 {
		within(t, 10*time.Second, "Close()", func() {
			if err := l.Close(); err != nil {
				t.Errorf("Close() #%d = %v, want nil", i+1, err)
			}
		})
	}
	// Every later Append fails fast, whatever else it races with inside
	// the implementation.
	for i := 0; i < 200 && !t.Failed(); i++ {
		within(t, 5*time.Second, "Append() after Close", func() {
			b := store.Batch{Session: "s", Frames: frames("s", 2, 1)}
			if err := l.Append(t.Context(), b); !errors.Is(err, store.ErrClosed) {
				t.Errorf("Append(%s) #%d after Close = %v, want %v", batchesString([]store.Batch{b}), i, err, store.ErrClosed)
			}
		})
	}
	l = s.openIn(t, dir)
	if h := mustSession(t, l, "s").Head; h != 1 {
		t.Errorf("Session(%q).Head after reopen = %d, want 1", "s", h)
	}
}

// testCloseWhileAppending closes the log under writers: every Append returns,
// each with nil or ErrClosed, and every frame whose Append returned nil is
// there after reopening.
func testCloseWhileAppending(t *testing.T, s *suite) {
	dir := t.TempDir()
	l := s.openIn(t, dir)
	const writers = 8
	ids := make([]string, writers)
	for i := range ids {
		ids[i] = fmt.Sprintf("w%d", i)
	}
	mustCreate(t, l, ids...)

	var appended atomic.Int64
	lastOK := make([]uint64, writers)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			for seq := uint64(1); ; seq++ {
				err := l.Append(t.Context(), store.Batch{Session: id, Frames: []store.Frame{frame(id, seq)}})
				if errors.Is(err, store.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Append(%s[%d]) while closing = %v, want nil or %v", id, seq, err, store.ErrClosed)
					return
				}
				lastOK[i] = seq
				appended.Add(1)
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for appended.Load() < 200 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	within(t, 10*time.Second, "Close() while appending", func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close() while appending = %v, want nil", err)
		}
	})
	within(t, 10*time.Second, "Append() racing Close", wg.Wait)

	l = s.openIn(t, dir)
	for i, id := range ids {
		got := mustRead(t, l, id, 0, 0)
		// Frames acknowledged with nil are all there; at most the one
		// append answered ErrClosed may have landed too.
		if n := uint64(len(got)); n < lastOK[i] || n > lastOK[i]+1 {
			t.Errorf("Read(%q, 0, 0) after reopen = seqs %s, want 1..%d", id, seqsString(got), lastOK[i])
		}
		if d := diffFrames(got, frames(id, 1, uint64(len(got)))); d != "" {
			t.Errorf("Read(%q, 0, 0) after reopen = %s", id, d)
		}
	}
}

// testCheck runs on a Log that is a store.Checker: a whole log passes the
// quick and the full check, which count what it holds, before and after
// more appends.
func testCheck(t *testing.T, s *suite) {
	l := s.newLog(t)
	c, ok := l.(store.Checker)
	if !ok {
		t.Skip("the Log is not a store.Checker")
	}
	mustCreate(t, l, "a", "b", "empty")
	mustAppend(t, l, store.Batch{Session: "a", Frames: append(frames("a", 1, 3), event(4, "RUN_STARTED", "run-a"))},
		store.Batch{Session: "b", Frames: frames("b", 1, 7)})
	check := func(want int64) {
		t.Helper()
		for _, full := range []bool{false, true} {
			seen := 0
			rep, err := c.Check(t.Context(), store.CheckOptions{Full: full, Frame: func(data []byte) error {
				seen++
				if len(data) == 0 {
					return errors.New("empty")
				}
				return nil
			}})
			if err != nil {
				t.Fatalf("Check(full %v) = %v, want nil", full, err)
			}
			if !rep.OK() || rep.Sessions != 3 || rep.Full != full {
				t.Errorf("Check(full %v) = %+v, want OK with 3 sessions", full, rep)
			}
			if full && (rep.Frames != want || int64(seen) != want) {
				t.Errorf("Check(full) = %d frames, %d passed to Frame, want %d", rep.Frames, seen, want)
			}
		}
	}
	check(11)
	mustAppend(t, l, store.Batch{Session: "b", Frames: frames("b", 8, 2)}, store.Batch{Session: "empty", Frames: frames("empty", 1, 1)})
	check(14)
}

// testCheckpoint runs only on a Log that is a store.Checkpointer: a saved
// checkpoint reads back byte for byte, a later one replaces it, one ahead
// of the log is refused and changes nothing, and it survives a reopen.
func testCheckpoint(t *testing.T, s *suite) {
	dir := t.TempDir()
	ctx := t.Context()
	l := s.openIn(t, dir)
	cp, ok := l.(store.Checkpointer)
	if !ok {
		t.Skip("the Log keeps no checkpoints")
	}
	mustCreate(t, l, "a", "b")
	if _, err := cp.LoadCheckpoint(ctx, "a"); !errors.Is(err, store.ErrNoCheckpoint) {
		t.Errorf("LoadCheckpoint(%q) of a new session = %v, want %v", "a", err, store.ErrNoCheckpoint)
	}
	if _, err := cp.LoadCheckpoint(ctx, "nope"); !errors.Is(err, store.ErrUnknownSession) {
		t.Errorf("LoadCheckpoint(%q) = %v, want %v", "nope", err, store.ErrUnknownSession)
	}
	if err := cp.SaveCheckpoint(ctx, "nope", store.Checkpoint{}); !errors.Is(err, store.ErrUnknownSession) {
		t.Errorf("SaveCheckpoint(%q) = %v, want %v", "nope", err, store.ErrUnknownSession)
	}
	// A checkpoint of a session with no frames yet is one of head 0.
	if err := cp.SaveCheckpoint(ctx, "b", store.Checkpoint{Head: 0, Data: []byte("empty")}); err != nil {
		t.Errorf("SaveCheckpoint(%q, head 0) = %v, want nil", "b", err)
	}
	if err := cp.SaveCheckpoint(ctx, "a", store.Checkpoint{Head: 1, Data: []byte("x")}); !errors.Is(err, store.ErrCheckpointAhead) {
		t.Errorf("SaveCheckpoint(%q, head 1) of an empty log = %v, want %v", "a", err, store.ErrCheckpointAhead)
	}
	mustAppend(t, l, store.Batch{Session: "a", Frames: frames("a", 1, 5)})
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, 64<<10)
	for _, c := range []store.Checkpoint{{Head: 3, Data: []byte("three")}, {Head: 5, Data: big}} {
		if err := cp.SaveCheckpoint(ctx, "a", c); err != nil {
			t.Fatalf("SaveCheckpoint(%q, head %d) = %v, want nil", "a", c.Head, err)
		}
		got, err := cp.LoadCheckpoint(ctx, "a")
		if err != nil || got.Head != c.Head || !bytes.Equal(got.Data, c.Data) {
			t.Errorf("LoadCheckpoint(%q) = head %d, %d bytes, %v, want head %d, %d bytes", "a", got.Head, len(got.Data), err, c.Head, len(c.Data))
		}
	}
	if err := cp.SaveCheckpoint(ctx, "a", store.Checkpoint{Head: 6, Data: []byte("ahead")}); !errors.Is(err, store.ErrCheckpointAhead) {
		t.Errorf("SaveCheckpoint(%q, head 6) of a 5-frame log = %v, want %v", "a", err, store.ErrCheckpointAhead)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}

	l = s.openIn(t, dir)
	cp = l.(store.Checkpointer)
	got, err := cp.LoadCheckpoint(ctx, "a")
	if err != nil || got.Head != 5 || !bytes.Equal(got.Data, big) {
		t.Errorf("LoadCheckpoint(%q) after reopen = head %d, %d bytes, %v, want head 5, %d bytes", "a", got.Head, len(got.Data), err, len(big))
	}
	if got, err := cp.LoadCheckpoint(ctx, "b"); err != nil || got.Head != 0 || string(got.Data) != "empty" {
		t.Errorf("LoadCheckpoint(%q) after reopen = %d %q %v, want 0 %q", "b", got.Head, got.Data, err, "empty")
	}
}

// testWritesAmongAppends has checkpoints and session updates, some of them
// refused, race appends to other sessions: a store may put them in one
// commit, and a refusal is its own request's only.
func testWritesAmongAppends(t *testing.T, s *suite) {
	l := s.newLog(t)
	ctx := t.Context()
	cp, _ := l.(store.Checkpointer)
	const writers, each = 4, 50
	ids := make([]string, writers)
	for i := range ids {
		ids[i] = fmt.Sprintf("w%d", i)
	}
	mustCreate(t, l, append(ids, "c")...)
	mustAppend(t, l, store.Batch{Session: "c", Frames: frames("c", 1, 2)})
	var wg sync.WaitGroup
	errs := make(chan error, writers*each*4)
	for _, id := range ids {
		wg.Go(func() {
			for seq := uint64(1); seq <= each; seq++ {
				if err := l.Append(ctx, store.Batch{Session: id, Frames: []store.Frame{frame(id, seq)}}); err != nil {
					errs <- fmt.Errorf("Append(%s seq %d) = %v, want nil", id, seq, err)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range each {
			if err := l.UpdateSession(ctx, store.Session{ID: "nope", Title: "t"}); !errors.Is(err, store.ErrUnknownSession) {
				errs <- fmt.Errorf("UpdateSession(nope) = %v, want %v", err, store.ErrUnknownSession)
			}
			title := fmt.Sprintf("title %d", i)
			if err := l.UpdateSession(ctx, store.Session{ID: "c", Title: title}); err != nil {
				errs <- fmt.Errorf("UpdateSession(c, %q) = %v, want nil", title, err)
			}
			if cp == nil {
				continue
			}
			if err := cp.SaveCheckpoint(ctx, "c", store.Checkpoint{Head: 3, Data: []byte("ahead")}); !errors.Is(err, store.ErrCheckpointAhead) {
				errs <- fmt.Errorf("SaveCheckpoint(c, head 3) of a 2-frame log = %v, want %v", err, store.ErrCheckpointAhead)
			}
			if err := cp.SaveCheckpoint(ctx, "c", store.Checkpoint{Head: 2, Data: []byte(title)}); err != nil {
				errs <- fmt.Errorf("SaveCheckpoint(c, head 2) = %v, want nil", err)
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, id := range ids {
		if got := mustSession(t, l, id); got.Head != each {
			t.Errorf("Session(%s).Head = %d, want %d", id, got.Head, each)
		}
	}
	want := fmt.Sprintf("title %d", each-1)
	if got := mustSession(t, l, "c"); got.Title != want || got.Head != 2 {
		t.Errorf("Session(c) = title %q head %d, want %q head 2", got.Title, got.Head, want)
	}
	if cp != nil {
		if got, err := cp.LoadCheckpoint(ctx, "c"); err != nil || string(got.Data) != want {
			t.Errorf("LoadCheckpoint(c) = %q, %v, want %q", got.Data, err, want)
		}
	}
}
