//go:build unix

package sqlite_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
)

// TestOpenFileModes: with umask 000, under which SQLite alone makes the
// database, -wal and -shm files 0644, Open makes the data dir 0700 and all
// three files 0600. The umask is the process's: this test does not run in
// parallel, and puts it back before anything else can start.
func TestOpenFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "orrery.db")
	old := syscall.Umask(0)
	l, err := sqlite.Open(path)
	if err == nil {
		err = l.CreateSession(context.Background(), store.Session{ID: "s"})
	}
	if err == nil {
		err = l.Append(context.Background(), store.Batch{Session: "s", Frames: []store.Frame{{Seq: 1, Type: "CUSTOM", Data: []byte(`{}`)}}})
	}
	syscall.Umask(old)
	if err != nil {
		t.Fatalf("Open, CreateSession, Append = %v", err)
	}
	defer l.Close()
	for name, want := range map[string]fs.FileMode{dir: fs.ModeDir | 0o700, path: 0o600, path + "-wal": 0o600, path + "-shm": 0o600} {
		st, err := os.Stat(name)
		if err != nil {
			t.Errorf("os.Stat(%s) = %v", filepath.Base(name), err)
			continue
		}
		if got := st.Mode() & (fs.ModeDir | fs.ModePerm); got != want {
			t.Errorf("mode of %s = %v, want %v", filepath.Base(name), got, want)
		}
	}
}

// TestOpenKeepsModes: Open leaves an existing database's mode as it is (a
// loose one is for the caller to warn about), and an existing directory's.
func TestOpenKeepsModes(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "orrery.db")
	l, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if l, err = sqlite.Open(path); err != nil {
		t.Fatal(err)
	}
	l.Close()
	for name, want := range map[string]fs.FileMode{dir: 0o750, path: 0o640} {
		if st, err := os.Stat(name); err != nil || st.Mode().Perm() != want {
			t.Errorf("os.Stat(%s) = %v, %v; want mode %v", name, st.Mode(), err, want)
		}
	}
}
