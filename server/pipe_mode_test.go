//go:build unix

package server_test

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/getorrery/orrery/server"
)

// TestListenPipeMode: with umask 000 the socket is still 0600 (it is made
// private before it appears at its path), nothing else is left in its
// directory, a second listener on a live pipe is refused, a stale socket is
// replaced, and Close removes the socket. The umask is the process's: this
// test does not run in parallel, and puts it back at once.
func TestListenPipeMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k.sock")
	old := syscall.Umask(0)
	ln, err := server.ListenPipe(path)
	syscall.Umask(old)
	if err != nil {
		t.Fatalf("ListenPipe() = %v, want nil", err)
	}
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Type() != fs.ModeSocket || st.Mode().Perm() != 0o600 {
		t.Errorf("mode of the pipe = %v, want a socket with 0600", st.Mode())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the pipe's directory holds %v, want the socket only", entries)
	}
	if got := ln.Addr().String(); got != path {
		t.Errorf("Addr() = %q, want %q", got, path)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("Dial(pipe) = %v, want nil", err)
	}
	c.Close()
	if err := <-accepted; err != nil {
		t.Errorf("Accept() = %v, want nil", err)
	}
	if _, err := server.ListenPipe(path); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("ListenPipe() on a live pipe = %v, want an error saying it is in use", err)
	}
	if err := ln.Close(); err != nil {
		t.Errorf("Close() = %v, want nil", err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("after Close, Lstat(pipe) = %v, want it gone", err)
	}

	// A socket whose process died is stale: it is replaced.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	ln, err = server.ListenPipe(path)
	if err != nil {
		t.Fatalf("ListenPipe() over a stale socket = %v, want nil", err)
	}
	defer ln.Close()
	if c, err := net.Dial("unix", path); err != nil {
		t.Errorf("Dial(pipe) after replacing a stale socket = %v, want nil", err)
	} else {
		c.Close()
	}
}
