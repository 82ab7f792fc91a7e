// Package kernel hosts sessions. Each session is an actor: one goroutine
// owns its state, assigns every frame its seq, applies it, and hands it to
// a committer that makes it durable in the store before the hub publishes
// it to subscribers. Runs, steering and cancellation each have their own
// file; the agent loop reaches a session only through a Turn.
package kernel

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"
	"weak"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// Config is what a Kernel is built from. Store and Models are required.
type Config struct {
	// Store is the durable log.
	Store store.Log
	// Cluster, when set, shares Store with other nodes: a session another
	// node owns loads as a follower of it (follow.go).
	Cluster Cluster
	// Models turns a model spec into a provider.
	Models func(spec string) (agent.Provider, error)
	// DefaultModel is the spec of sessions that name none.
	DefaultModel string
	// Tools are the tools the kernel runs itself; nil means none.
	Tools *tool.Set
	// Searchable are tools kept out of every model request, which the
	// model finds with tools.search, such as MCP servers' tools. Their
	// names must not clash with Tools or the ui tools.
	Searchable *tool.Set
	// Prices turn usage into cost.
	Prices agent.PriceTable
	// Placements are the person's configured placements by id
	// ([ui.placements."<id>"]): a surface shown under that id goes there,
	// whatever its owner asked. An id nobody shows changes nothing.
	Placements map[string]string
	// Permissions are the rules on what each owner may do, such as
	// deny = ["ui(pane.right)"]; nil allows everything.
	Permissions ui.Permissions
	// Consent are the [permissions] rules every server tool call passes.
	Consent consent.Rules
	// ConsentTimeout is how long a consent request waits for an answer
	// before it is denied; 0 means DefaultConsentTimeout.
	ConsentTimeout time.Duration
	// AutoApprove allows every call the rules would ask about (orrery run
	// --yes). Deny rules still deny.
	AutoApprove bool
	// Workspace is where tools work: its Root is used for sessions that
	// name no cwd, and its Extra roots widen every session's workspace.
	Workspace tool.Workspace
	// MaxSteps bounds the model calls of one run; 0 means the agent default.
	MaxSteps int
	// MaxFilesVisited bounds the directory entries one WorkspaceFiles or
	// MatchWorkspaceFiles listing reads; 0 means DefaultFilesVisited.
	MaxFilesVisited int
	// QueueFrames bounds each subscriber's queue; 0 means DefaultQueueFrames.
	QueueFrames int
	// UnsavedFrames bounds the frames queued for the store and not yet
	// committed, across all sessions: past it, agent loops wait for the
	// store to catch up. 0 means DefaultUnsavedFrames.
	UnsavedFrames int
	// Logger receives the kernel's logs; nil means slog.Default().
	Logger *slog.Logger
	// Observer, when set, is told of every append a session makes (package
	// metrics counts them); nil costs nothing.
	Observer Observer
	// DebugActor makes every access to a session's owned state check that
	// it happens on the session's goroutine. Tests turn it on.
	DebugActor bool
	// Now replaces the clock for event timestamps and for pacing component
	// data updates (limits.dataUpdatesPerSec).
	Now func() time.Time
	// AfterFunc runs f after d, as time.AfterFunc does, and returns a
	// function that stops it. It paces coalesced data updates; nil means
	// time.AfterFunc. Tests pass a fake clock's.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// Limits bound components: limits.componentBytes, limits.dataBytes and
	// limits.dataUpdatesPerSec; zero fields mean the defaults.
	Limits component.Limits
	// Intents receives the committed actions on extensions' components:
	// the extension host implements it. Nil means no extension runs, so an
	// action on an extension's component is refused naming the fix.
	Intents IntentHandler
	// Opener opens a link on the host's own screen. Nil (orrery serve,
	// orrery run -p) opens nothing: the clients get a notice naming the
	// target instead.
	Opener Opener
	// Interrupted, when set, is the message of the RUN_ERROR interrupted
	// that the recover step closes a session's run left open with (orrery
	// db repair says the log was cut back); nil, or "" for a session, says
	// the server stopped during it.
	Interrupted func(session string) string
	// StoreCheck says how Open checks the store for damage when it is a
	// store.Checker; the zero value checks what is cheap before Open
	// returns and the rest in the background.
	StoreCheck StoreCheck
	// SessionLoaded, when set, is called each time a session is loaded
	// into memory, after it started and before anyone else can use it: the
	// extension host adds the session's extension tools and starts its
	// extensions from it. It must not block: start slow work on a goroutine.
	SessionLoaded func(*Session)
	// SessionUnloaded, when set, is called each time a session was
	// unloaded after a quiet spell (IdleUnload), once its goroutines
	// stopped: the extension host drops the session's extensions, which
	// SessionLoaded starts again when the session next loads. It must not
	// block or call the session.
	SessionUnloaded func(*Session)
	// IdleUnload is how long a session stays loaded with no run, no
	// subscriber and no Hold (an extension process) before it is unloaded:
	// its goroutines stop and its memory is freed, and it loads again from
	// its checkpoint on the next use. 0 keeps every session loaded until
	// Close; cmd/orrery sets [kernel] idle_unload (10 minutes by default).
	IdleUnload time.Duration
	// CheckpointEvery is how many frames a session logs between two
	// checkpoints of its state, when the store keeps checkpoints
	// (store.Checkpointer); a session also checkpoints at the end of each
	// run, when it unloads and at Close. 0 means DefaultCheckpointEvery;
	// a negative value writes none and reads none (every load rebuilds
	// from seq 0).
	CheckpointEvery int
}

