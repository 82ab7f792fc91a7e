package tui

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/getorrery/orrery/termtext"
)

// marked writes the editor's text with a | where the cursor is.
func marked(l *lineEdit) string {
	return string(l.buf[:l.pos]) + "|" + string(l.buf[l.pos:])
}

// unmark returns the text of s without its | and where the | was, in runes.
func unmark(t *testing.T, s string) (string, int) {
	t.Helper()
	i := strings.Index(s, "|")
	if i < 0 {
		t.Fatalf("%q has no | for the cursor", s)
	}
	return s[:i] + s[i+1:], utf8.RuneCountInString(s[:i])
}

// reversedCells writes the cells drawn in reverse video between ⟦ and ⟧,
// every other escape sequence removed.
func reversedCells(s string) string {
	var b strings.Builder
	on := false
	for i := 0; i < len(s); {
		if s[i] != 0x1b {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := termtext.SequenceEnd(s, i)
		if seq := s[i:end]; strings.HasPrefix(seq, "\x1b[") && strings.HasSuffix(seq, "m") {
			for _, p := range strings.Split(seq[2:len(seq)-1], ";") {
				switch p {
				case "7":
					if !on {
						b.WriteString("⟦")
					}
					on = true
				case "", "0", "27":
					if on {
						b.WriteString("⟧")
					}
					on = false
				}
			}
		}
		i = end
	}
	if on {
		b.WriteString("⟧")
	}
	return b.String()
}

// TestLineEditKeys drives the editor with keys (a name as
// tea.KeyPressMsg.String names it, or "=text" for text typed or pasted)
// from a text with a cursor (|) and checks the text and cursor after.
func TestLineEditKeys(t *testing.T) {
	tests := []struct {
		name string
		from string
		keys []string
		want string
	}{
		{"type at the end", "web|", []string{"=-2"}, "web-2|"},
		{"left then insert mid-value", "web-1|", []string{"left", "left", "=x"}, "webx|-1"},
		{"right stops at the end", "ab|", []string{"right", "right"}, "ab|"},
		{"left stops at the start", "|ab", []string{"left", "ctrl+b"}, "|ab"},
		{"home and end", "ab|cd", []string{"home", "=<", "end", "=>"}, "<abcd>|"},
		{"ctrl+a and ctrl+e", "ab|cd", []string{"ctrl+a", "=<", "ctrl+e", "=>"}, "<abcd>|"},
		{"backspace at the cursor", "abc|def", []string{"backspace"}, "ab|def"},
		{"backspace at the start does nothing", "|abc", []string{"backspace"}, "|abc"},
		{"delete at the cursor", "abc|def", []string{"delete"}, "abc|ef"},
		{"delete at the end does nothing", "abc|", []string{"delete", "ctrl+d"}, "abc|"},
		{"word left", "deploy the web-1 app|", []string{"alt+left"}, "deploy the web-1 |app"},
		{"word left twice over punctuation", "deploy the web-1 app|", []string{"alt+left", "ctrl+left", "alt+b"}, "deploy the |web-1 app"},
		{"word right", "|deploy the web", []string{"alt+right", "ctrl+right"}, "deploy the| web"},
		{"word right to the end", "deploy |the", []string{"alt+f", "alt+f"}, "deploy the|"},
		{"ctrl+w deletes the spaced word back", "run go test -race  |ok", []string{"ctrl+w"}, "run go test |ok"},
		{"ctrl+w at the start does nothing", "|abc", []string{"ctrl+w"}, "|abc"},
		{"alt+backspace deletes the word back", "web-12|", []string{"alt+backspace"}, "web-|"},
		{"alt+d deletes the word after", "a |big word", []string{"alt+d"}, "a | word"},
		{"ctrl+u deletes to the start", "abc|def", []string{"ctrl+u"}, "|def"},
		{"ctrl+k deletes to the end", "abc|def", []string{"ctrl+k"}, "abc|"},
		{"ctrl+u in a line of several", "one\ntw|o", []string{"ctrl+u"}, "one\n|o"},
		{"ctrl+k joins the next line at a line's end", "one|\ntwo", []string{"ctrl+k"}, "one|two"},
		{"home and end in a line of several", "one\ntw|o\nthree", []string{"home", "=[", "end", "=]"}, "one\n[two]|\nthree"},
		{"multi-byte runes", "héllo|", []string{"left", "left", "left", "backspace"}, "h|llo"},
		{"delete a multi-byte rune", "|é€x", []string{"delete", "delete"}, "|x"},
		{"insert between wide runes", "世界|", []string{"left", "=x"}, "世x|界"},
		{"a combining mark moves with its letter", "e\u0301a|", []string{"left", "left"}, "|e\u0301a"},
		{"backspace deletes a letter and its mark", "xe\u0301|", []string{"backspace"}, "x|"},
		{"an emoji with a joiner is one grapheme", "a👩\u200d💻|", []string{"left", "=b"}, "ab|👩\u200d💻"},
		{"a flag is one grapheme", "🇫🇷|🇩🇪", []string{"delete", "backspace"}, "|"},
		{"word motion over CJK", "hello 世界|", []string{"alt+left"}, "hello |世界"},
		{"paste in the middle", "ab|cd", []string{"=XYZ"}, "abXYZ|cd"},
		{"unknown keys leave it", "ab|", []string{"f2", "ctrl+o"}, "ab|"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, pos := unmark(t, tt.from)
			l := newLineEdit(text, pos, 0)
			for _, k := range tt.keys {
				if s, ok := strings.CutPrefix(k, "="); ok {
					l.insert(s)
					continue
				}
				handled := l.key(k)
				if want := k != "f2" && k != "ctrl+o"; handled != want {
					t.Errorf("key(%q) = %v, want %v", k, handled, want)
				}
			}
			if got := marked(l); got != tt.want {
				t.Errorf("after %q: %q, want %q", tt.keys, got, tt.want)
			}
		})
	}
}

