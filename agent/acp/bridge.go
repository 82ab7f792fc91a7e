// Package acp puts an Agent Client Protocol agent behind an Orrery session:
// the agent (Claude, Gemini CLI, Codex, Goose, OpenCode adapters …) runs as
// a process that speaks ACP v1 (newline-delimited JSON-RPC 2.0) on stdio,
// its session updates become the session's AG-UI frames, and its
// permission requests pass Orrery's consent gate.
//
// The JSON-RPC layer is raw on purpose: ids are kept verbatim, lines have
// no length cap, and session updates are kept as raw JSON, so an update
// variant or field this package does not know is never dropped or misread.
// Every frame made from an update carries it in metadata.acp, and an
// unknown variant becomes RAW {source: "acp"}.
package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/getorrery/orrery"
	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/protocol"
)

// ProtocolVersion is the ACP version the bridge speaks.
const ProtocolVersion = 1

// Defaults of Config.
const (
	DefaultCancelTimeout    = 5 * time.Second
	DefaultStopTimeout      = 2 * time.Second
	DefaultHandshakeTimeout = 60 * time.Second
)

// Names of the CUSTOM events the bridge adds.
const (
	// SessionEvent records the agent's own session id, so that after a
	// restart the session can be resumed: {"agent", "sessionId"}.
	SessionEvent = "orrery.acp.session"
	// StopEvent records a turn's ACP stop reason: {"stopReason"}.
	StopEvent = "orrery.acp.stop"
	// CommandsEvent carries an available_commands_update:
	// {"commands": [...]} as the agent sent them.
	CommandsEvent = "orrery.commands"
	// ContextEvent carries a usage_update's context window, so a client
	// can show how full it is: {"used", "size"} (ContextWindow).
	ContextEvent = "orrery.context"
)

// ContextWindow is the value of ContextEvent: the tokens the agent's
// context holds (Used) out of those it can hold (Size), as the agent last
// reported them.
type ContextWindow struct {
	Used int64 `json:"used"`
	Size int64 `json:"size"`
}

// contextEvent returns the ContextEvent of a usage_update whose used and
// size are whole numbers of tokens, carrying the update in metadata.acp;
// false for any other update.
func contextEvent(raw json.RawMessage) (protocol.Event, bool) {
	var u struct {
		SessionUpdate string `json:"sessionUpdate"`
		Used          *int64 `json:"used"`
		Size          *int64 `json:"size"`
	}
	if json.Unmarshal(raw, &u) != nil || u.SessionUpdate != "usage_update" || u.Used == nil || u.Size == nil || *u.Used < 0 || *u.Size < 0 {
		return nil, false
	}
	value, err := json.Marshal(ContextWindow{Used: *u.Used, Size: *u.Size})
	if err != nil {
		return nil, false
	}
	return &protocol.Custom{Name: ContextEvent, Value: value}, true
}

// MetaKey is the metadata key under which a frame made from a session
// update carries the raw update; frames that follow from the same update
// carry true.
const MetaKey = "acp"

// Config describes one ACP agent. Name and Command are required.
type Config struct {
	// Name names the agent in errors and logs: a name from [agents.<name>],
	// or the command line.
	Name string
	// Command and Args start the agent; Env adds KEY=VALUE variables to
	// Orrery's own environment.
	Command string
	Args    []string
	Env     []string
	// Origin is where the command was given, named in an error that says
	// what to fix, such as "the acp: spec"; "" means [agents.<Name>] in
	// the config.
	Origin string
	// IdleStop stops a session's agent process once it has had no turn
	// for this long (0 keeps it until Close); the next prompt starts it
	// again, resuming the agent's session when the agent can.
	IdleStop time.Duration
	// Limit, shared by several Agents, bounds their processes together;
	// nil bounds nothing.
	Limit *ProcessLimit
	// MCPServers are passed to session/new as ACP McpServer objects.
	MCPServers []MCPServer
	// Logger receives the agent's stderr and the bridge's notes; nil means
	// slog.Default().
	Logger *slog.Logger
	// CancelTimeout is how long a cancelled turn waits for the agent's
	// answer before the process is killed; 0 means DefaultCancelTimeout.
	CancelTimeout time.Duration
	// StopTimeout is each step's wait when stopping a process (close
	// stdin, SIGTERM, SIGKILL); 0 means DefaultStopTimeout.
	StopTimeout time.Duration
	// HandshakeTimeout bounds initialize and session/new; 0 means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Outside receives the frames of updates that arrive outside any turn
	// (after a turn's result, say); nil drops them with a warning.
	Outside func(ctx context.Context, session string, events ...protocol.Event) error
	// Resume, when set, returns the agent's session id recorded for an
	// Orrery session (its last SessionEvent), or "" when there is none.
	Resume func(ctx context.Context, session string) (string, error)
}

