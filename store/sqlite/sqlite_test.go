package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

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
