package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/acp"
	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/metrics"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool/mcp"
)

// acpAgents resolves the model specs of external ACP agents ("agent:NAME"
// from [agents.<name>], "acp:COMMAND ARGS…") into one acp.Agent per spec,
// and passes every other spec on. Close stops their processes.
type acpAgents struct {
	defs map[string]config.AgentDef
	mcp  []acp.MCPServer
	log  *slog.Logger
	next func(string) (agent.Provider, error)

	// idleStop and limit are [agents] idle_stop and max_processes, the
	// limit shared by every agent.
	idleStop time.Duration
	limit    *acp.ProcessLimit

	mu     sync.Mutex // guards k and agents
	k      *kernel.Kernel
	agents map[string]*acp.Agent
}

func newACPAgents(cfg config.Config, log *slog.Logger, next func(string) (agent.Provider, error)) *acpAgents {
	a := &acpAgents{defs: cfg.Agents, mcp: acpMCPServers(cfg.MCP.Servers), log: log, next: next, agents: make(map[string]*acp.Agent),
		idleStop: cfg.AgentProcesses.IdleStop.Duration}
	if n := cfg.AgentProcesses.MaxProcesses; n > 0 {
		a.limit = &acp.ProcessLimit{Max: n}
	}
	return a
}

// resolve is the kernel's Models function.
func (a *acpAgents) resolve(spec string) (agent.Provider, error) {
	var cfg acp.Config
	switch {
	case strings.HasPrefix(spec, "agent:"):
		name := strings.TrimPrefix(spec, "agent:")
		def, ok := a.defs[name]
		if !ok {
			return nil, fmt.Errorf("no agent %q is configured: add [agents.%s] with command (and args, env) to the config, or use --agent 'acp:COMMAND ARGS…'; configured: %s", name, name, a.names())
		}
		cfg = acp.Config{Name: name, Command: def.Command, Args: def.Args, Env: envList(def.Env)}
	case strings.HasPrefix(spec, "acp:"):
		words, err := acpCommand(strings.TrimPrefix(spec, "acp:"))
		if err != nil {
			return nil, err
		}
		cfg = acp.Config{Name: joinWords(words), Command: words[0], Args: words[1:], Origin: "the acp: spec"}
	default:
		return a.next(spec)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ag, ok := a.agents[spec]; ok {
		return ag, nil
	}
	cfg.MCPServers = a.mcp
	cfg.IdleStop, cfg.Limit = a.idleStop, a.limit
	cfg.Logger = a.log
	cfg.Outside = a.append
	cfg.Resume = a.resume(cfg.Name)
	ag, err := acp.New(cfg)
	if err != nil {
		return nil, err
	}
	a.agents[spec] = ag
	return ag, nil
}

// acpCommand splits the command line of an "acp:" spec into words (see
// splitWords), with each way it can be wrong said as what to do.
func acpCommand(line string) ([]string, error) {
	words, err := splitWords(line)
	switch {
	case errors.Is(err, errOpenSingle):
		return nil, errors.New("acp: the spec has an unterminated ' quote: close it, as in acp:'/opt/my agent/bin' --acp")
	case errors.Is(err, errOpenDouble):
		return nil, errors.New(`acp: the spec has an unterminated " quote: close it, as in acp:"/opt/my agent/bin" --acp`)
	case errors.Is(err, errTrailingBackslash):
		return nil, errors.New(`acp: the spec ends with a backslash that escapes nothing: remove it, or write \\ for a backslash`)
	case err != nil:
		return nil, fmt.Errorf("acp: split the command line: %w", err)
	case len(words) == 0:
		return nil, errors.New("acp: names no command: write acp:COMMAND ARGS…, such as 'acp:gemini --acp'")
	case words[0] == "":
		return nil, errors.New("acp: the command is an empty word: write acp:COMMAND ARGS…, such as 'acp:gemini --acp'")
	}
	return words, nil
}

func (a *acpAgents) names() string {
	if len(a.defs) == 0 {
		return "none"
	}
	names := slices.Sorted(maps.Keys(a.defs))
	return strings.Join(names, ", ")
}

// setKernel gives the agents the kernel their sessions live in.
func (a *acpAgents) setKernel(k *kernel.Kernel) {
	a.mu.Lock()
	a.k = k
	a.mu.Unlock()
}

func (a *acpAgents) kernel() (*kernel.Kernel, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.k == nil {
		return nil, errors.New("the kernel is not open yet")
	}
	return a.k, nil
}

// append logs an agent's update that arrived outside any turn.
func (a *acpAgents) append(ctx context.Context, session string, evs ...protocol.Event) error {
	k, err := a.kernel()
	if err != nil {
		return err
	}
	s, err := k.Session(ctx, session)
	if err != nil {
		return err
	}
	return s.Append(ctx, evs...)
}

// resume finds the agent session the log records for an Orrery session.
func (a *acpAgents) resume(name string) func(ctx context.Context, session string) (string, error) {
	return func(ctx context.Context, session string) (string, error) {
		k, err := a.kernel()
		if err != nil {
			return "", err
		}
		s, err := k.Session(ctx, session)
		if err != nil {
			return "", err
		}
		var frames [][]byte
		for since := uint64(0); ; {
			page, head, err := s.Read(ctx, since, 1000)
			if err != nil {
				return "", err
			}
			for _, f := range page {
				frames = append(frames, f.Data)
				since = f.Seq
			}
			if len(page) == 0 || since >= head {
				break
			}
		}
		return acp.LastSession(frames, name), nil
	}
}

// watch exports the agents' processes to met, labelled by agent: a
// configured agent's name, or "acp:" for every agent a command line named
// (so that the label's values stay as few as the config's agents).
func (a *acpAgents) watch(met *metrics.Metrics) {
	read := func(f func(acp.Stats) int) func() map[string]int {
		return func() map[string]int {
			a.mu.Lock()
			defer a.mu.Unlock()
			n := map[string]int{}
			for spec, ag := range a.agents {
				label := "acp:"
				if name, ok := strings.CutPrefix(spec, "agent:"); ok {
					label = name
				}
				n[label] += f(ag.Stats())
			}
			return n
		}
	}
	met.Gauge("orrery_agent_processes", "ACP agent processes running, by agent.", "agent", read(func(s acp.Stats) int { return s.Running }))
	met.Counter("orrery_agent_process_starts_total", "ACP agent processes started, by agent (one per session, again after a crash).", "agent", read(func(s acp.Stats) int { return int(s.Starts) }))
	met.Counter("orrery_agent_process_crashes_total", "ACP agent processes that exited before Orrery stopped them, by agent.", "agent", read(func(s acp.Stats) int { return int(s.Crashes) }))
}

// Close stops every agent process.
func (a *acpAgents) Close(ctx context.Context) error {
	a.mu.Lock()
	agents := slices.Collect(maps.Values(a.agents))
	a.mu.Unlock()
	var errs []error
	for _, ag := range agents {
		errs = append(errs, ag.Close(ctx))
	}
	return errors.Join(errs...)
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// acpMCPServers are Orrery's [mcp.servers] as ACP's session/new takes them.
func acpMCPServers(servers map[string]mcp.ServerConfig) []acp.MCPServer {
	out := make([]acp.MCPServer, 0, len(servers))
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		srv := servers[name]
		if srv.URL != "" {
			var headers []acp.NameVal
			for _, k := range slices.Sorted(maps.Keys(srv.Headers)) {
				headers = append(headers, acp.NameVal{Name: k, Value: srv.Headers[k]})
			}
			out = append(out, acp.MCPServer{Type: "http", Name: name, URL: srv.URL, Headers: headers})
			continue
		}
		var env []acp.NameVal
		for _, k := range slices.Sorted(maps.Keys(srv.Env)) {
			env = append(env, acp.NameVal{Name: k, Value: srv.Env[k]})
		}
		out = append(out, acp.MCPServer{Name: name, Command: srv.Command, Args: srv.Args, Env: env})
	}
	return out
}
