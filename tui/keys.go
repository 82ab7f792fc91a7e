package tui

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
	"github.com/getorrery/orrery/ui/component"
)

// maxAttachmentBytes bounds one @mentioned file sent as an attachment.
const maxAttachmentBytes = 256 << 10

// key handles one key press.
func (m *Model) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	s := k.String()
	if s == "ctrl+c" {
		return m.interrupt()
	}
	m.draftKept = false
	if m.scr.overlay != "" {
		// An opened row takes the keys until it is closed.
		if s == "esc" || s == "enter" || s == "q" || m.scr.nodeByID(m.scr.overlay) == nil {
			m.scr.overlay = ""
		}
		return m, nil
	}
	if m.scr.picker != nil {
		return m.pickerKey(s)
	}
	if m.scr.consent != nil {
		// A waiting consent request takes every key but the transcript's
		// scrolling: nothing typed reaches the composer, whose draft stays.
		if s != "pgup" && s != "pgdown" {
			return m, m.consentKey(s)
		}
	} else if m.scr.question != nil && m.scr.focus == "" {
		if cmd, ok := m.inputKey(s); ok {
			return m, cmd
		}
	}
	switch s {
	case "f6":
		m.cycleFocus()
		return m, nil
	case "ctrl+o":
		// Folding is the person's choice, the same live and on replay.
		m.scr.expanded = !m.scr.expanded
		if m.scr.expanded {
			m.info("tool calls shown whole (Ctrl-O folds them to 8 lines)")
		} else {
			m.info("tool calls folded to 8 lines (Ctrl-O shows them whole)")
		}
		return m, nil
	case "pgup":
		m.scr.scroll += max(1, m.scr.height/2)
		return m, nil
	case "pgdown":
		m.scr.scroll = max(0, m.scr.scroll-max(1, m.scr.height/2))
		return m, nil
	}
	if m.scr.focus != "" {
		if cmd, ok := m.focusKey(k); ok {
			return m, cmd
		}
		// Any other key goes back to the composer.
		m.scr.focus = ""
	}
	return m, m.composerKey(k)
}

// quitWithin is how soon a second Ctrl-C must follow the first to quit.
const quitWithin = 2 * time.Second

// interrupt is Ctrl-C: it puts a draft away (into the history, where ↑
// finds it); with none it cancels the run in flight; with neither it says
// that a second Ctrl-C within quitWithin quits, and that one does.
func (m *Model) interrupt() (tea.Model, tea.Cmd) {
	now := time.Now()
	if now.Before(m.quitBy) {
		return m, tea.Quit
	}
	if strings.TrimSpace(m.input.String()) != "" && !m.draftKept {
		m.input.take()
		m.draftKept = true
		m.info("the draft is put away (↑ brings it back)")
		return m, nil
	}
	if cmd := m.cancelRun("cancelling the run"); cmd != nil {
		return m, cmd
	}
	m.quitBy = now.Add(quitWithin)
	m.info("Ctrl-C again within 2 s quits (or Ctrl-D on an empty composer)")
	return m, nil
}

// cancelRun asks the kernel to cancel the run in flight, saying so, and
// returns nil when there is none to cancel (or the cancel was sent).
func (m *Model) cancelRun(say string) tea.Cmd {
	if !m.scr.running || m.cancelSent || m.session == "" {
		return nil
	}
	m.cancelSent = true
	m.info(say)
	return m.do("cancel", &protocol.RunCancel{Envelope: protocol.Envelope{T: "run.cancel"}, Session: m.session}, "")
}

func (m *Model) pickerKey(s string) (tea.Model, tea.Cmd) {
	p := m.scr.picker
	switch s {
	case "up", "k":
		p.up()
	case "down", "j":
		p.down()
	case "enter":
		if c, ok := p.chosen(); ok {
			m.scr.picker = nil
			return m, m.attachCmd(c.ID)
		}
		m.scr.picker = nil
		if m.session == "" {
			return m, m.newSessionCmd(m.opts.Model)
		}
	case "esc":
		m.scr.picker = nil
		if m.session == "" {
			return m, m.newSessionCmd(m.opts.Model)
		}
	}
	return m, nil
}

