package termtext

import (
	"io"
	"strings"
	"unicode/utf8"
)

// Visible is the form a command prints text with: every character a
// terminal would act on is shown as a visible stand-in, and everything else
// as it is. Newlines and tabs are kept, so that multi-line text (a model's
// answer, a tool's output) keeps its shape.
//
//   - A C0 control (U+0000–U+001F) is shown as its Unicode Control Picture,
//     U+2400 plus its code: ESC as ␛, BEL as ␇, NUL as ␀, a carriage return
//     as ␍; DEL as ␡ (U+2421). A carriage return just before a newline is
//     dropped, so CRLF text reads as lines.
//   - A C1 control (U+0080–U+009F, such as the 8-bit CSI U+009B) and a
//     bidirectional embedding, override or isolate (U+202A–U+202E,
//     U+2066–U+2069) is shown as its code point, <U+009B>, <U+202E>.
//   - Invalid UTF-8 becomes U+FFFD.
//
// An escape sequence thus prints as ␛ and the plain characters after it,
// such as ␛]52;c;ZXZpbA==␇ or ␛[2J: it is readable, and nothing acts on it.
//
// Control Pictures rather than caret (^[) or backslash (\x1b) notation: a
// picture is one character wide, so a table stays aligned, and it is not
// something ordinary text is full of, whereas ^[ and \x1b appear as
// themselves in source code, logs and shell output, where a reader could not
// tell them from a real ESC. The form is unambiguous: a character of the
// Control Pictures block (U+2400–U+243F) that the text itself holds is shown
// as its code point, <U+241B>, and so is a < that starts "<U+" (as
// <U+003C>U+), so that a ␛ in the output always stands for an ESC and a
// <U+XXXX> always for that code point.
func Visible(s string) string {
	if isVisiblePlain(s, false) {
		return s
	}
	b, _ := appendVisible(make([]byte, 0, len(s)+16), s, false, true)
	return string(b)
}

// VisibleLine is Visible for a field printed on one line, such as a title,
// a name or an id in a row of a table: a newline is shown too, as ␊, and a
// tab as ␉.
func VisibleLine(s string) string {
	if isVisiblePlain(s, true) {
		return s
	}
	b, _ := appendVisible(make([]byte, 0, len(s)+16), s, true, true)
	return string(b)
}

// isVisiblePlain reports whether s is printable ASCII (and, unless line,
// newlines and tabs) holding no "<U+": nothing Visible would change.
func isVisiblePlain(s string, line bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x7f || !line && (c == '\n' || c == '\t') {
			continue
		}
		return false
	}
	return !strings.Contains(s, "<U+")
}

// appendVisible appends the visible form of s to dst and returns it with
// the number of bytes of s it showed. Unless final, it stops before a tail
// whose form depends on what comes next: part of a UTF-8 sequence, a
// carriage return (dropped before a newline), "<" or "<U" (escaped before
// "U+"); final shows such a tail as the end of the text.
func appendVisible(dst []byte, s string, line, final bool) ([]byte, int) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case (c == '\n' || c == '\t') && !line:
			dst = append(dst, c)
			i++
		case c == '\r':
			if i+1 == len(s) && !final {
				return dst, i
			}
			if i+1 < len(s) && s[i+1] == '\n' {
				i++ // the newline shows the line's end
				continue
			}
			dst = appendPicture(dst, c)
			i++
		case c < 0x20 || c == 0x7f:
			dst = appendPicture(dst, c)
			i++
		case c == '<':
			rest := s[i+1:]
			if !final && len(rest) < 2 && strings.HasPrefix("U+", rest) {
				return dst, i
			}
			if strings.HasPrefix(rest, "U+") {
				dst = appendCodePoint(dst, '<')
			} else {
				dst = append(dst, c)
			}
			i++
		case c < 0x80:
			dst = append(dst, c)
			i++
		default:
			if !final && !utf8.FullRuneInString(s[i:]) {
				return dst, i
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				dst = utf8.AppendRune(dst, utf8.RuneError)
			case r <= 0x9f, isBidiControl(r), r >= 0x2400 && r <= 0x243f:
				dst = appendCodePoint(dst, r)
			default:
				dst = append(dst, s[i:i+size]...)
			}
			i += size
		}
	}
	return dst, len(s)
}

// appendPicture appends the Control Picture of the C0 control or DEL c.
func appendPicture(dst []byte, c byte) []byte {
	if c == 0x7f {
		return utf8.AppendRune(dst, 0x2421)
	}
	return utf8.AppendRune(dst, 0x2400+rune(c))
}

// appendCodePoint appends r as <U+XXXX>.
func appendCodePoint(dst []byte, r rune) []byte {
	const hex = "0123456789ABCDEF"
	dst = append(dst, "<U+"...)
	for shift := 12; shift >= 0; shift -= 4 {
		dst = append(dst, hex[r>>shift&0xf])
	}
	return append(dst, '>')
}

// Writer writes the Visible form of the text written to it, for text that
// arrives in pieces, such as a model's streamed answer. A piece may end in
// the middle of a UTF-8 sequence, or between a carriage return and its
// newline: the Writer holds such a tail back until the next piece says how
// to show it, so the output is the same however the text was cut, and no
// piece of it ever reaches the underlying writer unshown. Flush ends the
// text. Writer is not safe for concurrent use; use NewWriter to make one.
type Writer struct {
	w    io.Writer
	held []byte // the tail of the text whose form depends on what follows
	buf  []byte // the shown form of one write, reused
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write shows p, less a tail it holds back, on the underlying writer.
func (w *Writer) Write(p []byte) (int, error) {
	if _, err := w.WriteString(string(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteString is Write for a string.
func (w *Writer) WriteString(s string) (int, error) {
	n := len(s)
	if len(w.held) > 0 {
		s = string(w.held) + s
		w.held = w.held[:0]
	}
	var used int
	w.buf, used = appendVisible(w.buf[:0], s, false, false)
	w.held = append(w.held, s[used:]...)
	if len(w.buf) == 0 {
		return n, nil
	}
	if _, err := w.w.Write(w.buf); err != nil {
		return 0, err
	}
	return n, nil
}

// Flush shows what the Writer holds back as the end of the text (part of a
// UTF-8 sequence as U+FFFD, a carriage return as ␍, a < as itself), so that
// the underlying writer has all that was written. What is written next
// starts a new text.
func (w *Writer) Flush() error {
	if len(w.held) == 0 {
		return nil
	}
	w.buf, _ = appendVisible(w.buf[:0], string(w.held), false, true)
	w.held = w.held[:0]
	_, err := w.w.Write(w.buf)
	return err
}
