package tui

import (
	"math"
	"strings"

	"github.com/getorrery/orrery/termtext"
	"github.com/getorrery/orrery/ui"
)

// renderChart draws a chart natively in w cells: block characters for
// bars, columns and stacked; braille for line, area and scatter; ▁…█ for a
// sparkline; a proportional bar with a legend for a donut; a bar with its
// max for a gauge. Each series has its own fill or mark, named in a legend.
func renderChart(k *kind, w int) []string {
	if len(k.Series) == 0 {
		return []string{"(no data)"}
	}
	switch k.ChartKind {
	case ui.ChartBars:
		return chartBars(k, w)
	case ui.ChartColumns:
		return chartColumns(k, w)
	case ui.ChartStacked:
		return chartStacked(k, w)
	case ui.ChartLine, ui.ChartArea, ui.ChartScatter:
		return chartPlot(k, w)
	case ui.ChartSparkline:
		return chartSparkline(k, w)
	case ui.ChartDonut:
		return chartDonut(k, w)
	case ui.ChartGauge:
		return chartGauge(k, w)
	}
	return []string{"(unknown chart " + termtext.StripLine(k.ChartKind) + ")"}
}

func (k *kind) label(i int) string {
	if i < len(k.Labels) {
		return termtext.StripLine(k.Labels[i])
	}
	return ""
}

func (k *kind) legend(glyphs []string, w int) []string {
	if len(k.Series) < 2 {
		return nil
	}
	var parts []string
	for i, s := range k.Series {
		parts = append(parts, seriesStyle(i).Render(glyphs[i%len(glyphs)])+" "+termtext.StripLine(s.Label))
	}
	return wrap(strings.Join(parts, "  "), w)
}

func chartBars(k *kind, w int) []string {
	lw := 0
	for i := range k.Labels {
		lw = max(lw, width(k.label(i)))
	}
	lw = min(lw, w/3)
	var top float64
	var vw int
	for _, s := range k.Series {
		for _, v := range s.nums() {
			top = math.Max(top, math.Abs(v))
			vw = max(vw, width(formatNum(v, k.Unit)))
		}
	}
	cells := max(1, w-lw-vw-2)
	var out []string
	n := len(k.Labels)
	for _, s := range k.Series {
		n = max(n, len(s.nums()))
	}
	for i := range n {
		for si, s := range k.Series {
			vals := s.nums()
			if i >= len(vals) {
				continue
			}
			name := ""
			if si == 0 {
				name = k.label(i)
			}
			bar := ""
			if top > 0 {
				bar = strings.Repeat(seriesFills[si%len(seriesFills)], int(math.Round(math.Abs(vals[i])/top*float64(cells))))
			}
			out = append(out, fit(name, lw)+" "+seriesStyle(si).Render(bar)+" "+formatNum(vals[i], k.Unit))
		}
	}
	return append(out, k.legend(seriesFills, w)...)
}

// chartHeight is the rows of a columns or braille plot.
const chartHeight = 8

func chartColumns(k *kind, w int) []string {
	s0 := k.Series[0].nums()
	var top float64
	for _, s := range k.Series {
		for _, v := range s.nums() {
			top = math.Max(top, v)
		}
	}
	ns := len(k.Series)
	colW := max(1, min(4, (w-len(s0))/max(1, len(s0)*ns)))
	grid := make([]strings.Builder, chartHeight)
	for i := range s0 {
		for si, s := range k.Series {
			vals := s.nums()
			v := 0.0
			if i < len(vals) {
				v = vals[i]
			}
			eighths := 0
			if top > 0 {
				eighths = int(math.Round(math.Max(0, v) / top * chartHeight * 8))
			}
			for r := range chartHeight {
				level := eighths - (chartHeight-1-r)*8
				var cell string
				switch {
				case level >= 8:
					cell = seriesFills[si%len(seriesFills)]
				case level > 0 && si == 0:
					cell = string(sparkLevels[level-1])
				case level > 0:
					cell = seriesFills[si%len(seriesFills)]
				default:
					cell = " "
				}
				grid[r].WriteString(seriesStyle(si).Render(strings.Repeat(cell, colW)))
			}
		}
		for r := range chartHeight {
			grid[r].WriteString(" ")
		}
	}
	out := make([]string, 0, chartHeight+3)
	out = append(out, "max "+formatNum(top, k.Unit))
	for r := range grid {
		out = append(out, grid[r].String())
	}
	var labels strings.Builder
	slot := colW*ns + 1
	for i := range s0 {
		labels.WriteString(fit(k.label(i), slot))
	}
	out = append(out, strings.TrimRight(labels.String(), " "))
	return append(out, k.legend(seriesFills, w)...)
}

