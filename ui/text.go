package ui

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/getorrery/orrery/termtext"
)

// Text returns the text form of a surface: what a client that cannot draw
// it natively shows, the same in every client. It validates the surface first
// and returns Validate's refusal when it fails. The form depends only on the
// surface, never on the screen: text, markdown and diff as their source;
// a stream as value then its chunks; a table as aligned columns under a
// rule; a tree indented with guides; progress and gauges as a 20-cell bar
// with the percent; a task and its steps with status glyphs; a question with
// its choices; a form as "label: value" lines; a stack as its children's
// forms separated by blank lines; charts as compact drawings with their
// numbers; a raster as its cells; an image as "[image: <alt>]".
//
// Every form is sanitized with termtext.Strip (no escape sequences,
// controls or bidirectional overrides), its lines carry no trailing spaces,
// and it ends without a newline. docs/surfaces.md shows each one.
func Text(surface json.RawMessage) (string, error) {
	n, err := check(surface, "surface", false)
	if err != nil {
		return "", err
	}
	return n.text(), nil
}

func (n *surfaceNode) text() string {
	var s string
	switch k := n.kind.(type) {
	case *textKind:
		s = termtext.Strip(k.Value)
	case *markdownKind:
		s = termtext.Strip(k.Value)
	case *diffKind:
		s = termtext.Strip(k.Value)
		if k.Path != "" {
			s = termtext.StripLine(k.Path) + "\n" + s
		}
	case *streamKind:
		s = termtext.Strip(k.Value + strings.Join(k.Chunks, ""))
	case *tableKind:
		s = k.text()
	case *treeKind:
		s = k.text()
	case *progressKind:
		s = k.text()
	case *taskKind:
		s = k.text()
	case *questionKind:
		s = k.text()
	case *formKind:
		s = k.text()
	case *stackKind:
		parts := make([]string, 0, len(k.nodes))
		for _, c := range k.nodes {
			if t := c.text(); t != "" {
				parts = append(parts, t)
			}
		}
		s = strings.Join(parts, "\n\n")
	case *chartKind:
		s = k.text()
	case *rasterKind:
		s = k.text()
	case *imageKind:
		s = "[image: " + termtext.StripLine(k.Alt) + "]"
	}
	return finish(s)
}

// columnGap separates a table's columns.
const columnGap = "  "

func (k *tableKind) text() string {
	grid := make([][]string, 0, len(k.Rows)+1)
	head := make([]string, len(k.Columns))
	for i, c := range k.Columns {
		head[i] = termtext.StripLine(c)
	}
	grid = append(grid, head)
	for _, r := range k.Rows {
		row := make([]string, len(r))
		for i, c := range r {
			row[i] = termtext.StripLine(c)
		}
		grid = append(grid, row)
	}
	widths := make([]int, len(k.Columns))
	for _, row := range grid {
		for i, c := range row {
			widths[i] = max(widths[i], textWidth(c))
		}
	}
	var b strings.Builder
	line := func(row []string) {
		for i, c := range row {
			if i > 0 {
				b.WriteString(columnGap)
			}
			align := "left"
			if i < len(k.Align) {
				align = k.Align[i]
			}
			switch align {
			case "right":
				b.WriteString(padLeft(c, widths[i]))
			case "center":
				b.WriteString(padCenter(c, widths[i]))
			default:
				b.WriteString(padRight(c, widths[i]))
			}
		}
		b.WriteByte('\n')
	}
	line(grid[0])
	rule := make([]string, len(widths))
	for i, w := range widths {
		rule[i] = strings.Repeat("─", max(w, 1))
	}
	b.WriteString(strings.Join(rule, columnGap))
	b.WriteByte('\n')
	for _, row := range grid[1:] {
		line(row)
	}
	return b.String()
}

func (k *treeKind) text() string {
	if len(k.Nodes) == 0 {
		return "(empty)"
	}
	var lines []string
	var walk func(nodes []treeNode, prefix string, top bool)
	walk = func(nodes []treeNode, prefix string, top bool) {
		for i, n := range nodes {
			last := i == len(nodes)-1
			label := termtext.StripLine(n.Label)
			var child string
			switch {
			case top:
				lines = append(lines, label)
			case last:
				lines = append(lines, prefix+"└─ "+label)
				child = prefix + "   "
			default:
				lines = append(lines, prefix+"├─ "+label)
				child = prefix + "│  "
			}
			walk(n.Children, child, false)
		}
	}
	walk(k.Nodes, "", true)
	return strings.Join(lines, "\n")
}

// barWidth is the cells of a progress, gauge, bars, stacked or donut bar.
const barWidth = 20