// MCPServer is an MCP server as ACP's session/new takes it: a stdio
// server (Command, Args, Env) or an HTTP one (Type "http", URL, Headers).
type MCPServer struct {
	Type    string    `json:"type,omitempty"`
	Name    string    `json:"name"`
	Command string    `json:"command,omitempty"`
	Args    []string  `json:"args,omitempty"`
	Env     []NameVal `json:"env,omitempty"`
	URL     string    `json:"url,omitempty"`
	Headers []NameVal `json:"headers,omitempty"`
}

// NameVal is an ACP environment variable or HTTP header.
type NameVal struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MarshalJSON writes a stdio server with args and env always present, as
// the schema requires.
func (m MCPServer) MarshalJSON() ([]byte, error) {
	if m.Type == "" {
		args, env := m.Args, m.Env
		if args == nil {
			args = []string{}
		}
		if env == nil {
			env = []NameVal{}
		}
		return json.Marshal(struct {
			Name    string    `json:"name"`
			Command string    `json:"command"`
			Args    []string  `json:"args"`
			Env     []NameVal `json:"env"`
		}{m.Name, m.Command, args, env})
	}
	headers := m.Headers
	if headers == nil {
		headers = []NameVal{}
	}
	return json.Marshal(struct {
		Type    string    `json:"type"`
		Name    string    `json:"name"`
		URL     string    `json:"url"`
		Headers []NameVal `json:"headers"`
	}{m.Type, m.Name, m.URL, headers})
}

// Agent is an ACP agent as an agent.Runner: one process per session,
// started on the session's first prompt and again after a crash. Close
// stops every process.
type Agent struct {
	cfg Config
	log *slog.Logger

	// starts and crashes count the processes started and those that
	// exited before Orrery stopped them; running those not yet exited.
	starts, crashes atomic.Uint64
	running         atomic.Int64

	mu     sync.Mutex // guards procs, turns and closed
	procs  map[string]*proc
	turns  map[string]chan struct{} // a session's turn token, held by its turn in flight
	closed bool
}

