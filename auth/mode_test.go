//go:build unix

package auth_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSaveFileModes: with umask 000, and a stale tokens.json.tmp left
// world-writable by a crash, a new token leaves the data dir 0700 and
// tokens.json 0600, and no temporary file of its own. The umask is the
// process's: this test does not run in parallel, and puts it back at once.
func TestSaveFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "tokens.json")
	old := syscall.Umask(0)
	s := openStore(t, path)
	_, _, err := s.Create("laptop")
	if err == nil {
		err = os.WriteFile(path+".tmp", []byte("stale"), 0o666)
	}
	if err == nil {
		_, _, err = s.Create("phone")
	}
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]fs.FileMode{dir: fs.ModeDir | 0o700, path: 0o600} {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode() & (fs.ModeDir | fs.ModePerm); got != want {
			t.Errorf("mode of %s = %v, want %v", filepath.Base(name), got, want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("data dir holds %v, want tokens.json and the stale tokens.json.tmp only", entries)
	}
}