// meter draws part of whole as a bar of barWidth cells: █ done, ░ to go.
func meter(part, whole float64) string {
	filled := 0
	if whole > 0 {
		filled = int(math.Floor(math.Max(0, math.Min(1, part/whole))*barWidth + 1e-9))
	}
	return "[" + strings.Repeat("█", filled) + strings.Repeat("░", barWidth-filled) + "]"
}

func (k *progressKind) text() string {
	var b strings.Builder
	if k.Label != "" {
		b.WriteString(termtext.StripLine(k.Label) + " ")
	}
	if k.Value == nil {
		b.WriteString(meter(0, 1) + " working")
		return b.String()
	}
	v, m := *k.Value, k.max()
	b.WriteString(meter(v, m) + " ")
	pct := strconv.Itoa(percent(v, m)) + "%"
	if m == 100 {
		b.WriteString(pct)
	} else {
		b.WriteString(formatNumber(v) + "/" + formatNumber(m) + " (" + pct + ")")
	}
	return b.String()
}

// statusGlyphs mark a task's or step's status; the status word follows the
// task's own glyph, so the glyph is never the only signal.
var statusGlyphs = map[string]string{
	"pending":   "○",
	"running":   "◐",
	"done":      "✔",
	"failed":    "✖",
	"cancelled": "⊘",
	"blocked":   "⧖",
}

func (k *taskKind) text() string {
	lines := []string{statusGlyphs[k.Status] + " " + termtext.StripLine(k.Title) + " (" + k.Status + ")"}
	if d := termtext.Strip(k.Detail); d != "" {
		lines = append(lines, indent(d, "  "))
	}
	for _, s := range k.Steps {
		lines = append(lines, "  "+statusGlyphs[s.Status]+" "+termtext.StripLine(s.Title))
	}
	return strings.Join(lines, "\n")
}

func (k *questionKind) text() string {
	lines := []string{"? " + strings.ReplaceAll(termtext.Strip(k.Prompt), "\n", "\n  ")}
	if d := termtext.Strip(k.Detail); d != "" {
		lines = append(lines, indent(d, "  "))
	}
	var picked []string
	if k.Answer != nil {
		picked = k.Answer.Choices
	}
	for _, c := range k.Choices {
		on := slices.Contains(picked, c.value())
		mark := "( )"
		switch {
		case k.Multiple && on:
			mark = "[x]"
		case k.Multiple:
			mark = "[ ]"
		case on:
			mark = "(•)"
		}
		line := "  " + mark + " " + termtext.StripLine(c.Label)
		if c.Detail != "" {
			line += " — " + termtext.StripLine(c.Detail)
		}
		lines = append(lines, line)
	}
	if k.AllowText {
		switch {
		case k.Answer != nil && k.Answer.Text != nil:
			lines = append(lines, "  > "+strings.ReplaceAll(termtext.Strip(*k.Answer.Text), "\n", "\n    "))
		case k.Answer == nil:
			lines = append(lines, "  > (type an answer)")
		}
	}
	return strings.Join(lines, "\n")
}

func (k *formKind) text() string {
	var lines []string
	for _, f := range k.Fields {
		label := f.Label
		if label == "" {
			label = f.Name
		}
		label = termtext.StripLine(label)
		if f.Required {
			label += " *"
		}
		lines = append(lines, label+": "+f.valueText())
	}
	submit := "Submit"
	if k.Submit != nil {
		submit = *k.Submit
	}
	lines = append(lines, "[ "+termtext.StripLine(submit)+" ]")
	return strings.Join(lines, "\n")
}

func (f *formField) valueText() string {
	switch f.Type {
	case "boolean":
		var on bool
		_ = json.Unmarshal(f.Value, &on)
		if on {
			return "[x]"
		}
		return "[ ]"
	case "number":
		if len(f.Value) == 0 {
			return ""
		}
		var v float64
		_ = json.Unmarshal(f.Value, &v)
		return formatNumber(v)
	case "multichoice":
		var vs []string
		_ = json.Unmarshal(f.Value, &vs)
		for i, v := range vs {
			vs[i] = termtext.StripLine(v)
		}
		return strings.Join(vs, ", ")
	case "multiline":
		var v string
		_ = json.Unmarshal(f.Value, &v)
		return strings.ReplaceAll(termtext.Strip(v), "\n", "\n  ")
	}
	var v string
	_ = json.Unmarshal(f.Value, &v)
	return termtext.StripLine(v)
}

func (k *rasterKind) text() string {
	lines := make([]string, len(k.Rows))
	for i, r := range k.Rows {
		lines[i] = strings.ReplaceAll(r, " ", "·")
	}
	for _, c := range sortedKeys(k.Legend) {
		lines = append(lines, c+" "+termtext.StripLine(k.Legend[c]))
	}
	if k.Alt != "" {
		lines = append(lines, termtext.StripLine(k.Alt))
	}
	return strings.Join(lines, "\n")
}
