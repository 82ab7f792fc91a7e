package sqlite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/getorrery/orrery/internal/testdisk"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/store/storetest"
)

func open(t *testing.T, dir string) store.Log {
	t.Helper()
	path := filepath.Join(dir, "orrery.db")
	l, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want nil", path, err)
	}
	return l
}

func TestLog(t *testing.T) {
	storetest.Run(t, open)
}

func TestPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "orrery.db")
	l, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want nil", path, err)
	}
	defer l.Close()
	if got := l.Path(); got != path {
		t.Errorf("Path() = %q, want %q", got, path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("os.Stat(%q) = %v, want nil", path, err)
	}
}

func TestWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orrery.db")
	l, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want nil", path, err)
	}
	defer l.Close()
	ctx := t.Context()
	if err := l.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		t.Fatalf("CreateSession() = %v, want nil", err)
	}
	f := store.Frame{Seq: 1, Type: "RUN_STARTED", Run: "r", Data: []byte(`{"type":"RUN_STARTED"}`)}
	if err := l.Append(ctx, store.Batch{Session: "s", Frames: []store.Frame{f}}); err != nil {
		t.Fatalf("Append() = %v, want nil", err)
	}

	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
		t.Errorf("os.Stat(%q) = %v, %v, want a non-empty WAL file", path+"-wal", fi, err)
	}
	// WAL mode is a property of the file: a fresh connection reports it.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatalf("sql.Open(%q) = %v, want nil", path, err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("PRAGMA journal_mode = %q, %v, want %q", mode, err, "wal")
	}
}

