// Package testdisk gives tests real disks that fail: a small tmpfs that
// fills up, and an ext4 file system that turns read-only mid-write as one
// does after a disk error. Both need root on Linux; elsewhere the test is
// skipped, except when the environment variable CI is set, where it fails,
// so that CI (which runs as root on Linux) never skips them silently.
package testdisk

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// unavailable skips t, or fails it when CI is set.
func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("this test needs a real failing disk and cannot make one: %s (CI is set, so it must)", why)
	}
	t.Skipf("this test needs a real failing disk and cannot make one: %s", why)
}

func needRoot(t testing.TB) {
	t.Helper()
	switch {
	case runtime.GOOS != "linux":
		unavailable(t, "not Linux")
	case os.Geteuid() != 0:
		unavailable(t, "not root: mounting a file system needs root")
	}
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Tmpfs mounts a tmpfs of size bytes on a fresh directory and returns it;
// it is unmounted when the test ends.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	needRoot(t)
	dir := t.TempDir()
	if err := run("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir); err != nil {
		unavailable(t, err.Error())
	}
	t.Cleanup(func() {
		if err := run("umount", dir); err != nil {
			t.Errorf("unmount the test's tmpfs: %v", err)
		}
	})
	return dir
}

// Filler is a file that takes up a file system's free space.
type Filler struct {
	t    testing.TB
	path string
}

// Fill writes a file in dir until the file system has no space left.
func Fill(t testing.TB, dir string) *Filler {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		_, err := f.Write(buf)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
	// Small writes take the last partial blocks.
	for {
		if _, err := f.Write(buf[:512]); err != nil {
			break
		}
	}
	return &Filler{t: t, path: path}
}

// Leave shrinks the filler so that about n bytes are free.
func (f *Filler) Leave(n int64) {
	f.t.Helper()
	fi, err := os.Stat(f.path)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.Truncate(f.path, max(0, fi.Size()-n)); err != nil {
		f.t.Fatal(err)
	}
}

// Free removes the filler.
func (f *Filler) Free() {
	f.t.Helper()
	if err := os.Remove(f.path); err != nil {
		f.t.Fatal(err)
	}
}

// Ext4 is an ext4 file system in an image file, mounted with
// errors=remount-ro, so that a disk error makes it read-only under the
// files open on it, as a real one does.
type Ext4 struct {
	t          testing.TB
	Dir        string // where it is mounted
	img, loop  string
	mounted    bool
	errTrigger string // the sysfs file that reports a disk error
}

// NewExt4 makes and mounts an ext4 file system of size bytes; it is
// unmounted and released when the test ends.
func NewExt4(t testing.TB, size int64) *Ext4 {
	t.Helper()
	needRoot(t)
	for _, tool := range []string{"mkfs.ext4", "losetup", "e2fsck", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, tool+" is not installed")
		}
	}
	base := t.TempDir()
	e := &Ext4{t: t, Dir: filepath.Join(base, "mnt"), img: filepath.Join(base, "ext4.img")}
	if err := os.Mkdir(e.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(e.img, size); err != nil {
		t.Fatal(err)
	}
	if err := run("mkfs.ext4", "-q", "-F", e.img); err != nil {
		unavailable(t, err.Error())
	}
	out, err := exec.Command("losetup", "-f", "--show", e.img).CombinedOutput()
	if err != nil {
		unavailable(t, fmt.Sprintf("losetup: %v: %s", err, bytes.TrimSpace(out)))
	}
	e.loop = strings.TrimSpace(string(out))
	e.errTrigger = filepath.Join("/sys/fs/ext4", filepath.Base(e.loop), "trigger_fs_error")
	t.Cleanup(func() {
		if e.mounted {
			if err := run("umount", e.Dir); err != nil {
				t.Errorf("unmount the test's ext4: %v", err)
			}
		}
		if err := run("losetup", "-d", e.loop); err != nil {
			t.Errorf("release the test's loop device: %v", err)
		}
	})
	e.mount()
	if _, err := os.Stat(e.errTrigger); err != nil {
		unavailable(t, "this kernel cannot simulate an ext4 disk error: "+err.Error())
	}
	return e
}

func (e *Ext4) mount() {
	e.t.Helper()
	if err := run("mount", "-t", "ext4", "-o", "errors=remount-ro", e.loop, e.Dir); err != nil {
		unavailable(e.t, err.Error())
	}
	e.mounted = true
}

// Fail reports a disk error to the file system, which makes it read-only
// at once: every later write fails with EROFS. What was written before is
// synced to the image first, so that it survives.
func (e *Ext4) Fail() {
	e.t.Helper()
	syncAll()
	if err := os.WriteFile(e.errTrigger, []byte("orrery test: simulated disk error\n"), 0o200); err != nil {
		e.t.Fatalf("simulate a disk error: %v", err)
	}
}

// Repair unmounts the file system, checks it and mounts it again, writable,
// as a person does after a disk error. Nothing may hold a file open on it.
func (e *Ext4) Repair() {
	e.t.Helper()
	if err := run("umount", e.Dir); err != nil {
		e.t.Fatalf("unmount the failed ext4: %v", err)
	}
	e.mounted = false
	// e2fsck exits 1 when it fixed something, as it may after an error.
	if out, err := exec.Command("e2fsck", "-f", "-y", e.loop).CombinedOutput(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() > 1 {
			e.t.Fatalf("e2fsck: %v: %s", err, bytes.TrimSpace(out))
		}
	}
	e.mount()
}
