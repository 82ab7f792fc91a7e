package termtext_test

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/getorrery/orrery/termtext"
)

func TestVisible(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "plain\ttext\nline two\n", "plain\ttext\nline two\n"},
		{"OSC 52 clipboard write", "a\x1b]52;c;ZXZpbA==\x07b", "a␛]52;c;ZXZpbA==␇b"},
		{"CSI clear and home", "\x1b[2J\x1b[Hhi", "␛[2J␛[Hhi"},
		{"OSC 8 link", "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\", "␛]8;;https://evil.example␛\\click␛]8;;␛\\"},
		{"OSC 0 title", "\x1b]0;pwned\x07", "␛]0;pwned␇"},
		{"8-bit CSI", "c1\u009b31m", "c1<U+009B>31m"},
		{"8-bit OSC and NEL", "\u009d0;t\u009c\u0085", "<U+009D>0;t<U+009C><U+0085>"},
		{"a lone C1 byte is invalid UTF-8", "\x9b31m", "\uFFFD31m"},
		{"bidi override", "\u202egnp.exe\u202c", "<U+202E>gnp.exe<U+202C>"},
		{"bidi isolate", "\u2066iso\u2069 \u2067 \u2068", "<U+2066>iso<U+2069> <U+2067> <U+2068>"},
		{"lone CR", "progress 10%\rprogress 90%", "progress 10%␍progress 90%"},
		{"CR at the end", "done\r", "done␍"},
		{"CRLF", "crlf\r\nnext\r\n", "crlf\nnext\n"},
		{"CR CRLF", "a\r\r\nb", "a␍\nb"},
		{"BEL", "bell\x07", "bell␇"},
		{"NUL", "nul\x00end", "nul␀end"},
		{"DEL", "del\x7f", "del␡"},
		{"other C0", "\x01\x08\x0b\x0c\x1f", "␁␈␋␌␟"},
		{"invalid UTF-8", "bad \xff\xfe utf8 \xe2\x80", "bad \uFFFD\uFFFD utf8 \uFFFD\uFFFD"},
		{"a sequence cut short", "cut \x1b[", "cut ␛["},
		{"text that is not ASCII", "héllo wörld ✓ 日本 \uFFFD", "héllo wörld ✓ 日本 \uFFFD"},
		{"a Control Picture in the text", "fake ␛[2J ␍", "fake <U+241B>[2J <U+240D>"},
		{"a code point spelled in the text", "<U+202E> and <U+", "<U+003C>U+202E> and <U+003C>U+"},
		{"a < that spells nothing", "a<b <U <Ux", "a<b <U <Ux"},
		{"hostile", hostile, "␛[2J␛[H␛]52;c;ZXZpbA==␇␛]8;;https://evil.example␛\\click␛]8;;␛\\ ␛]0;pwned␇<U+009B>31m<U+202E>exe.txt<U+202C>␍␡safe"},
	} {
		if got := termtext.Visible(c.in); got != c.want {
			t.Errorf("%s: Visible(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

func TestVisibleLine(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "a title", "a title"},
		{"newline and tab", "one\ntwo\tthree", "one␊two␉three"},
		{"CRLF", "one\r\ntwo", "one␊two"},
		{"lone CR", "safe\rEVIL", "safe␍EVIL"},
		{"escapes", "t\x1b]0;x\x07\u009b\u202e", "t␛]0;x␇<U+009B><U+202E>"},
		{"a picture in the text", "␊", "<U+240A>"},
	} {
		if got := termtext.VisibleLine(c.in); got != c.want {
			t.Errorf("%s: VisibleLine(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// TestWriter writes text in two pieces cut inside what needs the next byte
// to be shown: each piece shows nothing raw, and the whole shows as Visible
// of the text does.
func TestWriter(t *testing.T) {
	for _, c := range []struct {
		name, a, b  string
		first, want string // after a; after a, b and Flush
	}{
		{"CSI split", "x\x1b[2", "Jy", "x␛[2", "x␛[2Jy"},
		{"ESC at the end", "x\x1b", "]52;c;ZXZpbA==\x07", "x␛", "x␛]52;c;ZXZpbA==␇"},
		{"OSC 52 split", "\x1b]52;c;ZX", "ZpbA==\x07", "␛]52;c;ZX", "␛]52;c;ZXZpbA==␇"},
		{"OSC 8 split at ST", "\x1b]8;;u\x1b", "\\link", "␛]8;;u␛", "␛]8;;u␛\\link"},
		{"8-bit CSI split", "a\xc2", "\x9b31m", "a", "a<U+009B>31m"},
		{"bidi split", "b\xe2\x80", "\xaeexe", "b", "b<U+202E>exe"},
		{"CRLF split", "a\r", "\nb", "a", "a\nb"},
		{"lone CR split", "a\r", "b", "a", "a␍b"},
		{"< split", "x<", "U+0041>", "x", "x<U+003C>U+0041>"},
		{"<U split", "x<U", "+1", "x", "x<U+003C>U+1"},
		{"< that spells nothing", "x<", "b", "x", "x<b"},
		{"held to the end", "a\xe2\x80", "", "a", "a\uFFFD\uFFFD"},
		{"CR held to the end", "a\r", "", "a", "a␍"},
		{"< held to the end", "a<U", "", "a", "a<U"},
	} {
		var out strings.Builder
		w := termtext.NewWriter(&out)
		if n, err := w.WriteString(c.a); n != len(c.a) || err != nil {
			t.Errorf("%s: WriteString(%q) = %d, %v, want %d, nil", c.name, c.a, n, err, len(c.a))
		}
		if got := out.String(); got != c.first {
			t.Errorf("%s: after WriteString(%q) the output = %q, want %q", c.name, c.a, got, c.first)
		}
		checkVisible(t, c.a, out.String(), false)
		if n, err := w.Write([]byte(c.b)); n != len(c.b) || err != nil {
			t.Errorf("%s: Write(%q) = %d, %v, want %d, nil", c.name, c.b, n, err, len(c.b))
		}
		if err := w.Flush(); err != nil {
			t.Errorf("%s: Flush() = %v", c.name, err)
		}
		if got := out.String(); got != c.want {
			t.Errorf("%s: output = %q, want %q", c.name, got, c.want)
		}
		if whole := termtext.Visible(c.a + c.b); out.String() != whole {
			t.Errorf("%s: output = %q, want Visible(%q) = %q", c.name, out.String(), c.a+c.b, whole)
		}
	}
}

// TestWriterFlushStartsAgain: after Flush, a piece that would have
// completed the held tail starts a new text instead.
func TestWriterFlushStartsAgain(t *testing.T) {
	var out strings.Builder
	w := termtext.NewWriter(&out)
	w.WriteString("a\r")
	w.Flush()
	w.WriteString("\nb")
	w.Flush()
	if got, want := out.String(), "a␍\nb"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// checkVisible fails if out, the visible form of in, holds anything a
// terminal acts on: a byte below 0x20 (but newline and tab, unless line),
// DEL, a C1 control, a bidirectional control or invalid UTF-8.
func checkVisible(t *testing.T, in, out string, line bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("the visible form of %q is not valid UTF-8: %q", in, out)
	}
	for i, r := range out {
		bad := r < 0x20 && (line || r != '\n' && r != '\t') || r == 0x7f || r >= 0x80 && r <= 0x9f ||
			r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
		if bad {
			t.Fatalf("the visible form of %q holds %U at %d: %q", in, r, i, out)
		}
	}
}

// unshow reverses the visible form: each stand-in becomes what it stands
// for.
func unshow(t *testing.T, out string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(out); {
		r, size := utf8.DecodeRuneInString(out[i:])
		switch {
		case r >= 0x2400 && r < 0x2420:
			b.WriteByte(byte(r - 0x2400))
		case r == 0x2421:
			b.WriteByte(0x7f)
		case r >= 0x2400 && r <= 0x243f:
			t.Fatalf("%q holds %U, a Control Picture that stands for nothing", out, r)
		case strings.HasPrefix(out[i:], "<U+"):
			end := strings.IndexByte(out[i:], '>')
			if end != 7 {
				t.Fatalf("%q holds a <U+ at %d that is not <U+XXXX>", out, i)
			}
			n, err := strconv.ParseUint(out[i+3:i+7], 16, 32)
			if err != nil {
				t.Fatalf("%q holds %q at %d", out, out[i:i+8], i)
			}
			b.WriteRune(rune(n))
			size = 8
		default:
			b.WriteString(out[i : i+size])
		}
		i += size
	}
	return b.String()
}

// shown is what the visible form of s stands for: s with each byte of
// invalid UTF-8 as U+FFFD and CRLF as LF.
func shown(s string) string {
	return string([]rune(strings.ReplaceAll(s, "\r\n", "\n")))
}

// FuzzVisible checks both visible forms: the output holds nothing a
// terminal acts on, a one-line field has no newline or tab, and the
// stand-ins are unambiguous: reading them back gives the text.
func FuzzVisible(f *testing.F) {
	f.Add(hostile)
	f.Add("plain")
	f.Add("multi\r\nline\ttext\r")
	f.Add("\x1b[31mred\x1b[0m\x1b]52;c;")
	f.Add("\u009b\u202e\u2066\xff\xe2\x80")
	f.Add("␛ <U+241B> <U <")
	f.Fuzz(func(t *testing.T, s string) {
		out := termtext.Visible(s)
		checkVisible(t, s, out, false)
		if back, want := unshow(t, out), shown(s); back != want {
			t.Fatalf("Visible(%q) = %q reads back as %q, want %q", s, out, back, want)
		}
		line := termtext.VisibleLine(s)
		checkVisible(t, s, line, true)
		if back, want := unshow(t, line), shown(s); back != want {
			t.Fatalf("VisibleLine(%q) = %q reads back as %q, want %q", s, line, back, want)
		}
	})
}

// FuzzWriter writes text to a Writer in pieces whose lengths cuts gives:
// the output is Visible of the whole text, and never holds a raw control
// along the way.
func FuzzWriter(f *testing.F) {
	f.Add(hostile, []byte{1, 2, 3})
	f.Add("a\r\nb\u009b\u202e<U+", []byte{1})
	f.Add("\xe2\x80\xae\xc2\x9b", []byte{1, 1, 2})
	f.Fuzz(func(t *testing.T, s string, cuts []byte) {
		var out strings.Builder
		w := termtext.NewWriter(&out)
		rest := s
		for i := 0; rest != ""; i++ {
			n := len(rest)
			if len(cuts) > 0 {
				n = min(n, int(cuts[i%len(cuts)]%8)+1)
			}
			w.WriteString(rest[:n])
			rest = rest[n:]
			checkVisible(t, s, out.String(), false)
		}
		w.Flush()
		if got, want := out.String(), termtext.Visible(s); got != want {
			t.Fatalf("Writer on %q cut by %v wrote %q, want Visible() = %q", s, cuts, got, want)
		}
	})
}

func BenchmarkVisible(b *testing.B) {
	for _, c := range []struct{ name, in string }{
		{"plain", strings.Repeat("a line of plain model text\n", 40)},
		{"hostile", strings.Repeat(hostile+"\n", 10)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.in)))
			for b.Loop() {
				termtext.Visible(c.in)
			}
		})
	}
}

func BenchmarkWriter(b *testing.B) {
	text := strings.Repeat("a delta of streamed text, ", 8) + "\u202e\x1b[2J\r\n"
	var sink discard
	w := termtext.NewWriter(&sink)
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		w.WriteString(text)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
