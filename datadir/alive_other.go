//go:build !unix

package datadir

import "os"

// alive reports whether a process with id pid exists: on Windows, finding
// a process opens it, which fails for one that is gone.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
