package tui

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/getorrery/orrery/termtext"
	"github.com/getorrery/orrery/ui"
)

// surface is a decoded surface: {"kind": {"t": …, …}}. Only the fields the
// TUI draws are read; what fails to decode is drawn as its text form.
type surface struct {
	Kind kind `json:"kind"`
}

type kind struct {
	T string `json:"t"`
	// text, markdown, diff, stream
	Value  json.RawMessage `json:"value"`
	Chunks []string        `json:"chunks"`
	Path   string          `json:"path"`
	// table
	Columns []string        `json:"columns"`
	Rows    json.RawMessage `json:"rows"` // [][]string in a table, []string in a raster
	Align   []string        `json:"align"`
	// tree
	Nodes []treeNode `json:"nodes"`
	// progress
	Max   *float64 `json:"max"`
	Label string   `json:"label"`
	// task
	Title  string     `json:"title"`
	Status string     `json:"status"`
	Detail string     `json:"detail"`
	Steps  []taskStep `json:"steps"`
	// question
	Prompt    string           `json:"prompt"`
	Choices   []questionChoice `json:"choices"`
	Multiple  bool             `json:"multiple"`
	AllowText bool             `json:"allowText"`
	Answer    *questionAnswer  `json:"answer"`
	// form
	Fields []formField `json:"fields"`
	Submit *string     `json:"submit"`
	// stack
	Children  []json.RawMessage `json:"children"`
	Direction string            `json:"direction"`
	// chart (Kind is the chart's kind)
	ChartKind string        `json:"kind"`
	Labels    []string      `json:"labels"`
	Series    []chartSeries `json:"series"`
	Unit      string        `json:"unit"`
	// raster
	Palette map[string]string `json:"palette"`
	Legend  map[string]string `json:"legend"`
	Alt     string            `json:"alt"`
	// image
	Mime string `json:"mime"`
	Data string `json:"data"`
}

// tableRows is rows as a table's.
func (k *kind) tableRows() [][]string {
	var r [][]string
	_ = json.Unmarshal(k.Rows, &r)
	return r
}

// rasterRows is rows as a raster's.
func (k *kind) rasterRows() []string {
	var r []string
	_ = json.Unmarshal(k.Rows, &r)
	return r
}

// strValue is value as a string ("" when it is not one).
func (k *kind) strValue() string {
	var s string
	if json.Unmarshal(k.Value, &s) == nil {
		return s
	}
	return ""
}

// numValue is value as a number, and whether it is one.
func (k *kind) numValue() (float64, bool) {
	var f float64
	if json.Unmarshal(k.Value, &f) == nil {
		return f, true
	}
	return 0, false
}

type treeNode struct {
	Label    string     `json:"label"`
	Children []treeNode `json:"children"`
}

type taskStep struct {
	Title  string `json:"title"`
	Status string `json:"status"`
}

type questionChoice struct {
	Label  string `json:"label"`
	Value  string `json:"value"`
	Detail string `json:"detail"`
}

// questionAnswer is a question's accepted answer.
type questionAnswer struct {
	Choices []string `json:"choices"`
	Text    *string  `json:"text"`
}

type formField struct {
	Name        string          `json:"name"`
	Label       string          `json:"label"`
	Type        string          `json:"type"`
	Value       json.RawMessage `json:"value"`
	Choices     []string        `json:"choices"`
	Required    bool            `json:"required"`
	Placeholder string          `json:"placeholder"`
	Help        string          `json:"help"`
	Min         *float64        `json:"min"`
	Max         *float64        `json:"max"`
}

type chartSeries struct {
	Label  string            `json:"label"`
	Values []json.RawMessage `json:"values"`
}

// nums returns the series' values as numbers (a pair's y for scatter).
func (s chartSeries) nums() []float64 {
	out := make([]float64, 0, len(s.Values))
	for _, v := range s.Values {
		var f float64
		if json.Unmarshal(v, &f) == nil {
			out = append(out, f)
			continue
		}
		var p []float64
		if json.Unmarshal(v, &p) == nil && len(p) == 2 {
			out = append(out, p[1])
		}
	}
	return out
}

