package ext

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// Defaults of Config's timings and limits.
const (
	// DefaultHeartbeat is how often a running extension is pinged.
	DefaultHeartbeat = 5 * time.Second
	// DefaultHeartbeatTimeout is how long a ping may wait for its answer
	// before the extension counts as hung: with DefaultHeartbeat, a crash
	// or a hang is noticed within 15 s.
	DefaultHeartbeatTimeout = 10 * time.Second
	// DefaultIdle is the quiet spell after which a non-resident extension
	// parks.
	DefaultIdle = 5 * time.Minute
	// DefaultLoadTimeout bounds the ext/load handshake.
	DefaultLoadTimeout = 30 * time.Second
	// MaxHeld is how many ui/* calls made during ext/load may wait.
	MaxHeld = 256
	// DefaultMaxQueued is how many ordered calls may wait unanswered before
	// the extension counts as flooding and is stopped.
	DefaultMaxQueued = 1024
	// DefaultMaxConcurrent is how many of its other calls may run at once;
	// more are refused until some finish.
	DefaultMaxConcurrent = 32
	// DefaultMaxRestarts is how many restarts in a row the supervisor tries
	// before it leaves the extension stopped.
	DefaultMaxRestarts = 5
)

// Config is what a Host is built from. Every zero field has a default.
type Config struct {
	// Extensions are the manifests to run in each session (see Discover).
	Extensions []*Manifest
	// Logger receives the host's logs and each extension's stderr.
	Logger *slog.Logger
	// LogDir, when set, keeps each extension's stderr in <LogDir>/<name>.log
	// (what orrery ext logs prints).
	LogDir string
	// Heartbeat, HeartbeatTimeout, Idle and LoadTimeout are the timings
	// above; BackoffMin and BackoffMax bound the supervisor's wait between
	// restarts (doubling from min).
	Heartbeat, HeartbeatTimeout, Idle, LoadTimeout time.Duration
	BackoffMin, BackoffMax                         time.Duration
	// MaxRestarts, MaxQueued, MaxConcurrent and MaxBody are the limits
	// above; MaxBody bounds one message (jsonrpc.DefaultMaxBody).
	MaxRestarts, MaxQueued, MaxConcurrent, MaxBody int
	// Hub is the kernel's event hub that hub/* calls use, each extension
	// seated as ext://<name>; nil refuses them.
	Hub *hub.Hub
	// Workspace is where a runtime "none" extension's actions run when the
	// session names no cwd of its own (the CLI passes its current
	// directory); empty means the extension's own directory.
	Workspace string
}

func (c *Config) defaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	setDur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	setDur(&c.Heartbeat, DefaultHeartbeat)
	setDur(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	setDur(&c.Idle, DefaultIdle)
	setDur(&c.LoadTimeout, DefaultLoadTimeout)
	setDur(&c.BackoffMin, 500*time.Millisecond)
	setDur(&c.BackoffMax, 30*time.Second)
	setInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	setInt(&c.MaxRestarts, DefaultMaxRestarts)
	setInt(&c.MaxQueued, DefaultMaxQueued)
	setInt(&c.MaxConcurrent, DefaultMaxConcurrent)
}

// Host runs extensions: one Instance of each manifest per session. Create
// it with New, pass it to the kernel with Wire (SessionLoaded and Intents),
// Attach the kernel before opening it, and stop the host with Close before
// the kernel.
type Host struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // ends the actions still running when the host closes
	cancel context.CancelFunc

	mu         sync.Mutex // guards k, hub, instances, registered, refused and closed
	k          *kernel.Kernel
	hub        *hub.Hub
	instances  map[string]map[string]*Instance
	registered map[string]bool  // extensions whose components the kernel holds
	refused    map[string]error // what the kernel refused of each manifest's components
	closed     bool
	wg         sync.WaitGroup

	countsMu sync.Mutex
	counts   map[string]ProcessCounts // by extension name
}

// ProcessCounts is what one extension's processes did since the host
// started, over every session.
type ProcessCounts struct {
	// Starts counts processes started; Crashes those that stopped
	// without being asked to (an exit, a hang, a broken protocol), each
	// followed by a restart unless the supervisor gave up.
	Starts, Crashes int
}

// Counts returns each extension's process counts, by name.
func (h *Host) Counts() map[string]ProcessCounts {
	h.countsMu.Lock()
	defer h.countsMu.Unlock()
	return maps.Clone(h.counts)
}

func (h *Host) count(name string, f func(*ProcessCounts)) {
	h.countsMu.Lock()
	defer h.countsMu.Unlock()
	if h.counts == nil {
		h.counts = map[string]ProcessCounts{}
	}
	c := h.counts[name]
	f(&c)
	h.counts[name] = c
}

var _ kernel.IntentHandler = (*Host)(nil)

// New returns a host with cfg's defaults filled in. It starts nothing.
func New(cfg Config) *Host {
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Host{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, hub: cfg.Hub, instances: make(map[string]map[string]*Instance),
		registered: make(map[string]bool), refused: make(map[string]error)}
}

