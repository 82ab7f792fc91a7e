package datadir_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/getorrery/orrery/datadir"
	"github.com/getorrery/orrery/internal/testdisk"
)

// helperEnv names the data dir a helper process (TestHelperProcess) works
// on; helperModeEnv says what it does there.
const (
	helperEnv     = "ORRERY_DATADIR_HELPER"
	helperModeEnv = "ORRERY_DATADIR_HELPER_MODE"
)

// TestHelperProcess is not a test: run by helper, it holds the data dir
// and says "held" (mode hold), or tries to and says how that went (mode
// try).
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("a helper process of the other tests")
	}
	l, err := datadir.Acquire(dir, datadir.Owner{Command: "helper", Listen: "http://127.0.0.1:1", Pipe: pipePath(t, dir)})
	if os.Getenv(helperModeEnv) == "try" {
		switch {
		case err == nil:
			fmt.Println("acquired")
			l.Close()
		case errors.Is(err, datadir.ErrHeld):
			fmt.Println("held: " + err.Error())
		default:
			fmt.Println("error: " + err.Error())
		}
		os.Exit(0)
	}
	if err != nil {
		fmt.Println("error: " + err.Error())
		os.Exit(1)
	}
	fmt.Println("held")
	// Hold until killed, or until the parent closes stdin.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	l.Close()
	os.Exit(0)
}

// helper starts this test binary as a helper process on dir in mode, and
// returns it with the first line it printed.
func helper(t *testing.T, dir, mode string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir, helperModeEnv+"="+mode)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the helper process (%s) printed nothing: %v", mode, err)
	}
	return cmd, strings.TrimSpace(line)
}

func TestAcquireWritesOwner(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := datadir.Acquire(dir, datadir.Owner{Command: "orrery serve", Version: "v1"})
	if err != nil {
		t.Fatalf("Acquire() = %v", err)
	}
	defer l.Close()
	o, err := datadir.ReadOwner(dir)
	if err != nil || o == nil {
		t.Fatalf("ReadOwner() = %v, %v; want the owner", o, err)
	}
	if o.PID != os.Getpid() || o.Command != "orrery serve" || o.Version != "v1" || o.Started.IsZero() {
		t.Errorf("ReadOwner() = %+v, want this pid, the command, the version and a start time", o)
	}
	if runtime.GOOS != "windows" {
		for _, name := range []string{datadir.LockFile, datadir.OwnerFile} {
			st, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %04o, want 0600", name, st.Mode().Perm())
			}
		}
		if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
			t.Errorf("the data dir has mode %04o, want 0700", st.Mode().Perm())
		}
	}

	if err := l.Update(func(o *datadir.Owner) {
		o.Listen, o.Pipe, o.Roots = "http://127.0.0.1:7411", pipePath(t, dir), []string{"/src"}
		o.PID = 1 // not the caller's to change
	}); err != nil {
		t.Fatalf("Update() = %v", err)
	}
	o, _ = datadir.ReadOwner(dir)
	if o.PID != os.Getpid() || o.Listen != "http://127.0.0.1:7411" || o.Pipe != filepath.Join(dir, "orrery.sock") || o.Command != "orrery serve" || len(o.Roots) != 1 {
		t.Errorf("ReadOwner() after Update = %+v, want the listener and pipe added, the rest kept", o)
	}

	if err := l.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if o, err := datadir.ReadOwner(dir); o != nil || err != nil {
		t.Errorf("ReadOwner() after Close = %+v, %v; want no owner file", o, err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("a second Close() = %v, want nil", err)
	}
	if err := l.Update(func(*datadir.Owner) {}); err == nil {
		t.Error("Update() after Close = nil, want an error")
	}
}