// pairs returns the series' values as x, y pairs (scatter).
func (s chartSeries) pairs() [][2]float64 {
	var out [][2]float64
	for _, v := range s.Values {
		var p []float64
		if json.Unmarshal(v, &p) == nil && len(p) == 2 {
			out = append(out, [2]float64{p[0], p[1]})
		}
	}
	return out
}

// Styles of the surface renderers. Colour always comes with a glyph or a
// label that carries the same meaning.
var (
	styleAdd    = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	styleDel    = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
	styleHunk   = lipgloss.NewStyle().Foreground(lipgloss.Color("6"))
	styleDim    = lipgloss.NewStyle().Faint(true)
	styleBold   = lipgloss.NewStyle().Bold(true)
	styleCursor = lipgloss.NewStyle().Reverse(true)
	seriesColor = []string{"4", "3", "5", "6", "2", "1", "12", "11"}
)

func seriesStyle(i int) lipgloss.Style {
	return lipgloss.NewStyle().Foreground(lipgloss.Color(seriesColor[i%len(seriesColor)]))
}

// Series glyphs: each series has its own fill and mark, named in a legend,
// so that colour is never the only signal.
var (
	seriesFills = []string{"█", "▓", "▒", "░", "#", "=", "+", ":"}
	seriesMarks = []string{"•", "○", "×", "+", "*", "◆", "△", "#"}
	sparkLevels = []rune("▁▂▃▄▅▆▇█")
)

// renderOpts are what a renderer needs beyond the surface.
type renderOpts struct {
	width  int
	height int // rows available; 0 means as many as needed
	// cursor is the chosen row of a focused question, table or form; -1
	// when the surface has no focus.
	cursor int
	md     *markdown
	// graphics is the terminal's graphics protocol, GraphicsNone for none.
	graphics string
	// edit is the person's unsent work on a focused form or question; nil
	// when there is none.
	edit *edit
}

// renderSurface draws a surface in at most o.width cells per line. A
// surface that does not decode is drawn as its text form; one whose text
// form fails too is drawn as a one-line notice.
func renderSurface(raw json.RawMessage, o renderOpts) []string {
	if o.width < 1 {
		o.width = 1
	}
	var s surface
	if err := json.Unmarshal(raw, &s); err != nil || s.Kind.T == "" {
		return textForm(raw, o.width)
	}
	lines := renderKind(&s.Kind, o)
	for i, l := range lines {
		lines[i] = clip(l, o.width)
	}
	return lines
}

// textForm draws the kernel's text form of a surface, sanitized and wrapped.
func textForm(raw json.RawMessage, w int) []string {
	t, err := ui.Text(raw)
	if err != nil {
		return []string{styleDim.Render(clip("(this surface cannot be drawn: "+termtext.StripLine(err.Error())+")", w))}
	}
	return wrap(termtext.Strip(t), w)
}