func chartStacked(k *kind, w int) []string {
	lw := 0
	for i := range k.Labels {
		lw = max(lw, width(k.label(i)))
	}
	lw = min(lw, w/3)
	n := len(k.Series[0].nums())
	totals := make([]float64, n)
	var top float64
	for i := range n {
		for _, s := range k.Series {
			if v := s.nums(); i < len(v) {
				totals[i] += math.Max(0, v[i])
			}
		}
		top = math.Max(top, totals[i])
	}
	vw := width(formatNum(top, k.Unit))
	cells := max(1, w-lw-vw-2)
	var out []string
	for i := range n {
		var bar strings.Builder
		used := 0
		acc := 0.0
		for si, s := range k.Series {
			v := s.nums()
			if i >= len(v) || top == 0 {
				continue
			}
			acc += math.Max(0, v[i])
			end := int(math.Round(acc / top * float64(cells)))
			bar.WriteString(seriesStyle(si).Render(strings.Repeat(seriesFills[si%len(seriesFills)], max(0, end-used))))
			used = max(used, end)
		}
		out = append(out, fit(k.label(i), lw)+" "+bar.String()+" "+formatNum(totals[i], k.Unit))
	}
	return append(out, k.legend(seriesFills, w)...)
}

// braille is a canvas of 2×4 dots per cell. A cell may instead hold a
// series mark, which names the series without colour.
type braille struct {
	w, h  int // in cells
	cells [][]rune
	owner [][]int    // series that last set a dot in the cell, -1 for none
	marks [][]string // a series mark drawn over the cell, "" for none
}

func newBraille(w, h int) *braille {
	b := &braille{w: w, h: h, cells: make([][]rune, h), owner: make([][]int, h), marks: make([][]string, h)}
	for r := range h {
		b.cells[r] = make([]rune, w)
		b.owner[r] = make([]int, w)
		b.marks[r] = make([]string, w)
		for c := range w {
			b.cells[r][c] = 0x2800
			b.owner[r][c] = -1
		}
	}
	return b
}

var brailleBits = [4][2]rune{{0x01, 0x08}, {0x02, 0x10}, {0x04, 0x20}, {0x40, 0x80}}

// set sets the dot at x, y (dots, y down) for series s.
func (b *braille) set(x, y, s int) {
	if x < 0 || y < 0 || x >= b.w*2 || y >= b.h*4 {
		return
	}
	b.cells[y/4][x/2] |= brailleBits[y%4][x%2]
	b.owner[y/4][x/2] = s
}

// mark puts series s's mark over the cell that holds dot x, y.
func (b *braille) mark(x, y, s int) {
	if x < 0 || y < 0 || x >= b.w*2 || y >= b.h*4 {
		return
	}
	b.marks[y/4][x/2] = seriesMarks[s%len(seriesMarks)]
	b.owner[y/4][x/2] = s
}

func (b *braille) lines() []string {
	out := make([]string, b.h)
	for r := range b.h {
		var sb strings.Builder
		for c := range b.w {
			ch := string(b.cells[r][c])
			if m := b.marks[r][c]; m != "" {
				ch = m
			}
			if o := b.owner[r][c]; o >= 0 {
				ch = seriesStyle(o).Render(ch)
			}
			sb.WriteString(ch)
		}
		out[r] = sb.String()
	}
	return out
}

