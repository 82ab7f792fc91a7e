package tui

import (
	"sort"
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/getorrery/orrery/termtext"
)

// Raster limits: a raster is drawn in at most 64×32 cells.
const (
	maxRasterCols = 64
	maxRasterRows = 32
)

// renderRaster draws a raster in half-block cells: each cell is two rows
// of the raster, the upper half ▀ in the top pixel's colour over the lower
// pixel's. Its legend names what each palette letter means, so the picture
// does not rest on colour alone.
func renderRaster(k *kind, w int) []string {
	rows := k.rasterRows()
	if len(rows) > maxRasterRows*2 {
		rows = rows[:maxRasterRows*2]
	}
	cols := min(maxRasterCols, w)
	colour := func(ch rune) (string, bool) {
		c, ok := k.Palette[string(ch)]
		return c, ok && c != "" && c != "transparent"
	}
	var out []string
	for r := 0; r < len(rows); r += 2 {
		top := []rune(rowString(rows, r))
		bot := []rune(rowString(rows, r+1))
		var sb strings.Builder
		for c := 0; c < cols && (c < len(top) || c < len(bot)); c++ {
			var tc, bc string
			var tok, bok bool
			if c < len(top) {
				tc, tok = colour(top[c])
			}
			if c < len(bot) {
				bc, bok = colour(bot[c])
			}
			switch {
			case tok && bok:
				sb.WriteString(lipgloss.NewStyle().Foreground(lipgloss.Color(tc)).Background(lipgloss.Color(bc)).Render("▀"))
			case tok:
				sb.WriteString(lipgloss.NewStyle().Foreground(lipgloss.Color(tc)).Render("▀"))
			case bok:
				sb.WriteString(lipgloss.NewStyle().Foreground(lipgloss.Color(bc)).Render("▄"))
			default:
				sb.WriteString(" ")
			}
		}
		out = append(out, sb.String())
	}
	if len(k.Legend) > 0 {
		keys := make([]string, 0, len(k.Legend))
		for key := range k.Legend {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		var parts []string
		for _, key := range keys {
			parts = append(parts, termtext.StripLine(key)+" "+termtext.StripLine(k.Legend[key]))
		}
		out = append(out, wrap(strings.Join(parts, "  "), w)...)
	}
	if k.Alt != "" {
		out = append(out, styleDim.Render(clip(termtext.StripLine(k.Alt), w)))
	}
	return out
}

func rowString(rows []string, i int) string {
	if i < len(rows) {
		return rows[i]
	}
	return ""
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
