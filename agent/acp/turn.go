package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// turn maps one turn's session updates into frames. update and permission
// run on the connection's reader goroutine; closeAll and stop on Run's.
type turn struct {
	a   *Agent
	p   *proc
	in  agent.RunInput
	ctx context.Context

	mu        sync.Mutex // guards the fields below and orders emits
	textID    string     // the open text message, or ""
	textMsg   string     // the ACP messageId of the open text message
	reasonID  string     // the open reasoning message, or ""
	calls     map[string]*callState
	lastCost  float64 // the cumulative cost the agent last reported
	costKnown bool
}

// callState is what the turn knows of one tool call: the agent's latest
// view of it, each field as the last update that carried it said.
type callState struct {
	id        string
	title     string
	kind      string
	rawInput  json.RawMessage
	locations []location
	content   json.RawMessage
	// started: TOOL_CALL_START, its arguments and TOOL_CALL_END are sent.
	// They wait until the call settles (a permission is asked for it, or
	// its status leaves pending), since agents refine a call's title and
	// input after announcing it (Claude Code announces "Terminal" with {}
	// and sends the command in a tool_call_update).
	started  bool
	resulted bool // TOOL_CALL_RESULT sent
	denied   bool // Orrery's gate refused the call's permission
}

// merge takes what u says of the call.
func (c *callState) merge(u updateFields) {
	if u.Title != nil && *u.Title != "" {
		c.title = *u.Title
	}
	if u.Kind != nil && *u.Kind != "" {
		c.kind = *u.Kind
	}
	if len(u.RawInput) > 0 && string(u.RawInput) != "null" {
		c.rawInput = u.RawInput
	}
	if len(u.Locations) > 0 {
		c.locations = u.Locations
	}
	if len(u.Content) > 0 && string(u.Content) != "null" {
		c.content = u.Content
	}
}

// view is the call as an update that says everything the turn knows.
func (c *callState) view() updateFields {
	title, kind := c.title, c.kind
	return updateFields{ToolCallID: c.id, Title: &title, Kind: &kind, RawInput: c.rawInput, Locations: c.locations, Content: c.content}
}

// start returns the call's TOOL_CALL_START, arguments and END as the
// agent's latest view has them, once.
func (c *callState) start() []protocol.Event {
	if c.started {
		return nil
	}
	c.started = true
	name := c.title
	if name == "" {
		name = c.kind
	}
	evs := []protocol.Event{&protocol.ToolCallStart{ToolCallID: c.id, ToolCallName: name}}
	if len(c.rawInput) > 0 {
		evs = append(evs, &protocol.ToolCallArgs{ToolCallID: c.id, Delta: string(c.rawInput)})
	}
	return append(evs, &protocol.ToolCallEnd{ToolCallID: c.id})
}

func newTurn(a *Agent, p *proc, in agent.RunInput, ctx context.Context) *turn {
	return &turn{a: a, p: p, in: in, ctx: ctx, calls: make(map[string]*callState)}
}

// emit sequences evs, the frames of one update: the last carries the raw
// update in metadata.acp, the others true. A frame the session refuses is
// logged and replaced by RAW, so the update is never lost.
func (t *turn) emit(raw json.RawMessage, evs ...protocol.Event) {
	if len(evs) == 0 {
		return
	}
	for i, ev := range evs {
		mark := json.RawMessage("true")
		if i == len(evs)-1 && raw != nil {
			mark = raw
		}
		setMetaValue(ev, mark)
	}
	err := t.in.Turn.Emit(t.ctx, evs...)
	if err == nil || t.ctx.Err() != nil {
		return
	}
	t.a.log.WarnContext(t.ctx, "acp: the session refused an update's frames; keeping it as RAW", "agent", t.a.cfg.Name, "err", err)
	if raw != nil {
		ev := &protocol.Raw{Event: raw, Source: "acp"}
		setMeta(ev, raw)
		_ = t.in.Turn.Emit(t.ctx, ev)
	}
}

// setMeta puts raw in ev's metadata.acp.
func setMeta(ev protocol.Event, raw json.RawMessage) { setMetaValue(ev, raw) }

