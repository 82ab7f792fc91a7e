package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
	"github.com/getorrery/orrery/ui"
)

// consentReq is a pending consent request, from orrery.consent.requested.
type consentReq struct {
	Request string `json:"request"`
	Tool    string `json:"tool"`
	Subject string `json:"subject"`
	Rule    string `json:"rule"`
	// Part is set for a shell line: Rule is then a sentence naming it.
	Part    string `json:"part"`
	Args    json.RawMessage
	Options []struct {
		ID    string `json:"id"`
		Label string `json:"label"`
	} `json:"options"`
}

// screen is everything the TUI draws, and draw turns it into lines. It
// holds no connection: the model fills it from the session's frames and the
// person's keys, so a golden test can draw one from frames alone.
type screen struct {
	width, height int

	messages []protocol.Message
	// expanded shows every tool call whole rather than folded (Ctrl-O).
	expanded bool
	nodes    []*node
	surfaces map[string]json.RawMessage // this turn's surfaces, by id
	// kept are earlier turns' surfaces, by tool call id: what a call
	// showed while it ran stays what it shows after later turns.
	kept      map[string]json.RawMessage
	dismissed map[string]bool  // node ids this client dismissed
	focus     string           // the focused node id, "" for the composer
	cursor    map[string]int   // the chosen row of each node
	edits     map[string]*edit // unsent work on forms and questions, by node id

	// toolStatus is each tool call's outcome as its result said it
	// (metadata.orrery.outcome.status: ok, error, denied, …), by call id.
	toolStatus map[string]string

	consent       *consentReq
	consentChoice int
	consentScroll int  // the first row of a long subject shown
	consentNudge  bool // a key that does not answer was pressed while it waited

	question       *inputReq // a question the kernel asks, drawn like consent
	questionChoice int

	notices []notice
	input   []string // the composer's lines, as it draws them
	status  string
	running bool
	scroll  int // thread lines scrolled up from the end

	picker *picker // the session picker, when open
	// asRow are the nodes the last draw showed as one-line rows (the
	// band's, the footer's, folded panes); overlay is the node opened
	// whole over the thread from its row, or "".
	asRow   map[string]bool
	overlay string
	list    []string // a listing (/ui, /ext, /cost) drawn over the thread

	md     *markdown
	thread threadCache
	drawn  map[string]nodeDraw // by node id

	graphics string           // the terminal's graphics protocol
	images   []imagePlacement // the images the last draw placed
	decoded  map[string]decodedImage
}

// decodedImage is an image node's decoded bytes and the surface they came from.
type decodedImage struct {
	surface []byte
	data    []byte
	err     error
}

// imageOf returns the bytes of an image node for the terminal's protocol.
func (s *screen) imageOf(n *node) ([]byte, bool) {
	if s.graphics == GraphicsNone {
		return nil, false
	}
	if d, ok := s.decoded[n.Node]; ok && bytes.Equal(d.surface, n.Surface) {
		return d.data, d.err == nil
	}
	var sf surface
	if err := json.Unmarshal(n.Surface, &sf); err != nil || sf.Kind.T != ui.KindImage {
		return nil, false
	}
	data, err := imageBytes(&sf.Kind, s.graphics)
	if s.decoded == nil {
		s.decoded = make(map[string]decodedImage)
	}
	s.decoded[n.Node] = decodedImage{surface: bytes.Clone(n.Surface), data: data, err: err}
	return data, err == nil
}

// threadCache keeps the lines of each finished message at a width.
type threadCache struct {
	w     int
	lines map[string]cachedLines
}

type cachedLines struct {
	n     int // len of the source
	lines []string
}

