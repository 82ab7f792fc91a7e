package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
	"github.com/getorrery/orrery/ui"
)

// commandNames are the slash commands, for completion.
var commandNames = []string{"/cost", "/ext", "/help", "/model", "/new", "/quit", "/sessions", "/ui"}

const helpText = `/ui                          list what is placed: id, placement, owner, state
/ui move ID PLACEMENT        move a surface (band, pane.left, pane.right, footer, inline, hidden)
/ui hide ID                  hide a surface for everyone
/ui save ID                  keep its placement in the config from the next session on
/ext                         list the extensions; /ext restart ID restarts one
/sessions  /new  /model [NAME]  /cost  /quit
/NAME ARGS                   a command the agent advertises is sent to it as your prompt; // sends a line as it is
F6 focuses the panes; Esc, x or Delete dismisses the focused surface on this screen
on a focused form: Tab moves between fields, type to edit, Space toggles, ←/→ choose, Enter submits
on a focused question: 1-9 or Space pick, type on the > row, Enter sends
Enter sends (steers while a run is in flight); Ctrl-J adds a line; Ctrl-C puts a draft away, then cancels, then twice quits; Ctrl-D on an empty line quits
Ctrl-O shows tool calls whole (their output and arguments) or folds them to 8 lines again; Esc interrupts a run or denies a question`

// commandsEvent is the CUSTOM event that carries the slash commands the
// session's agent advertises (an ACP agent's available_commands_update):
// {"commands": [{"name", "description", "input": {"hint"}}]}.
const commandsEvent = "orrery.commands"

// agentCommand is a slash command the session's agent advertises. Chosen,
// it is sent to the agent as the prompt text "/name args".
type agentCommand struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Input       *struct {
		Hint string `json:"hint"`
	} `json:"input"`
}

// parseCommands reads an orrery.commands value; names are sanitized, and
// one that is empty or holds a space is left out (it could not be typed).
func parseCommands(value []byte) []agentCommand {
	var v struct {
		Commands []agentCommand `json:"commands"`
	}
	if json.Unmarshal(value, &v) != nil {
		return nil
	}
	var out []agentCommand
	seen := map[string]bool{}
	for _, c := range v.Commands {
		c.Name = strings.TrimLeft(termtext.StripLine(c.Name), "/")
		if c.Name == "" || strings.ContainsAny(c.Name, " \t") || seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		c.Description = termtext.StripLine(c.Description)
		if c.Input != nil {
			c.Input.Hint = termtext.StripLine(c.Input.Hint)
		}
		out = append(out, c)
	}
	return out
}

// isOwnCommand reports whether name (with its slash) is one of the TUI's
// own commands, which come before any the agent advertises.
func isOwnCommand(name string) bool {
	return slices.Contains(commandNames, name) || name == "/?" || name == "/exit"
}

// agentCommand returns the advertised command called name (with its
// slash), unless the TUI has its own by that name.
func (m *Model) agentCommand(name string) (agentCommand, bool) {
	if isOwnCommand(name) {
		return agentCommand{}, false
	}
	for _, c := range m.agentCommands {
		if "/"+c.Name == name {
			return c, true
		}
	}
	return agentCommand{}, false
}

// describe is a command's line in a listing: name, description and the
// input it takes.
func (c agentCommand) describe() string {
	line := "/" + c.Name
	if c.Input != nil && c.Input.Hint != "" {
		line += " <" + c.Input.Hint + ">"
	}
	if c.Description != "" {
		line += "  " + c.Description
	}
	return line + "  (the agent's)"
}

