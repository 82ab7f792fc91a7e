package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxBuffered bounds the updates kept for a session whose session/new has
// not answered yet; later ones are dropped with a warning.
const maxBuffered = 1000

// proc is one agent process serving one Orrery session.
type proc struct {
	a       *Agent
	session string // the Orrery session
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	conn    *Conn
	exited  chan struct{} // closed once the process has been waited for
	exitErr error         // the process's exit status, set before exited closes
	// stopping is set once Orrery itself ends the process (stop, kill):
	// an exit before it is a crash.
	stopping atomic.Bool

	idleMu    sync.Mutex  // guards idleTimer
	idleTimer *time.Timer // stops the process once idle (Config.IdleStop)

	init initResult // the initialize result

	stderrMu   sync.Mutex // guards stderrTail
	stderrTail []string   // the last lines the agent wrote on stderr (stderrLines)

	mu         sync.Mutex // guards the fields below
	acpSession string     // the agent's session id, once updates route
	// pendingSession is the agent's session id from session/new (or the
	// one resumed) until the first turn starts routing its updates.
	pendingSession string
	buffered       []json.RawMessage
	sink           router // the turn in flight, or nil
	perms          map[string]*permission
}

// router receives what the agent sends about the session; the turn in
// flight implements it.
type router interface {
	// update maps one raw session update; it runs on the reader goroutine.
	update(raw json.RawMessage)
	// permission handles a permission request; it runs on the reader
	// goroutine and must not wait for the answer.
	permission(p *proc, m *Message)
}

// initResult is the part of initialize's result the bridge reads.
type initResult struct {
	ProtocolVersion   int `json:"protocolVersion"`
	AgentCapabilities struct {
		LoadSession         bool `json:"loadSession"`
		SessionCapabilities struct {
			Resume json.RawMessage `json:"resume"`
		} `json:"sessionCapabilities"`
		PromptCapabilities struct {
			Image           bool `json:"image"`
			EmbeddedContext bool `json:"embeddedContext"`
		} `json:"promptCapabilities"`
		MCPCapabilities struct {
			HTTP bool `json:"http"`
			SSE  bool `json:"sse"`
		} `json:"mcpCapabilities"`
	} `json:"agentCapabilities"`
	AuthMethods []struct {
		ID          string `json:"id"`
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"authMethods"`
	AgentInfo struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"agentInfo"`
}

func (r initResult) canResume() bool {
	c := r.AgentCapabilities.SessionCapabilities.Resume
	return len(c) > 0 && string(c) != "null"
}

// start starts the agent's process in its own process group, with stdin
// and stdout as the ACP connection and stderr drained into the log.
func (a *Agent) start(session, cwd string) (*proc, error) {
	cmd := exec.Command(a.cfg.Command, a.cfg.Args...)
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), a.cfg.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start agent %s: %w", a.cfg.Name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start agent %s: %w", a.cfg.Name, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("start agent %s: %w", a.cfg.Name, err)
	}
	if !a.cfg.Limit.take() {
		return nil, &limitError{max: a.cfg.Limit.Max}
	}
	if err := cmd.Start(); err != nil {
		a.cfg.Limit.give()
		return nil, &startError{name: a.cfg.Name, command: a.cfg.Command, origin: a.cfg.Origin, err: err}
	}
	a.starts.Add(1)
	a.running.Add(1)
	p := &proc{a: a, session: session, cmd: cmd, stdin: stdin, exited: make(chan struct{}), perms: make(map[string]*permission)}
	log := a.log.With("agent", a.cfg.Name, "session", session, "pid", cmd.Process.Pid)
	p.conn = NewConn(stdin, p.handle, log)
	var readers sync.WaitGroup
	readers.Go(func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			log.Info("agent stderr", "line", line)
			p.stderrMu.Lock()
			p.stderrTail = append(p.stderrTail, clip([]byte(line), 300))
			if len(p.stderrTail) > stderrLines {
				p.stderrTail = p.stderrTail[len(p.stderrTail)-stderrLines:]
			}
			p.stderrMu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
	})
	readers.Go(func() { _ = p.conn.Serve(stdout) })
	go func() {
		readers.Wait()
		p.exitErr = cmd.Wait()
		if !p.stopping.Load() {
			a.crashes.Add(1)
		}
		a.running.Add(-1)
		a.cfg.Limit.give()
		p.conn.Close(p.exitError())
		close(p.exited)
		log.Info("agent exited", "status", p.exitErr)
	}()
	return p, nil
}

