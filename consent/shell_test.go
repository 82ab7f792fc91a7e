package consent_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/tool"
)

// shellRules are the rules the shell table is judged by.
var shellRules = consent.Rules{
	Allow: []string{"shell(git status*)", "shell(go test*)", "shell(echo *)", "shell(cat)", "shell(cat *)", "shell(grep *)",
		"shell(wc *)", "shell(ls*)", "shell(true)", "shell(cd *)", "shell(printf *)"},
	Ask:  []string{"shell(make *)"},
	Deny: []string{"shell(rm -rf*)", "shell(git push*)", "shell(curl*)"},
}

// shellCases are shell lines and how shellRules judge them; they seed
// FuzzShellDecide too.
var shellCases = []struct {
	name, line string
	want       consent.Decision
	// part is the part named; why, when set, is in the sentence.
	part, why string
	// noDeny judges by shellRules without its deny rules.
	noDeny bool
}{
	// The lines that ran without asking when the rules matched the
	// whole line.
	{"list with ;", "git status; id", consent.Ask, "id", `the part "id" matches no allow rule`, false},
	{"and list", "git status && id", consent.Ask, "id", "", false},
	{"or list", "git status || id", consent.Ask, "id", "", false},
	{"background list", "git status & id", consent.Ask, "id", "", false},
	{"command substitution", "git status $(id)", consent.Ask, "id", "", false},
	{"newline", "git status\nid", consent.Ask, "id", "", false},
	// Every part asked about is named, the last one too.
	{"parts asked", "id && whoami; rm -rf ./important", consent.Ask, "id", `the parts "id", "whoami" and "rm -rf ./important" match no allow rule`, true},
	{"a part asked twice is named once", "id; id", consent.Ask, "id", `the part "id" matches no allow rule`, false},
	{"denied part after an allowed one", "go test; rm -rf dir", consent.Deny, "rm -rf dir", `deny = ["shell(rm -rf*)"] on the part "rm -rf dir"`, false},
	// Every part allowed.
	{"chain of allowed parts", "git status && git status --short", consent.Allow, "", "", false},
	{"pipeline allowed", "git status --short | grep M | wc -l", consent.Allow, "", "", false},
	{"pipeline with a denied stage", "cat go.mod | grep x | rm -rf y", consent.Deny, "rm -rf y", "", false},
	{"backticks", "echo `id`", consent.Ask, "id", "", false},
	{"process substitution denied", "cat <(git status) <(rm -rf x)", consent.Deny, "rm -rf x", "", false},
	{"process substitution is bash only", "cat <(git status)", consent.Ask, "cat <(git status)", "cannot be read as POSIX sh", false},
	{"subshell", "(git status; id)", consent.Ask, "id", "", false},
	{"block", "{ git status; rm -rf /; }", consent.Deny, "rm -rf /", "", false},
	{"comment is not a command", "git status # ; rm -rf x", consent.Allow, "", "", false},
	// Quoting is read before matching.
	{"extra spaces", "git   status", consent.Allow, "", "", false},
	{"quoted words", `'git' "status" --short`, consent.Allow, "", "", false},
	{"backslash in a word", `g\it status`, consent.Allow, "", "", false},
	{"quoted operator is an argument", "git status '; id'", consent.Allow, "", "", false},
	{"escaped operator is an argument", `git status \; id`, consent.Allow, "", "", false},
	{"ANSI-C quoting as the command", `$'\x72\x6d' -rf x`, consent.Deny, "rm -rf x", "", false},
	{"escaped space in the name", `git\ status`, consent.Ask, "git status", "holds white space", false},
	{"dash reads $'\\' differently", `echo $'\' ; touch pwned ; #'`, consent.Ask, "touch pwned", "", false},
	// Assignments and wrappers.
	{"leading assignment", "FOO=1 git status", consent.Allow, "", "", false},
	{"assignment to PATH", "PATH=/tmp git status", consent.Ask, "PATH=/tmp", "changes what the line runs", false},
	{"env with an assignment", "env FOO=1 git status", consent.Allow, "", "", false},
	{"env -i", "env -i git status", consent.Allow, "", "", false},
	{"env runs a denied command", "env rm -rf x", consent.Deny, "rm -rf x", "", false},
	{"env -S is not read", "env -S 'rm -rf x'", consent.Ask, "env -S rm -rf x", "option -S", false},
	{"env PATH", "env PATH=. git status", consent.Ask, "PATH=.", "", false},
	{"stacked wrappers", "nohup timeout 5 nice -n 10 command git status", consent.Allow, "", "", false},
	{"wrapper in a system directory", "/usr/bin/env git status", consent.Allow, "", "", false},
	{"a local env is not env", "./env git status", consent.Ask, "./env git status", "", false},
	{"command -v runs nothing", "command -v rm", consent.Ask, "command -v rm", "", false},
	{"sudo is a command of its own", "sudo git status", consent.Ask, "sudo git status", "", false},
	{"sudo runs a denied command", "sudo rm -rf /", consent.Deny, "rm -rf /", "", false},
	{"sh -c", "bash -c 'git status; rm -rf x'", consent.Deny, "rm -rf x", "", false},
	{"eval", "eval 'git status; id'", consent.Ask, "eval git status; id", "", false},
	{"eval denied", "eval 'rm -rf x'", consent.Deny, "rm -rf x", "", false},
	{"trap runs its line", "trap 'rm -rf x' EXIT; git status", consent.Deny, "rm -rf x", "", false},
	{"here-string substitution", "cat <<< $(rm -rf x)", consent.Deny, "rm -rf x", "", false},
	{"line continuation in the name", "r\\\nm -rf x", consent.Deny, "rm -rf x", "", false},
	{"find -exec", "find . -name '*.o' -exec rm -rf {} +", consent.Deny, "rm -rf {}", "", false},
	{"xargs", "ls | xargs rm -rf", consent.Deny, "rm -rf", "", false},
	{"xargs may get -rf from its input", "ls | xargs rm", consent.Deny, "rm", "could match", false},
	// Redirections.
	{"redirection inside the workspace", "echo hi > out.txt", consent.Allow, "", "", false},
	{"redirection to /etc", "echo hi > /etc/passwd", consent.Ask, ">/etc/passwd", "the redirection to /etc/passwd leaves the workspace", false},
	{"appending above the workspace", "echo hi >> ../x", consent.Ask, ">>../x", "leaves the workspace", false},
	{"redirection to home", "echo hi > ~/x", consent.Ask, ">~/x", "home directory", false},
	{"bash's >& to a file", "echo hi >& /etc/x", consent.Ask, ">&/etc/x", "", false},
	{"fd duplication", "git status 2>&1", consent.Allow, "", "", false},
	{"to /dev/null", "git status > /dev/null 2>&1", consent.Allow, "", "", false},
	{"reading from outside", "cat < /etc/shadow", consent.Ask, "</etc/shadow", "the redirection from /etc/shadow leaves the workspace", false},
	{"redirection to an expansion", `echo hi > "$OUT"`, consent.Ask, ">$OUT", "expansion", false},
	{"after cd a relative target is unknown", "cd sub && echo hi > out.txt", consent.Ask, ">out.txt", "changes directory", false},
	// Here-documents.
	{"here-doc substitution", "cat <<EOF\n$(rm -rf x)\nEOF", consent.Deny, "rm -rf x", "", false},
	{"quoted here-doc is text", "cat <<'EOF'\n$(rm -rf x)\nEOF", consent.Allow, "", "", false},
	{"unclosed here-doc", "cat <<EOF\nx", consent.Ask, "cat <<EOF\nx", "cannot be read", false},
	// Lines that do not parse.
	{"unclosed quote", "echo 'hi", consent.Ask, "echo 'hi", "no rule can allow it", false},
	{"unclosed quote still denies", "git status; rm -rf x; echo 'hi", consent.Deny, "rm -rf x", "", false},
	// Names that are not literal words.
	{"variable as the command", "$CMD status", consent.Ask, "$CMD status", "is not a literal word", true},
	{"quoted expansion as the command", `"${X}" --version`, consent.Ask, "${X} --version", "is not a literal word", true},
	{"deny could match a variable command", "$CMD -rf x", consent.Deny, "$CMD -rf x", "could match", false},
	{"substitution as the command", "$(echo rm) -rf x", consent.Deny, "$(echo rm) -rf x", "", false},
	{"glob as the command", "/bin/r? -rf x", consent.Deny, "/bin/r? -rf x", "", false},
	{"a path to a denied command", "/bin/rm -rf x", consent.Deny, "rm -rf x", "", false},
	{"a variable argument may hold a denied subcommand", "git $SUB origin", consent.Deny, "git $SUB origin", "could match", false},
	{"variable argument", `echo "$HOME"`, consent.Allow, "", "", false},
	// Compound commands and functions.
	{"if", "if git status; then id; fi", consent.Ask, "id", "", false},
	{"for", "for f in a b; do rm -rf $f; done", consent.Deny, "rm -rf $f", "", false},
	{"while", "while true; do git status; done", consent.Allow, "", "", false},
	{"case", "case $x in a) git push;; esac", consent.Deny, "git push", "", false},
	{"function body", "f() { rm -rf x; }; f", consent.Deny, "rm -rf x", "", false},
	{"function call", "f() { git status; }; f", consent.Ask, "f", "", false},
	{"arithmetic holding a substitution", "echo $((1 + $(id)))", consent.Ask, "id", "", false},
	{"parameter default holding a substitution", "echo ${X:-$(rm -rf x)}", consent.Deny, "rm -rf x", "", false},
	{"[[ is bash's test", "[[ -f go.mod ]] && go test ./...", consent.Allow, "", "", false},
	{"ask rule", "make all", consent.Ask, "make all", `the rule ask = ["shell(make *)"] matches the part "make all"`, false},
	{"bare assignment runs nothing", "X=1", consent.Allow, "", "", false},
	{"no command line at all", "", consent.Ask, "", "names no command line", false},
}