func setMetaValue(ev protocol.Event, v json.RawMessage) {
	h := ev.Header()
	if h.Metadata == nil {
		h.Metadata = &protocol.Metadata{}
	}
	if h.Metadata.Extra == nil {
		h.Metadata.Extra = make(map[string]json.RawMessage)
	}
	h.Metadata.Extra[MetaKey] = v
}

// contentBlock is the part of an ACP ContentBlock the mapping reads.
type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
	URI  string `json:"uri"`
	Name string `json:"name"`
}

// updateFields are the fields of the session updates the mapping reads.
type updateFields struct {
	SessionUpdate     string          `json:"sessionUpdate"`
	MessageID         string          `json:"messageId"`
	Content           json.RawMessage `json:"content"`
	ToolCallID        string          `json:"toolCallId"`
	Title             *string         `json:"title"`
	Kind              *string         `json:"kind"`
	Status            *string         `json:"status"`
	RawInput          json.RawMessage `json:"rawInput"`
	Locations         []location      `json:"locations"`
	Entries           []planEntry     `json:"entries"`
	AvailableCommands json.RawMessage `json:"availableCommands"`
	Cost              *cost           `json:"cost"`
}

type cost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

type location struct {
	Path string `json:"path"`
}

type planEntry struct {
	Content string `json:"content"`
	Status  string `json:"status"`
}

// update maps one raw session update into frames.
func (t *turn) update(raw json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var u updateFields
	if err := json.Unmarshal(raw, &u); err != nil {
		t.emit(raw, &protocol.Raw{Event: raw, Source: "acp"})
		return
	}
	switch u.SessionUpdate {
	case "agent_message_chunk":
		var c contentBlock
		_ = json.Unmarshal(u.Content, &c)
		if c.Type != "text" || c.Text == "" {
			break
		}
		var evs []protocol.Event
		evs = append(evs, t.closeReasoning()...)
		if t.textID != "" && u.MessageID != "" && u.MessageID != t.textMsg {
			evs = append(evs, t.closeText()...)
		}
		if t.textID == "" {
			t.textID, t.textMsg = t.in.Turn.NewID("msg"), u.MessageID
			evs = append(evs, &protocol.TextMessageStart{MessageID: t.textID, Role: protocol.RoleAssistant})
		}
		evs = append(evs, &protocol.TextMessageContent{MessageID: t.textID, Delta: c.Text})
		t.emit(raw, evs...)
		return
	case "agent_thought_chunk":
		var c contentBlock
		_ = json.Unmarshal(u.Content, &c)
		if c.Type != "text" || c.Text == "" {
			break
		}
		evs := t.closeText()
		if t.reasonID == "" {
			t.reasonID = t.in.Turn.NewID("reason")
			evs = append(evs,
				&protocol.ReasoningStart{MessageID: t.reasonID},
				&protocol.ReasoningMessageStart{MessageID: t.reasonID, Role: protocol.RoleReasoning})
		}
		evs = append(evs, &protocol.ReasoningMessageContent{MessageID: t.reasonID, Delta: c.Text})
		t.emit(raw, evs...)
		return
	case "tool_call", "tool_call_update":
		if u.ToolCallID == "" {
			break
		}
		t.emit(raw, t.toolCall(u)...)
		return
	case "plan":
		t.emit(raw, planSurface(u.Entries))
		return
	case "available_commands_update":
		cmds := u.AvailableCommands
		if len(cmds) == 0 || string(cmds) == "null" {
			cmds = json.RawMessage("[]")
		}
		value, _ := json.Marshal(map[string]json.RawMessage{"commands": cmds})
		t.emit(raw, &protocol.Custom{Name: CommandsEvent, Value: value})
		return
	case "usage_update":
		if u.Cost != nil && strings.EqualFold(u.Cost.Currency, "USD") {
			delta := u.Cost.Amount
			if t.costKnown {
				delta -= t.lastCost
			}
			t.lastCost, t.costKnown = u.Cost.Amount, true
			if delta > 0 {
				_ = t.in.Turn.Usage(t.ctx, agent.Usage{ReportedMicroUSD: int64(math.Round(delta * 1e6))})
			}
		}
		if ev, ok := contextEvent(raw); ok {
			t.emit(raw, ev)
			return
		}
	}
	// Everything else, and what the mapping cannot show, is kept raw.
	t.emit(raw, &protocol.Raw{Event: raw, Source: "acp"})
}