// eventHub returns the hub hub/* calls use (Config.Hub), or nil. It is
// set when the host is made and never changes.
func (h *Host) eventHub() *hub.Hub { return h.hub }

// Wire sets the kernel configuration's SessionLoaded, SessionUnloaded and
// Intents to h.
func (h *Host) Wire(kc *kernel.Config) {
	kc.SessionLoaded = h.SessionLoaded
	kc.SessionUnloaded = h.SessionUnloaded
	kc.Intents = h
}

// Attach gives h the kernel it serves, and registers every extension's
// declared components ([[provides.components]]) and actions with it. Call
// it after kernel.New and before Kernel.Open, which may load sessions. The
// error names each component the kernel refused (its shows are refused
// with that problem); the extensions still load.
func (h *Host) Attach(k *kernel.Kernel) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.k = k
	var errs []error
	for _, m := range h.cfg.Extensions {
		if err := h.registerLocked(m); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// registerLocked registers m's components with the kernel, once. h.mu is
// held.
func (h *Host) registerLocked(m *Manifest) error {
	name := m.Extension.Name
	if h.k == nil || h.registered[name] {
		return h.refused[name]
	}
	decl := kernel.ExtensionUI{Runtime: m.Extension.Runtime}
	for _, c := range m.Provides.Components {
		decl.Components = append(decl.Components, kernel.DeclaredComponent{Name: c.Name, Structure: json.RawMessage(c.Structure), Schema: json.RawMessage(c.Schema)})
	}
	decl.Actions = sortedKeys(m.Provides.Actions)
	err := h.k.RegisterComponents(m.Owner(), decl)
	h.registered[name] = true
	if err != nil {
		err = fmt.Errorf("extension %s: %w", name, err)
		h.refused[name] = err
	} else {
		delete(h.refused, name)
	}
	return err
}

// unregisterLocked drops name's components from the kernel when no session
// runs it any more. h.mu is held.
func (h *Host) unregisterLocked(m *Manifest) {
	name := m.Extension.Name
	for _, set := range h.instances {
		if set[name] != nil {
			return
		}
	}
	if h.k != nil && h.registered[name] {
		h.k.UnregisterComponents(m.Owner())
	}
	delete(h.registered, name)
	delete(h.refused, name)
}

// ErrUnknownExtension means no extension has the name asked for.
var ErrUnknownExtension = errors.New("ext: unknown extension")

// SessionLoaded starts s's extensions: it adds every extension's declared
// tools to the session, and starts those that declare placements or
// subscribe to events, drawing their declared surfaces at once in a
// loading state. It is kernel.Config.SessionLoaded.
func (h *Host) SessionLoaded(s *kernel.Session) {
	h.mu.Lock()
	if h.closed || h.instances[s.ID()] != nil {
		h.mu.Unlock()
		return
	}
	set := make(map[string]*Instance, len(h.cfg.Extensions))
	var refused []error
	for _, m := range h.cfg.Extensions {
		set[m.Extension.Name] = newInstance(h, m, s)
		if err := h.registerLocked(m); err != nil {
			refused = append(refused, err)
		}
	}
	h.instances[s.ID()] = set
	h.mu.Unlock()
	ctx := context.Background()
	var start []*Instance
	for _, name := range sortedKeys(set) {
		in := set[name]
		if err := in.declare(ctx); err != nil {
			in.log.Warn("extension refused", "err", err)
			refused = append(refused, err)
			continue
		}
		if in.m.StartsWithSession() || len(in.m.Provides.Placements) > 0 {
			start = append(start, in)
		}
	}
	// The rest goes through the session's actor and the processes: not
	// while the kernel is still loading the session.
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for _, err := range refused {
			if nerr := s.Notify(ctx, "", "error", err.Error()); nerr != nil {
				h.log.Warn("notice", "err", nerr)
			}
		}
		for _, in := range start {
			in.drawLoading(ctx)
			if in.m.StartsWithSession() {
				// Counted before it starts, while this goroutine still
				// is: Close waits for it, and the Adds it makes come
				// while the count is above zero, never beside Close's
				// Wait at zero (which the race detector caught).
				h.wg.Add(1)
				go func() { defer h.wg.Done(); _, _ = in.ensure(ctx) }()
			}
		}
	}()
}

// SessionUnloaded drops s's extensions once the kernel unloaded s after a
// quiet spell: none of them had a process running (each running process
// holds its session, kernel.Session.Hold), so this stops only their
// restart timers. SessionLoaded starts them again when s loads. It is
// kernel.Config.SessionUnloaded.
func (h *Host) SessionUnloaded(s *kernel.Session) {
	h.mu.Lock()
	set := h.instances[s.ID()]
	delete(h.instances, s.ID())
	h.mu.Unlock()
	for _, in := range set {
		in.shutdown()
	}
}