// Host styles: the input, consent and trust prompts are drawn with these
// and nothing else uses them. A surface's text is always framed inside its
// box, one cell in from the edge, and loses every escape sequence, so it
// cannot take them.
var (
	hostConsent = lipgloss.NewStyle().Bold(true).Reverse(true).Foreground(lipgloss.Color("3"))
	hostInput   = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("6"))
	hostStatus  = lipgloss.NewStyle().Reverse(true)
	styleUser   = lipgloss.NewStyle().Bold(true)
	styleNotice = lipgloss.NewStyle().Foreground(lipgloss.Color("3"))
	styleError  = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
	styleInfo   = lipgloss.NewStyle().Faint(true)
)

// noticeMark is a notice's mark, a glyph as well as a colour: · info,
// ! a warning, ✗ an error.
func noticeMark(level int) string {
	switch level {
	case levelInfo:
		return styleInfo.Render("· ")
	case levelError:
		return styleError.Render("✗ ")
	}
	return styleNotice.Render("! ")
}

// visible returns the nodes drawn at placement p, dismissed ones left out.
func (s *screen) visible(p string) []*node {
	var out []*node
	for _, n := range s.nodes {
		if n.Placement == p && !s.dismissed[n.Node] && n.Owner != string(ui.OwnerHost) {
			out = append(out, n)
		}
	}
	return out
}

// focusable returns the node ids F6 moves through, in screen order.
func (s *screen) focusable() []string {
	var out []string
	for _, p := range []string{string(ui.PaneLeft), string(ui.PaneRight), string(ui.Band), string(ui.Footer), string(ui.Inline)} {
		for _, n := range s.visible(p) {
			out = append(out, n.Node)
		}
	}
	return out
}

func (s *screen) nodeByID(id string) *node {
	for _, n := range s.nodes {
		if n.Node == id {
			return n
		}
	}
	return nil
}

// draw returns the screen, exactly height lines of width cells.
func (s *screen) draw() string {
	w, h := s.width, s.height
	if w < 10 || h < 6 {
		return strings.Join(blank(w, h), "\n")
	}
	left, right := s.visible(string(ui.PaneLeft)), s.visible(string(ui.PaneRight))
	lay := ComputeLayout(w, len(left) > 0, len(right) > 0)

	// The band: its own nodes, then the panes that folded.
	bandNodes := s.visible(string(ui.Band))
	if lay.FoldLeft {
		bandNodes = append(bandNodes, left...)
	}
	if lay.FoldRight {
		bandNodes = append(bandNodes, right...)
	}
	clear(s.asRow)
	band := s.rows(bandNodes, w, MaxBandRows, "band")
	footer := s.rows(s.visible(string(ui.Footer)), w, MaxFooterRows, "footer")
	consent := append(s.drawConsent(w), s.drawQuestion(w)...)
	input := s.drawInput(w)
	status := []string{hostStatus.Render(fit(" "+s.status, w))}

	mid := h - len(band) - len(footer) - len(consent) - len(input) - len(status)
	if mid < 1 {
		// Too short: the thread keeps one row, the band and footer give way.
		band, footer = nil, nil
		mid = max(1, h-len(consent)-len(input)-len(status))
	}

	var middle []string
	s.images = s.images[:0]
	threadLines := s.drawThread(lay.Thread, mid)
	var blocks [][]string
	if lay.Left > 0 {
		blocks = append(blocks, s.drawPane(left, lay.Left, mid, len(band), 0))
	}
	blocks = append(blocks, threadLines)
	if lay.Right > 0 {
		blocks = append(blocks, s.drawPane(right, lay.Right, mid, len(band), lay.Left+lay.Thread))
	}
	middle = columns(mid, blocks...)

	var out []string
	out = append(out, band...)
	out = append(out, middle...)
	out = append(out, consent...)
	out = append(out, input...)
	out = append(out, footer...)
	out = append(out, status...)
	if len(out) > h {
		out = out[len(out)-h:]
	}
	for len(out) < h {
		out = append(out, strings.Repeat(" ", w))
	}
	return strings.Join(out, "\n")
}

