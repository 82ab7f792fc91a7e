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
//
// A shell command line (a call whose ShellSubject is set) is not matched as
// one string. It is read with a shell parser, as bash and as POSIX sh (the
// /bin/sh that runs it may be either), and split into parts: every simple
// command, wherever it sits (lists, pipelines, subshells, blocks, if, while,
// for and case bodies, function bodies, command and process substitutions,
// expansions), every redirection to a file, and every assignment to a
// variable that changes what runs (PATH, LD_*, …). A command is matched as
// its words joined by single spaces once quoting is read, without its
// leading assignments and redirections, and seen through the wrappers that
// only run it (env, command, builtin, exec, nohup, time, nice, timeout,
// stdbuf). Commands that run other commands (sudo, doas, xargs, find -exec,
// sh -c, eval, trap) are judged themselves and so is what they run. Each part goes
// through deny, allow, ask and the default on its own; the line is denied if
// any part is, asked about if any part is, and allowed only when every part
// is. The verdict names the part that decided.
//
// What cannot be read is asked about, and no rule with a subject allows it:
// a line either dialect fails to parse, a command whose name is not a
// literal word, a wrapper's options this package does not know, and a
// redirection whose target is not a literal path inside the workspace. A
// deny rule still denies such a part when it could match whatever the
// unread pieces turn out to be. Rules on arguments are a convenience, not a
// boundary: a command can reach the same effect by other arguments.
package consent

import (
	"errors"
	"fmt"
	"slices"
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
	// ShellSubject says the subject is a shell command line, judged part
	// by part (see the package documentation).
	ShellSubject bool
	// Workspace resolves the files a shell line redirects to or from; a
	// redirection it refuses is asked about. Nil means no workspace is
	// known, so every redirection to or from a file is asked about.
	Workspace Resolver
	// ReadOnly marks a tool that only reads: allowed when no rule matches.
	ReadOnly bool
}

// Resolver resolves a path in a workspace, refusing one that leads outside
// it. tool.Workspace is one.
type Resolver interface {
	Resolve(path string) (string, error)
}

// Verdict is the gate's answer for a call and the rule that gave it.
type Verdict struct {
	Decision Decision
	// Rule is the rule that matched, as written, such as
	// `allow = ["shell(git status*)"]`; for a default it says so. A shell
	// line allowed part by part names every rule that allowed a part.
	Rule string
	// Part is, for a shell line denied or asked about, the part that
	// decided: a command as matched ("rm -rf dir"), a redirection
	// (">/etc/passwd"), or the whole line when it cannot be read. It is ""
	// for an allowed line and for a call that is not a shell line.
	Part string
	// Why says Rule of Part for a person, such as
	// `deny = ["shell(rm -rf*)"] on the part "rm -rf dir"` or
	// `the part "id" matches no allow rule`; "" when Part is "".
	Why string
}

// Reason is what decided, for a person: Why when the verdict names a part,
// else Rule.
func (v Verdict) Reason() string {
	if v.Why != "" {
		return v.Why
	}
	return v.Rule
}

// Default rule names, for verdicts no rule gave.
const (
	DefaultReadOnly = "default: tools that only read are allowed"
	DefaultAsk      = "default: tools that write or execute are asked about"
	// DefaultNoCommand allows a shell line with nothing in it to judge,
	// such as a bare assignment "X=1".
	DefaultNoCommand = "default: a shell line that runs no command is allowed"
	// ShellUnreadable asks about a part of a shell line that cannot be
	// read: the line does not parse, a command name is not a literal word,
	// or a wrapper's options are unknown.
	ShellUnreadable = "shell: what cannot be read is asked about"
	// ShellRedirect asks about a redirection to or from a file that may be
	// outside the workspace.
	ShellRedirect = "shell: redirections that leave the workspace are asked about"
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
// reports it). A shell line is decided part by part (see the package
// documentation).
func (r Rules) Decide(c Call) Verdict {
	if c.ShellSubject {
		return r.decideShell(c)
	}
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
// the ones a person grants for a session. For a shell line it reports
// whether rule, as an allow rule, allows every part of it, as Decide would.
func Match(rule string, c Call) (bool, error) {
	p, err := parse(rule)
	if err != nil {
		return false, err
	}
	if p == nil {
		return false, nil
	}
	if c.ShellSubject {
		return p.allowsLine(c), nil
	}
	return p.match(c), nil
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

// anySubject reports whether p matches every subject of its tool: it has
// none, or its subject is only stars (shell(*) is shell).
func (p *pattern) anySubject() bool {
	return !p.hasSubject || strings.Trim(p.subject, "*") == ""
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

// seg is one piece of what a part of a shell line may be at run time:
// literal text, or (star) any text at all, where the shell fills in an
// expansion.
type seg struct {
	lit  string
	star bool
}

// globMeets reports whether some string matches both pattern, a subject
// pattern whose stars cross "/", and shape. For a shape without stars it is
// glob. It is how a deny rule judges a part with expansions in it: the rule
// denies when the expansions could make the part match.
func globMeets(pattern string, shape []seg) bool {
	var s []byte
	var sStar []bool
	for _, g := range shape {
		if g.star {
			if len(sStar) == 0 || !sStar[len(sStar)-1] {
				s, sStar = append(s, 0), append(sStar, true)
			}
			continue
		}
		for i := 0; i < len(g.lit); i++ {
			s, sStar = append(s, g.lit[i]), append(sStar, false)
		}
	}
	if !slices.Contains(sStar, true) {
		return glob(pattern, string(s), false)
	}
	var p []byte
	var pStar []bool
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == '*' {
			if len(pStar) == 0 || !pStar[len(pStar)-1] {
				p, pStar = append(p, 0), append(pStar, true)
			}
			continue
		}
		p, pStar = append(p, pattern[i]), append(pStar, false)
	}
	// A search over (tokens of pattern read, tokens of shape read): a star
	// on either side may match nothing or eat the other side's next byte.
	n, m := len(p), len(s)
	seen := make([]bool, (n+1)*(m+1))
	stack := []int{0}
	seen[0] = true
	push := func(i, j int) {
		if k := i*(m+1) + j; !seen[k] {
			seen[k] = true
			stack = append(stack, k)
		}
	}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		i, j := k/(m+1), k%(m+1)
		if i == n && j == m {
			return true
		}
		ps, ss := i < n && pStar[i], j < m && sStar[j]
		if ps {
			push(i+1, j)
		}
		if ss {
			push(i, j+1)
		}
		if i < n && j < m {
			switch {
			case ps && !ss:
				push(i, j+1)
			case ss && !ps:
				push(i+1, j)
			case !ps && !ss && p[i] == s[j]:
				push(i+1, j+1)
			}
		}
	}
	return false
}
