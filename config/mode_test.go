//go:build unix

package config_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/getorrery/orrery/config"
)

// TestSetFileMode: with umask 000 and a stale orrery.toml.tmp left
// world-writable by a crash, Set leaves the file 0600. The umask is the
// process's: this test does not run in parallel, and puts it back at once.
func TestSetFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orrery.toml")
	old := syscall.Umask(0)
	err := os.WriteFile(path+".tmp", []byte("stale"), 0o666)
	if err == nil {
		err = config.Set(path, "agent.model", "offline")
	}
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("os.Stat(orrery.toml) = %v, %v; want mode 0600", st.Mode(), err)
	}
}
