package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/getorrery/orrery"
	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/acp"
	"github.com/getorrery/orrery/agent/ask"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/agent/subagent"
	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/datadir"
	"github.com/getorrery/orrery/ext"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/hub/hubtool"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/metrics"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/termtext"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/tool/mcp"
	"github.com/getorrery/orrery/ui/component"
)

// commonFlags are the flags every command that uses the data dir takes.
type commonFlags struct {
	configPath string
	data       string
	model      string
	agent      string
	// modelWhy says why the model was chosen, when config named none.
	modelWhy string
	// apply, when set, applies a command's own flags to the config before
	// it is checked.
	apply func(*config.Config) error
}

func (c *commonFlags) register(fs *flag.FlagSet, withModel bool) {
	fs.StringVar(&c.configPath, "config", "", "config file (default $ORRERY_CONFIG, then "+config.DefaultFile()+")")
	fs.StringVar(&c.data, "data", "", "data directory (default $ORRERY_DATA, then "+config.DefaultDataDir()+")")
	if withModel {
		fs.StringVar(&c.model, "model", "", "model: offline, openai:NAME, anthropic:NAME, an alias from [models], or script:PATH (default agent.model, $ORRERY_MODEL, then by the key set: ANTHROPIC_API_KEY, OPENAI_API_KEY, else offline)")
		fs.StringVar(&c.agent, "agent", "", "run sessions with an external ACP agent instead of the built-in one: a NAME from [agents.<name>], or 'acp:COMMAND ARGS…'")
	}
}