// TestOpenFails checks that Open reports a path it cannot use, and that the
// partly opened Log it closes on the way out does not panic.
func TestOpenFails(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{
		dir, // a directory, not a database
		filepath.Join(dir, "notadb"),
	} {
		if path != dir {
			if err := os.WriteFile(path, []byte("this is not an SQLite database, not even close to one"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if l, err := sqlite.Open(path); err == nil {
			l.Close()
			t.Errorf("Open(%q) = nil error, want an error", path)
		}
	}
}

// TestGroupCommitFailure checks that when one session's batch fails inside
// a group commit (here a seq a second writer of the same file took first),
// only that session's append fails: the other session's batch, committed
// together with it, lands, and the failed session can go on from the head
// the file holds.
func TestGroupCommitFailure(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "orrery.db")
	l, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	frame := func(seq uint64, data string) store.Frame {
		return store.Frame{Seq: seq, Type: "CUSTOM", Data: []byte(data)}
	}
	for _, id := range []string{"a", "b"} {
		if err := l.CreateSession(ctx, store.Session{ID: id}); err != nil {
			t.Fatal(err)
		}
		if err := l.Append(ctx, store.Batch{Session: id, Frames: []store.Frame{frame(1, `{"n":1}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	// A second writer appends a's seq 2 behind l's back.
	other, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Append(ctx, store.Batch{Session: "a", Frames: []store.Frame{frame(2, `{"by":"other"}`)}}); err != nil {
		t.Fatalf("other.Append(a, 2) = %v, want nil", err)
	}
	other.Close()

	errs := l.CommitTogether(
		[]store.Batch{{Session: "a", Frames: []store.Frame{frame(2, `{"by":"l"}`)}}},
		[]store.Batch{{Session: "b", Frames: []store.Frame{frame(2, `{"n":2}`), frame(3, `{"n":3}`)}, CostDelta: 5}},
	)
	if errs[0] == nil {
		t.Errorf("CommitTogether() a = nil, want the failure of a seq another writer holds")
	}
	if errs[1] != nil {
		t.Errorf("CommitTogether() b = %v, want nil: a's failure must not fail b", errs[1])
	}
	b, err := l.Read(ctx, "b", 0, 0)
	if err != nil || len(b) != 3 || string(b[2].Data) != `{"n":3}` {
		t.Errorf("Read(b) = %v, %v, want seqs 1..3", b, err)
	}
	if s, err := l.Session(ctx, "b"); err != nil || s.Head != 3 || s.MicroUSD != 5 {
		t.Errorf("Session(b) = %+v, %v, want head 3 and micro_usd 5", s, err)
	}
	a, err := l.Read(ctx, "a", 0, 0)
	if err != nil || len(a) != 2 || string(a[1].Data) != `{"by":"other"}` {
		t.Errorf("Read(a) = %v, %v, want seq 2 as the other writer wrote it", a, err)
	}
	// The failure taught l a's stored head: seq 2 is a conflict, seq 3 goes on.
	if err := l.Append(ctx, store.Batch{Session: "a", Frames: []store.Frame{frame(2, `{"by":"l"}`)}}); !errors.Is(err, store.ErrSeqConflict) {
		t.Errorf("Append(a, 2) = %v, want ErrSeqConflict", err)
	}
	if err := l.Append(ctx, store.Batch{Session: "a", Frames: []store.Frame{frame(3, `{"by":"l"}`)}}); err != nil {
		t.Errorf("Append(a, 3) = %v, want nil", err)
	}

	// Within one Append, too, each batch stands alone.
	other, err = sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Append(ctx, store.Batch{Session: "a", Frames: []store.Frame{frame(4, `{"by":"other"}`)}}); err != nil {
		t.Fatalf("other.Append(a, 4) = %v, want nil", err)
	}
	other.Close()
	err = l.Append(ctx,
		store.Batch{Session: "a", Frames: []store.Frame{frame(4, `{"by":"l"}`)}},
		store.Batch{Session: "b", Frames: []store.Frame{frame(4, `{"n":4}`)}})
	if err == nil {
		t.Errorf("Append(a 4, b 4) = nil, want a's failure")
	}
	if s, err := l.Session(ctx, "b"); err != nil || s.Head != 4 {
		t.Errorf("Session(b) = %+v, %v, want head 4: b's batch stands alone", s, err)
	}
}

// TestGroupCommitFailureMany: frames go to SQLite many rows a statement;
// when one row of such a statement fails, the commit is tried again a row
// at a time, so that only the batch holding that row fails.
func TestGroupCommitFailureMany(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "orrery.db")
	l, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	frames := func(from, n int, by string) []store.Frame {
		fs := make([]store.Frame, n)
		for i := range fs {
			fs[i] = store.Frame{Seq: uint64(from + i), Type: "CUSTOM", Data: []byte(fmt.Sprintf(`{"by":%q,"n":%d}`, by, from+i))}
		}
		return fs
	}
	for _, id := range []string{"a", "b"} {
		if err := l.CreateSession(ctx, store.Session{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	other, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Append(ctx, store.Batch{Session: "a", Frames: frames(1, 1, "other")}); err != nil {
		t.Fatalf("other.Append(a, 1) = %v, want nil", err)
	}
	other.Close()
	// b's 40 frames come first, so a's seq 1 is row 41: inside the second
	// statement of 32 rows. The batches are one request, so that only a
	// row-at-a-time retry, not a transaction per request, keeps b's.
	errs := l.CommitTogether([]store.Batch{
		{Session: "b", Frames: frames(1, 40, "l")},
		{Session: "a", Frames: frames(1, 40, "l")},
		{Session: "b", Frames: frames(41, 30, "l")},
	})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "session a seq 1") {
		t.Errorf("CommitTogether() = %v, want the failure of a's seq 1, which another writer holds", errs[0])
	}
	b, err := l.Read(ctx, "b", 0, 0)
	if err != nil || len(b) != 70 || string(b[69].Data) != `{"by":"l","n":70}` {
		t.Errorf("Read(b) = %d frames, %v, want seqs 1..70", len(b), err)
	}
	a, err := l.Read(ctx, "a", 0, 0)
	if err != nil || len(a) != 1 || string(a[0].Data) != `{"by":"other","n":1}` {
		t.Errorf("Read(a) = %v, %v, want only seq 1 as the other writer wrote it", a, err)
	}
}

// TestOpenFullDisk: a log closed cleanly (its -wal and -shm files gone)
// does not open on a full disk, since SQLite must make them; the error
// says the disk is full, as ENOSPC, not only "disk I/O error".
func TestOpenFullDisk(t *testing.T) {
	dir := testdisk.Tmpfs(t, 4<<20)
	path := filepath.Join(dir, "orrery.db")
	l, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CreateSession(t.Context(), store.Session{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	fill := testdisk.Fill(t, dir)
	l, err = sqlite.Open(path)
	if err == nil {
		// A file system that kept room for SQLite's files: nothing to see.
		l.Close()
		t.Skip("the log opened on the full disk")
	}
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "the disk is full") {
		t.Errorf("Open() on a full disk = %v, want ENOSPC saying the disk is full", err)
	}
	fill.Free()
	l, err = sqlite.Open(path)
	if err != nil {
		t.Fatalf("Open() with room again = %v, want nil", err)
	}
	defer l.Close()
	if _, err := l.Session(t.Context(), "s"); err != nil {
		t.Errorf("Session(s) after the disk had room again = %v, want the session", err)
	}
}

// TestWALCheckpoints: the writer's connection never checkpoints the WAL
// itself, so a goroutine of the log copies it into the database beside
// the writer (the database file grows as frames are appended, before any
// close), and the WAL stays well under the frames written (without
// checkpoints it grows to 3.4 times them) under appends that never pause.
func TestWALCheckpoints(t *testing.T) {
	sqlite.SetWALLimits(t, 64<<10, 1<<20)
	path := filepath.Join(t.TempDir(), "orrery.db")
	l, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want nil", path, err)
	}
	defer l.Close()
	ctx := t.Context()
	if err := l.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		t.Fatalf("CreateSession() = %v, want nil", err)
	}
	data := []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat("x", 200) + `"}`)
	const total = 16 << 20
	written := 0
	seq := uint64(0)
	for written < total {
		fs := make([]store.Frame, 64)
		for i := range fs {
			seq++
			fs[i] = store.Frame{Seq: seq, Type: "TEXT_MESSAGE_CONTENT", Run: "r", Data: data}
			written += len(data)
		}
		if err := l.Append(ctx, store.Batch{Session: "s", Frames: fs}); err != nil {
			t.Fatalf("Append() = %v, want nil", err)
		}
	}
	db, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if db.Size() < total/2 {
		t.Errorf("the database file holds %d bytes after %d bytes of frames were appended: the WAL was not checkpointed into it", db.Size(), written)
	}
	wal, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// How far past the 1 MiB limit it goes depends on when the two
	// checkpointers run (one may find the other busy); without any it is
	// 3.4 times the frames (57 MB).
	if wal.Size() > int64(written/2) {
		t.Errorf("the WAL grew to %d bytes for %d bytes of frames, want at most half of that", wal.Size(), written)
	}
	frames, err := l.Read(ctx, "s", 0, 0)
	if err != nil || len(frames) != int(seq) {
		t.Errorf("Read() = %d frames, %v, want %d", len(frames), err, seq)
	}
}
