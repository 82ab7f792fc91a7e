package tui

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/getorrery/orrery/termtext"
)

// composer is the multi-line input: a lineEdit with the history of what
// was sent. It draws its own cursor as a reversed cell.
type composer struct {
	lineEdit
	history []string
	hpos    int // index into history while browsing; len(history) when not
	draft   string
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
	c.pos = start + utf8.RuneCountInString(with)
}

// lines draws the buffer in w cells per row, wrapped by grapheme, the
// cursor as a reversed cell, at most maxComposerRows rows around the
// cursor.
func (c *composer) lines(w int, focused bool) []string {
	w = max(1, w)
	var rows []string
	var cur strings.Builder
	curW := 0
	cursorRow := 0
	flush := func() {
		rows = append(rows, cur.String())
		cur.Reset()
		curW = 0
	}
	b := c.bounds()
	for k := range b {
		i := b[k]
		atCursor := i == c.pos && focused
		if k == len(b)-1 {
			if atCursor {
				if curW >= w {
					flush()
				}
				cursorRow = len(rows)
				cur.WriteString(styleCursor.Render(" "))
			}
			break
		}
		g := string(c.buf[i:b[k+1]])
		if g == "\n" {
			if atCursor {
				cursorRow = len(rows)
				cur.WriteString(styleCursor.Render(" "))
			}
			flush()
			continue
		}
		ch := termtext.StripLine(g)
		cw := width(ch)
		if cw == 0 {
			ch, cw = "?", 1
		}
		if cw > w {
			ch, cw = "…", 1
		}
		if curW+cw > w {
			flush()
		}
		if atCursor {
			cursorRow = len(rows)
			ch = styleCursor.Render(ch)
		}
		cur.WriteString(ch)
		curW += cw
	}
	flush()
	if len(rows) > maxComposerRows {
		start := max(0, min(cursorRow-maxComposerRows+1, len(rows)-maxComposerRows))
		rows = rows[start : start+maxComposerRows]
	}
	return rows
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
