package tui

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/clipperhouse/uax29/v2/graphemes"

	"github.com/getorrery/orrery/termtext"
)

// lineEdit is a text being typed, with a cursor between two of its
// graphemes: the one editor behind the composer, a form's text, number
// and multiline fields and a question's typed answer. The cursor moves by
// grapheme (a letter with its accents, an emoji with its joiners), so it
// never splits a UTF-8 sequence nor a character from its marks. A newline
// ends a line for Home, End, Ctrl-U and Ctrl-K. The zero value is empty,
// with the cursor at its start.
type lineEdit struct {
	buf []rune
	pos int // the cursor: a rune index on a grapheme boundary, 0…len(buf)
	off int // the first rune drawn when view scrolls sideways, on a grapheme boundary
	// edited is the lowest rune index whose text changed since the
	// composer last laid the text out in rows, or -1 when nothing did
	// (the zero value, 0, has it lay out everything).
	edited int
}

// touch records a change of the text at rune index i and after.
func (l *lineEdit) touch(i int) {
	if l.edited < 0 || i < l.edited {
		l.edited = max(i, 0)
	}
}

// newLineEdit returns an editor holding s with the cursor at pos (a rune
// index, moved onto the grapheme boundary at or after it); a pos below 0
// puts the cursor at the end.
func newLineEdit(s string, pos, off int) *lineEdit {
	l := &lineEdit{buf: []rune(s), pos: pos, off: off}
	if pos < 0 {
		l.pos = len(l.buf)
	}
	l.snap()
	return l
}

// String returns the text.
func (l *lineEdit) String() string { return string(l.buf) }

// set replaces the text and puts the cursor at its end.
func (l *lineEdit) set(s string) {
	l.buf = []rune(s)
	l.pos, l.off = len(l.buf), 0
	l.touch(0)
}

// bounds returns the grapheme boundaries of the text as rune indexes,
// from 0 to len(buf) inclusive.
func (l *lineEdit) bounds() []int {
	plain := true
	for _, r := range l.buf {
		if r >= utf8.RuneSelf || r == '\r' {
			plain = false
			break
		}
	}
	out := make([]int, 0, len(l.buf)+1)
	if plain {
		for i := 0; i <= len(l.buf); i++ {
			out = append(out, i)
		}
		return out
	}
	out = append(out, 0)
	n := 0
	it := graphemes.FromString(string(l.buf))
	for it.Next() {
		n += utf8.RuneCountInString(it.Value())
		out = append(out, n)
	}
	return out
}

// snap clamps the cursor and the scroll offset to the text and moves them
// onto the grapheme boundary at or after them.
func (l *lineEdit) snap() {
	l.pos = min(max(0, l.pos), len(l.buf))
	l.off = min(max(0, l.off), len(l.buf))
	b := l.bounds()
	l.pos = b[boundAtOrAfter(b, l.pos)]
	l.off = b[boundAtOrAfter(b, l.off)]
}

// boundAtOrAfter returns the index in b of the first boundary at or after
// i.
func boundAtOrAfter(b []int, i int) int {
	for k, x := range b {
		if x >= i {
			return k
		}
	}
	return len(b) - 1
}

// prev and next return the grapheme boundary before and after i.
func (l *lineEdit) prev(i int) int {
	b := l.bounds()
	k := boundAtOrAfter(b, i)
	return b[max(0, k-1)]
}

func (l *lineEdit) next(i int) int {
	b := l.bounds()
	k := boundAtOrAfter(b, i)
	if b[k] > i {
		return b[k]
	}
	return b[min(len(b)-1, k+1)]
}

// lineStart and lineEnd return where the line holding the cursor starts
// and ends (before its newline).
func (l *lineEdit) lineStart() int {
	i := l.pos
	for i > 0 && l.buf[i-1] != '\n' {
		i--
	}
	return i
}

func (l *lineEdit) lineEnd() int {
	i := l.pos
	for i < len(l.buf) && l.buf[i] != '\n' {
		i++
	}
	return i
}

