// Package datadir gives a data dir to one process at a time. A kernel holds
// an exclusive OS lock on DATA/orrery.lock (flock(2) on Unix, LockFileEx on
// Windows) for as long as it runs, so that exactly one process appends to
// the sessions' log; every other process that wants the data dir becomes a
// client of that one. Beside the lock, DATA/owner.json says who holds it
// (pid, start time, what it serves), so that the others can find it and
// name it to a person.
//
// The lock is the truth and the owner file only describes it: the OS
// releases the lock of a process that dies, however it dies, and the owner
// file such a process leaves behind describes nobody. Acquire takes a data
// dir whose lock is free whatever its owner file says, and replaces the
// file.
package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gofrs/flock"
)

// The files of a data dir this package names.
const (
	// LockFile is the file the lock is taken on. It is never removed:
	// removing a lock file lets two processes lock two different files.
	LockFile = "orrery.lock"
	// OwnerFile describes the holder (Owner, as JSON); it is removed when
	// the holder releases the lock.
	OwnerFile = "owner.json"
	// PipeFile is the Unix socket the holder serves its clients on, when
	// the data dir's path is short enough (PipePath).
	PipeFile = "orrery.sock"
)

// Owner describes the process that holds a data dir. The zero value of a
// field means the holder has not said (a holder that is still starting has
// not said where it listens yet; one that serves no HTTP never will).
type Owner struct {
	// PID is the holder's process id.
	PID int `json:"pid"`
	// Started is when the holder took the lock.
	Started time.Time `json:"started"`
	// Command is what the holder runs, such as "orrery serve".
	Command string `json:"command,omitempty"`
	// Listen is the URL of its HTTP listener, such as http://127.0.0.1:7411.
	Listen string `json:"listen,omitempty"`
	// Pipe is the path of the Unix socket it serves the protocol on.
	Pipe string `json:"pipe,omitempty"`
	// Roots are the directories its sessions may work in (a request's
	// cwd must be inside one).
	Roots []string `json:"roots,omitempty"`
	// Version is the holder's build version.
	Version string `json:"version,omitempty"`
}

// String names the holder for a person: "orrery serve (pid 1234, since
// 2006-01-02 15:04:05)".
func (o Owner) String() string {
	cmd := o.Command
	if cmd == "" {
		cmd = "an orrery process"
	}
	s := fmt.Sprintf("%s (pid %d", cmd, o.PID)
	if !o.Started.IsZero() {
		s += ", since " + o.Started.Local().Format(time.DateTime)
	}
	if o.Version != "" {
		s += ", version " + o.Version
	}
	return s + ")"
}

// ErrHeld is what a HeldError is: another process holds the data dir.
var ErrHeld = errors.New("datadir: held by another process")

// HeldError says that another process holds a data dir. errors.Is(err,
// ErrHeld) reports it.
type HeldError struct {
	// Dir is the data dir.
	Dir string
	// Owner is what the holder's owner file says, or nil when it says
	// nothing yet (the holder has just taken the lock) or describes a
	// process that is gone (the file is a dead holder's and the live one
	// has not replaced it yet).
	Owner *Owner
}

func (e *HeldError) Error() string {
	if e.Owner == nil {
		return fmt.Sprintf("the data dir %s is in use by another process, which has not said who it is yet", e.Dir)
	}
	return fmt.Sprintf("the data dir %s is in use by %s", e.Dir, e.Owner)
}

// Is reports whether target is ErrHeld.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lock is a held data dir. Its methods are safe for concurrent use.
type Lock struct {
	dir string
	fl  *flock.Flock
	// file is the lock file as it was when locked: Check compares the
	// file at its path with it.
	file os.FileInfo

	mu     sync.Mutex // guards owner, ownerErr and closed
	owner  Owner
	closed bool
	// ownerErr is why the owner file could not be written, or nil.
	ownerErr error
}