// command runs a slash command.
func (m *Model) command(line string) tea.Cmd {
	f := strings.Fields(line)
	args := f[1:]
	switch f[0] {
	case "/help", "/?":
		m.scr.list = strings.Split(helpText, "\n")
		if len(m.agentCommands) > 0 {
			m.scr.list = append(m.scr.list, "", "the agent's commands, sent to it as your prompt:")
			for _, c := range m.agentCommands {
				if !isOwnCommand("/" + c.Name) {
					m.scr.list = append(m.scr.list, "  "+c.describe())
				}
			}
		}
	case "/quit", "/exit":
		return tea.Quit
	case "/ui":
		return m.uiCommand(args)
	case "/ext":
		return m.extCommand(args)
	case "/sessions":
		return m.sessionsCmd()
	case "/new":
		return m.newSessionCmd(m.opts.Model)
	case "/model":
		if len(args) == 1 {
			m.opts.Model = args[0]
			m.notice("new sessions use " + termtext.StripLine(args[0]) + "; starting one now")
			return m.newSessionCmd(args[0])
		}
		return m.summaryCmd(func(s protocol.SessionSummary) []string {
			model := s.Model
			if model == "" {
				model = "the kernel's default"
			}
			return []string{"model: " + termtext.StripLine(model) + " (/model NAME starts a session with another)"}
		})
	case "/cost":
		return m.summaryCmd(func(s protocol.SessionSummary) []string {
			return []string{fmt.Sprintf("cost of this session: $%.6f (%d micro-USD)", float64(s.MicroUSD)/1e6, s.MicroUSD)}
		})
	default:
		what := "the commands"
		if len(m.agentCommands) > 0 {
			what = "the commands, the agent's among them"
		}
		m.notice("unknown command " + termtext.StripLine(f[0]) + ": /help lists " + what + "; start a line with // to send it to the agent as it is")
	}
	return nil
}

// summaryCmd looks up this session's summary and lists what show makes of it.
func (m *Model) summaryCmd(show func(protocol.SessionSummary) []string) tea.Cmd {
	cl, ctx, session := m.opts.Client, m.ctx, m.session
	return func() tea.Msg {
		list, err := cl.Sessions(ctx)
		if err != nil {
			return noticeMsg{"could not read the session: " + termtext.StripLine(err.Error())}
		}
		for _, s := range list {
			if s.ID == session {
				return listMsg{show(s)}
			}
		}
		return noticeMsg{"session " + session + " is not listed: run /sessions"}
	}
}

// UIList returns the /ui listing of what is placed now.
func (m *Model) UIList() []string {
	var rows [][]string
	for _, n := range m.scr.nodes {
		if n.Owner == string(ui.OwnerHost) {
			continue
		}
		state := "shown"
		switch {
		case n.Stopped:
			e, _ := n.ext()
			state = "stopped (/ext restart " + e + ")"
		case m.scr.dismissed[n.Node]:
			state = "dismissed here"
		case n.Placement == string(ui.Hidden):
			state = "hidden"
		case n.Err != "":
			state = "error"
		}
		if n.Placement == string(ui.PaneLeft) || n.Placement == string(ui.PaneRight) {
			lay := ComputeLayout(m.scr.width, len(m.scr.visible(string(ui.PaneLeft))) > 0, len(m.scr.visible(string(ui.PaneRight))) > 0)
			if n.Placement == string(ui.PaneLeft) && lay.FoldLeft || n.Placement == string(ui.PaneRight) && lay.FoldRight {
				state += ", folded into the band"
			}
		}
		rows = append(rows, []string{termtext.StripLine(n.ID), n.Placement, termtext.StripLine(n.Owner), state})
	}
	if len(rows) == 0 {
		return []string{"nothing is placed now"}
	}
	head := []string{"ID", "PLACEMENT", "OWNER", "STATE"}
	widths := make([]int, 4)
	for _, r := range append([][]string{head}, rows...) {
		for i, c := range r {
			widths[i] = max(widths[i], width(c))
		}
	}
	var out []string
	for _, r := range append([][]string{head}, rows...) {
		var parts []string
		for i, c := range r {
			parts = append(parts, fit(c, widths[i]))
		}
		out = append(out, strings.TrimRight(strings.Join(parts, "  "), " "))
	}
	return out
}

