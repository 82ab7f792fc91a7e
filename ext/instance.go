package ext

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/getorrery/orrery/ext/jsonrpc"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/ui"
)

// Instance is one extension in one session: its process (when it has one),
// the surfaces it showed and its supervisor.
type Instance struct {
	h     *Host
	m     *Manifest
	s     *kernel.Session
	owner ui.Owner
	log   *slog.Logger

	mu         sync.Mutex // guards the fields below
	state      string
	proc       *process
	restarts   int    // restarts in a row since the last stable run
	lastErr    string // why it last stopped
	shown      map[string]shown
	registered map[string]ToolDecl // tools added with ext/register
	retry      *time.Timer
	gone       bool   // unloaded or host closed: never start again
	detach     func() // gives up the hub seat; nil without one
}

// shown is a surface the extension placed, to draw it stopped or remove it.
type shown struct {
	placement, title string
}

func newInstance(h *Host, m *Manifest, s *kernel.Session) *Instance {
	state := StateIdle
	if m.Extension.Runtime == RuntimeNone {
		state = StateNone
	}
	return &Instance{
		h: h, m: m, s: s, owner: m.Owner(), state: state, shown: make(map[string]shown),
		log: h.log.With("ext", m.Extension.Name, "session", s.ID()),
	}
}

// Status returns the instance's status.
func (in *Instance) Status() Status {
	in.mu.Lock()
	defer in.mu.Unlock()
	st := Status{
		Name: in.m.Extension.Name, Version: in.m.Extension.Version, Runtime: in.m.Extension.Runtime,
		Session: in.s.ID(), State: in.state, Resident: in.m.Extension.Resident, Restarts: in.restarts, Error: in.lastErr,
	}
	if in.proc != nil && in.proc.cmd.Process != nil {
		st.PID = in.proc.cmd.Process.Pid
	}
	return st
}

// declare adds the manifest's tools to the session (its components are
// the kernel's, registered by the host).
func (in *Instance) declare(ctx context.Context) error {
	if err := in.s.SetExtTools(in.owner, in.declaredTools()); err != nil {
		return fmt.Errorf("extension %s: %w", in.m.Extension.Name, err)
	}
	return nil
}

// drawLoading draws the declared placements in their loading state, or as
// their declared component with its first data.
func (in *Instance) drawLoading(ctx context.Context) {
	for _, p := range in.m.Provides.Placements {
		title := p.Title
		if title == "" {
			title = p.ID
		}
		si := kernel.ShowInput{ID: p.ID, Placement: p.Placement, Title: p.Title, Surface: textSurface(title + ": loading…")}
		if p.Component != "" {
			si.Surface, si.Component, si.Data = nil, p.Component, json.RawMessage(p.Data)
		}
		if err := in.show(ctx, si); err != nil {
			in.log.Warn("draw declared placement", "id", p.ID, "err", err)
		}
	}
}

func textSurface(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"kind": map[string]string{"t": "text", "value": text}})
	return b
}

// show places a surface for the extension and remembers it.
func (in *Instance) show(ctx context.Context, si kernel.ShowInput) error {
	if err := in.s.Show(ctx, in.owner, si); err != nil {
		return err
	}
	in.mu.Lock()
	in.shown[si.ID] = shown{placement: si.Placement, title: si.Title}
	in.mu.Unlock()
	return nil
}

// drawStopped shows every surface the extension placed as stopped, naming
// why and the fix.
func (in *Instance) drawStopped(ctx context.Context, why string) {
	in.mu.Lock()
	ids := sortedKeys(in.shown)
	all := make(map[string]shown, len(in.shown))
	for k, v := range in.shown {
		all[k] = v
	}
	in.mu.Unlock()
	for _, id := range ids {
		sh := all[id]
		text := fmt.Sprintf("stopped: %s. Restart it with /ext restart %s", why, in.m.Extension.Name)
		if err := in.s.Show(ctx, in.owner, kernel.ShowInput{ID: id, Placement: sh.placement, Title: sh.title, Surface: textSurface(text), Stopped: true}); err != nil {
			in.log.Warn("draw stopped surface", "id", id, "err", err)
		}
	}
}

