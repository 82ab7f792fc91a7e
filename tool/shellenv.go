package tool

import (
	"fmt"
	"strings"

	"github.com/getorrery/orrery/internal/redact"
)

// alwaysPassed are the variables a command gets whatever Shell.HideEnv
// says: without them nothing is found and nothing has a home.
var alwaysPassed = []string{"PATH", "HOME"}

// MatchEnv reports whether the variable name matches pattern: a name
// (GITHUB_TOKEN), or a pattern in which each * stands for any run of
// characters, none included (AWS_*, *_SECRET). Letters match in either
// case.
func MatchEnv(pattern, name string) bool {
	p, n := strings.ToUpper(pattern), strings.ToUpper(name)
	// The classic greedy match with one backtrack point: the last *.
	pi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case pi < len(p) && p[pi] == n[ni]:
			pi++
			ni++
		case star >= 0:
			pi, mark = star+1, mark+1
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// CheckEnvPattern reports what is wrong with a HideEnv entry: it is empty,
// has a character no variable name has (letters, digits, _ and * only), or
// would hide PATH or HOME, which every command gets.
func CheckEnvPattern(pattern string) error {
	if pattern == "" {
		return fmt.Errorf("the pattern is empty: write a variable's name, such as GITHUB_TOKEN, or a pattern such as AWS_*")
	}
	for _, r := range pattern {
		if r != '_' && r != '*' && (r < '0' || r > '9') && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return fmt.Errorf("%q has %q: a pattern is a variable's name (letters, digits and _), with * for any run of characters", pattern, string(r))
		}
	}
	for _, name := range alwaysPassed {
		if MatchEnv(pattern, name) {
			return fmt.Errorf("%q matches %s, which every command gets: make it narrower", pattern, name)
		}
	}
	return nil
}

// hidden reports whether the variable name=value is kept from a command:
// HideEnv matches its name, or its value holds a URL with credentials
// (scheme://user:pass@host, or a key= or token= query parameter).
func (s Shell) hidden(name, value string) bool {
	for _, keep := range alwaysPassed {
		if name == keep {
			return false
		}
	}
	for _, p := range s.HideEnv {
		if MatchEnv(p, name) {
			return true
		}
	}
	return redact.HasCredentials(value)
}

// environ returns the environment a command runs with: environ (KEY=VALUE
// entries, as os.Environ gives them) without the hidden variables, and with
// PAGER and GIT_PAGER set to cat.
func (s Shell) environ(environ []string) []string {
	out := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !s.hidden(name, value) {
			out = append(out, kv)
		}
	}
	return append(out, "PAGER=cat", "GIT_PAGER=cat")
}