// lockSession waits until no other turn of session is in flight.
func (a *Agent) lockSession(ctx context.Context, session string) (func(), error) {
	a.mu.Lock()
	tok, ok := a.turns[session]
	if !ok {
		tok = make(chan struct{}, 1)
		a.turns[session] = tok
	}
	a.mu.Unlock()
	select {
	case tok <- struct{}{}:
		return func() { <-tok }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

var _ agent.Runner = (*Agent)(nil)

// New returns an Agent for cfg with its defaults filled in. It starts
// nothing.
func New(cfg Config) (*Agent, error) {
	if cfg.Command == "" {
		return nil, errors.New("an ACP agent needs a command: set command in [agents.<name>], or use --agent 'acp:COMMAND ARGS…'")
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Command
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CancelTimeout <= 0 {
		cfg.CancelTimeout = DefaultCancelTimeout
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	return &Agent{cfg: cfg, log: cfg.Logger, procs: make(map[string]*proc), turns: make(map[string]chan struct{})}, nil
}

// Stats is what an Agent's processes did.
type Stats struct {
	// Running counts the processes not yet exited; Starts those started,
	// Crashes those that exited before Orrery stopped them (the session's
	// next prompt starts another).
	Running         int
	Starts, Crashes uint64
}

// Stats returns the agent's process counts now.
func (a *Agent) Stats() Stats {
	return Stats{Running: int(a.running.Load()), Starts: a.starts.Load(), Crashes: a.crashes.Load()}
}

// ProcessLimit bounds the processes of the Agents that share it.
type ProcessLimit struct {
	// Max is how many may run at once.
	Max int
	n   atomic.Int64
}

// take counts one more process, or reports that Max are running.
func (l *ProcessLimit) take() bool {
	if l == nil {
		return true
	}
	for {
		n := l.n.Load()
		if n >= int64(l.Max) {
			return false
		}
		if l.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// give counts one process less.
func (l *ProcessLimit) give() {
	if l != nil {
		l.n.Add(-1)
	}
}

// stopIdle stops p if it is still the session's process and no turn holds
// the session: an idle agent frees its memory (Claude Code's is some
// 280 MB) until the session's next prompt.
func (a *Agent) stopIdle(p *proc) {
	a.mu.Lock()
	tok := a.turns[p.session]
	if a.procs[p.session] != p || tok == nil {
		a.mu.Unlock()
		return
	}
	select {
	case tok <- struct{}{}:
	default:
		a.mu.Unlock()
		return // a turn began meanwhile; its end sets the timer again
	}
	delete(a.procs, p.session)
	a.mu.Unlock()
	a.log.Info("acp: stopping an idle agent process; the next prompt starts it again", "agent", a.cfg.Name, "session", p.session, "idle", a.cfg.IdleStop)
	p.stop(a.cfg.StopTimeout)
	<-tok
}

// Name is "acp".
func (a *Agent) Name() string { return "acp" }

// Model is the agent's name.
func (a *Agent) Model() string { return a.cfg.Name }

// Stream is never called for a Runner; it refuses.
func (a *Agent) Stream(context.Context, agent.Request, func(agent.Delta) error) (agent.Usage, error) {
	return agent.Usage{}, errors.New("an ACP agent runs whole turns: the kernel calls Run, not Stream")
}

// Close stops every agent process: stdin closed, then SIGTERM, then
// SIGKILL. It is safe to call more than once.
func (a *Agent) Close(ctx context.Context) error {
	a.mu.Lock()
	a.closed = true
	procs := make([]*proc, 0, len(a.procs))
	for _, p := range a.procs {
		procs = append(procs, p)
	}
	a.procs = make(map[string]*proc)
	a.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.stop(a.cfg.StopTimeout) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop agent %s: %w", a.cfg.Name, ctx.Err())
	}
}

// outside sends an update that arrived outside any turn to the session.
func (a *Agent) outside(session string, update json.RawMessage) {
	if a.cfg.Outside == nil {
		a.log.Warn("acp: dropped an update that arrived outside a turn", "agent", a.cfg.Name, "session", session)
		return
	}
	ev, ok := contextEvent(update)
	if !ok {
		ev = &protocol.Raw{Event: update, Source: "acp"}
	}
	setMeta(ev, update)
	if err := a.cfg.Outside(context.Background(), session, ev); err != nil {
		a.log.Warn("acp: could not log an update that arrived outside a turn", "agent", a.cfg.Name, "session", session, "err", err)
	}
}

// Run runs one turn: it starts the session's agent process if it has none
// (initialize, then session/new, or session/resume or session/load after
// a restart), sends the person's last message as session/prompt and maps
// the agent's updates into frames until the prompt's result. When ctx
// ends it sends session/cancel, answers every pending permission request
// with cancelled, and kills the process if the agent does not finish in
// time.
func (a *Agent) Run(ctx context.Context, in agent.RunInput) agent.Result {
	// One turn per session at a time: a cancelled turn still waiting for
	// the agent's answer finishes (or its process is killed) before the
	// next one starts.
	unlock, err := a.lockSession(ctx, in.Session)
	if err != nil {
		return agent.Result{Err: err}
	}
	defer unlock()
	p, err := a.proc(ctx, in)
	if err != nil {
		return agent.Result{Err: err}
	}
	p.idle(false)
	defer p.idle(true)
	msgs, err := in.Turn.Messages(ctx)
	if err != nil {
		return agent.Result{Err: err}
	}
	prompt := promptBlocks(lastUser(msgs), in.Workspace.Root)
	t := newTurn(a, p, in, ctx)
	buffered := p.setSession(p.acpSessionID())
	for _, u := range buffered {
		t.update(u)
	}
	p.setSink(t)
	defer p.clearSink(t)
	_, resp, err := p.conn.Start("session/prompt", map[string]any{"sessionId": p.acpSessionID(), "prompt": prompt})
	if err != nil {
		a.drop(p)
		return agent.Result{Err: a.crashed(p, err)}
	}
	var m *Message
	select {
	case m = <-resp:
	case <-ctx.Done():
		_ = p.conn.Notify("session/cancel", map[string]string{"sessionId": p.acpSessionID()})
		p.cancelPermissions()
		timer := time.NewTimer(a.cfg.CancelTimeout)
		select {
		case <-resp:
			timer.Stop()
		case <-timer.C:
			a.log.WarnContext(ctx, "acp: the agent did not answer session/cancel in time; killing it", "agent", a.cfg.Name, "session", in.Session, "timeout", a.cfg.CancelTimeout)
			a.drop(p)
			p.kill()
		}
		t.closeAll()
		return agent.Result{Err: ctx.Err()}
	}
	t.closeAll()
	if m.Error != nil {
		if p.dead() || m.Error.Code == CodeInternalError && p.conn.Err() != nil {
			a.drop(p)
			return agent.Result{Err: a.crashed(p, m.Error)}
		}
		return agent.Result{Err: a.rpcError(p, "session/prompt", m.Error)}
	}
	var res struct {
		StopReason string `json:"stopReason"`
	}
	_ = json.Unmarshal(m.Result, &res)
	if res.StopReason == "" {
		res.StopReason = "end_turn"
	}
	t.stop(res.StopReason)
	if res.StopReason == "cancelled" {
		return agent.Result{Cancelled: true}
	}
	return agent.Result{}
}

func (p *proc) acpSessionID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.acpSession == "" {
		return p.pendingSession
	}
	return p.acpSession
}

// drop forgets p, so that the session's next turn starts a new process.
func (a *Agent) drop(p *proc) {
	a.mu.Lock()
	if a.procs[p.session] == p {
		delete(a.procs, p.session)
	}
	a.mu.Unlock()
}

// crashed is the error of a turn whose agent process died.
func (a *Agent) crashed(p *proc, cause error) error {
	if !p.waitExit(a.cfg.StopTimeout) {
		p.kill()
	}
	return &agent.Error{
		Code:    "agent_crashed",
		Message: fmt.Sprintf("the agent %s stopped during the turn (%v): send the prompt again to start it anew", a.cfg.Name, p.exitError()),
		Err:     cause,
	}
}

// rpcError turns an agent's error answer into a RUN_ERROR's error.
// The error's data (an agent's details) and the agent's last stderr lines
// go in the message: the person sees them where the run failed, whatever
// the log level.
func (a *Agent) rpcError(p *proc, method string, e *RPCError) error {
	if e.Code == CodeAuthRequired {
		return &agent.Error{Code: "auth_required", Message: a.authMessage(e), Err: e}
	}
	details := ""
	if d := bytes.TrimSpace(e.Data); len(d) > 0 && string(d) != "null" {
		var s string
		if json.Unmarshal(d, &s) != nil {
			s = string(d)
		}
		details = " (" + clip([]byte(s), 500) + ")"
	}
	return &agent.Error{Code: "agent_error", Message: fmt.Sprintf("the agent %s refused %s: %s%s%s; check the agent's own logs, then try again", a.cfg.Name, method, e.Message, details, p.lastWords()), Err: e}
}

func (a *Agent) authMessage(e *RPCError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the agent %s needs you to log in (%s): ", a.cfg.Name, e.Message)
	b.WriteString("log in with the agent's own command, or set its API key (such as ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY) in Orrery's environment or in env of [agents." + a.cfg.Name + "], then send the prompt again")
	return b.String()
}

// proc returns the session's running process, starting one and opening
// its ACP session when there is none.
func (a *Agent) proc(ctx context.Context, in agent.RunInput) (*proc, error) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, &agent.Error{Code: "agent_closed", Message: "Orrery is shutting down: send the prompt again once it is back"}
	}
	p := a.procs[in.Session]
	if p != nil && p.dead() {
		delete(a.procs, in.Session)
		p = nil
	}
	a.mu.Unlock()
	if p != nil {
		return p, nil
	}
	cwd := in.Workspace.Root
	p, err := a.start(in.Session, cwd)
	if err != nil {
		code := "agent_start"
		var le *limitError
		if errors.As(err, &le) {
			code = "agent_limit"
		}
		return nil, &agent.Error{Code: code, Message: err.Error(), Err: err}
	}
	hctx, cancel := context.WithTimeout(ctx, a.cfg.HandshakeTimeout)
	defer cancel()
	if err := a.handshake(hctx, p, in); err != nil {
		p.stop(a.cfg.StopTimeout)
		return nil, err
	}
	a.mu.Lock()
	a.procs[in.Session] = p
	a.mu.Unlock()
	return p, nil
}

// mcpServersFor is the configured MCP servers an agent can take: every
// stdio one, which all agents support, and an HTTP or SSE one only when
// its initialize advertised mcpCapabilities for that transport (an agent
// given one it does not support may fail session/new). Each left out is
// logged, naming the server.
func (a *Agent) mcpServersFor(init initResult) []MCPServer {
	out := make([]MCPServer, 0, len(a.cfg.MCPServers))
	caps := init.AgentCapabilities.MCPCapabilities
	for _, m := range a.cfg.MCPServers {
		switch {
		case m.Type == "", m.Type == "http" && caps.HTTP, m.Type == "sse" && caps.SSE:
			out = append(out, m)
		default:
			a.log.Warn("acp: MCP server not given to the agent: it does not advertise the transport", "agent", a.cfg.Name, "mcp_server", m.Name, "transport", m.Type)
		}
	}
	return out
}

// handshake runs initialize, then opens the session: session/resume or
// session/load when an earlier agent session is recorded and the agent
// offers them, else session/new.
func (a *Agent) handshake(ctx context.Context, p *proc, in agent.RunInput) error {
	res, err := p.conn.Call(ctx, "initialize", map[string]any{
		"protocolVersion": ProtocolVersion,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": false, "writeTextFile": false},
			"terminal": false,
		},
		"clientInfo": map[string]string{"name": "orrery", "title": "Orrery", "version": orrery.Version},
	})
	if err != nil {
		return a.handshakeError(p, "initialize", err)
	}
	if err := json.Unmarshal(res, &p.init); err != nil {
		return &agent.Error{Code: "agent_error", Message: fmt.Sprintf("the agent %s answered initialize with something that is not an InitializeResponse (%v): check that %s speaks ACP on stdio", a.cfg.Name, err, a.cfg.Command)}
	}
	if p.init.ProtocolVersion != ProtocolVersion {
		return &agent.Error{Code: "agent_version", Message: fmt.Sprintf("the agent %s speaks ACP version %d and Orrery speaks version %d: use a release of the agent that supports ACP v1", a.cfg.Name, p.init.ProtocolVersion, ProtocolVersion)}
	}
	mcp := a.mcpServersFor(p.init)
	cwd := in.Workspace.Root
	var prev string
	if a.cfg.Resume != nil {
		prev, _ = a.cfg.Resume(ctx, in.Session)
	}
	if prev != "" && (p.init.canResume() || p.init.AgentCapabilities.LoadSession) {
		method := "session/resume"
		if !p.init.canResume() {
			method = "session/load"
		}
		// Updates a load replays are for a conversation the log already
		// holds: they are buffered with the others and dropped below.
		p.mu.Lock()
		p.pendingSession = prev
		p.mu.Unlock()
		_, err := p.conn.Call(ctx, method, map[string]any{"sessionId": prev, "cwd": cwd, "mcpServers": mcp})
		if err == nil {
			replayed := p.setSession(prev)
			a.log.InfoContext(ctx, "acp: resumed the agent's session", "agent", a.cfg.Name, "session", in.Session, "method", method, "replayed", len(replayed))
			return nil
		}
		a.log.WarnContext(ctx, "acp: could not resume the agent's session; starting a new one", "agent", a.cfg.Name, "method", method, "err", err)
		p.mu.Lock()
		p.pendingSession = ""
		p.buffered = nil
		p.mu.Unlock()
	}
	res, err = p.conn.Call(ctx, "session/new", map[string]any{"cwd": cwd, "mcpServers": mcp})
	if err != nil {
		return a.handshakeError(p, "session/new", err)
	}
	var created struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &created); err != nil || created.SessionID == "" {
		return &agent.Error{Code: "agent_error", Message: fmt.Sprintf("the agent %s answered session/new without a sessionId: check that %s speaks ACP v1", a.cfg.Name, a.cfg.Command)}
	}
	p.mu.Lock()
	p.pendingSession = created.SessionID
	p.mu.Unlock()
	value, _ := json.Marshal(map[string]string{"agent": a.cfg.Name, "sessionId": created.SessionID})
	if err := in.Turn.Emit(ctx, &protocol.Custom{Name: SessionEvent, Value: value}); err != nil {
		return err
	}
	return nil
}