// findNode resolves what the person typed: an id, or a whole node id.
func (m *Model) findNode(id string) (*node, string) {
	var found []*node
	for _, n := range m.scr.nodes {
		if n.Owner == string(ui.OwnerHost) {
			continue
		}
		if n.Node == id {
			return n, ""
		}
		if n.ID == id {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return nil, "nothing placed is called " + termtext.StripLine(id) + ": /ui lists what is"
	case 1:
		return found[0], ""
	}
	var names []string
	for _, n := range found {
		names = append(names, n.Node)
	}
	return nil, termtext.StripLine(id) + " names more than one surface: use the whole node id, one of " + termtext.StripLine(strings.Join(names, ", "))
}

func (m *Model) uiCommand(args []string) tea.Cmd {
	if len(args) == 0 {
		m.scr.list = append([]string{"placed now (/ui move ID PLACEMENT, /ui hide ID, /ui save ID):"}, m.UIList()...)
		return nil
	}
	need := map[string]int{"move": 3, "hide": 2, "save": 2}
	n, ok := need[args[0]]
	if !ok {
		m.notice("/ui " + termtext.StripLine(args[0]) + " is not a /ui command: use /ui, /ui move ID PLACEMENT, /ui hide ID or /ui save ID")
		return nil
	}
	if len(args) != n {
		m.notice("usage: /ui move ID PLACEMENT, /ui hide ID or /ui save ID")
		return nil
	}
	nd, why := m.findNode(args[1])
	if nd == nil {
		m.notice(why)
		return nil
	}
	env := protocol.Envelope{T: "ui." + args[0]}
	switch args[0] {
	case "move":
		if _, err := ui.ParsePlacement(args[2]); err != nil {
			m.notice(termtext.StripLine(err.Error()))
			return nil
		}
		delete(m.scr.dismissed, nd.Node)
		return m.do("move", &protocol.UIMove{Envelope: env, Session: m.session, Node: nd.Node, Placement: args[2]}, "moved "+termtext.StripLine(nd.ID)+" to "+args[2])
	case "hide":
		return m.do("hide", &protocol.UIHide{Envelope: env, Session: m.session, Node: nd.Node}, "hid "+termtext.StripLine(nd.ID))
	default:
		return m.do("save", &protocol.UISave{Envelope: env, Session: m.session, Node: nd.Node}, "saved the placement of "+termtext.StripLine(nd.ID)+" in the config")
	}
}

// extList and extRestart are the extension host's requests, ext.list and
// ext.restart, as the kernel takes them. A kernel that does not know them
// refuses them, and the TUI shows the refusal.
type extList struct {
	protocol.Envelope
	Session string `json:"session,omitempty"`
}

type extRestart struct {
	protocol.Envelope
	Session string `json:"session"`
	Name    string `json:"name"`
}

// extStatus is one extension of the ext.list reply.
type extStatus struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Restarts int    `json:"restarts"`
	Error    string `json:"error"`
}

// extCommand is /ext, which lists the extensions: those that placed
// something in this session (what the screen knows) and whatever the
// kernel answers to ext.list; and /ext restart ID, which sends
// ext.restart.
func (m *Model) extCommand(args []string) tea.Cmd {
	cl, ctx, session := m.opts.Client, m.ctx, m.session
	if len(args) == 2 && args[0] == "restart" {
		id := strings.TrimPrefix(args[1], "ext:")
		return func() tea.Msg {
			_, err := cl.Do(ctx, &extRestart{Envelope: protocol.Envelope{T: "ext.restart"}, Session: session, Name: id})
			if err != nil {
				return noticeMsg{"could not restart ext:" + termtext.StripLine(id) + ": " + termtext.StripLine(err.Error())}
			}
			return noticeMsg{"restarting ext:" + termtext.StripLine(id)}
		}
	}
	if len(args) != 0 {
		m.notice("usage: /ext, or /ext restart ID")
		return nil
	}
	// What the screen knows: the extensions that placed something.
	owners := map[string]string{}
	for _, n := range m.scr.nodes {
		if e, ok := n.ext(); ok {
			if _, seen := owners[e]; !seen {
				owners[e] = "placed something here"
			}
			if n.Stopped {
				owners[e] = "stopped (/ext restart " + e + ")"
			}
		}
	}
	return func() tea.Msg {
		lines := []string{"extensions:"}
		value, err := cl.Do(context.WithoutCancel(ctx), &extList{Envelope: protocol.Envelope{T: "ext.list"}, Session: session})
		if err == nil {
			var out struct {
				Extensions []extStatus `json:"extensions"`
			}
			if json.Unmarshal(value, &out) == nil {
				for _, e := range out.Extensions {
					state := e.State
					if e.Restarts > 0 {
						state += fmt.Sprintf(", restarted %d times", e.Restarts)
					}
					if e.Error != "" {
						state += ": " + e.Error
					}
					if e.State == "failed" || e.State == "stopped" {
						state += " (/ext restart " + e.Name + ")"
					}
					owners[e.Name] = state
				}
			}
		}
		ids := make([]string, 0, len(owners))
		for id := range owners {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			lines = append(lines, "  ext:"+termtext.StripLine(id)+"  "+termtext.StripLine(owners[id]))
		}
		if len(ids) == 0 {
			lines = append(lines, "  none in this session")
		}
		if err != nil {
			lines = append(lines, "  (the kernel did not list its extensions: "+termtext.StripLine(err.Error())+")")
		}
		return listMsg{lines}
	}
}