// consentKey answers the pending consent request: 1–3 pick an option at
// once, ←/→ (Tab) move the highlight, which starts on Deny, and Enter
// answers it; Esc denies; ↑/↓ scroll a long request. No letter answers,
// so a person typing when the request appears answers nothing; what does
// not answer is swallowed, and the request says to answer it first.
func (m *Model) consentKey(s string) tea.Cmd {
	c := m.scr.consent
	n := max(1, len(c.Options))
	pick := -1
	switch s {
	case "left", "shift+tab":
		m.scr.consentChoice = (m.scr.consentChoice + n - 1) % n
		return nil
	case "right", "tab":
		m.scr.consentChoice = (m.scr.consentChoice + 1) % n
		return nil
	case "up":
		m.scr.consentScroll = max(0, m.scr.consentScroll-1)
		return nil
	case "down":
		m.scr.consentScroll++
		return nil
	case "enter":
		pick = m.scr.consentChoice
	case "esc":
		pick = denyChoice(c)
	default:
		if len(s) == 1 && s[0] >= '1' && s[0] <= '9' {
			pick = int(s[0] - '1')
		}
	}
	if pick < 0 || pick >= len(c.Options) {
		m.scr.consentNudge = true
		return nil
	}
	opt := c.Options[pick].ID
	req := &protocol.ConsentAnswer{Envelope: protocol.Envelope{T: "consent.answer"}, Session: m.session, Request: c.Request, Option: opt}
	m.info("answered " + opt)
	return m.do("consent", req, "")
}

// denyChoice is the index of c's deny option: the safest, where the
// highlight starts and what Esc answers (the last option when none is
// called deny).
func denyChoice(c *consentReq) int {
	for i, o := range c.Options {
		if o.ID == "deny" {
			return i
		}
	}
	return len(c.Options) - 1
}

// cycleFocus is F6: the next surface, then back to the composer.
func (m *Model) cycleFocus() {
	ids := m.scr.focusable()
	if len(ids) == 0 {
		m.scr.focus = ""
		m.notice("no surface to focus: nothing is placed")
		return
	}
	i := slices.Index(ids, m.scr.focus)
	switch {
	case m.scr.focus == "":
		m.scr.focus = ids[0]
	case i < 0 || i == len(ids)-1:
		m.scr.focus = ""
	default:
		m.scr.focus = ids[i+1]
	}
	if m.scr.focus != "" {
		if _, ok := m.scr.cursor[m.scr.focus]; !ok {
			m.scr.cursor[m.scr.focus] = 0
		}
	}
}

// focusKey acts on the focused surface: Esc, x or Delete dismisses it
// (for this client and this session only), ↑/↓ move its cursor, Enter
// commits an action.
func (m *Model) focusKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	n := m.scr.nodeByID(m.scr.focus)
	if n == nil {
		m.scr.focus = ""
		return nil, false
	}
	if cmd, ok := m.editKey(n, k); ok {
		return cmd, true
	}
	s := k.String()
	switch s {
	case "esc", "x", "delete":
		m.scr.dismissed[n.Node] = true
		m.scr.focus = ""
		m.info("dismissed " + termtext.StripLine(n.ID) + " on this screen (/ui lists it; another client still draws it)")
		return nil, true
	case "up", "k":
		m.scr.cursor[n.Node] = max(0, m.scr.cursor[n.Node]-1)
		return nil, true
	case "down", "j", "tab":
		m.scr.cursor[n.Node]++
		return nil, true
	case "enter", "space":
		if s == "enter" && m.scr.asRow[n.Node] && !actionable(n) {
			// A row shows a line of it: Enter opens it whole.
			m.scr.overlay = n.Node
			return nil, true
		}
		return m.activate(n), true
	}
	return nil, false
}

// actionable reports whether Enter on n does something of its own: a
// question's answer, a form's submit, a table's select, a link, a
// component's action.
func actionable(n *node) bool {
	if len(n.Links) > 0 || len(n.Actions) > 0 {
		return true
	}
	var root struct {
		Kind kind `json:"kind"`
	}
	_ = json.Unmarshal(n.Surface, &root)
	switch root.Kind.T {
	case "question", "form", "table":
		return true
	}
	return false
}