// Kernel hosts sessions. Create it with New, start it with Open, stop it
// with Close.
type Kernel struct {
	cfg Config
	log *slog.Logger

	loadMu sync.Mutex // serialises loading sessions from the store
	live   liveHub    // session-list changes for WatchSessions

	components registry // extensions' declared components
	unsaved    *backlog // frames queued for the store and not yet committed

	mu        sync.Mutex // guards sessions, dormant, providers, damaged and closed
	sessions  map[string]*Session
	dormant   map[string]weak.Pointer[Session] // unloaded sessions something may still hold (unload.go)
	providers map[string]agent.Provider
	// damaged are the sessions refused because their logs are damaged.
	damaged map[string]*DamagedError
	closed  bool

	stopCheck func()        // stops the background check of the store, or nil
	checked   chan struct{} // closed when that check has ended

	stopChanges func() // stops taking the other nodes' session-list changes, or nil
}

// New returns a kernel with cfg's defaults filled in. It starts nothing.
func New(cfg Config) *Kernel {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AfterFunc == nil {
		cfg.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	return &Kernel{
		cfg:       cfg,
		log:       cfg.Logger,
		sessions:  make(map[string]*Session),
		providers: make(map[string]agent.Provider),
		damaged:   make(map[string]*DamagedError),
		checked:   make(chan struct{}),
		unsaved:   newBacklog(cfg.UnsavedFrames),
	}
}

func (k *Kernel) now() time.Time { return k.cfg.Now() }

// Open checks the configuration, checks the store for damage
// (Config.StoreCheck), and takes the recover step of every session whose
// log shows a run in flight (the process that ran it died): the run gets
// one RUN_ERROR interrupted when its session loads, so Open loads those
// sessions now, and the session list never shows a run running that
// nothing runs. A store whose session records are damaged refuses the
// start (a *StoreDamagedError); a damaged session is refused by name (a
// *DamagedError) and its open run left to orrery db repair.
func (k *Kernel) Open(ctx context.Context) error {
	if err := k.open(ctx); err != nil {
		close(k.checked)
		return err
	}
	if c := k.cfg.Cluster; c != nil {
		stop, err := c.WatchChanges(k.live.notify)
		if err != nil {
			close(k.checked)
			return err
		}
		k.stopChanges = stop
	}
	k.startFullCheck()
	return nil
}

func (k *Kernel) open(ctx context.Context) error {
	if k.cfg.Store == nil || k.cfg.Models == nil {
		return errors.New("kernel: Config.Store and Config.Models are required")
	}
	if _, err := k.provider(k.cfg.DefaultModel); err != nil {
		return fmt.Errorf("default model: %w", err)
	}
	if err := k.checkStore(ctx); err != nil {
		return err
	}
	sessions, err := k.cfg.Store.Sessions(ctx)
	if err != nil {
		return fmt.Errorf("open kernel: %w", err)
	}
	for _, info := range sessions {
		if info.OpenRun == "" {
			continue
		}
		_, err := k.Session(ctx, info.ID)
		var damaged *DamagedError
		if errors.As(err, &damaged) {
			continue // refused by name; orrery db repair closes its run
		}
		if err != nil {
			return fmt.Errorf("recover session %s: %w", info.ID, err)
		}
	}
	return nil
}

// Close ends every run in flight as interrupted, commits what is queued,
// checkpoints and stops every session. It waits until ctx ends at most.
func (k *Kernel) Close(ctx context.Context) error {
	if k.stopChanges != nil {
		k.stopChanges()
	}
	if k.stopCheck != nil {
		k.stopCheck()
		select {
		case <-k.checked:
		case <-ctx.Done():
		}
	}
	k.mu.Lock()
	k.closed = true
	sessions := make([]*Session, 0, len(k.sessions))
	for _, s := range k.sessions {
		sessions = append(sessions, s)
	}
	var dormant []*Session
	for _, w := range k.dormant {
		if s := w.Value(); s != nil {
			dormant = append(dormant, s)
		}
	}
	k.sessions = map[string]*Session{}
	k.dormant = nil
	k.mu.Unlock()
	// An unloaded session runs nothing, but a subscriber may still wait
	// on it, and the goroutine that unloaded it may still be writing its
	// checkpoint.
	var errs []error
	for _, s := range dormant {
		s.hub.close(ErrSessionClosed)
		s.lifeMu.RLock()
		a := s.act
		s.lifeMu.RUnlock()
		select {
		case <-a.exited:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("close session %s: %w", s.id, ctx.Err()))
		}
	}
	closed := make([]error, len(sessions))
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Go(func() {
			if err := s.close(ctx); err != nil {
				closed[i] = fmt.Errorf("close session %s: %w", s.id, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(append(errs, closed...)...)
}

// provider returns the provider for spec, resolving it once per kernel so
// that a provider's state (a script's position) lasts across runs.
func (k *Kernel) provider(spec string) (agent.Provider, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.providers[spec]; ok {
		return p, nil
	}
	p, err := k.cfg.Models(spec)
	if err != nil {
		return nil, err
	}
	k.providers[spec] = p
	return p, nil
}

// SessionOptions describe a new session.
type SessionOptions struct {
	// ID is the session's id; empty means the kernel picks one.
	ID    string
	Title string
	Model string
	Cwd   string
}

// ValidateSessionID reports whether id can name a session: 1 to 128
// printable characters without spaces.
func ValidateSessionID(id string) error {
	if id == "" || len(id) > 128 {
		return &RequestError{Msg: "a session id must be 1 to 128 characters long"}
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return &RequestError{Msg: fmt.Sprintf("session id %q has a space or control character: use letters, digits and punctuation", id)}
		}
	}
	return nil
}

// CreateSession creates a session and returns it.
func (k *Kernel) CreateSession(ctx context.Context, opts SessionOptions) (*Session, error) {
	if opts.ID == "" {
		opts.ID = newID("ses")
	}
	if err := ValidateSessionID(opts.ID); err != nil {
		return nil, err
	}
	if opts.Model != "" {
		if _, err := k.provider(opts.Model); err != nil {
			return nil, &RequestError{Msg: err.Error()}
		}
	}
	if opts.Cwd != "" {
		// The cwd is the session's workspace: the tools may reach only
		// below it, so it must be a real directory named absolutely.
		if !filepath.IsAbs(opts.Cwd) {
			return nil, &RequestError{Msg: fmt.Sprintf("cwd %q is not an absolute path: name the session's directory from the root, such as /home/me/project", opts.Cwd)}
		}
		if fi, err := os.Stat(opts.Cwd); err != nil || !fi.IsDir() {
			return nil, &RequestError{Msg: fmt.Sprintf("cwd %q is not a directory on the kernel's machine: name one that exists there, or omit cwd for the kernel's own", opts.Cwd)}
		}
		opts.Cwd = filepath.Clean(opts.Cwd)
	}
	info := store.Session{ID: opts.ID, Title: opts.Title, Model: opts.Model, Cwd: opts.Cwd, Created: k.now()}
	if err := k.cfg.Store.CreateSession(ctx, info); err != nil {
		if errors.Is(err, store.ErrSessionExists) {
			return nil, &RequestError{Msg: fmt.Sprintf("session %s already exists: pick another id, or omit it", opts.ID)}
		}
		return nil, fmt.Errorf("create session: %w", err)
	}
	s, err := k.Session(ctx, opts.ID)
	if err != nil {
		return nil, err
	}
	if err := s.do(ctx, func() { s.changed(SessionCreated) }); err != nil {
		return nil, err
	}
	return s, nil
}

// Session returns the session with id, loading it from the store on first
// use (and again after it was unloaded). An unknown id gives an error that
// wraps ErrUnknownSession.
func (k *Kernel) Session(ctx context.Context, id string) (*Session, error) {
	k.mu.Lock()
	s, ok := k.sessions[id]
	closed := k.closed
	damaged := k.damageLocked(id)
	k.mu.Unlock()
	if damaged != nil {
		return nil, damaged // even a session in memory: its log is not whole
	}
	if ok {
		return s, nil
	}
	if closed {
		return nil, ErrSessionClosed
	}
	k.loadMu.Lock()
	defer k.loadMu.Unlock()
	k.mu.Lock()
	s, ok = k.sessions[id]
	damaged = k.damageLocked(id)
	if !ok && damaged == nil {
		// One Session per id: an unloaded one that is still held loads
		// again in place.
		s = k.dormantSessionLocked(id)
	}
	k.mu.Unlock()
	if ok {
		return s, nil
	}
	if damaged != nil {
		return nil, damaged
	}
	if s != nil {
		if err := k.reloadLocked(ctx, s); err != nil {
			return nil, err
		}
		return s, nil
	}
	info, err := k.cfg.Store.Session(ctx, id)
	if err != nil {
		return nil, err
	}
	s = newSession(k, info)
	if err := k.bringUp(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Loaded counts the sessions in memory: those used since they were last
// unloaded (Config.IdleUnload), or since the kernel opened.
func (k *Kernel) Loaded() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.sessions)
}

// Sessions lists every session, newest first.
func (k *Kernel) Sessions(ctx context.Context) ([]protocol.SessionSummary, error) {
	infos, err := k.cfg.Store.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.SessionSummary, 0, len(infos))
	for _, info := range infos {
		k.mu.Lock()
		live := k.sessions[info.ID]
		k.mu.Unlock()
		sum := protocol.SessionSummary{
			ID: info.ID, Title: info.Title, Created: info.Created.UTC().Format(time.RFC3339),
			Head: info.Head, Running: info.OpenRun != "", MicroUSD: info.MicroUSD, Model: info.Model,
		}
		if live != nil {
			sum.Running = live.Running()
			sum.Head = max(sum.Head, live.Head())
		}
		k.mu.Lock()
		if d := k.damaged[info.ID]; d != nil {
			sum.Damaged = d.Error()
		}
		k.mu.Unlock()
		out = append(out, sum)
	}
	return out, nil
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID returns prefix_ and 16 random characters.
func newID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}
