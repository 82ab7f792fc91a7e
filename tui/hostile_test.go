package tui_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/getorrery/orrery/ui"
)

// hostile is text that tries to clear the screen, write the clipboard
// (OSC 52), draw a fake link (OSC 8), set the title, use an 8-bit CSI and
// reverse the reading order.
const hostile = "\x1b[2J\x1b[H\x1b]52;c;ZXZpbA==\x07\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ \x1b]0;pwned\x07\u009b31m\u202eexe.txt\u202c\r\x7fsafe"

// escape matches an ESC and, when it starts one, an SGR sequence.
var escape = regexp.MustCompile("\x1b(\\[[0-9;:]*m)?")

func checkInert(t *testing.T, content string) {
	t.Helper()
	for _, m := range escape.FindAllStringIndex(content, -1) {
		seq := content[m[0]:m[1]]
		if !strings.HasSuffix(seq, "m") || !strings.HasPrefix(seq, "\x1b[") {
			t.Fatalf("the draw holds an escape sequence other than SGR at byte %d: %q", m[0], content[m[0]:min(len(content), m[0]+20)])
		}
	}
	// An OSC needs ESC ] or the C1 byte U+009D; printable "]52;" left after
	// its ESC is gone (or in a JSON-escaped argument) is inert text.
	for _, bad := range []string{"\u202e", "\u202c", "\u009b", "\u009d", "\x07", "\x7f", "\r"} {
		if i := strings.Index(content, bad); i >= 0 {
			t.Errorf("the draw holds %q: %q", bad, content[max(0, i-40):min(len(content), i+20)])
		}
	}
}

// TestHostileSurfacesDrawInert places surfaces full of control sequences in
// every placement and kind that carries text, and sends one as a prompt:
// the whole frame the TUI writes holds no escape but its own colours.
func TestHostileSurfacesDrawInert(t *testing.T) {
	k := newKernel(t)
	s, err := k.CreateSession(t.Context(), kernelOpts())
	if err != nil {
		t.Fatal(err)
	}
	q := jsonString(hostile)
	prompt(t, s, "echo "+hostile)
	show(t, s, ui.OwnerAgent, "t", "pane.left", hostile, `{"kind":{"t":"text","value":`+q+`}}`)
	show(t, s, ui.OwnerAgent, "md", "pane.right", "md", `{"kind":{"t":"markdown","value":`+jsonString("# Title "+hostile+"\n\n[link](https://x.example) "+hostile)+`}}`)
	show(t, s, ui.OwnerAgent, "tb", "band", "table", `{"kind":{"t":"table","columns":[`+q+`],"rows":[[`+q+`]]}}`)
	show(t, s, ui.OwnerAgent, "df", "footer", "diff", `{"kind":{"t":"diff","value":`+jsonString("+"+hostile)+`}}`)
	show(t, s, ui.OwnerAgent, "st", "inline", "stream", `{"kind":{"t":"stream","value":`+q+`,"chunks":[`+q+`]}}`)
	fs := frames(t, s, `"st"`)
	for _, size := range []struct{ w, h int }{{120, 40}, {50, 20}} {
		m, plain := draw(t, fs, size.w, size.h)
		checkInert(t, m.View().Content)
		if !strings.Contains(plain, "safe") {
			t.Errorf("Screen() lost the text after the sequences:\n%s", plain)
		}
	}
}
