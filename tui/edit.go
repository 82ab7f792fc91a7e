package tui

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/termtext"
	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// edit is the person's unsent work on a focused form or question: the
// values typed or toggled in a form's fields, the choices picked and the
// text typed in a question. A field the person has not touched is read
// from the surface, so a data update still shows through wherever the
// person left the form alone. The zero value is no work at all.
type edit struct {
	vals map[string]any // form: by field name; string (text, multiline, number, choice), bool, []string (multichoice)
	sub  map[string]int // form: the multichoice option under the cursor, by field name
	// carets are where the cursor is in a form's text, number and
	// multiline fields, by field name; a field with none has it at its end.
	carets map[string]caret

	picked    []string // question: the choice values picked
	pickedSet bool     // question: picked replaces the surface's answer
	text      []rune   // question: the typed answer
	textSet   bool     // question: text replaces the surface's answer
	answer    caret    // question: the cursor in the typed answer

	gen int // counts changes, so a draw knows when to redraw
}

// caret is a cursor left in a text: its rune index and the first rune
// drawn (lineEdit's pos and off). The zero value is no cursor left there,
// which puts it at the end.
type caret struct {
	pos, off int
	set      bool
}

// line returns an editor holding s with the cursor at c (at the end when
// c is not set).
func (c caret) line(s string) *lineEdit {
	if !c.set {
		return newLineEdit(s, -1, 0)
	}
	return newLineEdit(s, c.pos, c.off)
}

// caretOf returns where the editor's cursor is.
func caretOf(l *lineEdit) caret { return caret{pos: l.pos, off: l.off, set: true} }

// isTextField reports whether a form field is edited as text: text,
// number and multiline fields (and any type the TUI does not know).
func isTextField(f formField) bool {
	switch f.Type {
	case "boolean", "choice", "multichoice":
		return false
	}
	return true
}

// cleanField makes text going into a field inert: one line, except in a
// multiline field.
func cleanField(f formField, s string) string {
	if f.Type == "multiline" {
		return termtext.Strip(s)
	}
	return termtext.StripLine(s)
}

// fieldLine returns the editor of a text field: its value made inert, the
// cursor where the person left it (the end at first).
func (e *edit) fieldLine(f formField) *lineEdit {
	v, _ := e.fieldValue(f).(string)
	var c caret
	if e != nil {
		c = e.carets[f.Name]
	}
	return c.line(cleanField(f, v))
}

// setFieldLine keeps what the editor of a text field holds: its value,
// only when it changed (so a field the person only moved through still
// shows the surface's value), and its cursor.
func (e *edit) setFieldLine(f formField, l *lineEdit) {
	if v, _ := e.fieldValue(f).(string); v != l.String() {
		e.setField(f.Name, l.String())
	}
	if e.carets == nil {
		e.carets = make(map[string]caret)
	}
	e.carets[f.Name] = caretOf(l)
	e.gen++
}

// answerLine returns the editor of a question's typed answer.
func (e *edit) answerLine(k *kind) *lineEdit {
	var c caret
	if e != nil {
		c = e.answer
	}
	return c.line(termtext.StripLine(e.typed(k)))
}

// setAnswerLine keeps what the editor of a question's typed answer holds.
func (e *edit) setAnswerLine(k *kind, l *lineEdit) {
	if e.typed(k) != l.String() {
		e.text, e.textSet = l.buf, true
	}
	e.answer = caretOf(l)
	e.gen++
}

// fieldValue is a form field's value as the person edits it: a string for
// text, multiline, number and choice fields, a bool for boolean, a
// []string for multichoice.
func (e *edit) fieldValue(f formField) any {
	if e != nil {
		if v, ok := e.vals[f.Name]; ok {
			return v
		}
	}
	switch f.Type {
	case "boolean":
		var b bool
		_ = json.Unmarshal(f.Value, &b)
		return b
	case "multichoice":
		var l []string
		_ = json.Unmarshal(f.Value, &l)
		return l
	case "number":
		var n float64
		if json.Unmarshal(f.Value, &n) == nil {
			return strconv.FormatFloat(n, 'f', -1, 64)
		}
		return ""
	}
	var s string
	if json.Unmarshal(f.Value, &s) != nil && len(f.Value) > 0 && string(f.Value) != "null" {
		s = string(f.Value)
	}
	return s
}

