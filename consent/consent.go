// Package consent decides whether a tool call may run: the rules of
// [permissions] allow, ask and deny, matched against the tool's name and,
// for tools that have one, the call's subject (the command of shell, the
// path of a file tool).
//
// A rule is a tool name pattern, optionally followed by a subject pattern in
// parentheses: "read_file", "mcp.github.*", "shell(git status*)",
// "write_file(src/**)". In a tool name, * matches any run of characters. In a
// subject, * matches any run of characters except "/" when the tool's
// subject is a path, and any run at all when it is not (a command); ** always
// matches any run, "/" included. Rules of the form ui(…) are placement rules
// and are not this package's: they are skipped here.
//
// Deny rules are checked first, then allow, then ask. With no matching rule
// a tool that only reads is allowed and any other is asked about.
package consent

import (
	"errors"
	"fmt"
	"strings"
)

// Decision is what the gate does with a call.
type Decision int

// The decisions, in the order rules are checked.
const (
	// Deny refuses the call; the model reads why.
	Deny Decision = iota + 1
	// Allow runs the call.
	Allow
	// Ask asks a person, through a client that draws consent.
	Ask
)

func (d Decision) String() string {
	switch d {
	case Deny:
		return "deny"
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// Rules are the allow, ask and deny lists of [permissions].
type Rules struct {
	Allow []string `toml:"allow" json:"allow,omitempty"`
	Ask   []string `toml:"ask" json:"ask,omitempty"`
	Deny  []string `toml:"deny" json:"deny,omitempty"`
}

// Call is what the rules match: a tool call's tool and subject.
type Call struct {
	// Tool is the tool's name.
	Tool string
	// Subject is the call's subject, or "" for a tool without one.
	Subject string
	// PathSubject says the subject is a path, so * stops at "/".
	PathSubject bool
	// ReadOnly marks a tool that only reads: allowed when no rule matches.
	ReadOnly bool
}

// Verdict is the gate's answer for a call and the rule that gave it.
type Verdict struct {
	Decision Decision
	// Rule is the rule that matched, as written, such as
	// `allow = ["shell(git status*)"]`; for a default it says so.
	Rule string
}

// Default rule names, for verdicts no rule gave.
const (
	DefaultReadOnly = "default: tools that only read are allowed"
	DefaultAsk      = "default: tools that write or execute are asked about"
)

// Validate checks every rule, naming the first bad one and the fix.
func (r Rules) Validate() error {
	for _, list := range []struct {
		name  string
		rules []string
	}{{"allow", r.Allow}, {"ask", r.Ask}, {"deny", r.Deny}} {
		for _, rule := range list.rules {
			if _, err := parse(rule); err != nil {
				return fmt.Errorf("permissions.%s: %w", list.name, err)
			}
		}
	}
	return nil
}

// Decide returns the verdict of r for c: deny rules first, then allow, then
// ask, then the default. A rule that does not parse never matches (Validate
// reports it).
func (r Rules) Decide(c Call) Verdict {
	for _, list := range []struct {
		d     Decision
		name  string
		rules []string
	}{{Deny, "deny", r.Deny}, {Allow, "allow", r.Allow}, {Ask, "ask", r.Ask}} {
		for _, rule := range list.rules {
			p, err := parse(rule)
			if err != nil || p == nil || !p.match(c) {
				continue
			}
			return Verdict{Decision: list.d, Rule: fmt.Sprintf("%s = [%q]", list.name, rule)}
		}
	}
	if c.ReadOnly {
		return Verdict{Decision: Allow, Rule: DefaultReadOnly}
	}
	return Verdict{Decision: Ask, Rule: DefaultAsk}
}

// Match reports whether rule matches c. It is for one-off rules, such as
// the ones a person grants for a session.
func Match(rule string, c Call) (bool, error) {
	p, err := parse(rule)
	if err != nil {
		return false, err
	}
	return p != nil && p.match(c), nil
}

// pattern is a parsed rule.
type pattern struct {
	tool       string
	subject    string
	hasSubject bool
}

var errEmpty = errors.New(`a rule is empty: write a tool name such as "read_file", optionally with a subject such as "shell(git status*)"`)

// parse returns the pattern of rule, or nil for a ui(…) placement rule.
func parse(rule string) (*pattern, error) {
	rule = strings.TrimSpace(rule)
	if rule == "" {
		return nil, errEmpty
	}
	if strings.HasPrefix(rule, "ui(") {
		return nil, nil
	}
	name, rest, hasSubject := strings.Cut(rule, "(")
	if name == "" {
		return nil, fmt.Errorf("rule %q has no tool name before \"(\": write it as tool(subject), such as shell(git status*)", rule)
	}
	if strings.ContainsAny(name, ") \t") {
		return nil, fmt.Errorf("rule %q: a tool name has no spaces or \")\"; write tool(subject), such as shell(git status*)", rule)
	}
	p := &pattern{tool: name, hasSubject: hasSubject}
	if hasSubject {
		subject, ok := strings.CutSuffix(rest, ")")
		if !ok {
			return nil, fmt.Errorf("rule %q is not closed: end it with \")\", such as shell(git status*)", rule)
		}
		if subject == "" {
			return nil, fmt.Errorf("rule %q has an empty subject: drop the parentheses to match every call of %s, or write a subject such as %s(*)", rule, name, name)
		}
		p.subject = subject
	}
	return p, nil
}

func (p *pattern) match(c Call) bool {
	if !glob(p.tool, c.Tool, false) {
		return false
	}
	if !p.hasSubject {
		return true
	}
	return glob(p.subject, c.Subject, c.PathSubject)
}

// glob matches s against pattern, where ** matches any run, and * any run
// that, when paths is set, has no "/". There is no escape: rules name
// commands and paths, which rarely hold a literal *.
func glob(pattern, s string, paths bool) bool {
	// Iterative matching with backtracking to the last star, as in
	// path.Match, extended with ** (which may cross "/").
	for len(pattern) > 0 {
		star, double := false, false
		if strings.HasPrefix(pattern, "**") {
			star, double = true, true
			pattern = strings.TrimLeft(pattern, "*")
		} else if pattern[0] == '*' {
			star = true
			pattern = pattern[1:]
		}
		if star {
			crossSlash := double || !paths
			// A trailing ** matches everything below.
			if double && pattern == "" {
				return true
			}
			if pattern == "" {
				return crossSlash || !strings.Contains(s, "/")
			}
			for i := 0; i <= len(s); i++ {
				if !crossSlash && i > 0 && s[i-1] == '/' {
					break
				}
				if glob(pattern, s[i:], paths) {
					return true
				}
			}
			return false
		}
		// Literal run up to the next star.
		n := strings.IndexByte(pattern, '*')
		if n < 0 {
			n = len(pattern)
		}
		if !strings.HasPrefix(s, pattern[:n]) {
			return false
		}
		s, pattern = s[n:], pattern[n:]
	}
	return s == ""
}