// isWord reports whether the grapheme that starts with r is part of a
// word: a letter, a digit or an underscore.
func isWord(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// wordBack returns where the cursor lands going back one word: over the
// graphemes for which in is false, then over those for which it is true.
func (l *lineEdit) wordBack(in func(rune) bool) int {
	b := l.bounds()
	k := boundAtOrAfter(b, l.pos)
	for k > 0 && !in(l.buf[b[k-1]]) {
		k--
	}
	for k > 0 && in(l.buf[b[k-1]]) {
		k--
	}
	return b[k]
}

// wordForward returns where the cursor lands going forward one word: over
// the graphemes that are not a word's, then to the end of the word.
func (l *lineEdit) wordForward() int {
	b := l.bounds()
	k := boundAtOrAfter(b, l.pos)
	for k < len(b)-1 && !isWord(l.buf[b[k]]) {
		k++
	}
	for k < len(b)-1 && isWord(l.buf[b[k]]) {
		k++
	}
	return b[k]
}

// cut removes the runes from i to j and leaves the cursor at i.
func (l *lineEdit) cut(i, j int) {
	if i >= j {
		return
	}
	l.buf = append(l.buf[:i], l.buf[j:]...)
	l.touch(i)
	l.pos = i
	l.snap()
}

// insert puts s at the cursor and moves the cursor past it.
func (l *lineEdit) insert(s string) {
	if s == "" {
		return
	}
	r := []rune(s)
	at := l.pos
	l.touch(at)
	if at == len(l.buf) {
		l.buf = append(l.buf, r...)
	} else {
		l.buf = append(l.buf[:at], append(r, l.buf[at:]...)...)
	}
	l.pos += len(r)
	if l.plainAround(at, len(r)) {
		// Every rune of the text and its neighbours is a grapheme of its
		// own, so the cursor is on a boundary already: typing (or a paste
		// that arrives as keys) costs what it inserts, not the whole text.
		return
	}
	l.snap()
}

// plainAround reports whether the n runes inserted at at, the rune before
// them and the rune after them are all ASCII other than CR, and the
// scroll offset is not after them: then no grapheme boundary moved (an
// ASCII character never joins the one before it unless that is a CR or a
// prepended mark, which is not ASCII).
func (l *lineEdit) plainAround(at, n int) bool {
	if l.off > at {
		return false
	}
	lo, hi := max(at-1, 0), min(at+n+1, len(l.buf))
	for _, r := range l.buf[lo:hi] {
		if r >= utf8.RuneSelf || r == '\r' {
			return false
		}
	}
	return true
}

// The composer's names for the moves it shares with every field.
func (l *lineEdit) backspace() { l.cut(l.prev(l.pos), l.pos) }
func (l *lineEdit) del()       { l.cut(l.pos, l.next(l.pos)) }
func (l *lineEdit) left()      { l.pos = l.prev(l.pos) }
func (l *lineEdit) right()     { l.pos = l.next(l.pos) }
func (l *lineEdit) home()      { l.pos = l.lineStart() }
func (l *lineEdit) end()       { l.pos = l.lineEnd() }

// key applies one editing key, named as tea.KeyPressMsg.String names it,
// and reports whether it is one: ←/→ (Ctrl-B/Ctrl-F) a grapheme, Home/End
// (Ctrl-A/Ctrl-E) the line's ends, Alt-←/→, Ctrl-←/→ and Alt-B/Alt-F a
// word, Backspace and Delete (Ctrl-D) a grapheme at the cursor, Ctrl-W the
// space-separated word before it, Alt-Backspace the word before it, Alt-D
// the word after it, Ctrl-U to the line's start, Ctrl-K to its end (the
// newline itself when the cursor is at the end of a line). Typed text is
// the caller's: it decides what a key's text becomes (insert).
func (l *lineEdit) key(s string) bool {
	switch s {
	case "left", "ctrl+b":
		l.left()
	case "right", "ctrl+f":
		l.right()
	case "home", "ctrl+a":
		l.home()
	case "end", "ctrl+e":
		l.end()
	case "alt+left", "ctrl+left", "alt+b":
		l.pos = l.wordBack(isWord)
	case "alt+right", "ctrl+right", "alt+f":
		l.pos = l.wordForward()
	case "backspace", "ctrl+h":
		l.backspace()
	case "delete", "ctrl+d":
		l.del()
	case "ctrl+w":
		l.cut(l.wordBack(func(r rune) bool { return !unicode.IsSpace(r) }), l.pos)
	case "alt+backspace", "ctrl+backspace":
		l.cut(l.wordBack(isWord), l.pos)
	case "alt+d", "alt+delete", "ctrl+delete":
		l.cut(l.pos, l.wordForward())
	case "ctrl+u":
		l.cut(l.lineStart(), l.pos)
	case "ctrl+k":
		if e := l.lineEnd(); e > l.pos {
			l.cut(l.pos, e)
		} else if l.pos < len(l.buf) {
			l.cut(l.pos, l.pos+1) // the newline: join the next line
		}
	default:
		return false
	}
	return true
}

// cell is one grapheme as view draws it: its text, made inert and one line,
// and the cells it takes.
type cell struct {
	s string
	w int
}

// cells splits the text at the boundaries b into what view draws: each
// grapheme through termtext.StripLine, one that would draw as nothing (a
// control, a lone joiner) as "?".
func (l *lineEdit) cells(b []int) []cell {
	out := make([]cell, 0, len(b))
	for k := 0; k+1 < len(b); k++ {
		if r := l.buf[b[k]]; b[k+1] == b[k]+1 && r >= 0x20 && r < 0x7f {
			out = append(out, cell{string(r), 1}) // printable ASCII: as it is
			continue
		}
		s := termtext.StripLine(string(l.buf[b[k]:b[k+1]]))
		w := width(s)
		if w == 0 {
			s, w = "?", 1
		}
		out = append(out, cell{s, w})
	}
	return out
}

// view draws the text on one line in at most w cells, scrolled sideways so
// that the cursor stays in sight, the cursor as a reversed cell (a
// reversed space at the end) when focused. It keeps the scroll offset for
// the next draw, so the text moves only when the cursor would leave the
// field. Newlines and tabs are drawn as spaces, and every grapheme passes
// through termtext.StripLine.
func (l *lineEdit) view(w int, focused bool) string {
	w = max(1, w)
	l.snap()
	b := l.bounds()
	cs := l.cells(b)
	for i := range cs {
		if cs[i].w > w {
			cs[i] = cell{"…", 1} // a wide grapheme in a one-cell field
		}
	}
	cur := boundAtOrAfter(b, l.pos) // the cursor's grapheme; len(cs) at the end
	first := boundAtOrAfter(b, l.off)
	if !focused {
		first = 0
	}
	cellW := func(i int) int {
		if i == len(cs) {
			return 1 // the cursor after the last grapheme
		}
		return cs[i].w
	}
	span := func(from, to int) int { // cells of graphemes from…to inclusive
		n := 0
		for i := from; i <= to; i++ {
			n += cellW(i)
		}
		return n
	}
	if focused {
		if cur < first {
			first = cur
		}
		for first < cur && span(first, cur) > w {
			first++
		}
		// Text deleted at the end: bring back what fits on the left (with
		// a cell for the cursor after the last grapheme).
		for first > 0 && span(first-1, len(cs)) <= w {
			first--
		}
		l.off = b[first]
	}
	var sb strings.Builder
	used := 0
	for i := first; i <= len(cs); i++ {
		if i == len(cs) {
			if focused && cur == i && used+1 <= w {
				sb.WriteString(styleCursor.Render(" "))
			}
			break
		}
		c := cs[i]
		if used+c.w > w {
			break
		}
		if focused && i == cur {
			sb.WriteString(styleCursor.Render(c.s))
		} else {
			sb.WriteString(c.s)
		}
		used += c.w
	}
	return sb.String()
}
