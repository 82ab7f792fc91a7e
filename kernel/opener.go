package kernel

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
)

// SystemOpener opens links with the system's opener: explorer on Windows,
// open on macOS and xdg-open elsewhere. The target is the opener's one
// argument; no shell ever sees it. Only the host's own screen should use
// it (bare orrery): orrery serve and orrery run -p leave Config.Opener nil.
type SystemOpener struct {
	// Command replaces the system's opener, such as a test's script; empty
	// means the system's.
	Command string
}

var _ Opener = SystemOpener{}

// Open starts the opener on target and returns without waiting for it; a
// goroutine reaps it.
func (o SystemOpener) Open(_ context.Context, target string) error {
	name := o.Command
	if name == "" {
		switch runtime.GOOS {
		case "windows":
			name = "explorer"
		case "darwin":
			name = "open"
		default:
			name = "xdg-open"
		}
	}
	// The opener outlives the request that asked for it, so it does not
	// take the request's context.
	cmd := exec.Command(name, target)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("open %s with %s: %w; install %s or open it yourself", target, name, err, name)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