func renderKind(k *kind, o renderOpts) []string {
	w := o.width
	switch k.T {
	case ui.KindText:
		return wrap(termtext.Strip(k.strValue()), w)
	case ui.KindMarkdown:
		return o.md.render(termtext.Strip(k.strValue()), w)
	case ui.KindStream:
		lines := wrap(termtext.Strip(k.strValue()+strings.Join(k.Chunks, "")), w)
		if o.height > 0 {
			lines = tail(lines, o.height) // a stream follows its end
		}
		return lines
	case ui.KindDiff:
		return renderDiff(k, w)
	case ui.KindTable:
		return renderTable(k, o)
	case ui.KindTree:
		var out []string
		renderTree(k.Nodes, "", w, &out)
		return out
	case ui.KindProgress:
		return renderProgress(k, w)
	case ui.KindTask:
		return renderTask(k, w)
	case ui.KindQuestion:
		return renderQuestion(k, o)
	case ui.KindForm:
		return renderForm(k, o)
	case ui.KindStack:
		var out []string
		for i, c := range k.Children {
			if i > 0 && k.Direction != "row" {
				out = append(out, "")
			}
			co := o
			co.height, co.cursor, co.edit = 0, -1, nil
			out = append(out, renderSurface(c, co)...)
		}
		return out
	case ui.KindChart:
		return renderChart(k, w)
	case ui.KindRaster:
		return renderRaster(k, w)
	case ui.KindImage:
		if _, err := imageBytes(k, o.graphics); err == nil {
			// The image is drawn over these cells by the terminal.
			return blank(w, max(1, o.height))
		}
		return wrap("[image: "+termtext.StripLine(k.Alt)+"]", w)
	}
	raw, _ := json.Marshal(surface{Kind: *k})
	return textForm(raw, w)
}

func renderDiff(k *kind, w int) []string {
	var out []string
	if k.Path != "" {
		out = append(out, styleBold.Render(termtext.StripLine(k.Path)))
	}
	for _, l := range strings.Split(termtext.Strip(k.strValue()), "\n") {
		l = clip(strings.ReplaceAll(l, "\t", "    "), w)
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			out = append(out, styleBold.Render(l))
		case strings.HasPrefix(l, "+"):
			out = append(out, styleAdd.Render(l))
		case strings.HasPrefix(l, "-"):
			out = append(out, styleDel.Render(l))
		case strings.HasPrefix(l, "@@"):
			out = append(out, styleHunk.Render(l))
		default:
			out = append(out, l)
		}
	}
	return out
}

func renderTable(k *kind, o renderOpts) []string {
	n := len(k.Columns)
	widths := make([]int, n)
	cols := make([]string, n)
	for i, c := range k.Columns {
		cols[i] = termtext.StripLine(c)
		widths[i] = width(cols[i])
	}
	src := k.tableRows()
	rows := make([][]string, len(src))
	for r, row := range src {
		rows[r] = make([]string, n)
		for i := 0; i < n && i < len(row); i++ {
			rows[r][i] = termtext.StripLine(row[i])
			widths[i] = max(widths[i], width(rows[r][i]))
		}
	}
	// Shrink the widest columns until the table fits.
	total := func() int {
		t := 2 * max(n-1, 0)
		for _, x := range widths {
			t += x
		}
		return t
	}
	for total() > o.width {
		wi := 0
		for i := range widths {
			if widths[i] > widths[wi] {
				wi = i
			}
		}
		if widths[wi] <= 3 {
			break
		}
		widths[wi]--
	}
	line := func(cells []string) string {
		parts := make([]string, n)
		for i := range n {
			align := ""
			if i < len(k.Align) {
				align = k.Align[i]
			}
			parts[i] = fitAligned(cells[i], widths[i], align)
		}
		return strings.TrimRight(strings.Join(parts, "  "), " ")
	}
	out := []string{styleBold.Render(line(cols))}
	rule := make([]string, n)
	for i := range n {
		rule[i] = strings.Repeat("─", widths[i])
	}
	out = append(out, strings.Join(rule, "  "))
	for r, row := range rows {
		l := line(row)
		if r == o.cursor {
			l = styleCursor.Render("❯ " + l)
		}
		out = append(out, l)
	}
	return out
}

func renderTree(nodes []treeNode, prefix string, w int, out *[]string) {
	for i, n := range nodes {
		branch, next := "├─ ", "│  "
		if i == len(nodes)-1 {
			branch, next = "└─ ", "   "
		}
		*out = append(*out, clip(prefix+branch+termtext.StripLine(n.Label), w))
		renderTree(n.Children, prefix+next, w, out)
	}
}