func (a *Agent) handshakeError(p *proc, method string, err error) error {
	var re *RPCError
	if errors.As(err, &re) && !p.dead() {
		return a.rpcError(p, method, re)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &agent.Error{Code: "agent_timeout", Message: fmt.Sprintf("the agent %s did not answer %s within %s: check that %s speaks ACP on stdio", a.cfg.Name, method, a.cfg.HandshakeTimeout, a.cfg.Command), Err: err}
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return a.crashed(p, err)
}

// lastUser returns the last user message of msgs.
func lastUser(msgs []protocol.Message) protocol.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == protocol.RoleUser {
			return msgs[i]
		}
	}
	return protocol.Message{}
}

// promptBlocks turns a person's message into ACP content: one text block,
// then one resource_link per attached file. A relative path is joined to
// cwd; an attachment with no path is dropped.
func promptBlocks(m protocol.Message, cwd string) []map[string]any {
	blocks := []map[string]any{{"type": "text", "text": m.Content.String()}}
	for _, part := range m.Content.Parts {
		if part.Type == "text" || part.Source == nil {
			continue
		}
		path := part.Source.Value
		if strings.HasPrefix(path, "file://") {
			if u, err := url.Parse(path); err == nil && u.Path != "" {
				path = u.Path
			} else {
				path = strings.TrimPrefix(path, "file://")
			}
		} else if part.Source.Type != "path" {
			continue
		}
		if path == "" {
			continue
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(cwd, path)
		}
		name := attachmentName(part)
		if name == "" {
			name = path
		}
		blocks = append(blocks, map[string]any{"type": "resource_link", "uri": (&url.URL{Scheme: "file", Path: path}).String(), "name": name})
	}
	return blocks
}

// attachmentName reads {"name": …} from a part's metadata.
func attachmentName(part protocol.ContentPart) string {
	var meta struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(part.Metadata, &meta)
	return meta.Name
}

// Spec is the model spec of an agent named as --agent or session.new
// {agent} take it: "acp:COMMAND ARGS…" as is, a name from [agents.<name>]
// as "agent:NAME".
func Spec(agentName string) string {
	if strings.HasPrefix(agentName, "acp:") {
		return agentName
	}
	return "agent:" + agentName
}

// LastSession returns the agent's session id that the frames record last
// (SessionEvent) for the agent named name, or "".
func LastSession(frames [][]byte, name string) string {
	last := ""
	for _, data := range frames {
		if !strings.Contains(string(data), SessionEvent) {
			continue
		}
		ev, err := protocol.DecodeEvent(data)
		if err != nil {
			continue
		}
		c, ok := ev.(*protocol.Custom)
		if !ok || c.Name != SessionEvent {
			continue
		}
		var v struct {
			Agent     string `json:"agent"`
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(c.Value, &v) == nil && v.Agent == name {
			last = v.SessionID
		}
	}
	return last
}