func (e *edit) setField(name string, v any) {
	if e.vals == nil {
		e.vals = make(map[string]any)
	}
	e.vals[name] = v
	e.gen++
}

// picks returns the question's picked choice values.
func (e *edit) picks(k *kind) []string {
	if e != nil && e.pickedSet {
		return e.picked
	}
	if k.Answer != nil {
		return k.Answer.Choices
	}
	return nil
}

// typed returns the question's typed answer.
func (e *edit) typed(k *kind) string {
	if e != nil && e.textSet {
		return string(e.text)
	}
	if k.Answer != nil && k.Answer.Text != nil {
		return *k.Answer.Text
	}
	return ""
}

// choiceValue is what picking a question's choice answers: its value, or
// its label when it has none.
func choiceValue(c questionChoice) string {
	if c.Value != "" {
		return c.Value
	}
	return c.Label
}

// questionRows is how many rows a question's cursor moves over: its
// choices, and the typed answer's row when it allows text.
func questionRows(k *kind) int {
	n := len(k.Choices)
	if k.AllowText {
		n++
	}
	return max(1, n)
}

// editHint is the line under a focused form or question naming its keys.
const (
	formHint     = "Tab/↑↓ field · type to edit · Space toggles · ←/→ choose · Enter submits"
	questionHint = "↑/↓ move · 1-9 or Space pick · type on > · Enter sends"
)

func renderQuestion(k *kind, o renderOpts) []string {
	out := wrap(styleBold.Render(termtext.Strip(k.Prompt)), o.width)
	if k.Detail != "" {
		out = append(out, wrap(styleDim.Render(termtext.Strip(k.Detail)), o.width)...)
	}
	picked := o.edit.picks(k)
	for i, c := range k.Choices {
		box := "( )"
		if k.Multiple {
			box = "[ ]"
		}
		if slices.Contains(picked, choiceValue(c)) {
			box = "(•)"
			if k.Multiple {
				box = "[x]"
			}
		}
		line := fmt.Sprintf("%s %d. %s", box, i+1, termtext.StripLine(c.Label))
		if c.Detail != "" {
			line += " — " + termtext.StripLine(c.Detail)
		}
		out = append(out, cursorLine(line, i == o.cursor, o.width))
	}
	if k.AllowText {
		text := termtext.StripLine(o.edit.typed(k))
		switch {
		case o.cursor == len(k.Choices):
			l := o.edit.answerLine(k)
			out = append(out, editRow("❯ > ", l, "", "", o.width))
			if o.edit != nil && o.edit.answer.set {
				o.edit.answer.off = l.off // the scroll, for the next draw
			}
		case text == "":
			out = append(out, cursorLine("> (type an answer)", false, o.width))
		default:
			out = append(out, cursorLine("> "+text, false, o.width))
		}
	}
	if o.cursor >= 0 {
		out = append(out, styleDim.Render(clip(questionHint, o.width)))
	}
	return out
}

func renderForm(k *kind, o renderOpts) []string {
	var out []string
	for i, f := range k.Fields {
		label := termtext.StripLine(f.Label)
		if label == "" {
			label = termtext.StripLine(f.Name)
		}
		if f.Required {
			label += " *"
		}
		focused := i == o.cursor
		if focused && isTextField(f) {
			l := o.edit.fieldLine(f)
			out = append(out, editRow("❯ "+label+": ", l, "[", "]", o.width))
			if c, ok := o.edit.caretIn(f); ok {
				c.off = l.off // the scroll, for the next draw
				o.edit.carets[f.Name] = c
			}
		} else {
			out = append(out, cursorLine(label+": "+fieldText(f, o.edit, focused), focused, o.width))
		}
		if focused && f.Help != "" {
			out = append(out, styleDim.Render(clip("    "+termtext.StripLine(f.Help), o.width)))
		}
	}
	submit := "Submit"
	if k.Submit != nil && *k.Submit != "" {
		submit = termtext.StripLine(*k.Submit)
	}
	out = append(out, cursorLine("[ "+submit+" ]", o.cursor == len(k.Fields), o.width))
	if o.cursor >= 0 {
		out = append(out, styleDim.Render(clip(formHint, o.width)))
	}
	return out
}