// notice logs an orrery.notice from the extension in its session.
func (in *Instance) notice(ctx context.Context, level, text string) {
	if err := in.s.Notify(context.WithoutCancel(ctx), in.m.Extension.Name, level, text); err != nil {
		in.log.Warn("notice", "err", err)
	}
}

// ensure starts the process unless it runs, is starting, or the instance
// failed or is gone. It returns the running process, or why there is none.
func (in *Instance) ensure(ctx context.Context) (*process, error) {
	in.mu.Lock()
	switch {
	case in.gone:
		in.mu.Unlock()
		return nil, &kernel.RequestError{Msg: fmt.Sprintf("extension %s was unloaded: add it again with orrery ext add", in.m.Extension.Name)}
	case in.state == StateNone:
		in.mu.Unlock()
		return nil, &kernel.RequestError{Msg: fmt.Sprintf("extension %s has runtime \"none\": it has no process to call", in.m.Extension.Name)}
	case in.state == StateFailed:
		msg := fmt.Sprintf("extension %s stopped (%s): restart it with /ext restart %s", in.m.Extension.Name, in.lastErr, in.m.Extension.Name)
		in.mu.Unlock()
		return nil, &kernel.RequestError{Msg: msg}
	case in.proc != nil:
		p := in.proc
		in.mu.Unlock()
		return p, p.waitLoaded(ctx)
	}
	p, err := in.spawnLocked()
	if err == nil {
		// Counted like every goroutine of the host, under in.mu as the
		// process's own are, so that a shutdown (which marks in gone
		// under in.mu) comes before it or waits for it, and its own Adds
		// come while the count is above zero.
		in.h.wg.Add(1)
	}
	in.mu.Unlock()
	if err != nil {
		in.stopped(p, err)
		return nil, &kernel.RequestError{Msg: err.Error()}
	}
	go func() { defer in.h.wg.Done(); in.load(p) }()
	return p, p.waitLoaded(ctx)
}