// rows draws nodes one per row (band, footer): a marker, the title, the
// owner label and the first line of the surface. Past max rows the last
// row says how many more wait.
func (s *screen) rows(nodes []*node, w, maxRows int, what string) []string {
	var out []string
	if s.asRow == nil {
		s.asRow = map[string]bool{}
	}
	for i, n := range nodes {
		s.asRow[n.Node] = true
		if i == maxRows-1 && len(nodes) > maxRows {
			more := fmt.Sprintf("+%d more (/ui lists them)", len(nodes)-i)
			out = append(out, styleDim.Render(fit(" "+more, w)))
			break
		}
		mark := "▸"
		if n.Node == s.focus {
			mark = "▶"
		}
		head := mark + " " + termtext.StripLine(n.Title) + " [" + ownerLabel(n) + "] "
		if n.Stopped {
			head = mark + " " + termtext.StripLine(n.Title) + " [" + ownerLabel(n) + " stopped: /ext restart " + strings.TrimPrefix(n.Owner, "ext:") + "] "
		}
		body := oneLineOf(n, w-width(head), s.md)
		line := fit(head+body, w)
		if n.Stopped {
			line = styleDim.Render(termtext.Strip(line))
		} else if n.Node == s.focus {
			line = styleBold.Render(line)
		}
		out = append(out, line)
	}
	_ = what
	return out
}

// drawPane draws the nodes of one pane, stacked, each in its own box; the
// pane's top-left cell is at row0, col0 on the screen.
func (s *screen) drawPane(nodes []*node, w, h, row0, col0 int) []string {
	if len(nodes) == 0 {
		return blank(w, h)
	}
	// Each node gets an equal share, at least 3 rows; the rest wait.
	n := min(len(nodes), max(1, h/3))
	var out []string
	for i := range n {
		bh := h / n
		if i == n-1 {
			bh = h - len(out)
		}
		nd := nodes[i]
		title := termtext.StripLine(nd.Title)
		if i == n-1 && n < len(nodes) {
			title += fmt.Sprintf(" (+%d more)", len(nodes)-n)
		}
		if data, ok := s.imageOf(nd); ok && w > 4 && bh > 2 {
			s.images = append(s.images, imagePlacement{node: nd.Node, row: row0 + len(out) + 1, col: col0 + 2, cols: w - 4, rows: bh - 2, data: data})
		}
		content := s.drawNode(nd, w-4, bh-2)
		label := ownerLabel(nd)
		if nd.Stopped {
			label += " stopped"
		}
		out = append(out, box(title, label, content, w, bh, nd.Node == s.focus, nd.Stopped)...)
	}
	return out
}

// nodeDraw is a node's last drawing and what it was drawn from.
type nodeDraw struct {
	surface   []byte
	err       string
	w, h, cur int
	stopped   bool
	edit      *edit
	editGen   int
	lines     []string
}

// drawNode draws one node's content in w cells and at most h rows,
// reusing the last drawing while nothing it depends on changed: a token
// in the thread does not redraw the panes.
func (s *screen) drawNode(n *node, w, h int) []string {
	cur, ok := s.cursor[n.Node]
	if !ok || n.Node != s.focus {
		cur = -1
	}
	e := s.edits[n.Node]
	gen := 0
	if e != nil {
		gen = e.gen
	}
	if d, ok := s.drawn[n.Node]; ok && d.w == w && d.h == h && d.cur == cur && d.stopped == n.Stopped && d.err == n.Err &&
		d.edit == e && d.editGen == gen && bytes.Equal(d.surface, n.Surface) {
		return d.lines
	}
	lines := s.drawNodeFresh(n, w, h, cur, e)
	if s.drawn == nil || len(s.drawn) > 256 {
		s.drawn = make(map[string]nodeDraw)
	}
	s.drawn[n.Node] = nodeDraw{surface: bytes.Clone(n.Surface), err: n.Err, w: w, h: h, cur: cur, stopped: n.Stopped, edit: e, editGen: gen, lines: lines}
	return lines
}

