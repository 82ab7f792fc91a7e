package consent

import (
	"fmt"
	"strings"
)

// seeThrough holds the wrappers a command is judged through: each only runs
// its command (in another environment, directory, priority, time limit), so
// the command is the part allow and ask rules match, and deny rules are
// checked on the wrapper's form too. Each returns the index in args of the
// command it runs (len(args) when it runs none), the assignments it makes,
// and, when its words cannot be read, what is wrong with them. sudo and doas
// are not here: running as another user is a command of its own (see
// runner).
var seeThrough = map[string]func(args []word) (cmd int, assigns []word, problem string){
	"env":     envArgs,
	"command": commandArgs,
	"builtin": func([]word) (int, []word, string) { return 0, nil, "" },
	"exec":    optsOnly(opts{flags: "cl", values: "a"}),
	"nohup":   optsOnly(opts{}),
	"time": optsOnly(opts{flags: "pvq", values: "f",
		long: map[string]int{"portability": noValue, "verbose": noValue, "quiet": noValue, "format": needsValue}}),
	"nice":    optsOnly(opts{values: "n", number: true, long: map[string]int{"adjustment": needsValue}}),
	"timeout": timeoutArgs,
	"stdbuf": optsOnly(opts{values: "ioe",
		long: map[string]int{"input": needsValue, "output": needsValue, "error": needsValue}}),
}

// runner returns, for a command that runs another command or line it is
// given, how to read what it runs: the runner is a part as written, and
// what it runs is read as parts too. It is nil for any other command.
func runner(name string) func(r *reader, prog string, full form, args []word, depth int) {
	switch name {
	case "sudo":
		return sudoArgs
	case "doas":
		return asUser(opts{flags: "n", values: "u"})
	case "xargs":
		return xargsArgs
	case "find":
		return findArgs
	case "eval":
		return evalArgs
	case "trap":
		return trapArgs
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash":
		return shellArgs
	}
	return nil
}

// The kinds of long option.
const (
	noValue    = iota
	needsValue // --name=value or --name value
	mayValue   // --name or --name=value
)

// opts is what a command takes as options, read as getopt reads them:
// short options cluster (-ab), a short option's value is the rest of its
// word or the next word, a long option's value follows "=" or is the next
// word, and the options end at "--" or the first word that is not one.
type opts struct {
	flags  string // short options without a value
	values string // short options with a value
	// attached are short options whose value, if any, is the rest of the
	// word (xargs -i[R]).
	attached string
	long     map[string]int
	// number says a number is an option (nice -10).
	number bool
}

// scan returns how many words at the start of args are options, and the
// short options seen; problem says what cannot be read.
func (o opts) scan(args []word) (n int, seen, problem string) {
	value := func(i int) string {
		if i >= len(args) {
			return "an option has no value"
		}
		if args[i].split || args[i].glob {
			return fmt.Sprintf("the option value %s may become several words", args[i].text)
		}
		return ""
	}
	for n < len(args) {
		w := args[n]
		if !strings.HasPrefix(w.head, "-") || w.text == "-" {
			return n, seen, ""
		}
		if !w.lit || w.glob {
			return n, seen, fmt.Sprintf("its option %s is not a literal word", w.text)
		}
		if w.text == "--" {
			return n + 1, seen, ""
		}
		if long, ok := strings.CutPrefix(w.text, "--"); ok {
			name, _, hasValue := strings.Cut(long, "=")
			kind, known := o.long[name]
			switch {
			case !known:
				return n, seen, fmt.Sprintf("its option --%s is not one Orrery reads", name)
			case kind == noValue && hasValue:
				return n, seen, fmt.Sprintf("its option --%s takes no value", name)
			case kind == needsValue && !hasValue:
				if p := value(n + 1); p != "" {
					return n, seen, p
				}
				n++
			}
			n++
			continue
		}
		t := w.text
	cluster:
		for i := 1; i < len(t); i++ {
			c := t[i]
			switch {
			case o.number && c >= '0' && c <= '9' && i == 1 && strings.Trim(t[1:], "0123456789") == "":
				break cluster
			case strings.IndexByte(o.flags, c) >= 0:
				seen += string(c)
			case strings.IndexByte(o.attached, c) >= 0:
				seen += string(c)
				break cluster
			case strings.IndexByte(o.values, c) >= 0:
				seen += string(c)
				if i+1 == len(t) {
					if p := value(n + 1); p != "" {
						return n, seen, p
					}
					n++
				}
				break cluster
			default:
				return n, seen, fmt.Sprintf("its option -%c is not one Orrery reads", c)
			}
		}
		n++
	}
	return n, seen, ""
}