func TestDecideShell(t *testing.T) {
	ws := tool.Workspace{Root: t.TempDir()}
	for _, tt := range shellCases {
		t.Run(tt.name, func(t *testing.T) {
			rules := shellRules
			if tt.noDeny {
				rules.Deny = nil
			}
			c := consent.Call{Tool: "shell", Subject: tt.line, ShellSubject: true, Workspace: ws}
			got := rules.Decide(c)
			if got.Decision != tt.want || got.Part != tt.part || !strings.Contains(got.Why, tt.why) {
				t.Errorf("Decide(%q) = %v, part %q, why %q; want %v, part %q, why containing %q", tt.line, got.Decision, got.Part, got.Why, tt.want, tt.part, tt.why)
			}
			// A redirection is named by its target.
			named := strings.TrimLeft(tt.part, "0123456789<>&|")
			if got.Decision != consent.Allow && (!strings.Contains(got.Why, named) && !strings.Contains(got.Why, strconv.Quote(named))) {
				t.Errorf("Decide(%q).Why = %q, want a sentence naming the part %q", tt.line, got.Why, tt.part)
			}
		})
	}
}

func TestDecideShellRules(t *testing.T) {
	ws := tool.Workspace{Root: t.TempDir()}
	call := func(line string) consent.Call {
		return consent.Call{Tool: "shell", Subject: line, ShellSubject: true, Workspace: ws}
	}
	tests := []struct {
		name  string
		rules consent.Rules
		line  string
		want  consent.Decision
		rule  string
	}{
		{"one rule allows every part", consent.Rules{Allow: []string{"shell(git status*)"}}, "git status && git status --short", consent.Allow, `allow = ["shell(git status*)"]`},
		{"every rule that allowed a part", consent.Rules{Allow: []string{"shell(git status*)", "shell(go test*)"}}, "go test ./... && git status", consent.Allow, `allow = ["shell(go test*)", "shell(git status*)"]`},
		{"a rule without a subject allows what cannot be read", consent.Rules{Allow: []string{"shell"}}, "$CMD > /etc/x", consent.Allow, `allow = ["shell"]`},
		{"shell(*) is shell", consent.Rules{Allow: []string{"shell(*)"}}, "echo 'unclosed", consent.Allow, `allow = ["shell(*)"]`},
		{"a rule without a subject denies", consent.Rules{Allow: []string{"shell(git status*)"}, Deny: []string{"shell"}}, "git status", consent.Deny, `deny = ["shell"]`},
		{"a rule without a subject denies a line with no command", consent.Rules{Deny: []string{"shell(*)"}}, "X=1", consent.Deny, `deny = ["shell(*)"]`},
		{"deny on a wrapper", consent.Rules{Allow: []string{"shell(git status*)"}, Deny: []string{"shell(nohup *)"}}, "nohup git status", consent.Deny, `deny = ["shell(nohup *)"]`},
		{"no rules asks", consent.Rules{}, "git status", consent.Ask, consent.DefaultAsk},
		{"unreadable", consent.Rules{Allow: []string{"shell(cat *)"}}, "cat <(ls)", consent.Ask, consent.ShellUnreadable},
		{"redirection", consent.Rules{Allow: []string{"shell(echo *)"}}, "echo x > /etc/x", consent.Ask, consent.ShellRedirect},
		{"nothing to run", consent.Rules{}, "X=1", consent.Allow, consent.DefaultNoCommand},
		{"another tool's rule", consent.Rules{Allow: []string{"bash(git status*)"}}, "git status", consent.Ask, consent.DefaultAsk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.rules.Decide(call(tt.line))
			if got.Decision != tt.want || got.Rule != tt.rule {
				t.Errorf("Decide(%q) = %v by %q, want %v by %q", tt.line, got.Decision, got.Rule, tt.want, tt.rule)
			}
		})
	}
}