// instance returns session's instance of name.
func (h *Host) instance(session, name string) (*Instance, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	in := h.instances[session][name]
	if in == nil {
		return nil, fmt.Errorf("%w: no extension %q runs in session %s; list them with orrery ext list", ErrUnknownExtension, name, session)
	}
	return in, nil
}

// Status describes one extension in one session: what ext.list and orrery
// ext list show.
type Status = protocol.ExtStatus

// The states an Instance is in.
const (
	StateIdle     = "idle"     // not started yet: it starts on first need
	StateStarting = "starting" // started, ext/load not answered yet
	StateRunning  = "running"
	StateParked   = "parked"  // a non-resident extension after a quiet spell
	StateStopped  = "stopped" // crashed, hung or refused; the supervisor may restart it
	StateFailed   = "failed"  // stopped for good: restart it by hand
	StateNone     = "none"    // runtime none: there is no process
)

// List returns the status of every extension in session, or in every
// session when session is "", sorted by session then name.
func (h *Host) List(session string) []Status {
	h.mu.Lock()
	var all []*Instance
	for sid, set := range h.instances {
		if session != "" && sid != session {
			continue
		}
		for _, in := range set {
			all = append(all, in)
		}
	}
	h.mu.Unlock()
	out := make([]Status, 0, len(all))
	for _, in := range all {
		out = append(out, in.Status())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Session != out[j].Session {
			return out[i].Session < out[j].Session
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Restart stops session's extension name, if it runs, and starts it again
// with a fresh restart count: what /ext restart <name> does.
func (h *Host) Restart(ctx context.Context, session, name string) error {
	in, err := h.instance(session, name)
	if err != nil {
		return err
	}
	return in.restart(ctx)
}

// Unload stops session's extension name and removes its surfaces and
// tools from the session.
func (h *Host) Unload(ctx context.Context, session, name string) error {
	in, err := h.instance(session, name)
	if err != nil {
		return err
	}
	h.mu.Lock()
	delete(h.instances[session], name)
	h.unregisterLocked(in.m)
	h.mu.Unlock()
	return in.unload(ctx)
}

// Intent delivers a committed action on a component an extension showed:
// a ui/event notification {id, action, value} to the extension's process,
// started again if it is parked, idle or waiting to be restarted. It is
// kernel.IntentHandler's Intent: an extension that is not loaded in the
// session, or cannot be started (it failed, was unloaded, or its program
// does not start), is refused with an error wrapping
// kernel.ErrOwnerNotRunning.
func (h *Host) Intent(ctx context.Context, it kernel.Intent) error {
	in, err := h.owner(it)
	if err != nil {
		return err
	}
	return in.intent(ctx, it.ID, it.Action, it.Value)
}

// RunAction runs [provides.actions.<it.Action>] of a runtime "none"
// extension: its command, in the extension's directory, with the value on
// stdin and in ORRERY_VALUE. It is kernel.IntentHandler's RunAction. A
// command that fails is reported as a warning notice in the session.
func (h *Host) RunAction(ctx context.Context, it kernel.Intent) error {
	in, err := h.owner(it)
	if err != nil {
		return err
	}
	return in.runAction(ctx, it.ID, it.Action, it.Value)
}

// owner returns the instance an intent goes to.
func (h *Host) owner(it kernel.Intent) (*Instance, error) {
	name, ok := it.Owner.Ext()
	if !ok {
		return nil, &kernel.RequestError{Msg: fmt.Sprintf("%s is not an extension: its actions do not go to the extension host", it.Owner)}
	}
	in, err := h.instance(it.Session, name)
	if err != nil {
		return nil, fmt.Errorf("%w: extension %s is not loaded in session %s", kernel.ErrOwnerNotRunning, name, it.Session)
	}
	return in, nil
}

// Close stops every extension process and waits for them to exit, at most
// until ctx ends. Surfaces stay in the sessions' logs as they were.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	var all []*Instance
	for _, set := range h.instances {
		for _, in := range set {
			all = append(all, in)
		}
	}
	h.instances = map[string]map[string]*Instance{}
	if h.k != nil {
		for _, m := range h.cfg.Extensions {
			if h.registered[m.Extension.Name] {
				h.k.UnregisterComponents(m.Owner())
			}
		}
	}
	h.registered = map[string]bool{}
	h.mu.Unlock()
	h.cancel()
	var wg sync.WaitGroup
	for _, in := range all {
		wg.Go(func() { in.shutdown() })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close extension host: %w", ctx.Err())
	}
}

// logFile opens the extension's log file for appending, or returns nil.
func (h *Host) logFile(name string) *os.File {
	if h.cfg.LogDir == "" {
		return nil
	}
	if err := os.MkdirAll(h.cfg.LogDir, 0o700); err != nil {
		h.log.Warn("extension log dir", "err", err)
		return nil
	}
	f, err := os.OpenFile(LogPath(h.cfg.LogDir, name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		h.log.Warn("extension log file", "ext", name, "err", err)
		return nil
	}
	return f
}

// LogPath is where an extension's stderr is kept under dir.
func LogPath(dir, name string) string { return filepath.Join(dir, name+".log") }