// activate commits the focused component's action: a button's press, a
// question's select, a table's select, a form's submit, a link's open.
func (m *Model) activate(n *node) tea.Cmd {
	var root struct {
		Kind kind `json:"kind"`
	}
	_ = json.Unmarshal(n.Surface, &root)
	cur := m.scr.cursor[n.Node]
	if len(n.Links) > 0 && len(n.Actions) == 0 {
		return m.openLink(n, n.Links[min(cur, len(n.Links)-1)])
	}
	var event string
	var value any
	switch root.Kind.T {
	case "question":
		return m.sendAnswer(n, &root.Kind)
	case "form":
		return m.submitForm(n, &root.Kind)
	case "table":
		event = "select"
		if rows := root.Kind.tableRows(); cur < len(rows) {
			value = rows[cur]
		}
	default:
		event = "press"
	}
	action, ok := n.Actions[event]
	if !ok {
		if event == "press" && len(n.Actions) == 1 {
			for _, a := range n.Actions {
				action = a
			}
		} else {
			m.notice(termtext.StripLine(n.ID) + " takes no " + event + " here")
			return nil
		}
	}
	if n.Stopped {
		e, _ := n.ext()
		m.notice(termtext.StripLine(n.Owner) + " is stopped, so nothing would hear this: run /ext restart " + termtext.StripLine(e))
		return nil
	}
	return m.intent(n, action, value, fmt.Sprintf("sent %s to %s", action, termtext.StripLine(n.Owner)))
}

// uiIntent is the ui.intent request: a committed action on a placed node.
type uiIntent struct {
	protocol.Envelope
	Session string          `json:"session"`
	Node    string          `json:"node"`
	Action  string          `json:"action"`
	Value   json.RawMessage `json:"value,omitempty"`
}

func (m *Model) intent(n *node, action string, value any, ok string) tea.Cmd {
	req := &uiIntent{Envelope: protocol.Envelope{T: "ui.intent"}, Session: m.session, Node: n.Node, Action: action}
	if value != nil {
		req.Value, _ = json.Marshal(value)
	}
	return m.do(action, req, ok)
}

// openLink follows the host's link rules: only a target the bound tree
// shows, only http(s) or a path in the workspace; and only on the host's
// own screen. Attached to a kernel elsewhere it only names the target.
func (m *Model) openLink(n *node, href string) tea.Cmd {
	if _, err := component.CheckHref(href); err != nil {
		m.notice(termtext.StripLine(err.Error()))
		return nil
	}
	if !m.opts.Host {
		m.notice("link " + termtext.StripLine(href) + ": this screen is attached to a kernel elsewhere, which never opens links; open it yourself")
		return nil
	}
	return m.intent(n, "open", href, "asked the host to open "+termtext.StripLine(href))
}

// composerKey edits the composer, sends on Enter and runs commands.
func (m *Model) composerKey(k tea.KeyPressMsg) tea.Cmd {
	m.scr.scroll = 0
	switch k.String() {
	case "enter":
		return m.submit()
	case "ctrl+d":
		if m.input.String() == "" {
			return tea.Quit // as a shell: end of input on an empty line
		}
		m.input.key("ctrl+d") // deletes forward, as in a shell
	case "ctrl+j", "alt+enter", "shift+enter":
		m.input.insert("\n")
	case "up":
		if !m.input.multiline() {
			m.input.prev()
		}
	case "down":
		if !m.input.multiline() {
			m.input.next()
		}
	case "tab":
		return m.complete()
	case "esc":
		// Esc closes a listing; with none, it interrupts the run.
		if m.scr.list != nil {
			m.scr.list = nil
		} else if cmd := m.cancelRun("cancelling the run (Esc)"); cmd != nil {
			return cmd
		}
	default:
		if !m.input.key(k.String()) && k.Text != "" {
			m.input.insert(k.Text)
		}
	}
	return nil
}

