package tui

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/clipperhouse/uax29/v2/graphemes"

	"github.com/getorrery/orrery/termtext"
)

// composer is the multi-line input: a lineEdit with the history of what
// was sent. It draws its own cursor as a reversed cell.
type composer struct {
	lineEdit
	history []string
	hpos    int // index into history while browsing; len(history) when not
	draft   string
	rows    rowLayout // the text laid out in rows, kept across draws
}

// maxComposerRows is the most rows the composer takes on screen.
const maxComposerRows = 5

func (c *composer) multiline() bool { return strings.ContainsRune(string(c.buf), '\n') }

// take returns the text and clears the composer, adding it to the history.
func (c *composer) take() string {
	s := string(c.buf)
	if strings.TrimSpace(s) != "" && (len(c.history) == 0 || c.history[len(c.history)-1] != s) {
		c.history = append(c.history, s)
	}
	c.hpos = len(c.history)
	c.buf, c.pos, c.off = nil, 0, 0
	c.touch(0)
	return s
}

// prev and next browse the history.
func (c *composer) prev() {
	if c.hpos == len(c.history) {
		c.draft = string(c.buf)
	}
	if c.hpos > 0 {
		c.hpos--
		c.set(c.history[c.hpos])
	}
}

func (c *composer) next() {
	if c.hpos < len(c.history) {
		c.hpos++
		if c.hpos == len(c.history) {
			c.set(c.draft)
		} else {
			c.set(c.history[c.hpos])
		}
	}
}

// currentWord returns the word the cursor ends and where it starts.
func (c *composer) currentWord() (string, int) {
	start := c.pos
	for start > 0 && c.buf[start-1] != ' ' && c.buf[start-1] != '\n' {
		start--
	}
	return string(c.buf[start:c.pos]), start
}

// replaceWord replaces the word that starts at start and ends at the cursor.
func (c *composer) replaceWord(start int, with string) {
	rest := append([]rune(nil), c.buf[c.pos:]...)
	c.buf = append(append(c.buf[:start], []rune(with)...), rest...)
	c.touch(start)
	c.pos = start + utf8.RuneCountInString(with)
}

// lines draws the buffer in w cells per row, wrapped by grapheme, the
// cursor as a reversed cell, at most maxComposerRows rows around the
// cursor. It costs the rows it draws and the text edited since the last
// draw, not the whole text: the screen is drawn after every key, and a
// paste that arrives as keys (without bracketed paste) is a key a
// character.
func (c *composer) lines(w int, focused bool) []string {
	w = max(1, w)
	c.rows.layout(c.buf, c.edited, w)
	c.edited = -1
	starts := c.rows.starts
	total := len(starts)
	// The cursor at the end of a full last row goes on a row of its own.
	extra := focused && c.pos == len(c.buf) && c.rows.lastWidth >= w
	if extra {
		total++
	}
	cursorRow := 0
	if focused {
		cursorRow, _ = slices.BinarySearch(starts, c.pos+1)
		cursorRow = max(cursorRow-1, 0)
		if extra {
			cursorRow = total - 1
		}
	}
	first := 0
	if total > maxComposerRows {
		first = max(0, min(cursorRow-maxComposerRows+1, total-maxComposerRows))
	}
	last := min(total, first+maxComposerRows)
	rows := make([]string, 0, last-first)
	for r := first; r < last; r++ {
		if r == len(starts) { // the cursor's own row
			rows = append(rows, styleCursor.Render(" "))
			continue
		}
		end := len(c.buf)
		if r+1 < len(starts) {
			end = starts[r+1]
		}
		rows = append(rows, c.drawRow(starts[r], end, w, focused && !extra, r == len(starts)-1))
	}
	return rows
}

// drawRow draws the graphemes of c.buf[from:to], one row, with the cursor
// when it falls in it (or, on the last row, after it).
func (c *composer) drawRow(from, to, w int, cursor, lastRow bool) string {
	var b strings.Builder
	forGraphemes(c.buf[from:to], func(i, j int, g string) {
		atCursor := cursor && from+i == c.pos
		if g == "\n" {
			if atCursor {
				b.WriteString(styleCursor.Render(" "))
			}
			return
		}
		ch, _ := composerCell(g, w)
		if atCursor {
			ch = styleCursor.Render(ch)
		}
		b.WriteString(ch)
	})
	if cursor && lastRow && c.pos == len(c.buf) {
		b.WriteString(styleCursor.Render(" "))
	}
	return b.String()
}