// Acquire takes dir's lock without waiting, creating dir (0700) and the
// lock file (0600) when missing, and writes the owner file (0600) from o,
// with o.PID set to this process and o.Started to now when zero. When
// another process (or another Lock in this one) holds dir, it returns a
// *HeldError naming the holder as far as its owner file tells.
//
// An owner file that cannot be written (the disk is full, say) does not
// keep the lock from this process: the lock is what holds the dir, and a
// process on a full disk must still be able to read its log. Any older
// owner file is removed instead, so that it describes nobody; OwnerErr
// says why, and the others see the dir held by a holder that has not said
// who it is yet.
func Acquire(dir string, o Owner) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the data dir %s: %w", dir, err)
	}
	fl := flock.New(filepath.Join(dir, LockFile), flock.SetPermissions(0o600))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock the data dir %s: %w", dir, err)
	}
	if !ok {
		return nil, heldError(dir)
	}
	o.PID = os.Getpid()
	if o.Started.IsZero() {
		o.Started = time.Now().Truncate(time.Second)
	}
	file, err := os.Stat(filepath.Join(dir, LockFile))
	if err != nil {
		_ = fl.Unlock()
		return nil, fmt.Errorf("look at the lock file of %s: %w", dir, err)
	}
	l := &Lock{dir: dir, fl: fl, owner: o, file: file}
	if err := writeOwner(dir, o); err != nil {
		l.ownerErr = err
		if rerr := os.Remove(filepath.Join(dir, OwnerFile)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			// A file that describes another process, and cannot go:
			// holding the dir under it would misname the holder.
			_ = fl.Unlock()
			return nil, errors.Join(err, fmt.Errorf("remove the old owner file of %s: %w", dir, rerr))
		}
	}
	return l, nil
}

// Check reports whether the lock still holds the data dir: nil, or an
// error that says what happened and what to do. The OS lock itself cannot
// be lost, but the file it is on can: a data dir removed, moved or
// restored from a backup under a running kernel leaves this process
// holding a file another process will not see, so a second kernel could
// open the dir's log.
func (l *Lock) Check() error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return fmt.Errorf("the data dir %s is released: this kernel is shutting down", l.dir)
	}
	path := filepath.Join(l.dir, LockFile)
	now, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("the lock file %s is gone (the data dir was removed or moved): another process could take the dir; stop this one, put the dir back, and start it again", path)
	case err != nil:
		return fmt.Errorf("look at the lock file %s: %w", path, err)
	case !os.SameFile(now, l.file):
		return fmt.Errorf("the lock file %s was replaced (the data dir was restored or copied over): this process no longer holds the dir others see; stop it and start it again", path)
	}
	return nil
}

// OwnerErr is why the owner file could not be written when the lock was
// taken or last updated, or nil once it was.
func (l *Lock) OwnerErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ownerErr
}

// heldError describes dir's holder from its owner file.
func heldError(dir string) *HeldError {
	o, err := ReadOwner(dir)
	if err != nil || o == nil || !alive(o.PID) {
		return &HeldError{Dir: dir}
	}
	return &HeldError{Dir: dir, Owner: o}
}

// Dir returns the data dir.
func (l *Lock) Dir() string { return l.dir }

// Owner returns what the owner file says now.
func (l *Lock) Owner() Owner {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.owner
}

// Update changes the owner file with f, which may set every field but PID
// and Started: a holder says where it listens once it does.
func (l *Lock) Update(f func(*Owner)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("datadir: update the owner file of a released lock")
	}
	o := l.owner
	f(&o)
	o.PID, o.Started = l.owner.PID, l.owner.Started
	if err := writeOwner(l.dir, o); err != nil {
		l.ownerErr = err
		return err
	}
	l.owner, l.ownerErr = o, nil
	return nil
}

// Close removes the owner file and releases the lock. It is safe to call
// more than once.
func (l *Lock) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	rerr := os.Remove(filepath.Join(l.dir, OwnerFile))
	if errors.Is(rerr, os.ErrNotExist) {
		rerr = nil
	}
	if err := l.fl.Unlock(); err != nil {
		return fmt.Errorf("unlock the data dir %s: %w", l.dir, err)
	}
	if rerr != nil {
		return fmt.Errorf("remove the owner file of %s: %w", l.dir, rerr)
	}
	return nil
}

// ReadOwner returns what dir's owner file says, or nil when there is none.
// It does not look at the lock: a file left by a holder that died
// describes nobody (Acquire's HeldError checks that its process is alive).
func ReadOwner(dir string) (*Owner, error) {
	data, err := os.ReadFile(filepath.Join(dir, OwnerFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the owner file of %s: %w", dir, err)
	}
	var o Owner
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, fmt.Errorf("read the owner file of %s: %w", dir, err)
	}
	return &o, nil
}

// writeOwner replaces dir's owner file with o at once: a reader sees the
// old file or the new one, never a part.
func writeOwner(dir string, o Owner) error {
	data, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the owner file: %w", err)
	}
	// CreateTemp makes the file 0600 whatever the umask.
	tmp, err := os.CreateTemp(dir, ".owner-*")
	if err != nil {
		return fmt.Errorf("write the owner file of %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(data, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, OwnerFile))
	}
	if err != nil {
		return fmt.Errorf("write the owner file of %s: %w", dir, err)
	}
	return nil
}