func optsOnly(o opts) func([]word) (int, []word, string) {
	return func(args []word) (int, []word, string) {
		n, _, problem := o.scan(args)
		return n, nil, problem
	}
}

// assignments returns how many words at the start of args are NAME=value,
// as env and sudo take them before the command.
func assignments(args []word) (int, string) {
	n := 0
	for ; n < len(args); n++ {
		name, _, ok := strings.Cut(args[n].head, "=")
		if !ok || name == "" {
			break
		}
		if args[n].split || args[n].glob {
			return n, fmt.Sprintf("the assignment %s may become several words", args[n].text)
		}
	}
	return n, ""
}

var envOpts = opts{flags: "i0v", values: "uC", long: map[string]int{
	"ignore-environment": noValue, "null": noValue, "debug": noValue, "list-signal-handling": noValue,
	"unset": needsValue, "chdir": needsValue,
	"default-signal": mayValue, "ignore-signal": mayValue, "block-signal": mayValue,
}}

// envArgs reads env's options (-S, which splits a string into a command,
// is not read), a lone "-" (-i), and its assignments.
func envArgs(args []word) (int, []word, string) {
	n, _, problem := envOpts.scan(args)
	if problem != "" {
		return 0, nil, problem
	}
	if n < len(args) && args[n].lit && args[n].text == "-" {
		n++
	}
	k, problem := assignments(args[n:])
	return n + k, args[n : n+k], problem
}

// commandArgs reads command's options; with -v or -V it runs nothing, it
// says what a name is.
func commandArgs(args []word) (int, []word, string) {
	n, seen, problem := opts{flags: "pvV"}.scan(args)
	if strings.ContainsAny(seen, "vV") {
		return len(args), nil, problem
	}
	return n, nil, problem
}

var timeoutOpts = opts{flags: "v", values: "ks", long: map[string]int{
	"preserve-status": noValue, "foreground": noValue, "verbose": noValue,
	"kill-after": needsValue, "signal": needsValue,
}}

// timeoutArgs reads timeout's options and its duration.
func timeoutArgs(args []word) (int, []word, string) {
	n, _, problem := timeoutOpts.scan(args)
	switch {
	case problem != "":
		return 0, nil, problem
	case n == len(args):
		return n, nil, ""
	case args[n].split || args[n].glob:
		return 0, nil, fmt.Sprintf("its duration %s may become several words", args[n].text)
	}
	return n + 1, nil, ""
}

// runs reads the command a runner runs as a command of its own; a problem
// makes the runner's form a part asked about.
func (r *reader) runs(prog string, full form, args []word, depth int, more bool, problem string) {
	if problem != "" {
		r.add(part{form: full, rule: ShellUnreadable,
			unread: fmt.Sprintf("the part %q runs a command through %s, but %s, so no rule can allow it", full.text, prog, problem)})
		return
	}
	if len(args) > 0 {
		r.command(args, nil, depth, more)
	}
}

var sudoOpts = opts{flags: "AbEHknPS", values: "ugCDpT", long: map[string]int{
	"askpass": noValue, "background": noValue, "set-home": noValue, "non-interactive": noValue,
	"stdin": noValue, "reset-timestamp": noValue, "preserve-env": mayValue,
	"user": needsValue, "group": needsValue, "close-from": needsValue, "chdir": needsValue,
	"prompt": needsValue, "command-timeout": needsValue,
}}

// sudoArgs reads sudo's options and assignments; -s and -i, which run the
// command through a shell, are not read.
func sudoArgs(r *reader, prog string, full form, args []word, depth int) {
	n, _, problem := sudoOpts.scan(args)
	if problem == "" {
		k, p := assignments(args[n:])
		for _, a := range args[n : n+k] {
			if name, _, _ := strings.Cut(a.head, "="); changesWhatRuns(name) {
				r.add(assignPart(a))
			}
		}
		n, problem = n+k, p
	}
	r.runs(prog, full, args[min(n, len(args)):], depth, false, problem)
}