// caretIn returns the cursor the person left in a text field, if any.
func (e *edit) caretIn(f formField) (caret, bool) {
	if e == nil {
		return caret{}, false
	}
	c, ok := e.carets[f.Name]
	return c, ok
}

// minFieldCells is the fewest cells a focused text field's value gets: a
// long label gives way to it.
const minFieldCells = 4

// editRow draws the row of a focused text field or typed answer in w
// cells: prefix reversed as cursorLine reverses a focused row, then the
// value between open and close, not reversed, scrolled sideways so the
// cursor (a reversed cell) stays in sight.
func editRow(prefix string, l *lineEdit, open, close string, w int) string {
	room := w - width(open) - width(close)
	if room-width(prefix) < minFieldCells {
		prefix = clip(prefix, room-minFieldCells)
	}
	avail := room - width(prefix)
	if avail < 1 {
		return styleCursor.Render(clip(prefix+open+close, w))
	}
	row := open + l.view(avail, true) + close
	if prefix != "" {
		row = styleCursor.Render(prefix) + row
	}
	return row
}

// cursorLine marks the row under a focused surface's cursor with ❯ and
// reversed text.
func cursorLine(line string, focused bool, w int) string {
	if focused {
		return styleCursor.Render(clip("❯ "+line, w))
	}
	return clip("  "+line, w)
}