func (s *screen) drawNodeFresh(n *node, w, h, cur int, e *edit) []string {
	var lines []string
	if n.Stopped && !isStoppedSurface(n.Surface) {
		e, _ := n.ext()
		lines = append(lines, "stopped: /ext restart "+termtext.StripLine(e))
	}
	if len(n.Surface) > 0 {
		lines = append(lines, renderSurface(n.Surface, renderOpts{width: w, height: h, cursor: cur, md: s.md, graphics: s.graphics, edit: e})...)
	}
	if n.Err != "" {
		lines = append(lines, wrap(styleNotice.Render("! "+termtext.StripLine(n.Err)), w)...)
	}
	if h > 0 && len(lines) > h {
		lines = lines[:h]
	}
	return lines
}

// maxConsentRows is the most rows a consent request's subject takes; a
// longer one scrolls with ↑/↓.
const maxConsentRows = 8

const (
	underlineOn  = "\x1b[4m"
	underlineOff = "\x1b[24m"
)

// carryUnderline ends the underline at the end of a row that opened it and
// opens it again at the start of the next, so that each row stands alone.
func carryUnderline(rows []string) []string {
	on := false
	for i, r := range rows {
		if on {
			r = underlineOn + r
		}
		if a, b := strings.LastIndex(r, underlineOn), strings.LastIndex(r, underlineOff); a > b {
			on, r = true, r+underlineOff
		} else {
			on = false
		}
		rows[i] = r
	}
	return rows
}

// drawConsent draws the pending consent request in the host's own style:
// a reversed banner the full width of the screen, never inside a box. The
// whole subject is shown, wrapped, never cut (a long one scrolls), and so
// are the choices, with the keys that answer.
func (s *screen) drawConsent(w int) []string {
	c := s.consent
	if c == nil {
		return nil
	}
	what := termtext.StripLine(c.Tool)
	if c.Subject != "" {
		what += "(" + termtext.StripLine(c.Subject) + ")"
	}
	head := " ⚠ CONSENT · orrery asks: allow "
	text := head + what + "?"
	if p := termtext.StripLine(c.Part); p != "" {
		// The part that decided is underlined, wherever the rows break.
		if i := strings.Index(text[len(head):], p); i >= 0 {
			i += len(head)
			text = text[:i] + underlineOn + p + underlineOff + text[i+len(p):]
		}
	}
	rows := carryUnderline(wrapCommand(text, w))
	var out []string
	if len(rows) > maxConsentRows {
		first := min(max(0, s.consentScroll), len(rows)-maxConsentRows)
		for _, r := range rows[first : first+maxConsentRows] {
			out = append(out, hostConsent.Render(fit(r, w)))
		}
		out = append(out, styleDim.Render(fit(fmt.Sprintf("   ↑/↓ scroll the request: rows %d–%d of %d", first+1, first+maxConsentRows, len(rows)), w)))
	} else {
		for _, r := range rows {
			out = append(out, hostConsent.Render(fit(r, w)))
		}
	}
	if c.Rule != "" {
		because := "   asked because of "
		if c.Part != "" {
			because = "   asked because " // the rule is a sentence naming the part
		}
		for _, r := range wrapCommand(because+termtext.StripLine(c.Rule), w) {
			out = append(out, styleDim.Render(fit(r, w)))
		}
	}
	// The choices, then the keys, each whole on a row: a row breaks
	// between them, never inside one, so the highlighted choice is always
	// drawn whole, in reverse.
	units := make([]string, 0, len(c.Options)+1)
	for i, o := range c.Options {
		label := "[" + strconv.Itoa(i+1) + "] " + termtext.StripLine(o.Label)
		if i == s.consentChoice {
			label = hostConsent.Render("❯ " + label)
		} else {
			label = "  " + label
		}
		units = append(units, label)
	}
	units = append(units, " ←/→ Enter · Esc denies")
	row := " "
	for _, u := range units {
		if width(row) > 1 && width(row)+2+width(u) > w {
			out = append(out, row)
			row = " "
		}
		if width(row) > 1 {
			row += "  "
		}
		if width(row)+width(u) > w {
			for _, r := range wrap(u, w-1) {
				out = append(out, " "+r)
			}
			row = " "
			continue
		}
		row += u
	}
	if width(row) > 1 {
		out = append(out, row)
	}
	if s.consentNudge {
		out = append(out, styleNotice.Render(fit("   answer this first: the composer waits, and your draft is kept", w)))
	}
	return out
}

