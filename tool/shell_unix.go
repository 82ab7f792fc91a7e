//go:build unix

package tool

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// ownProcessGroup makes cmd start in a process group of its own and be
// cancelled by killing that whole group, so no child it started outlives it.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The group's id is the shell's pid (Setpgid with Pgid 0).
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}

// signalOf names the signal that ended a process, or "" if none did.
func signalOf(e *exec.ExitError) string {
	if ws, ok := e.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("signal %d (%s)", ws.Signal(), ws.Signal())
	}
	return ""
}
