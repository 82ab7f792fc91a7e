package consent_test

import (
	"strings"
	"testing"

	"github.com/getorrery/orrery/consent"
)

func TestDecide(t *testing.T) {
	rules := consent.Rules{
		Allow: []string{"shell(git status*)", "write_file(src/**)", "mcp.github.*", "read_file(docs/*.md)"},
		Ask:   []string{"read_file(secrets/**)"},
		Deny:  []string{"shell(rm -rf*)", "write_file(src/gen/**)", "mcp.github.delete_*"},
	}
	tests := []struct {
		name string
		call consent.Call
		want consent.Decision
		rule string
	}{
		{"allowed command prefix", consent.Call{Tool: "shell", Subject: "git status --short src/a", ShellSubject: true}, consent.Allow, `allow = ["shell(git status*)"]`},
		{"other command asks", consent.Call{Tool: "shell", Subject: "git push", ShellSubject: true}, consent.Ask, consent.DefaultAsk},
		{"denied command", consent.Call{Tool: "shell", Subject: "rm -rf /", ShellSubject: true}, consent.Deny, `deny = ["shell(rm -rf*)"]`},
		{"path under allowed dir", consent.Call{Tool: "write_file", Subject: "src/a/b.go", PathSubject: true}, consent.Allow, `allow = ["write_file(src/**)"]`},
		{"deny beats allow", consent.Call{Tool: "write_file", Subject: "src/gen/x.go", PathSubject: true}, consent.Deny, `deny = ["write_file(src/gen/**)"]`},
		{"path outside asks", consent.Call{Tool: "write_file", Subject: "main.go", PathSubject: true}, consent.Ask, consent.DefaultAsk},
		{"single star stops at slash", consent.Call{Tool: "read_file", Subject: "docs/a/b.md", PathSubject: true, ReadOnly: true}, consent.Allow, consent.DefaultReadOnly},
		{"single star within segment", consent.Call{Tool: "read_file", Subject: "docs/b.md", PathSubject: true, ReadOnly: true}, consent.Allow, `allow = ["read_file(docs/*.md)"]`},
		{"ask rule on a read-only tool", consent.Call{Tool: "read_file", Subject: "secrets/k", PathSubject: true, ReadOnly: true}, consent.Ask, `ask = ["read_file(secrets/**)"]`},
		{"mcp server wildcard", consent.Call{Tool: "mcp.github.create_issue"}, consent.Allow, `allow = ["mcp.github.*"]`},
		{"mcp deny", consent.Call{Tool: "mcp.github.delete_repo"}, consent.Deny, `deny = ["mcp.github.delete_*"]`},
		{"other server asks", consent.Call{Tool: "mcp.gitlab.create_issue"}, consent.Ask, consent.DefaultAsk},
		{"read-only default", consent.Call{Tool: "grep", ReadOnly: true}, consent.Allow, consent.DefaultReadOnly},
		{"name must match whole", consent.Call{Tool: "shell2", Subject: "git status", ShellSubject: true}, consent.Ask, consent.DefaultAsk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rules.Decide(tt.call)
			if got.Decision != tt.want || got.Rule != tt.rule {
				t.Errorf("Decide(%+v) = %v by %q, want %v by %q", tt.call, got.Decision, got.Rule, tt.want, tt.rule)
			}
		})
	}
}

func TestUIRulesAreSkipped(t *testing.T) {
	rules := consent.Rules{Deny: []string{"ui(pane.right)"}}
	if err := rules.Validate(); err != nil {
		t.Fatalf("Validate() = %v, want nil: ui rules belong to placements", err)
	}
	if got := rules.Decide(consent.Call{Tool: "ui", Subject: "pane.right"}); got.Decision != consent.Ask {
		t.Errorf("Decide = %v, want the default ask: a ui rule is not a tool rule", got.Decision)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		rule, want string
	}{
		{"", "is empty"},
		{"(x)", "no tool name"},
		{"shell(git", "not closed"},
		{"shell()", "empty subject"},
		{"my tool", "no spaces"},
	}
	for _, tt := range tests {
		err := consent.Rules{Allow: []string{tt.rule}}.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "permissions.allow") {
			t.Errorf("Validate(%q) = %v, want an error naming permissions.allow and %q", tt.rule, err, tt.want)
		}
	}
}

func TestMatch(t *testing.T) {
	ok, err := consent.Match("shell", consent.Call{Tool: "shell", Subject: "anything at all"})
	if err != nil || !ok {
		t.Errorf("Match(shell) = %v, %v, want true: a rule without a subject matches every call", ok, err)
	}
	if _, err := consent.Match("shell(", consent.Call{Tool: "shell"}); err == nil {
		t.Error("Match(shell() = nil error, want the parse error")
	}
}

func FuzzDecide(f *testing.F) {
	f.Add("shell(git *)", "shell", "git status", true)
	f.Add("write_file(src/**)", "write_file", "src/a/b", false)
	f.Add("**a*b**", "x", "aab/b", true)
	f.Fuzz(func(t *testing.T, rule, tool, subject string, paths bool) {
		c := consent.Call{Tool: tool, Subject: subject, PathSubject: paths}
		// Any rule either parses or is refused; matching never panics.
		if _, err := consent.Match(rule, c); err != nil && (consent.Rules{Allow: []string{rule}}).Validate() == nil {
			t.Errorf("Match(%q) failed with %v but Validate accepts it", rule, err)
		}
		// A rule equal to the call, with no stars, always matches it.
		plain := !strings.Contains(tool+subject, "*") && !strings.ContainsAny(tool, "()") && !strings.Contains(subject, ")")
		if plain && tool != "" && subject != "" && strings.TrimSpace(tool) == tool && !strings.ContainsAny(tool, " \t") && strings.TrimSpace(subject+")") == subject+")" {
			if exact, err := consent.Match(tool+"("+subject+")", c); err != nil || !exact {
				t.Errorf("Match(%q) = %v, %v for its own call", tool+"("+subject+")", exact, err)
			}
		}
	})
}
