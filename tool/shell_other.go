//go:build !unix

package tool

import "os/exec"

// ownProcessGroup keeps exec's default cancellation (killing the shell
// only): process groups are a Unix notion.
func ownProcessGroup(cmd *exec.Cmd) {}

// signalOf names the signal that ended a process; without Unix signals, "".
func signalOf(e *exec.ExitError) string { return "" }