// complete is Tab: an @mention completes against the workspace's files, a
// leading / against the commands. On the host's screen the workspace is
// this machine's; attached to a kernel elsewhere it is the kernel's, asked
// with workspace.files.
func (m *Model) complete() tea.Cmd {
	word, start := m.input.currentWord()
	switch {
	case strings.HasPrefix(word, "@") && !m.opts.Host:
		return m.remoteFilesCmd(word, start)
	case strings.HasPrefix(word, "@"):
		prefix, matches := completeFile(m.workspace(), word[1:])
		m.input.replaceWord(start, "@"+prefix)
		if len(matches) > 1 {
			m.scr.list = append([]string{"files:"}, matches...)
		}
	case strings.HasPrefix(word, "/") && start == 0:
		var names, lines []string
		for _, c := range commandNames {
			if strings.HasPrefix(c, word) {
				names, lines = append(names, c), append(lines, c)
			}
		}
		for _, c := range m.agentCommands {
			if name := "/" + c.Name; strings.HasPrefix(name, word) && !isOwnCommand(name) {
				names, lines = append(names, name), append(lines, c.describe())
			}
		}
		switch {
		case len(names) == 1:
			m.input.replaceWord(start, names[0]+" ")
			if c, ok := m.agentCommand(names[0]); ok {
				m.scr.list = []string{c.describe(), "Enter sends it to the agent as your prompt"}
			}
		case len(names) > 1:
			m.input.replaceWord(start, commonPrefix(names))
			m.scr.list = append([]string{"commands:"}, lines...)
		}
	}
	return nil
}

func (m *Model) workspace() string {
	if m.opts.Workspace != "" {
		return m.opts.Workspace
	}
	wd, _ := os.Getwd()
	return wd
}

// submit sends the composer's text: a command, a prompt, or (while a run
// is in flight) a steer.
func (m *Model) submit() tea.Cmd {
	text := m.input.take()
	if strings.TrimSpace(text) == "" {
		return nil
	}
	if q := m.scr.question; q != nil && q.InputKind != "choice" && q.InputKind != "confirm" && !strings.HasPrefix(text, "/") {
		// A text question takes the composer's line as its answer.
		return m.answerInput(strings.TrimSpace(text))
	}
	if strings.HasPrefix(text, "//") {
		// A line the person wants sent as it is, slash and all.
		text = text[1:]
	} else if strings.HasPrefix(text, "/") {
		name := strings.Fields(text)[0]
		if _, ok := m.agentCommand(name); !ok {
			return m.command(strings.TrimSpace(text))
		}
		// The agent's command: sent as the prompt text.
		text = strings.TrimSpace(text)
	}
	if m.session == "" {
		m.notice("no session is open yet: wait for it, or run /new")
		return nil
	}
	m.scr.list = nil
	m.scr.notices = nil // what they said was before this prompt
	in := protocol.RunInput{Text: text}
	root := m.workspace()
	var remote []string
	if !m.opts.Host {
		// This machine's files are not the kernel's workspace: nothing is
		// read here. A mention that names a file of the kernel's workspace
		// goes as a path attachment, which the kernel reads itself.
		remote = mentionWords(text)
		root = ""
	}
	for _, p := range mentions(root, text) {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			m.fail("could not attach @" + termtext.StripLine(p) + ": " + termtext.StripLine(err.Error()))
			continue
		}
		if len(data) > maxAttachmentBytes {
			data = data[:maxAttachmentBytes]
		}
		in.Attachments = append(in.Attachments, protocol.ContentPart{Type: "text", Text: "File @" + p + ":\n" + string(data)})
	}
	cl, ctx, session := m.opts.Client, m.ctx, m.session
	steer := m.scr.running
	return func() tea.Msg {
		var skipped []string
		for _, p := range remote {
			files, err := cl.WorkspaceFiles(ctx, session, p, 50)
			if err != nil || !slices.Contains(files.Files, p) {
				skipped = append(skipped, p)
				continue
			}
			in.Attachments = append(in.Attachments, protocol.ContentPart{Type: "document", Source: &protocol.Source{Type: "path", Value: p}})
		}
		var reply protocol.RunSendReply
		var err error
		if steer {
			reply, err = cl.Steer(ctx, session, in)
		} else {
			// With the run's usage events: the status line shows its
			// model and tokens as it goes.
			reply, err = cl.SendWith(ctx, session, in, client.SendOptions{UsageEvents: true})
			if err != nil && strings.Contains(err.Error(), "steer") {
				reply, err = cl.Steer(ctx, session, in)
			}
		}
		if err != nil {
			return sendFailedMsg{text: text, err: err}
		}
		if len(skipped) > 0 {
			// Sent; the words that name no file of the kernel's workspace
			// went as text.
			return sentMsg{reply: reply, notice: "@" + termtext.StripLine(strings.Join(skipped, ", @")) + " names no file of the kernel's workspace, so it went as text, not attached"}
		}
		return sentMsg{reply: reply}
	}
}
