package ui

import (
	"math"
	"strconv"
	"strings"

	"github.com/getorrery/orrery/termtext"
)

// Series glyphs. Colour is never the only signal: each series has its own
// fill (bars, columns, stacked, area, donut parts) or mark (line, scatter),
// named in a legend. They repeat after eight.
var (
	seriesFills = []string{"█", "▓", "▒", "░", "#", "=", "+", ":"}
	seriesMarks = []string{"•", "○", "×", "+", "*", "◆", "△", "#"}
	sparkLevels = []string{"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"}
)

const (
	// plotHeight is the rows of a columns, line, area or scatter plot.
	plotHeight = 8
	// plotWidth is the most columns of a line or area plot; more points
	// share columns. It is also a sparkline's most cells.
	plotWidth = 48
	// scatterWidth is the columns of a scatter plot.
	scatterWidth = 24
)

const noData = "(no data)"

func fill(i int) string { return seriesFills[i%len(seriesFills)] }
func mark(i int) string { return seriesMarks[i%len(seriesMarks)] }

func (k *chartKind) text() string {
	switch k.Kind {
	case ChartBars:
		return k.bars()
	case ChartColumns:
		return k.columns()
	case ChartStacked:
		return k.stacked()
	case ChartLine:
		return k.plot(false)
	case ChartArea:
		return k.plot(true)
	case ChartScatter:
		return k.scatter()
	case ChartSparkline:
		return k.sparkline()
	case ChartDonut:
		return k.donut()
	case ChartGauge:
		return k.gauge()
	}
	return ""
}

// num writes a value with the chart's unit.
func (k *chartKind) num(v float64) string { return withUnit(formatNumber(v), k.Unit) }

// named reports whether the chart shows series names: when there are
// several, or its one series has a label.
func (k *chartKind) named() bool {
	return len(k.Series) > 1 || k.Series[0].Label != ""
}

func (k *chartKind) name(i int) string { return termtext.StripLine(k.Series[i].Label) }

func (k *chartKind) labels() []string {
	out := make([]string, len(k.Labels))
	for i, l := range k.Labels {
		out[i] = termtext.StripLine(l)
	}
	return out
}

func (k *chartKind) maxAbs() float64 {
	m := 0.0
	for _, s := range k.Series {
		for _, v := range s.nums {
			m = math.Max(m, math.Abs(v))
		}
	}
	return m
}

// cellsFor scales a magnitude a of most m to at most n cells, drawing at
// least one cell for any value other than zero.
func cellsFor(a, m float64, n int) int {
	if a == 0 || m == 0 {
		return 0
	}
	return max(1, scaled(frac(a, 0, m), n))
}

// frac places v between lo and hi as a fraction from 0 to 1, halving first
// so that no difference overflows, and clamping what falls outside.
func frac(v, lo, hi float64) float64 {
	d := hi/2 - lo/2
	if !(d > 0) {
		return 0.5
	}
	f := (v/2 - lo/2) / d
	if math.IsNaN(f) {
		return 0
	}
	return math.Max(0, math.Min(1, f))
}

// scaled rounds a fraction from 0 to 1 to a count from 0 to n.
func scaled(f float64, n int) int {
	return int(math.Round(f * float64(n)))
}

// edges returns the cell where each running total ends on a bar of n cells
// scaled to total, never going back.
func edges(vals []float64, total float64, n int) []int {
	out := make([]int, len(vals))
	cum, prev := 0.0, 0
	for i, v := range vals {
		cum += v
		e := 0
		if total > 0 {
			e = scaled(frac(cum, 0, total), n)
		}
		prev = max(prev, e)
		out[i] = prev
	}
	return out
}

func maxWidth(ss []string) int {
	w := 0
	for _, s := range ss {
		w = max(w, textWidth(s))
	}
	return w
}

// bars: one line per category (and series, named), a bar scaled to the
// largest magnitude, then the value, right-aligned; one named series gets a
// legend line instead.
func (k *chartKind) bars() string {
	labels := k.labels()
	if len(labels) == 0 {
		return noData
	}
	m := k.maxAbs()
	lw := maxWidth(labels)
	names := make([]string, len(k.Series))
	var values []string
	for j := range k.Series {
		names[j] = k.name(j)
		for _, v := range k.Series[j].nums {
			values = append(values, k.num(v))
		}
	}
	nw, vw := maxWidth(names), maxWidth(values)
	var lines []string
	for i, label := range labels {
		for j, s := range k.Series {
			var b strings.Builder
			if j == 0 {
				b.WriteString(padRight(label, lw))
			} else {
				b.WriteString(strings.Repeat(" ", lw))
			}
			if len(k.Series) > 1 {
				b.WriteString("  " + padRight(names[j], nw))
			}
			v := s.nums[i]
			b.WriteString("  " + padRight(strings.Repeat(fill(j), cellsFor(math.Abs(v), m, barWidth)), barWidth))
			b.WriteString("  " + padLeft(k.num(v), vw))
			lines = append(lines, b.String())
		}
	}
	if len(k.Series) == 1 && k.named() {
		lines = append(lines, k.legend(fill))
	}
	return strings.Join(lines, "\n")
}

