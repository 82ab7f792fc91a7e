package tool_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/getorrery/orrery/tool"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from linux/prctl.h.
const prSetChildSubreaper = 36

// TestShellCancelKillsGroup starts a command that leaves a background child
// and cancels the call: afterwards no process of the command's group may be
// alive. The test process makes itself a child subreaper, so the orphaned
// child becomes its own child and can be reaped here; otherwise the child's
// zombie would wait for an init that may never reap it, and kill(-pgid, 0)
// would still find it.
func TestShellCancelKillsGroup(t *testing.T) {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Skipf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	ws, _ := newWorkspace(t, map[string]string{})
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu  sync.Mutex
		out strings.Builder
	)
	pidc := make(chan int, 1)
	stream := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		out.WriteString(s)
		// The command prints its group id (the shell's pid), then the
		// background child's pid, once both run.
		if f := strings.Fields(out.String()); len(f) == 2 && strings.HasSuffix(out.String(), "\n") {
			pgid, _ := strconv.Atoi(f[0])
			pidc <- pgid
		}
	}
	errc := make(chan error, 1)
	go func() {
		_, err := tool.Shell{}.Call(ctx, tool.Call{Args: shellArgs("sleep 1000 & echo $$ $!; wait"), Workspace: ws, Stream: stream})
		errc <- err
	}()
	pgid := <-pidc
	if err := syscall.Kill(-pgid, 0); err != nil {
		t.Fatalf("kill(-%d, 0) before cancel = %v, want the group alive", pgid, err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Call() error = %v, want context.Canceled", err)
	}
	// Reap the orphaned members of the group. A blocking wait is used, as
	// the SIGKILL must end them; the timer only turns a hang into a failure.
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		for {
			var ws syscall.WaitStatus
			if _, err := syscall.Wait4(-pgid, &ws, 0, nil); err != nil {
				return // ECHILD: no member of the group is left to reap
			}
		}
	}()
	select {
	case <-reaped:
	case <-time.After(30 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		t.Fatalf("the process group %d still runs after the call was cancelled", pgid)
	}
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(-%d, 0) after cancel = %v, want ESRCH", pgid, err)
	}
}
