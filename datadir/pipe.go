package datadir

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// maxSocketPath is the longest Unix socket path this package makes: the
// sun_path of macOS holds 104 bytes with its NUL (Linux 108).
const maxSocketPath = 103

// bindSlack is what the pipe's listener adds to a socket's directory to
// bind it first in a private directory of its own there (/.pNNNNNNNNNN/s).
const bindSlack = 16

// pipeBase is where the pipes of data dirs too deep for a socket go, in a
// directory of the user's own: a fixed place, so that every process of the
// user finds the same one whatever its TMPDIR.
var pipeBase = "/tmp"

// PipePath returns where the holder of dir serves its pipe: dir/orrery.sock
// when that is short enough to be a Unix socket's path, and otherwise
// /tmp/orrery-UID/orrery-HASH.sock, HASH naming dir's absolute path, in a
// directory only this user may enter (made when missing). Both the holder
// and its clients call it, and neither trusts the owner file's pipe: a
// directory there that is not private (another user's, a link, or open to
// others) is an error, since a client would talk to whoever made it.
func PipePath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("find the data dir %s: %w", dir, err)
	}
	if len(abs)+bindSlack <= maxSocketPath {
		return filepath.Join(dir, PipeFile), nil
	}
	base := filepath.Join(pipeBase, fmt.Sprintf("orrery-%d", os.Getuid()))
	if err := privateDir(base); err != nil {
		return "", fmt.Errorf("the data dir %s is too deep for its pipe to be a socket there, so it goes in %s, but %w", dir, base, err)
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(base, "orrery-"+hex.EncodeToString(sum[:8])+".sock"), nil
}