// spawnLocked starts the process and its reader. in.mu is held.
func (in *Instance) spawnLocked() (*process, error) {
	x := in.m.Extension
	if in.retry != nil {
		in.retry.Stop()
		in.retry = nil
	}
	argv := append([]string(nil), x.Command...)
	if strings.HasPrefix(argv[0], "./") || strings.HasPrefix(argv[0], "../") {
		argv[0] = filepath.Join(in.m.Dir, argv[0])
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = in.m.Dir
	cmd.Env = environ(map[string]string{
		"ORRERY_EXT": x.Name, "ORRERY_SESSION": in.s.ID(), "ORRERY_EXT_API": API,
	})
	p := &process{in: in, cmd: cmd, loaded: make(chan struct{}), done: make(chan struct{}),
		queue: make(chan job, in.h.cfg.MaxQueued), sem: make(chan struct{}, in.h.cfg.MaxConcurrent), quit: make(chan struct{})}
	p.loading.Store(true)
	p.started = time.Now()
	p.touch()
	in.proc = p
	in.state = StateStarting
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return p, fmt.Errorf("start extension %s: %w", x.Name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return p, fmt.Errorf("start extension %s: %w", x.Name, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return p, fmt.Errorf("start extension %s: %w", x.Name, err)
	}
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		return p, fmt.Errorf("start extension %s: %w; check [extension] command in %s", x.Name, err, filepath.Join(in.m.Dir, ManifestFile))
	}
	in.h.count(x.Name, func(c *ProcessCounts) { c.Starts++ })
	// The session stays loaded while its extension's process runs.
	p.release = in.s.Hold()
	in.log.Info("extension started", "pid", cmd.Process.Pid)
	p.conn = jsonrpc.NewConn(stdout, stdin, in.h.cfg.MaxBody)
	stderrDone := make(chan struct{})
	in.h.wg.Add(3)
	go func() { defer in.h.wg.Done(); defer close(stderrDone); in.captureStderr(stderr) }()
	go func() { defer in.h.wg.Done(); p.ordered() }()
	go func() {
		defer in.h.wg.Done()
		err := p.conn.Run(p.handle, p.bad)
		if err != nil {
			p.fail(fmt.Sprintf("its output broke the protocol (%v)", err))
		}
		<-stderrDone
		werr := cmd.Wait()
		p.exited(werr)
	}()
	return p, nil
}

// captureStderr copies the process's stderr to the log and the log file.
func (in *Instance) captureStderr(r io.Reader) {
	f := in.h.logFile(in.m.Extension.Name)
	if f != nil {
		defer f.Close()
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		in.log.Info("extension stderr", "line", line)
		if f != nil {
			fmt.Fprintf(f, "%s %s %s\n", time.Now().UTC().Format(time.RFC3339), in.s.ID(), line)
		}
	}
}

// load runs the ext/load handshake and then supervises the process.
func (in *Instance) load(p *process) {
	ctx, cancel := context.WithTimeout(context.Background(), in.h.cfg.LoadTimeout)
	defer cancel()
	params := map[string]any{
		"api": API, "name": in.m.Extension.Name, "version": in.m.Extension.Version,
		"session": in.s.ID(), "placements": placementsOf(in.m),
	}
	err := in.call(ctx, p, "ext/load", params, nil)
	p.loading.Store(false)
	if err != nil {
		p.fail(fmt.Sprintf("it did not answer ext/load (%v)", err))
		return
	}
	in.mu.Lock()
	if in.proc == p && in.state == StateStarting {
		in.state = StateRunning
	}
	in.mu.Unlock()
	close(p.loaded)
	in.log.Info("extension loaded")
	in.h.wg.Add(1)
	go func() { defer in.h.wg.Done(); p.heartbeat() }()
	if len(in.m.Subscribe.Events) > 0 {
		in.h.wg.Add(1)
		go func() { defer in.h.wg.Done(); p.forwardEvents() }()
	}
}

func placementsOf(m *Manifest) []PlacementDecl {
	if m.Provides.Placements == nil {
		return []PlacementDecl{}
	}
	return m.Provides.Placements
}

// stopped is called once p ended unexpectedly: it draws the surfaces
// stopped and schedules a restart with backoff, or gives up.
func (in *Instance) stopped(p *process, err error) {
	why := err.Error()
	in.mu.Lock()
	if in.proc != p {
		in.mu.Unlock()
		return
	}
	in.proc = nil
	if in.gone || p.parking.Load() {
		if !in.gone {
			in.state = StateParked
		}
		in.mu.Unlock()
		return
	}
	in.lastErr = why
	in.h.count(in.m.Extension.Name, func(c *ProcessCounts) { c.Crashes++ })
	stable := time.Since(p.started) > time.Minute
	if stable {
		in.restarts = 0
	}
	in.state = StateStopped
	giveUp := in.restarts >= in.h.cfg.MaxRestarts
	if giveUp {
		in.state = StateFailed
	} else {
		wait := in.h.cfg.BackoffMin << in.restarts
		if wait > in.h.cfg.BackoffMax || wait <= 0 {
			wait = in.h.cfg.BackoffMax
		}
		in.restarts++
		in.retry = time.AfterFunc(wait, func() {
			in.mu.Lock()
			idle := in.proc == nil && !in.gone && in.state == StateStopped
			in.mu.Unlock()
			if idle {
				in.ensure(context.Background())
			}
		})
	}
	in.mu.Unlock()
	ctx := context.Background()
	in.log.Warn("extension stopped", "why", why, "restarting", !giveUp)
	fix := fmt.Sprintf("restart it with /ext restart %s", in.m.Extension.Name)
	if !giveUp {
		fix = "restarting it"
	}
	in.notice(ctx, "error", fmt.Sprintf("extension %s stopped: %s; %s", in.m.Extension.Name, why, fix))
	in.drawStopped(ctx, why)
}

// restart stops the process (if any) and starts it again.
func (in *Instance) restart(ctx context.Context) error {
	in.mu.Lock()
	if in.state == StateNone {
		in.mu.Unlock()
		return &kernel.RequestError{Msg: fmt.Sprintf("extension %s has runtime \"none\": there is no process to restart", in.m.Extension.Name)}
	}
	p := in.proc
	in.proc = nil
	in.restarts = 0
	in.lastErr = ""
	in.state = StateIdle
	in.mu.Unlock()
	if p != nil {
		p.stop()
	}
	_, err := in.ensure(ctx)
	return err
}

// unload stops the process and removes the extension's surfaces, tools
// and component data from the session.
func (in *Instance) unload(ctx context.Context) error {
	in.shutdown()
	var errs []error
	if err := in.s.SetExtTools(in.owner, nil); err != nil {
		errs = append(errs, err)
	}
	if err := in.s.RemoveOwner(ctx, in.owner); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// shutdown stops the process for good and gives up its hub seat.
func (in *Instance) shutdown() {
	in.unseat()
	in.mu.Lock()
	in.gone = true
	p := in.proc
	in.proc = nil
	if in.retry != nil {
		in.retry.Stop()
	}
	in.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// intent delivers a committed action to the process, starting it when it
// is not running; one that cannot be started is kernel.ErrOwnerNotRunning.
func (in *Instance) intent(ctx context.Context, id, action string, value json.RawMessage) error {
	if in.m.Extension.Runtime == RuntimeNone {
		return fmt.Errorf("%w: extension %s has runtime \"none\" and declares no action %q", kernel.ErrOwnerNotRunning, in.m.Extension.Name, action)
	}
	p, err := in.ensure(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("%w: %w", kernel.ErrOwnerNotRunning, err)
	}
	if len(value) == 0 {
		value = json.RawMessage("null")
	}
	p.touch()
	return in.notify(ctx, p, "ui/event", map[string]any{"id": id, "action": action, "value": value})
}

// runAction starts a runtime "none" extension's declared action and
// returns once it started; its end is announced with a notice (a warning
// naming the exit status when it failed). It runs in the session's
// workspace (its cwd, else Config.Workspace, else the extension's dir),
// with the value on stdin and in ORRERY_VALUE, and is stopped when the host
// closes.
func (in *Instance) runAction(ctx context.Context, id, action string, value json.RawMessage) error {
	name := in.m.Extension.Name
	a, ok := in.m.Provides.Actions[action]
	if !ok || len(a.Command) == 0 {
		return &kernel.RequestError{Msg: fmt.Sprintf("extension %s declares no action %q: declare it as [provides.actions.%s] with a command in its orrery.toml", name, action, action)}
	}
	argv := append([]string(nil), a.Command...)
	if strings.HasPrefix(argv[0], "./") || strings.HasPrefix(argv[0], "../") {
		argv[0] = filepath.Join(in.m.Dir, argv[0])
	}
	dir := in.h.cfg.Workspace
	if info, err := in.s.Info(ctx); err == nil && info.Cwd != "" {
		dir = info.Cwd
	}
	if dir == "" {
		dir = in.m.Dir
	}
	if len(value) == 0 {
		value = json.RawMessage("null")
	}
	cmd := exec.CommandContext(in.h.ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = environ(map[string]string{"ORRERY_EXT": name, "ORRERY_EXT_API": API, "ORRERY_SESSION": in.s.ID(), "ORRERY_ID": id, "ORRERY_ACTION": action, "ORRERY_VALUE": string(value)})
	cmd.Stdin = bytes.NewReader(value)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return &kernel.RequestError{Msg: fmt.Sprintf("action %s of extension %s did not start: %v; fix [provides.actions.%s] command in %s", action, name, err, action, filepath.Join(in.m.Dir, ManifestFile))}
	}
	in.log.Info("action started", "action", action, "pid", cmd.Process.Pid)
	release := in.s.Hold()
	in.h.wg.Add(1)
	go func() {
		defer in.h.wg.Done()
		defer release()
		err := cmd.Wait()
		text := strings.TrimSpace(out.String())
		in.log.Info("action ended", "action", action, "output", text, "err", err)
		if f := in.h.logFile(name); f != nil {
			fmt.Fprintf(f, "%s %s action %s: %v\n%s\n", time.Now().UTC().Format(time.RFC3339), in.s.ID(), action, err, text)
			f.Close()
		}
		ctx := context.Background()
		if err != nil {
			in.notice(ctx, "warning", fmt.Sprintf("action %s of extension %s failed (%v): see orrery ext logs %s", action, name, err, name))
			return
		}
		in.notice(ctx, "info", fmt.Sprintf("action %s of extension %s finished", action, name))
	}()
	return nil
}

// passed are the variables of Orrery's own environment an extension
// inherits: what finding programs, a home and a locale need. Model keys
// and anything else stay out.
var passed = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ", "SYSTEMROOT", "APPDATA", "LOCALAPPDATA", "USERPROFILE", "GOCACHE", "GOPATH"}

// environ returns a minimal environment with extra laid over it.
func environ(extra map[string]string) []string {
	var out []string
	for _, k := range passed {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	for _, k := range sortedKeys(extra) {
		out = append(out, k+"="+extra[k])
	}
	return out
}

// process is one run of an extension's program.
type process struct {
	in      *Instance
	cmd     *exec.Cmd
	stdin   io.Closer
	conn    *jsonrpc.Conn
	started time.Time
	// release lets the session unload again once the process exited.
	release func()

	loading atomic.Bool   // ext/load is being answered
	held    atomic.Int32  // ui/* calls answered during ext/load, not yet applied
	loaded  chan struct{} // closed once ext/load is answered
	queue   chan job      // ordered calls, in the order read
	sem     chan struct{} // bounds the other calls in flight
	quit    chan struct{} // closed when the process is being stopped
	done    chan struct{} // closed when the process exited

	parking  atomic.Bool  // stopped on purpose (park or unload)
	lastSeen atomic.Int64 // unix nanos of the last message either way
	failOnce sync.Once
	quitOnce sync.Once
	exitErr  error
	why      atomic.Pointer[string]
}

// job is one ordered call.
type job struct {
	m    *jsonrpc.Message
	held bool // already answered {} during ext/load
}

func (p *process) touch() { p.lastSeen.Store(time.Now().UnixNano()) }

// waitLoaded waits for ext/load to be answered or the process to end.
func (p *process) waitLoaded(ctx context.Context) error {
	select {
	case <-p.loaded:
		return nil
	case <-p.done:
		return &kernel.RequestError{Msg: fmt.Sprintf("extension %s stopped before it loaded (%s): see orrery ext logs %s", p.in.m.Extension.Name, p.reason(), p.in.m.Extension.Name)}
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *process) reason() string {
	if w := p.why.Load(); w != nil {
		return *w
	}
	if p.exitErr != nil {
		return "it exited: " + p.exitErr.Error()
	}
	return "it exited"
}

// fail kills the process for why; the supervisor takes it from there.
func (p *process) fail(why string) {
	p.failOnce.Do(func() {
		p.why.Store(&why)
		p.in.log.Warn("killing extension", "why", why)
		p.kill()
	})
}

func (p *process) kill() {
	p.quitOnce.Do(func() { close(p.quit) })
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
}

// stop ends the process on purpose: stdin closes, and it is killed if it
// has not exited a second later.
func (p *process) stop() {
	p.parking.Store(true)
	p.quitOnce.Do(func() { close(p.quit) })
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
	select {
	case <-p.done:
	case <-time.After(time.Second):
		p.kill()
		<-p.done
	}
}

// exited runs once the process ended and its output was read.
func (p *process) exited(err error) {
	p.exitErr = err
	if p.release != nil {
		p.release()
	}
	p.quitOnce.Do(func() { close(p.quit) })
	close(p.done)
	if p.parking.Load() {
		p.in.stopped(p, errors.New("stopped"))
		return
	}
	p.in.stopped(p, errors.New(p.reason()))
}

// heartbeat pings the extension; one that does not answer in time is hung
// and is killed. It also parks a non-resident extension after a quiet
// spell.
func (p *process) heartbeat() {
	cfg := p.in.h.cfg
	t := time.NewTicker(cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		if !p.in.m.Extension.Resident && time.Since(time.Unix(0, p.lastSeen.Load())) > cfg.Idle {
			p.in.log.Info("parking extension after a quiet spell")
			// Detached at once: a call from now on starts a new process
			// rather than reaching this one while it stops.
			p.in.mu.Lock()
			if p.in.proc == p {
				p.in.state = StateParked
				p.in.proc = nil
			}
			p.in.mu.Unlock()
			go p.stop()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), cfg.HeartbeatTimeout)
		err := p.conn.Call(ctx, "ext/ping", nil, nil)
		cancel()
		if err != nil {
			select {
			case <-p.quit:
				return
			case <-p.done:
				return
			default:
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return // the connection ended: exited says why
			}
			p.fail(fmt.Sprintf("it did not answer a heartbeat within %s (hung)", cfg.HeartbeatTimeout))
			return
		}
	}
}