// toolCall maps a tool_call or tool_call_update (or a permission request's
// tool call): the call is started when first seen, its content becomes
// its surface, and a final status becomes its result.
func (t *turn) toolCall(u updateFields) []protocol.Event {
	evs := append(t.closeText(), t.closeReasoning()...)
	c := t.calls[u.ToolCallID]
	if c == nil {
		c = &callState{id: u.ToolCallID, kind: "other"}
		t.calls[c.id] = c
	}
	c.merge(u)
	if u.Status != nil && *u.Status != "" && *u.Status != "pending" {
		evs = append(evs, c.start()...)
	}
	var text string
	if len(u.Content) > 0 && string(u.Content) != "null" {
		var surface json.RawMessage
		surface, text = contentSurface(u.Content)
		if surface != nil {
			evs = append(evs, &protocol.StateDelta{Delta: []protocol.PatchOp{{Op: "add", Path: "/surfaces/" + escapePointer(c.id), Value: surface}}})
		}
	}
	if u.Status != nil && (*u.Status == "completed" || *u.Status == "failed") && !c.resulted {
		c.resulted = true
		status := "ok"
		if *u.Status == "failed" {
			status = "error"
		}
		if text == "" {
			text = *u.Status
		}
		outcome, _ := json.Marshal(map[string]string{"status": status, "surface": c.id})
		res := &protocol.ToolCallResult{MessageID: t.in.Turn.NewID("tool"), ToolCallID: c.id, Content: protocol.TextContent(text), Role: protocol.RoleTool}
		res.Orrery().Outcome = outcome
		evs = append(evs, res)
	}
	return evs
}

// contentSurface turns a tool call's content into a surface: a diff
// surface when it holds diffs, else a text surface of its text. It also
// returns the content's text.
func contentSurface(content json.RawMessage) (json.RawMessage, string) {
	var items []struct {
		Type       string          `json:"type"`
		Content    json.RawMessage `json:"content"`
		Path       string          `json:"path"`
		OldText    *string         `json:"oldText"`
		NewText    string          `json:"newText"`
		TerminalID string          `json:"terminalId"`
	}
	if err := json.Unmarshal(content, &items); err != nil || len(items) == 0 {
		return nil, ""
	}
	var texts, diffs []string
	var diffPath string
	for _, it := range items {
		switch it.Type {
		case "content":
			var c contentBlock
			_ = json.Unmarshal(it.Content, &c)
			switch {
			case c.Text != "":
				texts = append(texts, c.Text)
			case c.URI != "":
				texts = append(texts, c.URI)
			}
		case "diff":
			old := ""
			oldName := it.Path
			if it.OldText != nil {
				old = *it.OldText
			} else {
				oldName = "/dev/null"
			}
			diffs = append(diffs, tool.Unified(oldName, it.Path, old, it.NewText))
			if diffPath == "" {
				diffPath = it.Path
			}
		case "terminal":
			texts = append(texts, "terminal "+it.TerminalID)
		}
	}
	text := strings.Join(texts, "\n")
	var kind map[string]any
	switch {
	case len(diffs) > 0:
		kind = map[string]any{"t": "diff", "value": strings.Join(diffs, ""), "path": diffPath}
		if text == "" {
			text = strings.Join(diffs, "")
		}
	case text != "":
		kind = map[string]any{"t": "text", "value": text}
	default:
		return nil, ""
	}
	data, _ := json.Marshal(map[string]any{"kind": kind})
	return data, text
}

