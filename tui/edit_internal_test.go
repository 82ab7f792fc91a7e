package tui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/termtext"
)

// FuzzParseCommands checks that any orrery.commands value gives commands
// that can be typed and drawn: a name with no space, slash or control
// character, text with no escape, and no name twice.
func FuzzParseCommands(f *testing.F) {
	f.Add(`{"commands":[{"name":"review","description":"Review","input":{"hint":"what"}}]}`)
	f.Add(`{"commands":[{"name":"/a b"},{"name":""},{"name":"x"},{"name":"x"}]}`)
	f.Add(`{"commands":[{"name":"\u001b]0;t\u0007e","description":"\u202eevil"}]}`)
	f.Add(`{"commands":null}`)
	f.Fuzz(func(t *testing.T, value string) {
		seen := map[string]bool{}
		for _, c := range parseCommands([]byte(value)) {
			if c.Name == "" || strings.ContainsAny(c.Name, " \t\n") || strings.HasPrefix(c.Name, "/") || termtext.Strip(c.Name) != c.Name {
				t.Fatalf("parseCommands(%q) kept the name %q", value, c.Name)
			}
			if seen[c.Name] {
				t.Fatalf("parseCommands(%q) kept %q twice", value, c.Name)
			}
			seen[c.Name] = true
			line := c.describe()
			if termtext.Strip(line) != line || strings.Contains(line, "\n") {
				t.Fatalf("describe() = %q holds what the terminal would act on", line)
			}
		}
	})
}

// FuzzEditKeys drives a focused form or question, any surface at all, with
// any keys: nothing panics, and every line drawn fits the width.
func FuzzEditKeys(f *testing.F) {
	f.Add(`{"kind":{"t":"form","fields":[{"name":"a","type":"text"},{"name":"b","type":"multichoice","choices":["x","y"]},{"name":"c","type":"choice","choices":[]}]}}`, "\t\t  \x01\x02a\r")
	f.Add(`{"kind":{"t":"question","prompt":"p","multiple":true,"allowText":true,"choices":[{"label":"l"}]}}`, "19 jk\x01\x02\x02zz\r")
	f.Add(`{"kind":{"t":"question","prompt":"p"}}`, " 1\r")
	f.Fuzz(func(t *testing.T, surface, keys string) {
		m := New(Options{})
		m.scr.width, m.scr.height = 60, 20
		n := &node{Node: "placed:agent:x", ID: "x", Placement: "inline", Owner: "agent", Surface: []byte(surface)}
		m.scr.nodes = []*node{n}
		m.scr.focus = n.Node
		m.scr.cursor[n.Node] = 0
		for _, r := range keys {
			var k tea.KeyPressMsg
			switch r {
			case '\t':
				k = tea.KeyPressMsg{Code: tea.KeyTab}
			case '\r':
				continue // Enter sends: there is no client here
			case 0x01:
				k = tea.KeyPressMsg{Code: tea.KeyRight}
			case 0x02:
				k = tea.KeyPressMsg{Code: tea.KeyLeft}
			case 0x03:
				k = tea.KeyPressMsg{Code: tea.KeyBackspace}
			case ' ':
				k = tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
			default:
				if r >= '1' && r <= '9' {
					continue // a digit may send a single choice
				}
				k = tea.KeyPressMsg{Code: r, Text: string(r)}
			}
			m.scr.focus = n.Node
			m.editKey(n, k)
		}
		for i, l := range strings.Split(m.Screen(), "\n") {
			if w := width(l); w != 60 {
				t.Fatalf("line %d is %d cells wide, want 60: %q", i, w, l)
			}
		}
	})
}