// drawInput draws the composer: the host's prompt on every line.
func (s *screen) drawInput(w int) []string {
	var out []string
	hint := "Enter send · Ctrl-J newline · Tab complete · F6 panes · /ui · Ctrl-C cancel/quit"
	if s.running {
		hint = "Enter steers the run · Ctrl-C cancels it · F6 panes"
	}
	if s.consent != nil {
		// Paused while a consent request waits: keys go to the request.
		hint = "paused: the request above takes the keys · your draft is kept"
		out = append(out, styleDim.Render(fit(strings.Repeat("─", 2)+" "+hint+" ", w)))
		for i, l := range s.input {
			p := "  "
			if i == 0 {
				p = "› "
			}
			out = append(out, styleDim.Render(p+fit(termtext.Strip(l), w-2)))
		}
		if len(s.input) == 0 {
			out = append(out, styleDim.Render("› "+strings.Repeat(" ", w-2)))
		}
		return out
	}
	out = append(out, styleDim.Render(fit(strings.Repeat("─", 2)+" "+hint+" ", w)))
	for i, l := range s.input {
		p := "› "
		if i > 0 {
			p = "  "
		}
		out = append(out, hostInput.Render(p)+fit(l, w-2))
	}
	if len(s.input) == 0 {
		out = append(out, hostInput.Render("› ")+strings.Repeat(" ", w-2))
	}
	return out
}

// drawThread draws the conversation in w cells, the last h rows of it
// (less what is scrolled), with the notices and any listing after it.
func (s *screen) drawThread(w, h int) []string {
	inner := max(1, w-2)
	var lines []string
	if n := s.nodeByID(s.overlay); n != nil {
		// A row opened whole: the surface in all the thread's room.
		content := s.drawNode(n, inner-4, max(1, h-3))
		lines = append(box(termtext.StripLine(n.Title), ownerLabel(n), content, inner, min(h-1, len(content)+2), true, n.Stopped),
			styleDim.Render(fit("  Esc or Enter closes it", inner)))
	} else if s.picker != nil {
		lines = s.picker.draw(inner, h)
	} else {
		lines = s.threadLines(inner)
		for _, n := range s.visible(string(ui.Inline)) {
			content := s.drawNode(n, inner-4, 0)
			lines = append(lines, box(termtext.StripLine(n.Title), ownerLabel(n), content, inner, len(content)+2, n.Node == s.focus, n.Stopped)...)
		}
		if len(s.list) > 0 {
			lines = append(lines, "")
			for _, l := range s.list {
				lines = append(lines, wrap(l, inner)...)
			}
		}
		for _, n := range s.notices {
			lines = append(lines, wrap(noticeMark(n.level)+n.text, inner)...)
		}
	}
	end := len(lines) - s.scroll
	if end < h {
		end = min(len(lines), h)
	}
	start := max(0, end-h)
	view := lines[start:end]
	out := make([]string, h)
	for i := range h {
		l := ""
		if i < len(view) {
			l = view[i]
		}
		out[i] = " " + fit(l, inner) + " "
	}
	return out
}

