package prose_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/getorrery/orrery/internal/prose"
)

func TestDisplay(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{nil, "null"},
		{true, "true"},
		{json.Number("12.5"), "12.5"},
		{2.5, "2.5"},
		{"hi", `"hi"`},
		{strings.Repeat("x", 50), `"` + strings.Repeat("x", 39) + `…"`},
		{[]any{1}, "an array"},
		{map[string]any{}, "an object"},
	}
	for _, tt := range tests {
		if got := prose.Display(tt.v); got != tt.want {
			t.Errorf("Display(%#v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestClauseAndGroup(t *testing.T) {
	for in, want := range map[string]string{"Rows holds the rows.": "rows holds the rows", "URL of it.": "URL of it", "": ""} {
		if got := prose.Clause(in); got != want {
			t.Errorf("Clause(%q) = %q, want %q", in, got, want)
		}
	}
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 262144: "262,144", -5000000: "-5,000,000"} {
		if got := prose.Group(n); got != want {
			t.Errorf("Group(%d) = %q, want %q", n, got, want)
		}
	}
}