// TestLineEditView draws an editor in a narrow field: the cursor is a
// reversed cell (a reversed space at the end), wide runes take two cells,
// and a long text scrolls so the cursor stays in sight; it scrolls only
// when the cursor would leave the field.
func TestLineEditView(t *testing.T) {
	tests := []struct {
		name  string
		from  string
		width int
		keys  []string // keys between draws; each draw's result in want
		want  []string
	}{
		{"fits, cursor at the end", "web-1|", 10, nil, []string{"web-1⟦ ⟧"}},
		{"fits, cursor mid-value", "we|b-1", 10, nil, []string{"we⟦b⟧-1"}},
		{"long text at the end shows its tail", "abcdefghij|", 5, nil, []string{"ghij⟦ ⟧"}},
		{"long text at the start shows its head", "|abcdefghij", 5, nil, []string{"⟦a⟧bcde"}},
		{"moving left scrolls only at the edge", "abcdefghij|", 5,
			[]string{"left", "left", "left", "left", "left", "home", "end"},
			[]string{"ghij⟦ ⟧", "ghi⟦j⟧", "gh⟦i⟧j", "g⟦h⟧ij", "⟦g⟧hij", "⟦f⟧ghij", "⟦a⟧bcde", "ghij⟦ ⟧"}},
		{"deleting at the end brings back the left", "abcdefghij|", 5,
			[]string{"backspace", "home", "end", "ctrl+u"}, []string{"ghij⟦ ⟧", "fghi⟦ ⟧", "⟦a⟧bcde", "fghi⟦ ⟧", "⟦ ⟧"}},
		{"wide runes take two cells", "世界|", 6, nil, []string{"世界⟦ ⟧"}},
		{"the cursor on a wide rune", "世|界", 6, nil, []string{"世⟦界⟧"}},
		{"wide runes scroll whole", "一二三四五|", 5, nil, []string{"四五⟦ ⟧"}},
		{"a wide rune in a one-cell field", "|世", 1, nil, []string{"⟦…⟧"}},
		{"a letter and its mark are one cell", "e\u0301|", 4, nil, []string{"e\u0301⟦ ⟧"}},
		{"controls are drawn inert", "a\x1b[2Jb|", 10, nil, []string{"a?[2Jb⟦ ⟧"}},
		{"newlines are drawn as spaces", "a\nb|", 10, nil, []string{"a b⟦ ⟧"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, pos := unmark(t, tt.from)
			l := newLineEdit(text, pos, 0)
			for i, want := range tt.want {
				if i > 0 {
					l.key(tt.keys[i-1])
				}
				v := l.view(tt.width, true)
				if got := reversedCells(v); got != want {
					t.Errorf("view(%d) after %q = %q, want %q", tt.width, tt.keys[:i], got, want)
				}
				if w := width(v); w > tt.width {
					t.Errorf("view(%d) is %d cells wide: %q", tt.width, w, v)
				}
			}
		})
	}
}

// FuzzLineEdit drives the editor with any text and keys: the cursor stays
// on a grapheme boundary, the text stays what was typed around what was
// deleted (valid UTF-8 in, valid UTF-8 out) and every view fits its width.
func FuzzLineEdit(f *testing.F) {
	f.Add("héllo 世界", "\x01\x01x\x02\x03\x04", 7)
	f.Add("e\u0301👩\u200d💻🇫🇷", "\x01\x05\x06\x07\x08y", 3)
	f.Add("a\nb\nc", "\x09\x0a\x0b\x0c", 1)
	f.Add("x\r", "\n", 5)                   // CR LF is one grapheme
	f.Add("e\u0301", "\x01\x01a", 5)        // a letter typed before a combining mark
	f.Add("abc\u0915", "\x01\x01\x01zz", 3) // typed where the view has scrolled
	keys := []string{"", "left", "right", "home", "end", "alt+left", "alt+right", "backspace", "delete", "ctrl+w", "ctrl+u", "ctrl+k", "alt+backspace"}
	f.Fuzz(func(t *testing.T, text, script string, w int) {
		w = max(1, w%40)
		l := newLineEdit(text, 0, 0)
		for _, r := range script {
			if int(r) < len(keys) && r != 0 {
				l.key(keys[r])
			} else {
				l.insert(string(r))
			}
			if b := l.bounds(); !slices.Contains(b, l.pos) || !slices.Contains(b, l.off) {
				t.Fatalf("the cursor %d or the scroll offset %d is not on a grapheme boundary of %q", l.pos, l.off, l.String())
			}
			if got := width(l.view(w, true)); got > w {
				t.Fatalf("view(%d) of %q is %d cells wide", w, l.String(), got)
			}
		}
	})
}