// planSurface turns a plan into the task surface /surfaces/plan.
func planSurface(entries []planEntry) protocol.Event {
	steps := make([]map[string]string, 0, len(entries))
	done, running := 0, false
	for i, e := range entries {
		if i == 100 {
			break
		}
		st := "pending"
		switch e.Status {
		case "in_progress":
			st, running = "running", true
		case "completed":
			st = "done"
			done++
		}
		title := strings.TrimSpace(e.Content)
		if title == "" {
			title = fmt.Sprintf("step %d", i+1)
		}
		steps = append(steps, map[string]string{"title": title, "status": st})
	}
	status := "pending"
	switch {
	case len(entries) > 0 && done == len(entries):
		status = "done"
	case running || done > 0:
		status = "running"
	}
	surface, _ := json.Marshal(map[string]any{"kind": map[string]any{"t": "task", "title": "Plan", "status": status, "steps": steps}})
	return &protocol.StateDelta{Delta: []protocol.PatchOp{{Op: "add", Path: "/surfaces/plan", Value: surface}}}
}

func (t *turn) closeText() []protocol.Event {
	if t.textID == "" {
		return nil
	}
	id := t.textID
	t.textID, t.textMsg = "", ""
	return []protocol.Event{&protocol.TextMessageEnd{MessageID: id}}
}

func (t *turn) closeReasoning() []protocol.Event {
	if t.reasonID == "" {
		return nil
	}
	id := t.reasonID
	t.reasonID = ""
	return []protocol.Event{&protocol.ReasoningMessageEnd{MessageID: id}, &protocol.ReasoningEnd{MessageID: id}}
}

// closeAll closes the turn's open text and reasoning.
func (t *turn) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	evs := append(t.closeText(), t.closeReasoning()...)
	// A call the agent announced and never reported the end of is shown
	// and closed: denied when Orrery's gate refused it, else abandoned.
	ids := slices.Sorted(maps.Keys(t.calls))
	for _, id := range ids {
		c := t.calls[id]
		if c.resulted {
			continue
		}
		evs = append(evs, c.start()...)
		c.resulted = true
		status, why := "abandoned", "the agent ended its turn without reporting this call's result"
		if c.denied {
			status, why = "denied", "the call was denied, and the agent did not report it"
		}
		res := &protocol.ToolCallResult{MessageID: t.in.Turn.NewID("tool"), ToolCallID: c.id, Content: protocol.TextContent(why), Role: protocol.RoleTool}
		res.Orrery().Outcome = json.RawMessage(`{"status":"` + status + `"}`)
		evs = append(evs, res)
	}
	if len(evs) > 0 {
		_ = t.in.Turn.Emit(context.WithoutCancel(t.ctx), evs...)
	}
}

// stop records the turn's stop reason.
func (t *turn) stop(reason string) {
	value, _ := json.Marshal(map[string]string{"stopReason": reason})
	_ = t.in.Turn.Emit(t.ctx, &protocol.Custom{Name: StopEvent, Value: value})
}

// permission handles session/request_permission: the tool call is created
// if it was never announced, then the question goes to the consent gate
// on its own goroutine.
func (t *turn) permission(p *proc, m *Message) {
	var req struct {
		ToolCall json.RawMessage    `json:"toolCall"`
		Options  []permissionOption `json:"options"`
	}
	if err := json.Unmarshal(m.Params, &req); err != nil || len(req.Options) == 0 {
		p.replyPermission(m.ID, cancelledOutcome)
		return
	}
	var u updateFields
	_ = json.Unmarshal(req.ToolCall, &u)
	var call *callState
	if u.ToolCallID != "" {
		// The question is about the agent's latest view of the call: what
		// the request says, over what its updates said.
		t.mu.Lock()
		evs := t.toolCall(updateFields{ToolCallID: u.ToolCallID, Title: u.Title, Kind: u.Kind, RawInput: u.RawInput, Content: u.Content, Locations: u.Locations})
		call = t.calls[u.ToolCallID]
		evs = append(evs, call.start()...)
		t.emit(nil, evs...)
		u = call.view()
		t.mu.Unlock()
	}
	q := t.question(u, req.Options, m.Params)
	ctx, cancel := context.WithCancel(t.ctx)
	perm := &permission{p: p, id: m.ID, cancel: cancel}
	p.mu.Lock()
	p.perms[string(m.ID)] = perm
	p.mu.Unlock()
	go func() {
		asker, ok := t.in.Gate.(agent.PermissionAsker)
		if !ok {
			perm.finish(failClosed(m.Params))
			return
		}
		ans, err := asker.AskPermission(ctx, q)
		if call != nil && err == nil && !ans.Allow && !slices.ContainsFunc(q.Options, func(o agent.PermissionOption) bool { return o.ID == ans.Option && o.Allow }) {
			t.mu.Lock()
			call.denied = true
			t.mu.Unlock()
		}
		switch {
		case err != nil || t.ctx.Err() != nil:
			perm.finish(cancelledOutcome)
		case ans.Option != "":
			perm.finish(selectedOutcome(ans.Option))
		case ans.Allow:
			if id := pick(req.Options, "allow_once", "allow_always"); id != "" {
				perm.finish(selectedOutcome(id))
				return
			}
			perm.finish(failClosed(m.Params))
		default:
			perm.finish(failClosed(m.Params))
		}
	}()
}