func TestDecideShellWithoutWorkspace(t *testing.T) {
	rules := consent.Rules{Allow: []string{"shell(echo *)"}}
	for line, want := range map[string]consent.Decision{
		"echo hi > out.txt":   consent.Ask,
		"echo hi > /dev/null": consent.Allow,
		"echo hi":             consent.Allow,
	} {
		got := rules.Decide(consent.Call{Tool: "shell", Subject: line, ShellSubject: true})
		if got.Decision != want {
			t.Errorf("Decide(%q) with no workspace = %v (%s), want %v", line, got.Decision, got.Reason(), want)
		}
	}
}

func TestMatchShell(t *testing.T) {
	ws := tool.Workspace{Root: t.TempDir()}
	tests := []struct {
		rule, line string
		want       bool
	}{
		{"shell(git status*)", "git status && git status --short", true},
		{"shell(git status*)", "git status; touch pwned", false},
		{"shell(git status*)", "git status > /etc/x", false},
		{"shell(git status*)", "$CMD", false},
		{"shell", "$CMD", true},
		{"shell(echo *)", "echo 'unclosed", false},
	}
	for _, tt := range tests {
		c := consent.Call{Tool: "shell", Subject: tt.line, ShellSubject: true, Workspace: ws}
		got, err := consent.Match(tt.rule, c)
		if err != nil || got != tt.want {
			t.Errorf("Match(%q, %q) = %v, %v, want %v", tt.rule, tt.line, got, err, tt.want)
		}
		allowed := consent.Rules{Allow: []string{tt.rule}}.Decide(c).Decision == consent.Allow
		if allowed != got {
			t.Errorf("Match(%q, %q) = %v, but Decide with it as the one allow rule allows: %v", tt.rule, tt.line, got, allowed)
		}
	}
}