// columns: vertical columns plotHeight rows high, the categories under
// them, then one row of values per series.
func (k *chartKind) columns() string {
	labels := k.labels()
	if len(labels) == 0 {
		return noData
	}
	ns := len(k.Series)
	m := k.maxAbs()
	values := make([][]string, ns)
	for j, s := range k.Series {
		for _, v := range s.nums {
			values[j] = append(values[j], k.num(v))
		}
	}
	gw := make([]int, len(labels)) // each category's width
	for i, l := range labels {
		gw[i] = max(textWidth(l), ns)
		for j := range ns {
			gw[i] = max(gw[i], textWidth(values[j][i]))
		}
	}
	margin := ""
	var keys []string
	if k.named() {
		for j := range ns {
			keys = append(keys, fill(j)+" "+k.name(j))
		}
		margin = strings.Repeat(" ", maxWidth(keys)+2)
	}
	row := func(prefix string, cell func(i int) string) string {
		parts := make([]string, len(labels))
		for i := range labels {
			parts[i] = padRight(cell(i), gw[i])
		}
		return prefix + strings.Join(parts, "  ")
	}
	var lines []string
	for r := plotHeight; r >= 1; r-- {
		lines = append(lines, row(margin, func(i int) string {
			cw := gw[i] / ns
			var b strings.Builder
			for j, s := range k.Series {
				if cellsFor(math.Abs(s.nums[i]), m, plotHeight) >= r {
					b.WriteString(strings.Repeat(fill(j), cw))
				} else {
					b.WriteString(strings.Repeat(" ", cw))
				}
			}
			return b.String()
		}))
	}
	lines = append(lines, row(margin, func(i int) string { return labels[i] }))
	for j := range ns {
		prefix := ""
		if k.named() {
			prefix = padRight(keys[j], len([]rune(margin))-2) + "  "
		}
		lines = append(lines, row(prefix, func(i int) string { return values[j][i] }))
	}
	return strings.Join(lines, "\n")
}

// stacked: one line per category, the series' absolute values laid end to
// end and scaled to the largest total, then the total and its parts.
func (k *chartKind) stacked() string {
	labels := k.labels()
	if len(labels) == 0 {
		return noData
	}
	totals := make([]float64, len(labels))
	most := 0.0
	for i := range labels {
		for _, s := range k.Series {
			totals[i] += s.nums[i]
		}
		most = math.Max(most, totals[i])
	}
	lw := maxWidth(labels)
	var sums []string
	for _, t := range totals {
		sums = append(sums, k.num(t))
	}
	tw := maxWidth(sums)
	var lines []string
	for i, label := range labels {
		var bar strings.Builder
		parts := make([]string, len(k.Series))
		column := make([]float64, len(k.Series))
		for j, s := range k.Series {
			column[j] = s.nums[i]
			parts[j] = formatNumber(s.nums[i])
		}
		prev := 0
		for j, e := range edges(column, most, barWidth) {
			bar.WriteString(strings.Repeat(fill(j), e-prev))
			prev = e
		}
		line := padRight(label, lw) + "  " + padRight(bar.String(), barWidth) + "  " + padLeft(sums[i], tw)
		if len(k.Series) > 1 {
			line += " (" + strings.Join(parts, " + ") + ")"
		}
		lines = append(lines, line)
	}
	if k.named() {
		lines = append(lines, k.legend(fill))
	}
	return strings.Join(lines, "\n")
}

// legend names each series after its glyph.
func (k *chartKind) legend(glyph func(int) string) string {
	keys := make([]string, len(k.Series))
	for j := range k.Series {
		keys[j] = glyph(j) + " " + k.name(j)
	}
	return strings.Join(keys, "  ")
}

// grid is a plot's cells, row 0 at the bottom.
type grid [][]string