// threadLines draws every message.
func (s *screen) threadLines(w int) []string {
	if s.thread.w != w || s.thread.lines == nil {
		s.thread = threadCache{w: w, lines: make(map[string]cachedLines)}
	}
	results := map[string]string{}
	for _, m := range s.messages {
		if m.Role == protocol.RoleTool {
			results[m.ToolCallID] = m.Content.String()
		}
	}
	var out []string
	for _, m := range s.messages {
		switch m.Role {
		case protocol.RoleUser:
			text := termtext.Strip(m.Content.String())
			out = append(out, "")
			for i, l := range wrap(text, w-2) {
				p := "› "
				if i > 0 {
					p = "  "
				}
				out = append(out, styleUser.Render(p+l))
			}
		case protocol.RoleAssistant:
			text := m.Content.String()
			if text != "" {
				out = append(out, "")
				out = append(out, s.assistantLines(m.ID, text, w)...)
			}
			for _, c := range m.ToolCalls {
				out = append(out, s.toolCallLines(c, results, w)...)
			}
		case protocol.RoleReasoning:
			text := termtext.StripLine(m.Content.String())
			if text != "" {
				out = append(out, styleDim.Render(clip("∴ "+text, w)))
			}
		}
	}
	return out
}

// assistantLines draws a reply as Markdown, block by block, the same while
// it streams as once it is whole: a delta redraws only the last block, and
// the end of the turn moves nothing.
func (s *screen) assistantLines(id, text string, w int) []string {
	if c, ok := s.thread.lines[id]; ok && c.n == len(text) {
		return c.lines
	}
	lines := s.md.renderBlocks(termtext.Strip(text), w)
	s.thread.lines[id] = cachedLines{n: len(text), lines: lines}
	return lines
}

// toolMark is a tool call's mark, in words as well as a glyph: ✓ when its
// result said ok, ⊘ when it was denied or stopped, ✗ and the outcome
// otherwise, ⋯ while the run that made
// it is in flight, – when the run ended without a result for it.
func (s *screen) toolMark(id string, done bool) string {
	st, ok := s.toolStatus[id]
	switch {
	case ok && (st == "ok" || st == ""):
		return "✓"
	case ok && (st == "denied" || st == "cancelled"):
		return "⊘ " + st // refused or stopped, not failed
	case ok:
		return "✗ " + termtext.StripLine(st)
	case done:
		return "✓" // a result from before outcomes were logged
	case s.running:
		return "⋯"
	}
	return "– no result"
}

// foldedLines is how many lines a tool call's output takes while folded.
const foldedLines = 8

// expandedLines bounds a tool call's output shown whole (Ctrl-O).
const expandedLines = 2000

// toolCallLines draws a tool call and its result: the surface that shows
// it (a shell's streamed output) or the result's text, at most foldedLines
// lines with its arguments on one line, or (expanded, Ctrl-O) whole.
func (s *screen) toolCallLines(c protocol.ToolCall, results map[string]string, w int) []string {
	args := termtext.StripLine(c.Function.Arguments)
	_, done := results[c.ID]
	head := "⚙ " + styleBold.Render(termtext.StripLine(c.Function.Name)) + " " + s.toolMark(c.ID, done) + " "
	var out []string
	if s.expanded {
		out = wrap(head+styleDim.Render(args), w)
	} else {
		out = []string{clip(head+styleDim.Render(args), w)}
	}
	height := foldedLines
	if s.expanded {
		height = expandedLines
	}
	var body []string
	sf, ok := s.surfaces[c.ID]
	if !ok {
		sf, ok = s.kept[c.ID]
	}
	if ok {
		body = renderSurface(sf, renderOpts{width: w - 4, height: height, cursor: -1, md: s.md})
	} else if r, ok := results[c.ID]; ok {
		body = wrap(termtext.Strip(r), w-4)
	}
	if len(body) > height {
		hint := "Ctrl-O shows all"
		if s.expanded {
			hint = "too long to show whole"
		}
		body = append(body[:height-1], styleDim.Render(fmt.Sprintf("… %d more lines (%s)", len(body)-height+1, hint)))
	}
	for _, l := range body {
		out = append(out, "  │ "+l)
	}
	return out
}