// load reads the configuration and applies the flags over it.
func (c *commonFlags) load(e *env) (config.Config, error) {
	cfg, err := config.Read(c.configPath, e.getenv)
	if err != nil {
		return cfg, err
	}
	if c.data != "" {
		cfg.Store.Data = c.data
	}
	if c.model != "" {
		cfg.Agent.Model = c.model
	}
	if c.agent != "" {
		if c.model != "" {
			return cfg, &usageError{msg: "--model and --agent both name who answers: give one (an ACP agent runs its own model)"}
		}
		if _, ok := cfg.Agents[c.agent]; !ok && !strings.HasPrefix(c.agent, "acp:") {
			return cfg, &usageError{msg: fmt.Sprintf("--agent %q names no [agents.%s] in the config: add that table (command, args, env), or use --agent 'acp:COMMAND ARGS…'", c.agent, c.agent)}
		}
		cfg.Agent.Model = acp.Spec(c.agent)
	}
	if cfg.Agent.Model == "" {
		cfg.Agent.Model, c.modelWhy = models.Auto(e.getenv)
	}
	if c.apply != nil {
		if err := c.apply(&cfg); err != nil {
			return cfg, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, e.startTracing(cfg.Telemetry)
}

// embedded is a kernel on the data dir's store, with its event hub, and its
// MCP servers and extension host when it has them. It holds the data dir
// (lock) until Close.
type embedded struct {
	lock   *datadir.Lock
	store  store.Log
	kernel *kernel.Kernel
	mcp    *mcp.Set
	agents *acpAgents
	hub    *hub.Hub
	ext    *ext.Host // nil without extensions
	// metrics counts the kernel's work for GET /metrics.
	metrics *metrics.Metrics
}

// openKernel takes cfg's data dir for this process (datadir.Acquire: a
// *datadir.HeldError when another process holds it, whose client the caller
// may become), opens the store in it and starts a kernel on it, closing
// any run a dead process left in flight; it warns when the data
// dir or its files are open to other users (warnOpenModes). Tools work in
// the current directory unless a session names its own cwd; the shell
// tool's commands get Orrery's environment without the models' keys and
// shell.hide_env (config.HiddenEnv). opts adjust the kernel's
// config last (orrery run's --yes). With withProcs it starts the configured
// MCP servers, whose tools the model finds with tools.search (a server that
// fails to start is reported and left out), and the extensions found in the
// project's .orrery/extensions and the user's (a refused manifest is
// reported and left out).
//
// Every kernel has one event hub. Its agents get the task tool, and find
// the hub tools and ask with tools.search; each session's own agent is
// agent://{session}/main on the hub (hubtool.SessionSelf). A sub-agent the
// task tool starts joins the hub for as long as it runs (hub.Join and
// hub.Leave).
func openKernel(ctx context.Context, e *env, cfg config.Config, log *slog.Logger, withProcs bool, opts ...func(*kernel.Config)) (*embedded, error) {
	resolver := &models.Resolver{Aliases: cfg.Models, Getenv: e.getenv, Logger: log}
	agents := newACPAgents(cfg, log, resolver.Resolve)
	if _, err := agents.resolve(cfg.Agent.Model); err != nil {
		return nil, &usageError{msg: err.Error()}
	}
	lock, err := datadir.Acquire(cfg.Store.Data, datadir.Owner{Version: orrery.Version})
	if err != nil {
		return nil, err
	}
	if err := lock.OwnerErr(); err != nil {
		log.Warn("holding the data dir without saying who holds it: other commands on it will wait for this one, then give up", "err", err)
	}
	st, err := openStore(ctx, cfg, log)
	if err != nil {
		lock.Close()
		return nil, err
	}
	warnOpenModes(log, cfg)
	cwd, err := os.Getwd()
	if err != nil {
		st.Close()
		lock.Close()
		return nil, fmt.Errorf("find the current directory, the default workspace: %w", err)
	}
	kc := kernel.Config{
		Cluster:        kernelCluster(st),
		Store:          st,
		Models:         agents.resolve,
		DefaultModel:   cfg.Agent.Model,
		Tools:          tool.NewSet(append([]tool.Tool{tool.Clock{}, tool.Echo{}}, tool.Coding(tool.Shell{HideEnv: cfg.HiddenEnv()})...)...),
		Prices:         agent.DefaultPrices.Merge(cfg.Prices),
		Permissions:    cfg.Permissions.UI(),
		Consent:        cfg.Permissions.Rules,
		ConsentTimeout: cfg.Consent.Timeout.Duration,
		Workspace:      tool.Workspace{Root: cwd, Extra: cfg.Workspace.Extra},
		Placements:     cfg.PlacementOverrides(),
		MaxSteps:       cfg.Agent.MaxSteps,
		Limits:         component.Limits{ComponentBytes: cfg.Limits.ComponentBytes, DataBytes: cfg.Limits.DataBytes, DataUpdatesPerSec: cfg.Limits.DataUpdatesPerSec},
		Logger:         log,
	}
	kc.IdleUnload, kc.CheckpointEvery = cfg.Kernel.IdleUnload.Duration, cfg.Kernel.CheckpointEvery
	h := hub.NewWithOptions(hub.Options{Logger: log})
	kc.Tools = withTools(kc.Tools, subagent.TaskTool{
		// Read when called, so an option that wraps kc.Models applies. A
		// model names its sub-agent's model in a tool call, which a prompt
		// may have steered: it may name only what a request may.
		Models: func(spec string) (agent.Provider, error) {
			if err := specPolicy(cfg).Check(spec); err != nil {
				return nil, err
			}
			return kc.Models(spec)
		},
		// A sub-agent has a mailbox while it runs, and the hub releases
		// it when the sub-agent ends.
		OnStart: func(addr string) { _ = h.Join(addr) },
		OnEnd:   h.Leave,
		Self:    hubtool.SessionSelf,
	})
	kc.Searchable = withTools(kc.Searchable, append(hubtool.NewFor(h, hubtool.SessionSelf), ask.Tool{})...)
	var host *ext.Host
	if withProcs {
		host = openExtensions(e, cfg, log, cwd, h)
		if host != nil {
			host.Wire(&kc)
		}
	}
	var servers *mcp.Set
	if withProcs && len(cfg.MCP.Servers) > 0 {
		cctx, cancel := context.WithTimeout(ctx, cfg.MCP.ConnectTimeout.Duration)
		servers, err = mcp.ConnectAll(cctx, cfg.MCP.Servers, log)
		cancel()
		if err != nil {
			fmt.Fprintf(e.stderr, "orrery: some MCP servers did not start, and their tools are missing: %s\n", termtext.Visible(err.Error()))
		}
		kc.Searchable = withTools(kc.Searchable, servers.Tools()...)
	}
	for _, o := range opts {
		o(&kc)
	}
	kc.Models = withCrews(&kc, h)
	met := metrics.New()
	kc.Observer = met
	if co, ok := st.(store.CommitObserver); ok {
		co.OnCommit(met.Committed)
	}
	k := kernel.New(kc)
	met.Watch(k)
	if host != nil {
		met.Gauge("orrery_extensions", "Extensions of the sessions in memory, by state (running, parked, stopped, failed, none).", "state", func() map[string]int {
			n := map[string]int{ext.StateRunning: 0, ext.StateParked: 0, ext.StateStopped: 0, ext.StateFailed: 0}
			for _, st := range host.List("") {
				n[st.State]++
			}
			return n
		})
		counts := func(f func(ext.ProcessCounts) int) func() map[string]int {
			return func() map[string]int {
				n := map[string]int{}
				for name, c := range host.Counts() {
					n[name] = f(c)
				}
				return n
			}
		}
		met.Counter("orrery_extension_process_starts_total", "Extension processes started, by extension.", "extension", counts(func(c ext.ProcessCounts) int { return c.Starts }))
		met.Counter("orrery_extension_process_crashes_total", "Extension processes that stopped without being asked to (exited, hung, broke the protocol), by extension.", "extension", counts(func(c ext.ProcessCounts) int { return c.Crashes }))
		met.Gauge("orrery_extension_restarts", "Restarts in a row of the extensions, summed by state: the supervisor's count since each one last ran stably.", "state", func() map[string]int {
			n := map[string]int{}
			for _, st := range host.List("") {
				n[st.State] += st.Restarts
			}
			return n
		})
	}
	agents.watch(met)
	agents.setKernel(k)
	if host != nil {
		if err := host.Attach(k); err != nil {
			fmt.Fprintf(e.stderr, "orrery: %s\n", termtext.Visible(err.Error()))
		}
	}
	if err := k.Open(ctx); err != nil {
		if host != nil {
			_ = host.Close(ctx)
		}
		_ = agents.Close(ctx)
		servers.Close()
		st.Close()
		lock.Close()
		return nil, err
	}
	return &embedded{lock: lock, store: st, kernel: k, mcp: servers, agents: agents, hub: h, ext: host, metrics: met}, nil
}

// openExtensions finds the project's and the user's extensions and returns
// a host for them, or nil when there are none. A manifest that is refused
// is reported on stderr and left out.
func openExtensions(e *env, cfg config.Config, log *slog.Logger, cwd string, h *hub.Hub) *ext.Host {
	manifests, errs := ext.Discover(ext.ProjectDir(cwd), extUserDir(e))
	for _, err := range errs {
		fmt.Fprintf(e.stderr, "orrery: an extension was left out: %s\n", termtext.Visible(err.Error()))
	}
	if len(manifests) == 0 {
		return nil
	}
	return ext.New(ext.Config{Extensions: manifests, Logger: log, LogDir: extLogDir(cfg), Workspace: cwd, Hub: h})
}

// extLogDir is where the extensions' stderr is kept: <data>/ext-logs.
func extLogDir(cfg config.Config) string { return filepath.Join(cfg.Store.Data, "ext-logs") }

// extUserDir is the user's extensions dir: $ORRERY_EXT_DIR, else
// <config dir>/orrery/extensions.
func extUserDir(e *env) string {
	if d := e.getenv("ORRERY_EXT_DIR"); d != "" {
		return d
	}
	return ext.UserDir()
}

// extensions returns the extension host for the server, or nil (a nil
// interface, not a nil *ext.Host) without extensions.
func (e *embedded) extensions() server.Extensions {
	if e.ext == nil {
		return nil
	}
	return e.ext
}

// Close stops the extensions, then the kernel, the MCP servers and the
// store, and lets go of the data dir.
func (e *embedded) Close(ctx context.Context) error {
	var herr error
	if e.ext != nil {
		herr = e.ext.Close(ctx)
	}
	err := errors.Join(herr, e.kernel.Close(ctx), e.agents.Close(ctx), e.mcp.Close(), e.store.Close())
	return errors.Join(err, e.lock.Close())
}

func newLogger(e *env, level slog.Level) *slog.Logger {
	if v := e.getenv("ORRERY_LOG"); v != "" {
		var l slog.Level
		if l.UnmarshalText([]byte(v)) == nil {
			level = l
		}
	}
	// Every line logged with a run's or a request's context gets its
	// session and run ids (agent.LogHandler).
	opts := &slog.HandlerOptions{Level: level}
	switch f := e.getenv("ORRERY_LOG_FORMAT"); f {
	case "json":
		return slog.New(agent.LogHandler(slog.NewJSONHandler(e.stderr, opts)))
	case "", "text":
	default:
		l := slog.New(agent.LogHandler(slog.NewTextHandler(e.stderr, opts)))
		l.Warn("ORRERY_LOG_FORMAT is neither text nor json: logging as text", "value", f)
		return l
	}
	return slog.New(agent.LogHandler(slog.NewTextHandler(e.stderr, opts)))
}
