package anthropic

import (
	"regexp"
	"strings"
	"testing"
)

var wireNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestToolNames(t *testing.T) {
	long := "mcp." + strings.Repeat("very_long_server.", 5) + "create_issue"
	tests := []struct {
		name  string
		names []string
		want  map[string]string // expected wire names; others only need to be valid and distinct
	}{
		{
			name:  "valid names are kept",
			names: []string{"clock", "echo", "read-file", "Shell_2"},
			want:  map[string]string{"clock": "clock", "echo": "echo", "read-file": "read-file", "Shell_2": "Shell_2"},
		},
		{
			name:  "dots become underscores",
			names: []string{"ui.show", "tools.search", "mcp.github.create_issue"},
			want:  map[string]string{"ui.show": "ui_show", "tools.search": "tools_search", "mcp.github.create_issue": "mcp_github_create_issue"},
		},
		{
			name:  "a valid name wins its spelling over a sanitized one",
			names: []string{"ui.show", "ui_show"},
			want:  map[string]string{"ui_show": "ui_show"},
		},
		{
			name:  "two names that sanitize alike",
			names: []string{"a.b", "a:b", "a b"},
		},
		{
			name:  "long and odd names",
			names: []string{long, long + ".v2", "ünïcode.tool", "", "...", "x/y\\z"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newToolNames(tc.names)
			seen := map[string]string{}
			for _, name := range tc.names {
				w := n.wire(name)
				if !wireNameRE.MatchString(w) {
					t.Errorf("wire(%q) = %q, want a name matching %s", name, w, wireNameRE)
				}
				if other, dup := seen[w]; dup && other != name {
					t.Errorf("wire(%q) = wire(%q) = %q, want distinct names", name, other, w)
				}
				seen[w] = name
				if back := n.orrery(w); back != name {
					t.Errorf("orrery(wire(%q)) = %q, want the name back", name, back)
				}
				if want, ok := tc.want[name]; ok && w != want {
					t.Errorf("wire(%q) = %q, want %q", name, w, want)
				}
			}
			// The same set, in another order, maps the same way.
			rev := make([]string, len(tc.names))
			for i, name := range tc.names {
				rev[len(rev)-1-i] = name
			}
			m := newToolNames(rev)
			for _, name := range tc.names {
				if a, b := n.wire(name), m.wire(name); a != b {
					t.Errorf("wire(%q) = %q or %q depending on order, want one name", name, a, b)
				}
			}
		})
	}
}

func TestToolNamesUnknownComesBackUnchanged(t *testing.T) {
	n := newToolNames([]string{"ui.show"})
	if got := n.orrery("no_such_tool"); got != "no_such_tool" {
		t.Errorf("orrery(%q) = %q, want it unchanged", "no_such_tool", got)
	}
}

func TestWireID(t *testing.T) {
	idRE := regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	for _, id := range []string{"toolu_01A09q90qw90lq917835lq9", "call_abc", "call:2", "call.2", "", "ünï"} {
		got := wireID(id)
		if !idRE.MatchString(got) {
			t.Errorf("wireID(%q) = %q, want one matching %s", id, got, idRE)
		}
		if idRE.MatchString(id) && got != id {
			t.Errorf("wireID(%q) = %q, want a valid id kept", id, got)
		}
		if again := wireID(id); again != got {
			t.Errorf("wireID(%q) = %q then %q, want the same each time", id, got, again)
		}
	}
	if wireID("call:2") == wireID("call.2") {
		t.Errorf("wireID(call:2) = wireID(call.2) = %q, want distinct ids", wireID("call:2"))
	}
}
