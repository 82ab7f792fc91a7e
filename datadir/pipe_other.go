//go:build !unix

package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// privateDir makes dir when it is missing and checks that it is a
// directory.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("it cannot be made: %w", err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("it is not a directory (remove it, or give --data a shorter path)")
	}
	return nil
}