// idle starts (when the session's turn ended) or stops (when one begins)
// the timer that stops the process after Config.IdleStop.
func (p *proc) idle(now bool) {
	p.idleMu.Lock()
	defer p.idleMu.Unlock()
	if p.idleTimer != nil {
		p.idleTimer.Stop()
		p.idleTimer = nil
	}
	if now && p.a.cfg.IdleStop > 0 && !p.dead() {
		p.idleTimer = time.AfterFunc(p.a.cfg.IdleStop, func() { p.a.stopIdle(p) })
	}
}

// limitError is a process refused because the most that may run are.
type limitError struct{ max int }

func (e *limitError) Error() string {
	return fmt.Sprintf("%d ACP agent processes are running, the most [agents] max_processes allows: wait for one to stop (an idle one stops after [agents] idle_stop), or raise max_processes", e.max)
}

// startError is an agent command that could not be started.
type startError struct {
	name, command, origin string
	err                   error
}

func (e *startError) Error() string {
	origin := e.origin
	if origin == "" {
		origin = "[agents." + e.name + "]"
	}
	return fmt.Sprintf("the agent %s could not be started (%s: %v): install it, or fix the command in %s", e.name, e.command, e.err, origin)
}

func (e *startError) Unwrap() error { return e.err }

// stderrLines is how many of an agent's last stderr lines its errors quote.
const stderrLines = 5

// lastWords is the agent's last lines on stderr, for an error: "" when it
// wrote none, else "; its last words on stderr: …".
func (p *proc) lastWords() string {
	p.stderrMu.Lock()
	defer p.stderrMu.Unlock()
	if len(p.stderrTail) == 0 {
		return ""
	}
	return "; its last words on stderr: " + strings.Join(p.stderrTail, " | ")
}

// exitError describes how the process ended, with its last stderr lines.
func (p *proc) exitError() error {
	status := "it exited"
	if p.exitErr != nil {
		status = "it exited: " + p.exitErr.Error()
	}
	return errors.New(status + p.lastWords())
}