func asUser(o opts) func(r *reader, prog string, full form, args []word, depth int) {
	return func(r *reader, prog string, full form, args []word, depth int) {
		n, _, problem := o.scan(args)
		r.runs(prog, full, args[n:], depth, false, problem)
	}
}

var xargsOpts = opts{flags: "0prtxo", values: "adEILnPs", attached: "eil", long: map[string]int{
	"null": noValue, "interactive": noValue, "no-run-if-empty": noValue, "verbose": noValue,
	"exit": noValue, "open-tty": noValue, "show-limits": noValue,
	"arg-file": needsValue, "delimiter": needsValue, "max-args": needsValue, "max-procs": needsValue,
	"max-chars": needsValue, "process-slot-var": needsValue,
	"eof": mayValue, "replace": mayValue, "max-lines": mayValue,
}}

// xargsArgs reads the command xargs runs, which gets more arguments from
// its input (echo when it names none).
func xargsArgs(r *reader, prog string, full form, args []word, depth int) {
	n, _, problem := xargsOpts.scan(args)
	rest := args[n:]
	if problem == "" && len(rest) == 0 {
		rest = []word{bare("echo")}
	}
	r.runs(prog, full, rest, depth, true, problem)
}

// findArgs reads the commands of find's -exec, -execdir, -ok and -okdir,
// each up to its ";" or "{} +".
func findArgs(r *reader, _ string, _ form, args []word, depth int) {
	for i := 0; i < len(args); i++ {
		switch args[i].text {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		start := i + 1
		end := start
		for ; end < len(args); end++ {
			t := args[end].text
			if t == ";" || t == "+" && end > start && args[end-1].text == "{}" {
				break
			}
		}
		if end > start {
			r.command(args[start:end], nil, depth, false)
		}
		i = end
	}
}

// evalArgs reads the line eval runs: its words joined by spaces.
func evalArgs(r *reader, prog string, full form, args []word, depth int) {
	texts := make([]string, len(args))
	for i, a := range args {
		if !a.lit {
			r.runs(prog, full, nil, depth, false, fmt.Sprintf("its words are not all literal (%s)", a.text))
			return
		}
		texts[i] = a.text
	}
	if len(texts) > 0 {
		r.nested(strings.Join(texts, " "), full, depth)
	}
}

// trapArgs reads the line trap runs when a signal comes: its first
// operand, unless that resets the signal ("-") or names one (trap 2 INT).
func trapArgs(r *reader, prog string, full form, args []word, depth int) {
	n, _, _ := opts{flags: "lp"}.scan(args)
	if n >= len(args) || len(args)-n < 2 {
		return // lists, prints or resets: runs nothing
	}
	action := args[n]
	switch {
	case !action.lit:
		r.runs(prog, full, nil, depth, false, fmt.Sprintf("the line it runs, %s, is not a literal word", action.text))
	case action.text != "-" && strings.Trim(action.text, "0123456789") != "":
		r.nested(action.text, full, depth)
	}
}

// shellArgs reads the line a shell runs with -c. A shell that runs a
// script file or its input is the command as written: the file is not
// read.
func shellArgs(r *reader, prog string, full form, args []word, depth int) {
	hasC, i := false, 0
options:
	for ; i < len(args); i++ {
		t := args[i].text
		switch {
		case !args[i].lit:
			break options
		case t == "--" || t == "-":
			i++
			break options
		case strings.HasPrefix(t, "--"):
			if t == "--rcfile" || t == "--init-file" {
				i++
			}
		case len(t) < 2 || t[0] != '-' && t[0] != '+':
			break options
		default:
			hasC = hasC || t[0] == '-' && strings.IndexByte(t[1:], 'c') >= 0
			if strings.ContainsAny(t[1:], "oO") {
				i++ // -o option, -O shopt
			}
		}
	}
	if !hasC || i >= len(args) {
		return
	}
	if !args[i].lit {
		r.runs(prog, full, nil, depth, false, fmt.Sprintf("the line it runs, %s, is not a literal word", args[i].text))
		return
	}
	r.nested(args[i].text, full, depth)
}