// meter draws a bar of cells: filled █, empty ░, so the share reads
// without colour.
func meter(frac float64, cells int) string {
	if cells < 1 {
		return ""
	}
	frac = math.Max(0, math.Min(1, frac))
	full := int(math.Round(frac * float64(cells)))
	return strings.Repeat("█", full) + strings.Repeat("░", cells-full)
}

func renderProgress(k *kind, w int) []string {
	label := termtext.StripLine(k.Label)
	v, ok := k.numValue()
	if !ok {
		return []string{clip("⋯ "+label+" (working)", w)}
	}
	m := 100.0
	if k.Max != nil && *k.Max > 0 {
		m = *k.Max
	}
	pct := fmt.Sprintf(" %3d%%", int(math.Round(100*v/m)))
	cells := w - width(pct)
	if label != "" {
		cells -= width(label) + 1
		if cells < 5 {
			return []string{clip(label, w), meter(v/m, max(1, w-width(pct))) + pct}
		}
		return []string{label + " " + meter(v/m, cells) + pct}
	}
	return []string{meter(v/m, max(1, cells)) + pct}
}

// progressRow is a progress bar in one row of w cells: its label and its
// value first, the bar in what is left.
func progressRow(k *kind, w int) string {
	label := termtext.StripLine(k.Label)
	v, ok := k.numValue()
	if !ok {
		return clip("⋯ "+label+" (working)", w)
	}
	m := 100.0
	if k.Max != nil && *k.Max > 0 {
		m = *k.Max
	}
	head := fmt.Sprintf("%d%%", int(math.Round(100*v/m)))
	if label != "" {
		head = label + " " + head
	}
	if cells := w - width(head) - 1; cells >= 3 {
		return head + " " + meter(v/m, cells)
	}
	return clip(head, w)
}

// chartRow is a chart's values in words, for one row: "letters: apples
// 6, pears 5" for each series, a gauge's value and its range.
func chartRow(k *kind) string {
	var parts []string
	for _, s := range k.Series {
		vals := s.nums()
		if k.ChartKind == ui.ChartGauge && len(vals) > 0 {
			p := formatNum(vals[0], k.Unit)
			if k.Max != nil {
				p += " of " + formatNum(*k.Max, k.Unit)
			}
			parts = append(parts, strings.TrimSpace(termtext.StripLine(s.Label)+" "+p))
			continue
		}
		var items []string
		for i, v := range vals {
			item := formatNum(v, k.Unit)
			if i < len(k.Labels) {
				item = termtext.StripLine(k.Labels[i]) + " " + item
			}
			items = append(items, item)
		}
		p := strings.Join(items, ", ")
		if s.Label != "" {
			p = termtext.StripLine(s.Label) + ": " + p
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// statusGlyph is the glyph of a task or step status.
func statusGlyph(s string) string {
	switch s {
	case "done", "completed", "success":
		return "✓"
	case "running", "in_progress", "active":
		return "▶"
	case "failed", "error":
		return "✗"
	case "skipped", "cancelled":
		return "–"
	}
	return "○"
}

func renderTask(k *kind, w int) []string {
	out := []string{clip(statusGlyph(k.Status)+" "+styleBold.Render(termtext.StripLine(k.Title))+" ("+termtext.StripLine(k.Status)+")", w)}
	if k.Detail != "" {
		for _, l := range wrap(termtext.Strip(k.Detail), w-2) {
			out = append(out, "  "+l)
		}
	}
	for _, s := range k.Steps {
		out = append(out, clip("  "+statusGlyph(s.Status)+" "+termtext.StripLine(s.Title), w))
	}
	return out
}

// formatNum prints a number briefly: integers without a point, others with
// up to two decimals.
func formatNum(v float64, unit string) string {
	var s string
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		s = strconv.FormatFloat(v, 'f', -1, 64)
	} else {
		s = strconv.FormatFloat(v, 'f', 2, 64)
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if unit != "" {
		if unit == "%" {
			return s + "%"
		}
		return s + " " + termtext.StripLine(unit)
	}
	return s
}