// fieldText draws a field's value: [text] for text, number and multiline
// (one line), [x] or [ ] for a boolean, the choice (between ‹ › while
// focused), each option of a multichoice with its own box.
func fieldText(f formField, e *edit, focused bool) string {
	v := e.fieldValue(f)
	switch f.Type {
	case "boolean":
		if b, _ := v.(bool); b {
			return "[x]"
		}
		return "[ ]"
	case "choice":
		s, _ := v.(string)
		if focused {
			return "‹ " + termtext.StripLine(s) + " ›"
		}
		return "[" + termtext.StripLine(s) + "]"
	case "multichoice":
		on, _ := v.([]string)
		sub := 0
		if e != nil {
			sub = e.sub[f.Name]
		}
		var parts []string
		for i, c := range f.Choices {
			box := "[ ]"
			if slices.Contains(on, c) {
				box = "[x]"
			}
			p := box + " " + termtext.StripLine(c)
			if focused && i == sub {
				p = "‹" + p + "›"
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "  ")
	}
	s, _ := v.(string)
	s = termtext.StripLine(s)
	if s == "" && !focused && f.Placeholder != "" {
		return styleDim.Render("[(" + termtext.StripLine(f.Placeholder) + ")]")
	}
	return "[" + s + "]"
}

// rootKind decodes the kind at the root of a node's surface.
func rootKind(n *node) (kind, bool) {
	var root struct {
		Kind kind `json:"kind"`
	}
	if json.Unmarshal(n.Surface, &root) != nil {
		return kind{}, false
	}
	return root.Kind, true
}

// editOf returns the node's unsent work, starting it when there is none.
func (m *Model) editOf(n *node) *edit {
	if m.scr.edits == nil {
		m.scr.edits = make(map[string]*edit)
	}
	e, ok := m.scr.edits[n.Node]
	if !ok {
		e = &edit{}
		m.scr.edits[n.Node] = e
	}
	return e
}

// editKey handles a key on a focused form or question. It reports false
// for a key it leaves to the focus's other keys (Esc dismisses).
func (m *Model) editKey(n *node, k tea.KeyPressMsg) (tea.Cmd, bool) {
	root, ok := rootKind(n)
	if !ok {
		return nil, false
	}
	switch root.T {
	case ui.KindForm:
		return m.formKey(n, &root, k)
	case ui.KindQuestion:
		return m.questionKey(n, &root, k)
	}
	return nil, false
}

// formKey: Tab, Shift-Tab, ↑ and ↓ move between the fields and the submit
// button; typing edits a text, number or multiline field (Backspace
// deletes, Ctrl-U clears, Ctrl-J adds a line to a multiline one); Space
// (or ←/→) toggles a boolean; ←/→ (or Space) step through a choice; on a
// multichoice ←/→ move between the options and Space toggles one. Enter
// submits from anywhere.
func (m *Model) formKey(n *node, root *kind, k tea.KeyPressMsg) (tea.Cmd, bool) {
	rows := len(root.Fields) + 1
	cur := min(max(0, m.scr.cursor[n.Node]), rows-1)
	s := k.String()
	switch s {
	case "tab", "down":
		m.scr.cursor[n.Node] = (cur + 1) % rows
		return nil, true
	case "shift+tab", "up":
		m.scr.cursor[n.Node] = (cur + rows - 1) % rows
		return nil, true
	case "enter":
		return m.submitForm(n, root), true
	}
	if cur == len(root.Fields) {
		if s == "space" {
			return m.submitForm(n, root), true
		}
		return nil, false
	}
	f := root.Fields[cur]
	e := m.editOf(n)
	switch f.Type {
	case "boolean":
		switch s {
		case "space", "left", "right":
			b, _ := e.fieldValue(f).(bool)
			e.setField(f.Name, !b)
			return nil, true
		}
	case "choice":
		if len(f.Choices) == 0 {
			return nil, false
		}
		step := 0
		switch s {
		case "space", "right":
			step = 1
		case "left":
			step = len(f.Choices) - 1
		default:
			return nil, false
		}
		v, _ := e.fieldValue(f).(string)
		i := slices.Index(f.Choices, v) // -1 when none is chosen yet
		if i < 0 && step > 1 {
			i = 0
		}
		e.setField(f.Name, f.Choices[(i+step)%len(f.Choices)])
		return nil, true
	case "multichoice":
		if len(f.Choices) == 0 {
			return nil, false
		}
		if e.sub == nil {
			e.sub = make(map[string]int)
		}
		sub := min(e.sub[f.Name], len(f.Choices)-1)
		switch s {
		case "left":
			e.sub[f.Name] = (sub + len(f.Choices) - 1) % len(f.Choices)
			e.gen++
		case "right":
			e.sub[f.Name] = (sub + 1) % len(f.Choices)
			e.gen++
		case "space":
			on, _ := e.fieldValue(f).([]string)
			c := f.Choices[sub]
			next := slices.DeleteFunc(slices.Clone(on), func(x string) bool { return x == c })
			if len(next) == len(on) {
				// Keep the options' order.
				next = nil
				for _, x := range f.Choices {
					if x == c || slices.Contains(on, x) {
						next = append(next, x)
					}
				}
			}
			if next == nil {
				next = []string{}
			}
			e.setField(f.Name, next)
		default:
			return nil, false
		}
		return nil, true
	default: // text, multiline, number
		l := e.fieldLine(f)
		switch s {
		case "ctrl+j", "alt+enter", "shift+enter":
			if f.Type != "multiline" {
				return nil, true
			}
			l.insert("\n")
		default:
			if !l.key(s) {
				if k.Text == "" {
					return nil, false
				}
				l.insert(cleanField(f, k.Text))
			}
		}
		e.setFieldLine(f, l)
		return nil, true
	}
	// Off a text field, j and k move as ↓ and ↑ do.
	switch s {
	case "j":
		m.scr.cursor[n.Node] = (cur + 1) % rows
		return nil, true
	case "k":
		m.scr.cursor[n.Node] = (cur + rows - 1) % rows
		return nil, true
	}
	return nil, false
}

// pasteInto puts pasted text into the focused form field or question
// answer that takes text, and reports whether it did.
func (m *Model) pasteInto(text string) bool {
	n := m.scr.nodeByID(m.scr.focus)
	if n == nil {
		return false
	}
	root, ok := rootKind(n)
	if !ok {
		return false
	}
	cur := m.scr.cursor[n.Node]
	switch {
	case root.T == ui.KindForm && cur >= 0 && cur < len(root.Fields):
		f := root.Fields[cur]
		if f.Type != "text" && f.Type != "multiline" && f.Type != "number" {
			return false
		}
		e := m.editOf(n)
		l := e.fieldLine(f)
		l.insert(cleanField(f, text))
		e.setFieldLine(f, l)
		return true
	case root.T == ui.KindQuestion && root.AllowText && cur == len(root.Choices):
		e := m.editOf(n)
		l := e.answerLine(&root)
		l.insert(termtext.StripLine(text))
		e.setAnswerLine(&root, l)
		return true
	}
	return false
}

// submitForm checks the form's values (a required field filled, a number
// that is one, within min and max) and sends them as the component's
// submit action: {"<name>": value, …}.
func (m *Model) submitForm(n *node, root *kind) tea.Cmd {
	e := m.scr.edits[n.Node]
	vals := map[string]any{}
	for i, f := range root.Fields {
		label := f.Label
		if label == "" {
			label = f.Name
		}
		label = termtext.StripLine(label)
		fail := func(why string) tea.Cmd {
			m.scr.cursor[n.Node] = i
			m.notice(why)
			return nil
		}
		touched := false
		if e != nil {
			_, touched = e.vals[f.Name]
		}
		if !touched && len(f.Value) == 0 && !f.Required {
			continue
		}
		v := e.fieldValue(f)
		switch f.Type {
		case "number":
			s := strings.TrimSpace(v.(string))
			if s == "" {
				if f.Required {
					return fail(label + " is required: type a number in it, then Enter")
				}
				continue
			}
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return fail(label + " must be a number, not " + strconv.Quote(s) + ": type digits, then Enter")
			}
			if f.Min != nil && x < *f.Min || f.Max != nil && x > *f.Max {
				return fail(label + " must lie between " + bounds(f) + ": change it, then Enter")
			}
			vals[f.Name] = x
		case "multichoice":
			l, _ := v.([]string)
			if len(l) == 0 && f.Required {
				return fail(label + " is required: pick at least one with ←/→ and Space, then Enter")
			}
			vals[f.Name] = l
		case "boolean":
			vals[f.Name] = v
		default:
			s, _ := v.(string)
			if s == "" && f.Required {
				what := "type a value in it"
				if f.Type == "choice" {
					what = "choose one with ←/→"
				}
				return fail(label + " is required: " + what + ", then Enter")
			}
			vals[f.Name] = s
		}
	}
	return m.commit(n, component.EventSubmit, vals)
}

