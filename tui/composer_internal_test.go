package tui

import (
	"slices"
	"strings"
	"testing"

	"github.com/getorrery/orrery/termtext"
)

// refLines is the composer's drawing as it was before its rows were kept
// across draws: the whole text wrapped on every draw. The kept layout must
// draw the same.
func (c *composer) refLines(w int, focused bool) []string {
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

// FuzzComposerRows edits a composer with any text and keys and draws it
// after each step, at a width the script may change: the rows it keeps
// across draws draw the same as wrapping the whole text again.
func FuzzComposerRows(f *testing.F) {
	f.Add("hello world", "abc\x01\x02de", 4)
	f.Add("", "aaaaaaaaaa\x03\x03bbbb", 3)
	f.Add("e\u0301👩\u200d💻🇫🇷\n\nx", "\x01\x04\x01y\x05", 2)
	f.Add("ab\ncd\nef\ngh\nij\nkl", "\x06\x01\x01\x01z\x07\n", 5)
	f.Add("x\r", "\n\x08w", 1)
	keys := []string{"", "left", "right", "home", "end", "backspace", "ctrl+w", "ctrl+u", "ctrl+k", "alt+backspace", "delete"}
	f.Fuzz(func(t *testing.T, text, script string, w int) {
		w = 1 + abs(w)%12
		c := &composer{}
		c.set(text)
		for _, r := range script {
			switch {
			case r == 0x0b: // the width changes, as on a resize
				w = 1 + (w+3)%12
			case r == 0x0c:
				c.set(strings.Repeat("q", int(w)))
			case r == 0x0e:
				c.take()
			case int(r) < len(keys) && r != 0:
				c.key(keys[r])
			default:
				c.insert(string(r))
			}
			for _, focused := range []bool{true, false} {
				got, want := c.lines(w, focused), c.refLines(w, focused)
				if !slices.Equal(got, want) {
					t.Fatalf("text %q cursor %d width %d focused %v: drew\n%q\nwant\n%q", c.String(), c.pos, w, focused, got, want)
				}
			}
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
