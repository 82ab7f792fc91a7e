//go:build unix

package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// privateDir makes dir (0700) when it is missing and checks that it is a
// directory, not a link, of this user's own, that nobody else may enter.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("it cannot be made: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("it cannot be read: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("it is a link, not a directory (remove it, or give --data a shorter path)")
	case !fi.IsDir():
		return fmt.Errorf("it is not a directory (remove it, or give --data a shorter path)")
	case ok && int(st.Uid) != os.Getuid():
		return fmt.Errorf("it belongs to another user (uid %d): remove it, or give --data a shorter path", st.Uid)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("others may enter it (mode %o): chmod 700 it, or give --data a shorter path", fi.Mode().Perm())
	}
	return nil
}
