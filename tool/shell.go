package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Shell limits, used when the Shell's own fields are zero.
const (
	DefaultShellTimeout    = 120 * time.Second
	DefaultShellMaxTimeout = 600 * time.Second
	DefaultShellMaxOutput  = 30000
)

// shellWaitDelay is how long a finished or killed command's output pipes may
// stay open (held by a process that left the group) before they are closed.
const shellWaitDelay = time.Second

const shellUsage = `{"command": "…", "timeout_ms"?: 120000}`

// Shell runs a command with /bin/sh -c in the workspace root. The command
// runs in its own process group, which is killed whole (SIGKILL) when the
// call times out or its context ends. Its stdout and stderr go to
// Call.Stream as they arrive and come back, interleaved, in the result.
// The command gets Orrery's environment without its secrets (see HideEnv),
// since whatever it prints is logged.
//
// The zero Shell uses the defaults: a 120 s timeout, at most 600 s on
// request, and 30 000 bytes of output kept; it hides only the variables
// whose values are URLs with credentials.
type Shell struct {
	// Timeout is the time a command may run when the call gives no
	// timeout_ms; zero means DefaultShellTimeout.
	Timeout time.Duration
	// MaxTimeout is the most a call may ask for with timeout_ms; zero means
	// DefaultShellMaxTimeout.
	MaxTimeout time.Duration
	// MaxOutput is how many bytes of output the result keeps (its head and
	// its tail, with a line saying how much was cut between); zero means
	// DefaultShellMaxOutput. Stream still receives everything.
	MaxOutput int
	// HideEnv names the variables of Orrery's environment a command does
	// not get, such as the model providers' keys: names or patterns as
	// MatchEnv reads them (GITHUB_TOKEN, AWS_*). PATH and HOME are always
	// passed. Whatever HideEnv says, a variable whose value holds a URL
	// with credentials (https://user:pass@host, ?api_key=…) is not.
	HideEnv []string
}

func (s Shell) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultShellTimeout
}

func (s Shell) maxTimeout() time.Duration {
	if s.MaxTimeout > 0 {
		return s.MaxTimeout
	}
	return DefaultShellMaxTimeout
}

func (s Shell) maxOutput() int {
	if s.MaxOutput > 0 {
		return s.MaxOutput
	}
	return DefaultShellMaxOutput
}