// question is the consent question of a permission request: the tool call
// under the name of the Orrery tool that does the same (so [permissions]
// rules apply), with the agent's own options.
func (t *turn) question(u updateFields, opts []permissionOption, raw json.RawMessage) agent.Permission {
	kind := "other"
	if u.Kind != nil && *u.Kind != "" {
		kind = *u.Kind
	}
	q := agent.Permission{ToolCallID: u.ToolCallID, Args: u.RawInput, Raw: raw}
	if u.Title != nil {
		q.Title = *u.Title
	}
	switch kind {
	case "read":
		q.Tool, q.ReadOnly, q.PathSubject = "read_file", true, true
	case "search":
		q.Tool, q.ReadOnly, q.PathSubject = "list_files", true, true
	case "edit":
		q.Tool, q.PathSubject = "edit_file", true
	case "delete", "move":
		q.Tool, q.PathSubject = "write_file", true
	case "execute":
		q.Tool, q.ShellSubject = "shell", true
		var in struct {
			Command any `json:"command"`
		}
		_ = json.Unmarshal(u.RawInput, &in)
		switch c := in.Command.(type) {
		case nil:
			// No command in the input (Gemini puts it only in the title):
			// the title is the command line the rules read.
			q.Subject = strings.Trim(strings.TrimSpace(q.Title), "`")
		case string:
			q.Subject = c
		case []any:
			// An argv: each word quoted, so the rules read the line the
			// agent will run (["sh","-c","rm -rf x"] is sh -c 'rm -rf x').
			parts := make([]string, 0, len(c))
			for _, p := range c {
				parts = append(parts, shellQuote(fmt.Sprint(p)))
			}
			q.Subject = strings.Join(parts, " ")
		}
	default:
		q.Tool = "acp." + kind
	}
	if q.PathSubject {
		q.Subject = t.relPath(u)
	}
	for _, o := range opts {
		q.Options = append(q.Options, agent.PermissionOption{ID: o.OptionID, Label: o.Name, Allow: strings.HasPrefix(o.Kind, "allow")})
	}
	if len(q.Args) == 0 {
		q.Args = json.RawMessage("{}")
	}
	return q
}

// relPath is the path a tool call is about, relative to the workspace root
// when inside it.
func (t *turn) relPath(u updateFields) string {
	path := ""
	if len(u.Locations) > 0 {
		path = u.Locations[0].Path
	}
	if path == "" {
		var in struct {
			Path     string `json:"path"`
			FilePath string `json:"file_path"`
		}
		_ = json.Unmarshal(u.RawInput, &in)
		path = in.Path
		if path == "" {
			path = in.FilePath
		}
	}
	if path == "" {
		var items []struct {
			Path string `json:"path"`
		}
		_ = json.Unmarshal(u.Content, &items)
		for _, it := range items {
			if it.Path != "" {
				path = it.Path
				break
			}
		}
	}
	root := t.in.Workspace.Root
	if root != "" && filepath.IsAbs(path) {
		if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.ToSlash(rel)
		}
	}
	return path
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// shellQuote quotes w for a POSIX shell as shlex.quote does: a word of
// only safe characters as it is, anything else in single quotes, which a
// shell reads literally.
func shellQuote(w string) string {
	safe := w != "" && !strings.ContainsFunc(w, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r))
	})
	if safe {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