func newGrid(w int) grid {
	g := make(grid, plotHeight)
	for r := range g {
		g[r] = make([]string, w)
		for c := range g[r] {
			g[r][c] = " "
		}
	}
	return g
}

// rowOf places v between lo and hi on a row, the middle one when lo = hi.
func rowOf(v, lo, hi float64) int {
	if hi == lo {
		return (plotHeight - 1) / 2
	}
	return scaled(frac(v, lo, hi), plotHeight-1)
}

// draw writes the grid under a y axis labelled with lo and hi.
func (k *chartKind) draw(g grid, lo, hi float64) []string {
	top, bottom := k.num(hi), k.num(lo)
	yw := max(textWidth(top), textWidth(bottom))
	var lines []string
	for r := plotHeight - 1; r >= 0; r-- {
		label := ""
		switch {
		case hi == lo && r == rowOf(lo, lo, hi):
			label = top
		case hi != lo && r == plotHeight-1:
			label = top
		case hi != lo && r == 0:
			label = bottom
		}
		lines = append(lines, padLeft(label, yw)+" │"+strings.Join(g[r], ""))
	}
	lines = append(lines, strings.Repeat(" ", yw)+" └"+strings.Repeat("─", len(g[0])))
	return lines
}

// ends writes first at the left of w cells and last ending at its right.
func ends(first, last string, w int) string {
	if gap := w - textWidth(first) - textWidth(last); gap >= 1 {
		return first + strings.Repeat(" ", gap) + last
	}
	return first + " " + last
}

func bounds(vals []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return lo, hi
}