// composerCell is how the composer draws grapheme g in rows of w cells, and its
// width: an invisible one as "?", one wider than a row as "…".
func composerCell(g string, w int) (string, int) {
	if len(g) == 1 && g[0] >= ' ' && g[0] < utf8.RuneSelf && g[0] != 0x7f {
		return g, 1
	}
	ch := termtext.StripLine(g)
	cw := width(ch)
	if cw == 0 {
		ch, cw = "?", 1
	}
	if cw > w {
		ch, cw = "…", 1
	}
	return ch, cw
}

// forGraphemes calls fn with each grapheme of rs, as rune indexes into rs
// and its text.
func forGraphemes(rs []rune, fn func(i, j int, g string)) {
	plain := true
	for _, r := range rs {
		if r >= utf8.RuneSelf || r == '\r' {
			plain = false
			break
		}
	}
	if plain {
		var one [1]byte
		for i, r := range rs {
			one[0] = byte(r)
			fn(i, i+1, string(one[:]))
		}
		return
	}
	i := 0
	it := graphemes.FromString(string(rs))
	for it.Next() {
		j := i + utf8.RuneCountInString(it.Value())
		fn(i, j, it.Value())
		i = j
	}
}

// rowLayout is where a text's rows start when it is wrapped by grapheme in
// rows of w cells, a newline ending a row. It is laid out again only from
// the row where the text last changed: a row's breaks depend on the text
// before them alone.
type rowLayout struct {
	w         int
	starts    []int // the rune index each row starts at; starts[0] is 0
	lastWidth int   // the cells the last row takes
}

// layout brings the rows up to date with text, which changed at rune
// index edited and after (-1: not at all), for rows of w cells.
func (l *rowLayout) layout(text []rune, edited, w int) {
	if w != l.w || len(l.starts) == 0 {
		l.w, l.starts, edited = w, l.starts[:0], 0
	}
	if edited < 0 {
		return
	}
	// Lay out again from the row holding the rune before the change: the
	// grapheme it ends may have taken what was inserted after it. The
	// rows before it, and that row's start, are as they were.
	r, _ := slices.BinarySearch(l.starts, edited)
	r = max(r-1, 0)
	from := 0
	if r < len(l.starts) {
		from = l.starts[r]
	}
	if from > len(text) {
		r, from = 0, 0
	}
	l.starts = append(l.starts[:min(r, len(l.starts))], from)
	curW := 0
	forGraphemes(text[from:], func(i, j int, g string) {
		if g == "\n" {
			l.starts = append(l.starts, from+j)
			curW = 0
			return
		}
		_, cw := composerCell(g, w)
		if curW+cw > w {
			l.starts = append(l.starts, from+i)
			curW = 0
		}
		curW += cw
	})
	l.lastWidth = curW
}

// completeFile completes an @mention against the files under root: the
// longest common prefix of the matches, and the matches themselves.
func completeFile(root, partial string) (string, []string) {
	dir, base := filepath.Split(partial)
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		return partial, nil
	}
	var matches []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, base) || strings.HasPrefix(name, ".") && !strings.HasPrefix(base, ".") {
			continue
		}
		if e.IsDir() {
			name += "/"
		}
		matches = append(matches, dir+name)
	}
	sort.Strings(matches)
	if len(matches) == 0 {
		return partial, nil
	}
	return commonPrefix(matches), matches
}

// commonPrefix returns the longest prefix all of names share.
func commonPrefix(names []string) string {
	if len(names) == 0 {
		return ""
	}
	prefix := names[0]
	for _, n := range names[1:] {
		for !strings.HasPrefix(n, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	for len(prefix) > 0 && !utf8.ValidString(prefix) {
		prefix = prefix[:len(prefix)-1]
	}
	return prefix
}

// mentionWords returns the @words of text, without their @.
func mentionWords(text string) []string {
	var out []string
	for _, f := range strings.Fields(text) {
		if p, ok := strings.CutPrefix(f, "@"); ok {
			if p = strings.TrimRight(p, ",.;:!?)"); p != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// mentions returns the @paths of text that name files under root; none
// when root is "".
func mentions(root, text string) []string {
	if root == "" {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Fields(text) {
		p, ok := strings.CutPrefix(f, "@")
		if !ok || p == "" || seen[p] {
			continue
		}
		p = strings.TrimRight(p, ",.;:!?)")
		full := filepath.Join(root, p)
		if !isInside(root, full) {
			continue
		}
		if st, err := os.Stat(full); err == nil && st.Mode().IsRegular() {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

func isInside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}