// Spec implements Tool.
func (s Shell) Spec() Spec {
	maxMS := s.maxTimeout().Milliseconds()
	return Spec{
		Name:         "shell",
		ShellSubject: true,
		Description: fmt.Sprintf("Runs a shell command with /bin/sh -c in the workspace root and returns its combined stdout and stderr, then its exit status. "+
			"The command times out after %s unless timeout_ms says otherwise (at most %d ms); on timeout its whole process group is killed. "+
			"Long output keeps its first and last %d bytes. To leave something running, start it in the background with its output redirected to a file. "+
			"Variables that hold secrets (model API keys, URLs with credentials, and those configured as hidden) are left out of its environment.",
			s.timeout(), maxMS, s.maxOutput()/2),
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"command":{"type":"string","minLength":1,"description":"The command line, run by /bin/sh -c in the workspace root."},`+
			`"timeout_ms":{"type":"integer","minimum":1,"maximum":%d,"description":"How long the command may run, in milliseconds (default %d)."}`+
			`},"required":["command"],"additionalProperties":false}`, maxMS, s.timeout().Milliseconds())),
	}
}

type shellArgs struct {
	Command   *string `json:"command"`
	TimeoutMS *int64  `json:"timeout_ms"`
}

func (s Shell) args(raw json.RawMessage) (shellArgs, *argsError) {
	var a shellArgs
	if err := decodeArgs("shell", shellUsage, raw, &a); err != nil {
		return a, err
	}
	if a.Command == nil {
		return a, missing("shell", shellUsage, "command")
	}
	if strings.TrimSpace(*a.Command) == "" {
		return a, &argsError{"shell", shellUsage, "command is empty"}
	}
	if a.TimeoutMS != nil {
		maxMS := s.maxTimeout().Milliseconds()
		if *a.TimeoutMS < 1 || *a.TimeoutMS > maxMS {
			return a, &argsError{"shell", shellUsage, fmt.Sprintf("timeout_ms %d is out of range; pass from 1 to %d, or run the command in the background with its output redirected to a file", *a.TimeoutMS, maxMS)}
		}
	}
	return a, nil
}

// Subject implements Subjecter: the command line.
func (s Shell) Subject(args json.RawMessage) (string, error) {
	a, err := s.args(args)
	if err != nil {
		return "", err
	}
	return *a.Command, nil
}

// Call implements Tool. A command that exits non-zero, is killed by a
// signal or times out is a Result with Error set; a call whose ctx ends
// first returns ctx's error, wrapped, after the process group is killed.
func (s Shell) Call(ctx context.Context, c Call) (Result, error) {
	a, aerr := s.args(c.Args)
	if aerr != nil {
		return aerr.result(), nil
	}
	dir, err := c.Workspace.Resolve(".")
	if err != nil {
		return Result{Text: err.Error(), Error: true}, nil
	}
	timeout := s.timeout()
	if a.TimeoutMS != nil {
		timeout = time.Duration(*a.TimeoutMS) * time.Millisecond
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cmd := exec.CommandContext(runCtx, "/bin/sh", "-c", *a.Command)
	cmd.Dir = dir
	cmd.Env = s.environ(os.Environ())
	ownProcessGroup(cmd)
	cmd.WaitDelay = shellWaitDelay
	out := &outputBuffer{limit: s.maxOutput(), stream: c.Stream}
	cmd.Stdout = out
	cmd.Stderr = out

	err = cmd.Run()
	out.flush()
	if cerr := ctx.Err(); cerr != nil {
		return Result{}, fmt.Errorf("shell %q: %w", *a.Command, cerr)
	}
	text := out.text()
	var exitErr *exec.ExitError
	switch {
	case err != nil && errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return Result{Text: text + fmt.Sprintf("timed out after %s; pass timeout_ms up to %d or run it in the background", timeout, s.maxTimeout().Milliseconds()), Error: true}, nil
	case err == nil:
		return Result{Text: text + "exit status 0"}, nil
	case errors.Is(err, exec.ErrWaitDelay):
		return Result{Text: text + "exit status 0; a background process kept the output open, so its later output is not shown: redirect its output to a file"}, nil
	case errors.As(err, &exitErr):
		if sig := signalOf(exitErr); sig != "" {
			return Result{Text: text + "killed by " + sig, Error: true}, nil
		}
		return Result{Text: text + fmt.Sprintf("exit status %d", exitErr.ExitCode()), Error: true}, nil
	default:
		return Result{Text: text + fmt.Sprintf("the command could not run: %v", err), Error: true}, nil
	}
}

// outputBuffer collects a command's output: everything up to limit bytes,
// and past that the first and last limit/2 bytes and a count of the rest. It
// passes each piece on to stream, holding back a UTF-8 sequence split
// between two writes until it is whole.
type outputBuffer struct {
	limit  int
	stream func(string)

	mu      sync.Mutex // guards the fields below
	head    []byte
	tail    []byte // the most recent bytes past head, at most limit/2 once cut
	total   int
	pending []byte // the start of a UTF-8 sequence not yet streamed
}

// Write implements io.Writer.
func (b *outputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += len(p)
	rest := p
	if room := b.limit - b.limit/2 - len(b.head); room > 0 {
		n := min(room, len(rest))
		b.head = append(b.head, rest[:n]...)
		rest = rest[n:]
	}
	b.tail = append(b.tail, rest...)
	if keep := b.limit / 2; len(b.tail) > 2*keep+4096 {
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-keep:]...)
	}
	if b.stream != nil {
		chunk := append(b.pending, p...)
		cut := completeUTF8(chunk)
		b.pending = append([]byte(nil), chunk[cut:]...)
		if cut > 0 {
			b.stream(string(chunk[:cut]))
		}
	}
	return len(p), nil
}

// flush streams what Write held back.
func (b *outputBuffer) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stream != nil && len(b.pending) > 0 {
		b.stream(string(b.pending))
	}
	b.pending = nil
}

// text returns the kept output, ending in a newline unless it is empty, with
// a line "… N bytes cut …" where output was cut.
func (b *outputBuffer) text() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sb strings.Builder
	if b.total <= b.limit {
		sb.Write(b.head)
		sb.Write(b.tail)
	} else {
		tail := b.tail[max(0, len(b.tail)-b.limit/2):]
		head, tail := trimUTF8(b.head, tail)
		sb.Write(head)
		if len(head) > 0 && head[len(head)-1] != '\n' {
			sb.WriteByte('\n')
		}
		fmt.Fprintf(&sb, "… %d bytes cut …\n", b.total-len(head)-len(tail))
		sb.Write(tail)
	}
	if sb.Len() > 0 && !strings.HasSuffix(sb.String(), "\n") {
		sb.WriteByte('\n')
	}
	return strings.ToValidUTF8(sb.String(), "\uFFFD")
}

// completeUTF8 returns the length of the longest prefix of p that does not
// end inside a UTF-8 sequence that later bytes could complete.
func completeUTF8(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				return i
			}
			break
		}
	}
	return len(p)
}

// trimUTF8 drops a partial UTF-8 sequence from the end of head and from the
// start of tail, where the output was cut.
func trimUTF8(head, tail []byte) ([]byte, []byte) {
	head = head[:completeUTF8(head)]
	for n := 0; n < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); n++ {
		tail = tail[1:]
	}
	return head, tail
}

// SubjectIn implements WorkspaceSubjecter: the command line, the same in
// every workspace.
func (s Shell) SubjectIn(_ Workspace, args json.RawMessage) (string, error) {
	return s.Subject(args)
}