// bounds names a number field's range.
func bounds(f formField) string {
	lo, hi := "-∞", "∞"
	if f.Min != nil {
		lo = strconv.FormatFloat(*f.Min, 'f', -1, 64)
	}
	if f.Max != nil {
		hi = strconv.FormatFloat(*f.Max, 'f', -1, 64)
	}
	return lo + " and " + hi
}

// questionKey: ↑/↓ (or Tab) move over the choices and the typed answer's
// row; 1–9 pick a choice (a single choice is sent at once); Space picks the
// choice under the cursor (toggles it with multiple); on the > row typing
// edits the answer. Enter sends: a single choice's row sends that choice,
// otherwise what is picked and typed.
func (m *Model) questionKey(n *node, root *kind, k tea.KeyPressMsg) (tea.Cmd, bool) {
	rows := questionRows(root)
	cur := min(max(0, m.scr.cursor[n.Node]), rows-1)
	onText := root.AllowText && cur == len(root.Choices)
	s := k.String()
	e := m.editOf(n)
	switch s {
	case "tab", "down":
		m.scr.cursor[n.Node] = min(cur+1, rows-1)
		return nil, true
	case "shift+tab", "up":
		m.scr.cursor[n.Node] = max(cur-1, 0)
		return nil, true
	case "enter":
		if !onText && !root.Multiple && cur < len(root.Choices) {
			e.pick(root, cur, false)
		}
		return m.sendAnswer(n, root), true
	}
	if onText {
		l := e.answerLine(root)
		if !l.key(s) {
			if k.Text == "" {
				return nil, false
			}
			l.insert(termtext.StripLine(k.Text))
		}
		e.setAnswerLine(root, l)
		return nil, true
	}
	if len(s) == 1 && s[0] >= '1' && s[0] <= '9' {
		i := int(s[0] - '1')
		if i >= len(root.Choices) {
			return nil, true
		}
		m.scr.cursor[n.Node] = i
		e.pick(root, i, root.Multiple)
		if !root.Multiple {
			return m.sendAnswer(n, root), true
		}
		return nil, true
	}
	switch s {
	case "space":
		if cur < len(root.Choices) {
			e.pick(root, cur, root.Multiple)
		}
		return nil, true
	case "j":
		m.scr.cursor[n.Node] = min(cur+1, rows-1)
		return nil, true
	case "k":
		m.scr.cursor[n.Node] = max(cur-1, 0)
		return nil, true
	}
	return nil, false
}