// TestAcquireInProcess: a second Lock in the same process is refused, and
// Close frees the dir for the next.
func TestAcquireInProcess(t *testing.T) {
	dir := t.TempDir()
	first, err := datadir.Acquire(dir, datadir.Owner{Command: "first", Pipe: pipePath(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = datadir.Acquire(dir, datadir.Owner{Command: "second"})
	var held *datadir.HeldError
	if !errors.As(err, &held) || !errors.Is(err, datadir.ErrHeld) {
		t.Fatalf("a second Acquire() = %v, want a *HeldError", err)
	}
	if held.Owner == nil || held.Owner.PID != os.Getpid() || held.Owner.Command != "first" || held.Owner.Pipe != pipePath(t, dir) {
		t.Errorf("HeldError.Owner = %+v, want the first holder", held.Owner)
	}
	if msg := err.Error(); !strings.Contains(msg, "first (pid ") || !strings.Contains(msg, dir) {
		t.Errorf("HeldError = %q, want it to name the dir and the holder", msg)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := datadir.Acquire(dir, datadir.Owner{Command: "second"})
	if err != nil {
		t.Fatalf("Acquire() after Close = %v, want the dir", err)
	}
	second.Close()
}

// TestAcquireAcrossProcesses: a lock held by another process refuses this
// one and names it; a lock held here refuses another process; a holder
// killed with SIGKILL leaves its owner file behind, and the next Acquire
// takes the dir and replaces it.
func TestAcquireAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts helper processes")
	}
	dir := t.TempDir()
	child, line := helper(t, dir, "hold")
	if line != "held" {
		t.Fatalf("the holding helper said %q, want held", line)
	}
	_, err := datadir.Acquire(dir, datadir.Owner{})
	var held *datadir.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("Acquire() while a child holds the dir = %v, want a *HeldError", err)
	}
	if held.Owner == nil || held.Owner.PID != child.Process.Pid || held.Owner.Command != "helper" || held.Owner.Listen != "http://127.0.0.1:1" {
		t.Errorf("HeldError.Owner = %+v, want the child (pid %d)", held.Owner, child.Process.Pid)
	}

	// Killed: the OS releases its lock; its owner file stays, stale.
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	stale, err := datadir.ReadOwner(dir)
	if err != nil || stale == nil || stale.PID != child.Process.Pid {
		t.Fatalf("ReadOwner() after the kill = %+v, %v; want the dead child's file", stale, err)
	}
	l, err := datadir.Acquire(dir, datadir.Owner{Command: "next"})
	if err != nil {
		t.Fatalf("Acquire() after the holder was killed = %v, want the dir (the lock is the truth, not the file)", err)
	}
	defer l.Close()
	if o, _ := datadir.ReadOwner(dir); o == nil || o.PID != os.Getpid() || o.Command != "next" {
		t.Errorf("ReadOwner() = %+v, want this process: the stale file replaced", o)
	}

	// Held here: a child is refused, and told who holds it.
	_, line = helper(t, dir, "try")
	if !strings.HasPrefix(line, "held: ") || !strings.Contains(line, fmt.Sprintf("next (pid %d", os.Getpid())) {
		t.Errorf("a child's Acquire() while this process holds the dir said %q, want held by next (pid %d)", line, os.Getpid())
	}
	l.Close()
	_, line = helper(t, dir, "try")
	if line != "acquired" {
		t.Errorf("a child's Acquire() after Close said %q, want acquired", line)
	}
}

// TestHeldErrorStaleOwner: while the lock is held, an owner file that
// names a process that is gone is not passed off as the holder.
func TestHeldErrorStaleOwner(t *testing.T) {
	dir := t.TempDir()
	l, err := datadir.Acquire(dir, datadir.Owner{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A file as a dead holder would have left it: a pid no process has.
	data, _ := json.Marshal(datadir.Owner{PID: 1 << 30, Started: time.Now(), Command: "ghost"})
	if err := os.WriteFile(filepath.Join(dir, datadir.OwnerFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = datadir.Acquire(dir, datadir.Owner{})
	var held *datadir.HeldError
	if !errors.As(err, &held) || held.Owner != nil {
		t.Fatalf("Acquire() = %v (owner %+v), want a *HeldError with no owner", err, held)
	}
	if !strings.Contains(err.Error(), "has not said who it is") {
		t.Errorf("HeldError = %q, want it to say the holder is unknown", err)
	}
}

// TestAcquireFullDisk: on a full disk the owner file cannot be written,
// yet the dir is taken (a command must still read its log there); an
// owner file a dead holder left is removed rather than left to misname
// the holder, a second Acquire sees the dir held by nobody named, and an
// Update once there is room writes the file.
func TestAcquireFullDisk(t *testing.T) {
	dir := filepath.Join(testdisk.Tmpfs(t, 4<<20), "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A dead holder's file, as a process killed with SIGKILL leaves it.
	stale, err := json.Marshal(datadir.Owner{PID: 1 << 30, Command: "orrery serve"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, datadir.OwnerFile), stale, 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err := os.Create(filepath.Join(dir, datadir.LockFile)); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	fill := testdisk.Fill(t, dir)

	l, err := datadir.Acquire(dir, datadir.Owner{Command: "orrery sessions"})
	if err != nil {
		t.Fatalf("Acquire() on a full disk = %v, want the dir", err)
	}
	defer l.Close()
	if err := l.OwnerErr(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("OwnerErr() = %v, want ENOSPC", err)
	}
	if o, err := datadir.ReadOwner(dir); err != nil || o != nil {
		t.Errorf("ReadOwner() = %+v, %v: want no owner file, not the dead holder's", o, err)
	}
	_, err = datadir.Acquire(dir, datadir.Owner{Command: "second"})
	var held *datadir.HeldError
	if !errors.As(err, &held) || held.Owner != nil {
		t.Fatalf("a second Acquire() = %v, want a *HeldError with no owner", err)
	}

	fill.Free()
	if err := l.Update(func(o *datadir.Owner) { o.Pipe = pipePath(t, dir) }); err != nil {
		t.Fatalf("Update() with room again = %v, want nil", err)
	}
	if err := l.OwnerErr(); err != nil {
		t.Errorf("OwnerErr() after a good Update = %v, want nil", err)
	}
	if o, err := datadir.ReadOwner(dir); err != nil || o == nil || o.PID != os.Getpid() || o.Command != "orrery sessions" {
		t.Errorf("ReadOwner() after the Update = %+v, %v, want this process, orrery sessions", o, err)
	}
}

// pipePath is datadir.PipePath, failing the test on an error.
func pipePath(t testing.TB, dir string) string {
	t.Helper()
	p, err := datadir.PipePath(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheck: a held dir checks out while its lock file is the one locked;
// moved away, replaced by a copy, or released, Check says what happened,
// and moved back it checks out again.
func TestCheck(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	l, err := datadir.Acquire(dir, datadir.Owner{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lockFile := filepath.Join(dir, datadir.LockFile)
	steps := []struct {
		name string
		do   func() error
		want string // "" for nil
	}{
		{"held", func() error { return nil }, ""},
		{"the dir moved away", func() error { return os.Rename(dir, dir+".old") }, "is gone"},
		{"the dir moved back", func() error { return os.Rename(dir+".old", dir) }, ""},
		{"the lock file replaced by a copy", func() error {
			data, _ := os.ReadFile(lockFile)
			if err := os.Remove(lockFile); err != nil {
				return err
			}
			return os.WriteFile(lockFile, data, 0o600)
		}, "was replaced"},
		{"released", l.Close, "is released"},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		err := l.Check()
		if st.want == "" && err != nil || st.want != "" && (err == nil || !strings.Contains(err.Error(), st.want)) {
			t.Errorf("%s: Check() = %v, want %q", st.name, err, st.want)
		}
	}
}