func chartPlot(k *kind, w int) []string {
	scatter := k.ChartKind == ui.ChartScatter
	lo, hi := math.Inf(1), math.Inf(-1)
	xlo, xhi := math.Inf(1), math.Inf(-1)
	for _, s := range k.Series {
		if scatter {
			for _, p := range s.pairs() {
				xlo, xhi = math.Min(xlo, p[0]), math.Max(xhi, p[0])
				lo, hi = math.Min(lo, p[1]), math.Max(hi, p[1])
			}
			continue
		}
		for _, v := range s.nums() {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 0) {
		return []string{"(no data)"}
	}
	if k.ChartKind == ui.ChartArea {
		lo = math.Min(lo, 0)
	}
	if hi == lo {
		hi = lo + 1
	}
	axis := max(width(formatNum(hi, k.Unit)), width(formatNum(lo, k.Unit)))
	cw := max(2, w-axis-2)
	b := newBraille(cw, chartHeight)
	dotsW, dotsH := cw*2, chartHeight*4
	yOf := func(v float64) int { return dotsH - 1 - int(math.Round((v-lo)/(hi-lo)*float64(dotsH-1))) }
	for si, s := range k.Series {
		if scatter {
			span := xhi - xlo
			if span == 0 {
				span = 1
			}
			for _, p := range s.pairs() {
				x, y := int(math.Round((p[0]-xlo)/span*float64(dotsW-1))), yOf(p[1])
				if si == 0 {
					b.set(x, y, si)
				} else {
					b.mark(x, y, si)
				}
			}
			continue
		}
		vals := s.nums()
		if len(vals) == 0 {
			continue
		}
		xOf := func(i int) int {
			if len(vals) == 1 {
				return 0
			}
			return int(math.Round(float64(i) / float64(len(vals)-1) * float64(dotsW-1)))
		}
		for i := range vals {
			x0, y0 := xOf(i), yOf(vals[i])
			x1, y1 := x0, y0
			if i+1 < len(vals) {
				x1, y1 = xOf(i+1), yOf(vals[i+1])
			}
			for x := x0; x <= x1; x++ {
				y := y0
				if x1 > x0 {
					y = y0 + (y1-y0)*(x-x0)/(x1-x0)
				}
				b.set(x, y, si)
				if x == x0 && si > 0 && k.ChartKind == ui.ChartLine {
					b.mark(x, y, si)
				}
				if k.ChartKind == ui.ChartArea {
					for yy := y + 1; yy < dotsH; yy++ {
						if (x+yy)%2 == 0 || si == 0 {
							b.set(x, yy, si)
						}
					}
				}
			}
		}
	}
	rows := b.lines()
	out := make([]string, 0, len(rows)+2)
	for r, row := range rows {
		ax := ""
		switch r {
		case 0:
			ax = formatNum(hi, k.Unit)
		case len(rows) - 1:
			ax = formatNum(lo, k.Unit)
		}
		out = append(out, fit(ax, axis)+" ┤"+row)
	}
	if !scatter && len(k.Labels) > 0 {
		first, last := k.label(0), k.label(len(k.Labels)-1)
		gap := max(1, cw-width(first)-width(last))
		out = append(out, strings.Repeat(" ", axis+2)+first+strings.Repeat(" ", gap)+last)
	}
	// Series 0 is the plain braille line or dots; each other series carries
	// its mark at its points (an area its own fill pattern).
	glyphs := append([]string{"⠒"}, seriesMarks[1:]...)
	if k.ChartKind == ui.ChartArea {
		glyphs = []string{"⣿", "⢕"}
	}
	return append(out, k.legend(glyphs, w)...)
}

func chartSparkline(k *kind, w int) []string {
	var out []string
	for si, s := range k.Series {
		vals := s.nums()
		name := termtext.StripLine(s.Label)
		last := ""
		if len(vals) > 0 {
			last = " " + formatNum(vals[len(vals)-1], k.Unit)
		}
		cells := max(1, w-width(name)-width(last)-1)
		if name == "" {
			cells = max(1, w-width(last))
		}
		// Resample to at most cells values: each cell is the mean of its share.
		if len(vals) > cells {
			res := make([]float64, cells)
			for c := range cells {
				a, b := c*len(vals)/cells, (c+1)*len(vals)/cells
				sum := 0.0
				for _, v := range vals[a:b] {
					sum += v
				}
				res[c] = sum / float64(max(1, b-a))
			}
			vals = res
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range vals {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		var sb strings.Builder
		for _, v := range vals {
			lvl := 0
			if hi > lo {
				lvl = int(math.Round((v - lo) / (hi - lo) * 7))
			}
			sb.WriteRune(sparkLevels[lvl])
		}
		line := seriesStyle(si).Render(sb.String()) + last
		if name != "" {
			line = name + " " + line
		}
		out = append(out, line)
	}
	return out
}

func chartDonut(k *kind, w int) []string {
	vals := k.Series[0].nums()
	total := 0.0
	for _, v := range vals {
		total += math.Max(0, v)
	}
	if total == 0 {
		return []string{"(no data)"}
	}
	cells := max(4, w)
	var bar strings.Builder
	used, acc := 0, 0.0
	for i, v := range vals {
		acc += math.Max(0, v)
		end := int(math.Round(acc / total * float64(cells)))
		bar.WriteString(seriesStyle(i).Render(strings.Repeat(seriesFills[i%len(seriesFills)], max(0, end-used))))
		used = max(used, end)
	}
	out := []string{bar.String()}
	for i, v := range vals {
		pct := int(math.Round(100 * math.Max(0, v) / total))
		out = append(out, clip(seriesStyle(i).Render(seriesFills[i%len(seriesFills)])+" "+k.label(i)+" "+formatNum(v, k.Unit)+" ("+itoa(pct)+"%)", w))
	}
	return out
}

func chartGauge(k *kind, w int) []string {
	vals := k.Series[0].nums()
	if len(vals) == 0 {
		return []string{"(no data)"}
	}
	v, m := vals[0], 100.0
	if len(vals) > 1 && vals[1] > 0 {
		m = vals[1]
	}
	tailText := " " + formatNum(v, k.Unit) + " / " + formatNum(m, k.Unit)
	name := termtext.StripLine(k.Series[0].Label)
	cells := max(4, w-width(tailText))
	out := []string{}
	if name != "" {
		out = append(out, name)
	}
	return append(out, seriesStyle(0).Render(meter(v/m, cells))+tailText)
}