func TestVerdictReason(t *testing.T) {
	v := consent.Verdict{Decision: consent.Ask, Rule: consent.DefaultAsk, Part: "id", Why: `the part "id" matches no allow rule`}
	if got := v.Reason(); got != v.Why {
		t.Errorf("Reason() = %q, want Why %q", got, v.Why)
	}
	v = consent.Verdict{Decision: consent.Allow, Rule: `allow = ["read_file"]`}
	if got := v.Reason(); got != v.Rule {
		t.Errorf("Reason() = %q, want Rule %q", got, v.Rule)
	}
}

// fuzzWorkspace resolves what stays below its root: a relative path with
// no "..".
type fuzzWorkspace struct{}

func (fuzzWorkspace) Resolve(p string) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "..") || strings.ContainsRune(p, 0) {
		return "", errors.New("outside the workspace")
	}
	return "/ws/" + p, nil
}

// composable reports whether line parses alone, as bash and as POSIX sh,
// and ends where it seems to, so that joining it to another line adds that
// line's commands and changes none of its own.
func composable(line string) bool {
	if strings.TrimSpace(line) == "" || strings.HasSuffix(line, `\`) || strings.Contains(line, "<<") {
		return false
	}
	for _, lang := range []syntax.LangVariant{syntax.LangBash, syntax.LangPOSIX} {
		if _, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(line), ""); err != nil {
			return false
		}
	}
	return true
}

func FuzzShellDecide(f *testing.F) {
	for _, tt := range shellCases {
		f.Add(tt.line, tt.line, "git status", "shell(git status*)", "shell(git push*)")
	}
	f.Add("git status; id", "git status", "rm -rf dir", "shell(git status*)", "shell(rm -rf*)")
	f.Add("go test; rm -rf dir", "go test ./...", "echo ok > out.txt", "shell(go test*)", "shell(rm*)")
	f.Add("env -i FOO=1 nice -n 5 git status", "sudo -u root rm -rf /", "x=$(rm -rf y)", "shell(*)", "shell(*rm*)")
	f.Add("bash -c 'eval \"sh -c \\\"id\\\"\"'", "find . -exec sh -c 'id' \\;", "xargs -I{} echo {}", "shell(echo *)", "shell(id)")
	f.Add("echo $'\\' ; touch x ; #'", "cd /tmp", "echo > a", "shell(cd *)", "shell(touch*)")
	f.Fuzz(func(t *testing.T, line, a, b, allow, deny string) {
		rules := consent.Rules{Allow: []string{allow, "shell(echo *)"}, Deny: []string{deny, "shell(rm -rf*)"}}
		call := func(s string) consent.Call {
			return consent.Call{Tool: "shell", Subject: s, ShellSubject: true, Workspace: fuzzWorkspace{}}
		}
		decide := func(r consent.Rules, s string) consent.Decision { return r.Decide(call(s)).Decision }

		v := rules.Decide(call(line))
		switch v.Decision {
		case consent.Allow:
			if v.Part != "" || v.Why != "" || v.Rule == "" {
				t.Errorf("Decide(%q) = allow, part %q, why %q, rule %q; want a rule and no part", line, v.Part, v.Why, v.Rule)
			}
		case consent.Ask, consent.Deny:
			if v.Rule == "" || v.Why == "" && v.Part != "" {
				t.Errorf("Decide(%q) = %v, part %q, why %q, rule %q; want a rule and a sentence naming the part", line, v.Decision, v.Part, v.Why, v.Rule)
			}
		default:
			t.Fatalf("Decide(%q) = %v", line, v.Decision)
		}
		// Deny comes from deny rules only, a deny rule without a subject
		// denies every line, and no deny rule takes a deny away.
		lax := rules
		lax.Deny = nil
		if d := decide(lax, line); d == consent.Deny {
			t.Errorf("Decide(%q) with no deny rules = deny", line)
		}
		strict := rules
		strict.Deny = append(slices.Clone(rules.Deny), "shell")
		if d := decide(strict, line); d != consent.Deny {
			t.Errorf("Decide(%q) under deny = [\"shell\"] = %v, want deny", line, d)
		}
		fewer := rules
		fewer.Deny = rules.Deny[1:]
		if d := decide(fewer, line); d == consent.Deny && v.Decision != consent.Deny {
			t.Errorf("Decide(%q) = %v, but deny with one deny rule fewer", line, v.Decision)
		}
		// Match agrees with Decide for a rule alone, on a line that runs
		// something (a line that runs nothing is allowed with no rule).
		if ok, err := consent.Match(allow, call(line)); err == nil && decide(consent.Rules{}, line) != consent.Allow {
			if alone := decide(consent.Rules{Allow: []string{allow}}, line) == consent.Allow; ok != alone {
				t.Errorf("Match(%q, %q) = %v, but Decide with it alone allows: %v", allow, line, ok, alone)
			}
		}
		// A line made of two lines denies when either does alone, and is
		// allowed only when both are.
		if !composable(a) || !composable(b) {
			return
		}
		da, db := decide(rules, a), decide(rules, b)
		joins := []string{a + "\n" + b}
		if !strings.Contains(a, "#") && !strings.HasSuffix(strings.TrimSpace(a), ";") && !strings.HasSuffix(strings.TrimSpace(a), "&") {
			joins = append(joins, a+"; "+b)
		}
		for _, j := range joins {
			if !composable(j) {
				continue
			}
			dj := decide(rules, j)
			if (da == consent.Deny || db == consent.Deny) && dj != consent.Deny {
				t.Errorf("Decide(%q) = %v, but its parts alone: %q %v, %q %v", j, dj, a, da, b, db)
			}
			if dj == consent.Allow && (da != consent.Allow || db != consent.Allow) {
				t.Errorf("Decide(%q) = allow, but its parts alone: %q %v, %q %v", j, a, da, b, db)
			}
		}
	})
}

// BenchmarkDecideShell measures a shell line judged part by part against
// the same line matched as one string (the rules of a tool without a
// shell subject): the cost of reading the line twice with mvdan.cc/sh.
func BenchmarkDecideShell(b *testing.B) {
	ws := tool.Workspace{Root: b.TempDir()}
	rules := consent.Rules{Allow: []string{"shell(git status*)", "shell(go test*)", "shell(tail*)"}, Deny: []string{"shell(rm -rf*)"}}
	line := "git status --short && go test ./... 2>&1 | tail -20 > " + "out.txt"
	for _, bc := range []struct {
		name string
		call consent.Call
	}{
		{"glob", consent.Call{Tool: "shell", Subject: line}},
		{"parts", consent.Call{Tool: "shell", Subject: line, ShellSubject: true, Workspace: ws}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rules.Decide(bc.call)
			}
		})
	}
}
