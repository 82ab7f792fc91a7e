package openai

import (
	"regexp"
	"strings"
	"testing"
)

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestToolNames(t *testing.T) {
	long := "mcp." + strings.Repeat("server", 10) + ".create_issue"
	longer := "mcp." + strings.Repeat("server", 10) + ".close_issue"
	tests := []struct {
		name string
		want string // the wire name; "" means only check the pattern
	}{
		{"echo", "echo"},
		{"ui.show", "ui__show"},
		{"tools.search", "tools__search"},
		{"mcp.github.create_issue", "mcp__github__create_issue"},
		{"a.b", "a__b"},
		{"a__b", "a__b_2"}, // collides with a.b, sent earlier
		{"my tool/é", "my_tool___"},
		{"", "tool"},
		{long, ""},
		{longer, ""}, // same first 55 bytes as long
		{strings.Repeat("x", 64), strings.Repeat("x", 64)},
	}
	n := newToolNames()
	seen := map[string]string{}
	for _, tt := range tests {
		w := n.wire(tt.name)
		if tt.want != "" && w != tt.want {
			t.Errorf("wire(%q) = %q, want %q", tt.name, w, tt.want)
		}
		if !namePattern.MatchString(w) {
			t.Errorf("wire(%q) = %q, which does not match %s", tt.name, w, namePattern)
		}
		if other, dup := seen[w]; dup {
			t.Errorf("wire(%q) = %q, the same as wire(%q)", tt.name, w, other)
		}
		seen[w] = tt.name
		if again := n.wire(tt.name); again != w {
			t.Errorf("wire(%q) = %q then %q, want the same both times", tt.name, w, again)
		}
	}
	for w, name := range seen {
		if got := n.orrery(w); got != name {
			t.Errorf("orrery(%q) = %q, want %q", w, got, name)
		}
	}
	if got := n.orrery("never_sent"); got != "never_sent" {
		t.Errorf("orrery(never_sent) = %q, want it unchanged", got)
	}
}