// plot: a line or area plot plotHeight rows high, one column per point (or
// per group of points past plotWidth), the y axis labelled with the extremes
// and the x axis with the first and last labels, then each series' first,
// last, least and greatest value.
func (k *chartKind) plot(area bool) string {
	n := len(k.Series[0].nums)
	if n == 0 {
		return noData
	}
	var all []float64
	for _, s := range k.Series {
		all = append(all, s.nums...)
	}
	lo, hi := bounds(all)
	w := min(n, plotWidth)
	g := newGrid(w)
	for j := len(k.Series) - 1; j >= 0; j-- {
		s := k.Series[j].nums
		for c := range w {
			from, to := c*n/w, (c+1)*n/w
			if area {
				top := 0
				for _, v := range s[from:to] {
					top = max(top, rowOf(v, lo, hi))
				}
				for r := 0; r <= top; r++ {
					g[r][c] = fill(j)
				}
				continue
			}
			for _, v := range s[from:to] {
				g[rowOf(v, lo, hi)][c] = mark(j)
			}
		}
	}
	lines := k.draw(g, lo, hi)
	yw := textWidth(lines[len(lines)-1]) - w - 1
	first, last := "1", strconv.Itoa(n)
	if len(k.Labels) == n {
		first, last = termtext.StripLine(k.Labels[0]), termtext.StripLine(k.Labels[n-1])
	}
	if n == 1 {
		lines = append(lines, strings.Repeat(" ", yw+1)+first)
	} else {
		lines = append(lines, strings.Repeat(" ", yw+1)+ends(first, last, w))
	}
	glyph := mark
	if area {
		glyph = fill
	}
	for j, s := range k.Series {
		slo, shi := bounds(s.nums)
		line := glyph(j) + " "
		if name := k.name(j); name != "" {
			line += name + ": "
		}
		line += formatNumber(s.nums[0]) + " → " + k.num(s.nums[n-1]) +
			" (min " + formatNumber(slo) + ", max " + formatNumber(shi) + ")"
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// scatter: the [x, y] points on a plotHeight × scatterWidth grid, the axes
// labelled with the extremes, then each series' count of points.
func (k *chartKind) scatter() string {
	var xs, ys []float64
	for _, s := range k.Series {
		for _, p := range s.pairs {
			xs, ys = append(xs, p[0]), append(ys, p[1])
		}
	}
	if len(xs) == 0 {
		return noData
	}
	xlo, xhi := bounds(xs)
	ylo, yhi := bounds(ys)
	g := newGrid(scatterWidth)
	for j := len(k.Series) - 1; j >= 0; j-- {
		for _, p := range k.Series[j].pairs {
			c := scatterWidth / 2
			if xhi != xlo {
				c = scaled(frac(p[0], xlo, xhi), scatterWidth-1)
			}
			g[rowOf(p[1], ylo, yhi)][c] = mark(j)
		}
	}
	lines := k.draw(g, ylo, yhi)
	yw := textWidth(lines[len(lines)-1]) - scatterWidth - 1
	if xlo == xhi {
		lines = append(lines, strings.Repeat(" ", yw+1)+padCenter(formatNumber(xlo), scatterWidth))
	} else {
		lines = append(lines, strings.Repeat(" ", yw+1)+ends(formatNumber(xlo), formatNumber(xhi), scatterWidth))
	}
	for j, s := range k.Series {
		line := mark(j) + " "
		if name := k.name(j); name != "" {
			line += name + ": "
		}
		line += strconv.Itoa(len(s.pairs)) + " " + plural(len(s.pairs), "point")
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// sparkline: one line per series, its values as eighth-height blocks
// between its own extremes (means of groups past plotWidth), then its last
// value and extremes.
func (k *chartKind) sparkline() string {
	names := make([]string, len(k.Series))
	for j := range k.Series {
		names[j] = k.name(j)
	}
	nw := maxWidth(names)
	var lines []string
	for j, s := range k.Series {
		line := ""
		if k.named() {
			line = padRight(names[j], nw) + "  "
		}
		n := len(s.nums)
		if n == 0 {
			lines = append(lines, line+noData)
			continue
		}
		lo, hi := bounds(s.nums)
		w := min(n, plotWidth)
		var b strings.Builder
		for c := range w {
			from, to := c*n/w, (c+1)*n/w
			sum := 0.0
			for _, v := range s.nums[from:to] {
				sum += v
			}
			level := 3
			if hi != lo {
				level = scaled(frac(sum/float64(to-from), lo, hi), 7)
			}
			b.WriteString(sparkLevels[max(0, min(7, level))])
		}
		line += b.String() + "  " + k.num(s.nums[n-1]) + " (min " + formatNumber(lo) + ", max " + formatNumber(hi) + ")"
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// donut: the parts as one bar of barWidth cells (a donut unrolled), then
// each part with its value and its whole percent; the percents add up to
// 100.
func (k *chartKind) donut() string {
	labels := k.labels()
	vals := k.Series[0].nums
	if len(vals) == 0 {
		return noData
	}
	var lines []string
	if k.Series[0].Label != "" {
		lines = append(lines, k.name(0))
	}
	total := 0.0
	for _, v := range vals {
		total += v
	}
	if total > 0 {
		var bar strings.Builder
		prev := 0
		for i, e := range edges(vals, total, barWidth) {
			bar.WriteString(strings.Repeat(fill(i), e-prev))
			prev = e
		}
		lines = append(lines, bar.String())
	}
	pcts := shares(vals, total)
	var nums []string
	for _, v := range vals {
		nums = append(nums, k.num(v))
	}
	lw, vw := maxWidth(labels), maxWidth(nums)
	for i := range vals {
		lines = append(lines, fill(i)+" "+padRight(labels[i], lw)+"  "+padLeft(nums[i], vw)+"  "+padLeft(strconv.Itoa(pcts[i])+"%", 4))
	}
	return strings.Join(lines, "\n")
}

// shares splits 100 percent among vals by the largest remainder, so the
// whole percents add up to 100 (or are all 0 when total is 0).
func shares(vals []float64, total float64) []int {
	out := make([]int, len(vals))
	if total <= 0 {
		return out
	}
	type rem struct {
		i int
		r float64
	}
	rems := make([]rem, len(vals))
	left := 100
	for i, v := range vals {
		exact := v / total * 100
		out[i] = int(math.Floor(exact))
		left -= out[i]
		rems[i] = rem{i, exact - math.Floor(exact)}
	}
	// Stable: the largest remainders first, earlier parts first among equals.
	for a := 1; a < len(rems); a++ {
		for b := a; b > 0 && rems[b].r > rems[b-1].r; b-- {
			rems[b], rems[b-1] = rems[b-1], rems[b]
		}
	}
	for x := 0; x < left && x < len(rems); x++ {
		out[rems[x].i]++
	}
	return out
}

// gauge: a meter of value against max (100 by default), the numbers and the
// percent.
func (k *chartKind) gauge() string {
	vals := k.Series[0].nums
	v, m := vals[0], 100.0
	if len(vals) == 2 {
		m = vals[1]
	}
	line := ""
	if name := k.name(0); name != "" {
		line = name + " "
	}
	line += meter(v, m) + " "
	if m == 100 && k.Unit == "%" {
		return line + k.num(v)
	}
	return line + k.num(v) + " of " + k.num(m) + " (" + strconv.Itoa(percent(v, m)) + "%)"
}