// pick picks choice i: it toggles it among the others when toggle is set,
// and otherwise makes it the only one.
func (e *edit) pick(k *kind, i int, toggle bool) {
	v := choiceValue(k.Choices[i])
	if !toggle {
		e.picked, e.pickedSet = []string{v}, true
		e.gen++
		return
	}
	cur := e.picks(k)
	var next []string
	for _, c := range k.Choices {
		x := choiceValue(c)
		on := slices.Contains(cur, x)
		if x == v {
			on = !on
		}
		if on {
			next = append(next, x)
		}
	}
	if next == nil {
		next = []string{}
	}
	e.picked, e.pickedSet = next, true
	e.gen++
}

// sendAnswer sends what the question holds: as the component's submit
// action its answer {"choices": […], "text": "…"} (text only with
// allowText); as its select action the values picked.
func (m *Model) sendAnswer(n *node, root *kind) tea.Cmd {
	e := m.scr.edits[n.Node]
	picks := e.picks(root)
	text := ""
	if root.AllowText {
		text = e.typed(root)
	}
	if len(picks) == 0 && strings.TrimSpace(text) == "" {
		how := "pick a choice (1-9, or ↑/↓ and Space)"
		if root.AllowText {
			how += " or type an answer on the > row"
		}
		m.notice(termtext.StripLine(n.ID) + " has no answer yet: " + how + ", then Enter")
		return nil
	}
	if _, ok := n.Actions[component.EventSubmit]; ok || n.Actions[component.EventSelect] == "" {
		answer := map[string]any{"choices": picks}
		if picks == nil {
			answer["choices"] = []string{}
		}
		if text != "" {
			answer["text"] = text
		}
		return m.commit(n, component.EventSubmit, answer)
	}
	if len(picks) == 0 {
		picks = []string{text}
	}
	return m.commit(n, component.EventSelect, picks)
}

// commit commits event on the node: the ui.intent of the action its
// component's root declares for it. A surface that is no component, or
// whose root declares no such action, takes nothing, and the notice says
// so.
func (m *Model) commit(n *node, event string, value any) tea.Cmd {
	action, ok := n.Actions[event]
	if !ok {
		if len(n.Actions) == 0 {
			m.notice(termtext.StripLine(n.ID) + " is a surface, not a component, so nothing would hear its " + event + ": its owner must place it as a component whose root declares on." + event)
		} else {
			m.notice(termtext.StripLine(n.ID) + " takes no " + event + ": its component's root declares on." + event + " for that")
		}
		return nil
	}
	if n.Stopped {
		ext, _ := n.ext()
		m.notice(termtext.StripLine(n.Owner) + " is stopped, so nothing would hear this: run /ext restart " + termtext.StripLine(ext))
		return nil
	}
	return m.intent(n, action, value, fmt.Sprintf("sent %s to %s", action, termtext.StripLine(n.Owner)))
}
