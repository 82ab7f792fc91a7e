package termtext_test

import (
	"testing"

	"github.com/getorrery/orrery/termtext"
)

// hostile is text that tries to clear the screen, write the clipboard
// (OSC 52), draw a fake link (OSC 8), set the title, use an 8-bit CSI,
// reverse the reading order and overwrite its line.
const hostile = "\x1b[2J\x1b[H\x1b]52;c;ZXZpbA==\x07\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ \x1b]0;pwned\x07\u009b31m\u202eexe.txt\u202c\r\x7fsafe"

func TestStrip(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain\ttext\n", "plain\ttext\n"},
		{"\x1b[2Jclear", "clear"},
		{"a\x1b]52;c;ZXZpbA==\x07b", "ab"},
		{"a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"},
		{"\u202egnp.exe", "gnp.exe"},
		{"\u2066iso\u2069", "iso"},
		{"c1\u009b31m", "c131m"},
		{"bell\x07 del\x7f nul\x00", "bell del nul"},
		{"progress 10%\rprogress 90%", "progress 90%"},
		{"crlf\r\nnext", "crlf\nnext"},
		{"cut \x1b[", "cut "},
		{"bad \xff utf8", "bad \uFFFD utf8"},
		{"héllo wörld ✓", "héllo wörld ✓"},
		{hostile, "safe"},
	} {
		if got := termtext.Strip(c.in); got != c.want {
			t.Errorf("Strip(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestStripLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"one\ntwo\tthree", "one two three"},
		{"title\x1b]0;pwned\x07\r\n", "title "},
		{"plain", "plain"},
	} {
		if got := termtext.StripLine(c.in); got != c.want {
			t.Errorf("StripLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSequenceEnd(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"\x1b[31mx", 5},
		{"\x1b]52;c;ZXZpbA==\x07x", 16},
		{"\x1b]8;;u\x1b\\x", 8},
		{"\x1b(Bx", 2},
		{"\x1b[3\x07x", 3}, // a CSI cut short by a control ends before it
		{"\x1b", 1},
		{"\x1b]0;no end", 10},
	} {
		if got := termtext.SequenceEnd(c.in, 0); got != c.want {
			t.Errorf("SequenceEnd(%q, 0) = %d, want %d", c.in, got, c.want)
		}
	}
}

// FuzzStrip keeps the corpus the TUI's FuzzSanitize built, in
// testdata/fuzz/FuzzStrip.
func FuzzStrip(f *testing.F) {
	f.Add(hostile)
	f.Add("plain")
	f.Add("\x1b[31mred\x1b[0m")
	f.Add("\x1b]52;c;")
	f.Fuzz(func(t *testing.T, s string) {
		out := termtext.Strip(s)
		for i, r := range out {
			if r == 0x1b || r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
				t.Fatalf("Strip(%q) kept %U at %d", s, r, i)
			}
		}
		if again := termtext.Strip(out); again != out {
			t.Fatalf("Strip is not idempotent on %q: %q then %q", s, out, again)
		}
		line := termtext.StripLine(s)
		for i := 0; i < len(line); i++ {
			if line[i] == '\n' || line[i] == '\t' {
				t.Fatalf("StripLine(%q) = %q holds a newline or a tab", s, line)
			}
		}
	})
}