// dead reports whether the process has exited.
func (p *proc) dead() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop ends the process: it closes stdin and waits, then sends SIGTERM to
// its group and waits, then SIGKILL. Each wait is at most grace.
func (p *proc) stop(grace time.Duration) {
	p.stopping.Store(true)
	_ = p.stdin.Close()
	if p.waitExit(grace) {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	if p.waitExit(grace) {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// kill ends the process group at once.
func (p *proc) kill() {
	p.stopping.Store(true)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.stdin.Close()
	<-p.exited
}

func (p *proc) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// handle is the connection's Handler: the agent's requests and
// notifications, in arrival order.
func (p *proc) handle(m *Message) {
	switch m.Method {
	case "session/update":
		var params struct {
			SessionID string          `json:"sessionId"`
			Update    json.RawMessage `json:"update"`
		}
		if err := json.Unmarshal(m.Params, &params); err != nil || len(params.Update) == 0 {
			p.a.log.Warn("acp: skipped a session/update without an update", "agent", p.a.cfg.Name, "session", p.session, "err", err)
			return
		}
		p.route(params.SessionID, params.Update)
	case "session/request_permission":
		p.mu.Lock()
		sink := p.sink
		p.mu.Unlock()
		if sink == nil {
			// No turn is in flight, so nobody can be asked: fail closed.
			p.replyPermission(m.ID, failClosed(m.Params))
			return
		}
		sink.permission(p, m)
	case "$/cancel_request":
		var params struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if err := json.Unmarshal(m.Params, &params); err != nil {
			return
		}
		p.mu.Lock()
		perm := p.perms[string(params.RequestID)]
		p.mu.Unlock()
		if perm != nil {
			perm.finish(cancelledOutcome)
		}
	default:
		if m.IsRequest() {
			_ = p.conn.ReplyError(m.ID, CodeMethodNotFound, "Method not found: Orrery does not offer "+m.Method+" (it advertised no such capability)")
		}
	}
}

// route hands an update to the turn in flight, to the session outside a
// turn, or keeps it until session/new has answered.
func (p *proc) route(sessionID string, update json.RawMessage) {
	p.mu.Lock()
	if p.acpSession == "" {
		if len(p.buffered) < maxBuffered {
			p.buffered = append(p.buffered, update)
		} else {
			p.a.log.Warn("acp: dropped an update sent before session/new answered: too many", "agent", p.a.cfg.Name, "session", p.session)
		}
		p.mu.Unlock()
		return
	}
	if sessionID != p.acpSession {
		p.a.log.Warn("acp: update for another session id; routed to this session", "agent", p.a.cfg.Name, "session", p.session, "sessionId", sessionID)
	}
	sink := p.sink
	p.mu.Unlock()
	if sink != nil {
		sink.update(update)
		return
	}
	p.a.outside(p.session, update)
}

// setSession records the agent's session id and returns the updates that
// arrived before it.
func (p *proc) setSession(id string) []json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acpSession = id
	b := p.buffered
	p.buffered = nil
	return b
}

// setSink makes r receive the session's updates.
func (p *proc) setSink(r router) {
	p.mu.Lock()
	p.sink = r
	p.mu.Unlock()
}

// clearSink routes the session's updates outside any turn, if r still
// receives them.
func (p *proc) clearSink(r router) {
	p.mu.Lock()
	if p.sink == r {
		p.sink = nil
	}
	p.mu.Unlock()
}

// The outcomes of a permission request.
var cancelledOutcome = json.RawMessage(`{"outcome":{"outcome":"cancelled"}}`)

func selectedOutcome(option string) json.RawMessage {
	data, _ := json.Marshal(map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": option}})
	return data
}

func (p *proc) replyPermission(id json.RawMessage, outcome json.RawMessage) {
	if err := p.conn.Reply(id, outcome); err != nil {
		p.a.log.Warn("acp: answer a permission request", "agent", p.a.cfg.Name, "session", p.session, "err", err)
	}
}

// permission is a permission request waiting for its answer.
type permission struct {
	p      *proc
	id     json.RawMessage
	cancel context.CancelFunc // withdraws the question from clients
	once   sync.Once
}

// finish answers the request once; later calls do nothing.
func (perm *permission) finish(outcome json.RawMessage) {
	perm.once.Do(func() {
		perm.p.mu.Lock()
		delete(perm.p.perms, string(perm.id))
		perm.p.mu.Unlock()
		perm.p.replyPermission(perm.id, outcome)
		perm.cancel()
	})
}

// cancelPermissions answers every pending request with cancelled.
func (p *proc) cancelPermissions() {
	p.mu.Lock()
	perms := make([]*permission, 0, len(p.perms))
	for _, perm := range p.perms {
		perms = append(perms, perm)
	}
	p.mu.Unlock()
	for _, perm := range perms {
		perm.finish(cancelledOutcome)
	}
}

// permissionOption is one option of a permission request.
type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// pick returns the first option of kind, then of fallback; "" if none.
func pick(opts []permissionOption, kinds ...string) string {
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return o.OptionID
			}
		}
	}
	return ""
}

// failClosed is the answer when nobody can be asked: a reject option, or
// cancelled when the agent offers none.
func failClosed(params json.RawMessage) json.RawMessage {
	var req struct {
		Options []permissionOption `json:"options"`
	}
	_ = json.Unmarshal(params, &req)
	if id := pick(req.Options, "reject_once", "reject_always"); id != "" {
		return selectedOutcome(id)
	}
	return cancelledOutcome
}
