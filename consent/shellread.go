package consent

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// maxNesting bounds how deep the lines of sh -c and eval are read inside
// one another; a deeper one is asked about.
const maxNesting = 4

// form is one way a part of a shell line reads. Its text has quoting read
// and each expansion as written ("git log $REF"); allow and ask rules match
// it. Its shape has each expansion as any text at all; deny rules meet it
// (see globMeets).
type form struct {
	text  string
	shape []seg
}

func literal(s string) form { return form{text: s, shape: []seg{{lit: s}}} }

// part is one thing a shell line does, judged on its own: a command, an
// assignment to a variable that changes what runs, a redirection to or from
// a file, or the whole line when it cannot be read.
type part struct {
	form
	// also are other forms deny rules are checked on: those of the
	// wrappers the command runs through (env, nohup, …), outermost first,
	// and the command under its base name when it names a path (/bin/rm).
	also []form
	// unread, when set, is why no rule with a subject can allow the part,
	// as a person reads it; rule is then ShellUnreadable or ShellRedirect.
	unread string
	rule   string
	// note adds to the sentence of a part that no rule matched.
	note string
	// denyOnly marks a part of a best-effort reading of a line that does
	// not parse: it can deny the line, but the line itself is what is asked
	// about.
	denyOnly bool
	// whole marks the part that is a whole line that does not parse; a
	// deny names a part found in it rather than the line, when there is one.
	whole bool
}

// redirect is a redirection to or from a file, judged once the whole line
// is read (a cd anywhere in it changes what a relative target names).
type redirect struct {
	text     string // as written, such as "2>>log.txt"
	target   word
	write    bool
	denyOnly bool
}

// reader reads a shell line into its parts.
type reader struct {
	ws     Resolver
	pr     *syntax.Printer
	parts  []part
	redirs []redirect
	// posix is set while the POSIX reading of a line is walked.
	posix bool
	// denyOnly is set while a best-effort reading is walked.
	denyOnly bool
	// changesDir is set once a part runs cd, pushd or popd.
	changesDir bool
}

// readLine returns the parts of line, in the order they appear, each once.
// A blank line is one part asked about: the caller does not know the
// command (an agent's permission request without one).
func readLine(line string, ws Resolver) []part {
	if strings.TrimSpace(line) == "" {
		return []part{{form: literal(line), rule: ShellUnreadable, whole: true,
			unread: "the call names no command line, so no rule can allow it"}}
	}
	r := &reader{ws: ws, pr: syntax.NewPrinter()}
	r.line(line, 0)
	r.judgeRedirects()
	return dedupe(r.parts)
}

func (r *reader) add(p part) {
	p.denyOnly = p.denyOnly || r.denyOnly
	r.parts = append(r.parts, p)
}

// line reads src as bash and as POSIX sh: /bin/sh is dash on Debian and
// bash on macOS, and the two can read one line as different commands
// (`echo $'\' ; touch x ; #'` runs touch in dash only). Every command either
// reading finds is a part. A line either cannot parse is itself a part,
// asked about, put before the parts found in it.
func (r *reader) line(src string, depth int) {
	mark := len(r.parts)
	var failed []string
	for _, lang := range []syntax.LangVariant{syntax.LangBash, syntax.LangPOSIX} {
		f, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(src), "")
		if err != nil {
			failed = append(failed, fmt.Sprintf("as %s (%v)", dialect(lang), err))
			r.bestEffort(src, lang, depth)
			continue
		}
		r.file(f, lang == syntax.LangPOSIX, depth)
	}
	if len(failed) == 0 {
		return
	}
	line := part{form: literal(strings.TrimSpace(src)), rule: ShellUnreadable, denyOnly: r.denyOnly, whole: true,
		unread: fmt.Sprintf("the line %s cannot be read %s, so no rule can allow it", quoteShort(src), strings.Join(failed, " nor "))}
	r.parts = slices.Insert(r.parts, mark, line)
}

func dialect(lang syntax.LangVariant) string {
	if lang == syntax.LangPOSIX {
		return "POSIX sh"
	}
	return "bash"
}

// bestEffort walks what the parser recovers of a line lang cannot parse,
// for deny rules only: a denied command in a broken line still denies it.
func (r *reader) bestEffort(src string, lang syntax.LangVariant, depth int) {
	f, _ := syntax.NewParser(syntax.Variant(lang), syntax.RecoverErrors(8)).Parse(strings.NewReader(src), "")
	if f == nil {
		return
	}
	was := r.denyOnly
	r.denyOnly = true
	defer func() { r.denyOnly = was }()
	r.file(f, lang == syntax.LangPOSIX, depth)
}

// file walks every node of f: each simple command, declaration and
// redirection, wherever it sits, is read; Walk reaches those inside
// substitutions, expansions, bodies and clauses.
func (r *reader) file(f *syntax.File, posix bool, depth int) {
	was := r.posix
	r.posix = posix
	defer func() { r.posix = was }()
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			r.call(n, depth)
		case *syntax.DeclClause:
			r.decl(n, depth)
		case *syntax.Redirect:
			r.redirect(n)
		}
		return true
	})
}

func (r *reader) call(ce *syntax.CallExpr, depth int) {
	for _, a := range ce.Assigns {
		if a.Name != nil && changesWhatRuns(a.Name.Value) {
			r.add(assignPart(r.assignWord(a)))
		}
	}
	if len(ce.Args) == 0 {
		return
	}
	if r.posix && ce.Args[0].Lit() == "[[" {
		// bash's [[ … ]] test; dash looks for a program named "[[" and
		// finds none. What is inside it is walked all the same.
		return
	}
	words := make([]word, len(ce.Args))
	for i, w := range ce.Args {
		words[i] = r.word(w)
	}
	r.command(words, nil, depth, false)
}

// decl reads bash's declare, export, local, readonly and typeset, which the
// parser keeps apart from simple commands, as the command it is.
func (r *reader) decl(d *syntax.DeclClause, depth int) {
	if d.Variant == nil {
		return
	}
	words := []word{bare(d.Variant.Value)}
	for _, a := range d.Args {
		switch {
		case a.Naked && a.Name == nil && a.Value != nil:
			words = append(words, r.word(a.Value))
		case a.Naked && a.Name != nil:
			words = append(words, bare(a.Name.Value))
		case a.Name != nil:
			words = append(words, r.assignWord(a))
		}
	}
	r.command(words, nil, depth, false)
}

func assignPart(w word) part {
	name, _, _ := strings.Cut(w.head, "=")
	name = strings.TrimSuffix(name, "+")
	return part{form: form{text: w.text, shape: w.shape},
		note: fmt.Sprintf("it sets %s, which changes what the line runs", name)}
}

// command reads one command's words: it sees through the wrappers that only
// run their command, judges the command, and reads what a runner runs.
// more says the command gets more arguments when it runs (xargs).
func (r *reader) command(words []word, wrapped []form, depth int, more bool) {
	for {
		name := words[0]
		if name.glob {
			// /bin/r? may be /bin/rm: the name is any text to deny rules.
			words = slices.Clone(words)
			words[0].shape = []seg{{star: true}}
		}
		full := formOf(words, more)
		if !name.lit || name.glob {
			r.add(part{form: full, also: wrapped, rule: ShellUnreadable,
				unread: fmt.Sprintf("the part %q runs a command whose name %s is not a literal word, so no rule can allow it", full.text, name.text)})
			return
		}
		if strings.ContainsAny(name.text, " \t\n") {
			// "git\ status" runs a program named "git status": its text
			// reads as words it does not have.
			r.add(part{form: full, also: wrapped, rule: ShellUnreadable,
				unread: fmt.Sprintf("the part %q runs a command whose name %q holds white space, so no rule can allow it", full.text, name.text)})
			return
		}
		prog := name.text
		if base := path.Base(prog); base != prog {
			named := slices.Clone(words)
			named[0] = bare(base)
			wrapped = append(wrapped, formOf(named, more))
		}
		if wrap, ok := seeThrough[systemName(prog)]; ok {
			cmd, assigns, problem := wrap(words[1:])
			for _, a := range assigns {
				if n, _, _ := strings.Cut(a.head, "="); changesWhatRuns(n) {
					r.add(assignPart(a))
				}
			}
			if problem != "" {
				r.add(part{form: full, also: wrapped, rule: ShellUnreadable,
					unread: fmt.Sprintf("the part %q runs a command through %s, but %s, so no rule can allow it", full.text, prog, problem)})
				return
			}
			if 1+cmd < len(words) {
				wrapped = append(wrapped, full)
				words = words[1+cmd:]
				continue
			}
			// The wrapper runs nothing (env alone, command -v): it is the
			// command.
		}
		base := path.Base(prog)
		switch base {
		case "cd", "pushd", "popd":
			r.changesDir = true
		case "export", "readonly", "declare", "typeset", "local":
			for _, w := range words[1:] {
				if n, _, ok := strings.Cut(w.head, "="); ok && changesWhatRuns(strings.TrimSuffix(n, "+")) {
					r.add(assignPart(w))
				}
			}
		}
		r.add(part{form: full, also: wrapped})
		if run := runner(base); run != nil {
			run(r, prog, full, words[1:], depth)
		}
		return
	}
}

// systemName is prog's name when prog names a program by name or in a
// system directory, and "" for any other path: ./env is not env.
func systemName(prog string) string {
	dir, base := path.Split(prog)
	switch path.Clean(dir) {
	case ".":
		if dir == "" {
			return base
		}
	case "/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin":
		return base
	}
	return ""
}

// changesWhatRuns reports whether assigning name changes which program a
// command runs or runs code of its own: the search path, the dynamic
// loader's variables, and the shell's startup and tracing hooks. A
// program's own variables (GIT_PAGER, NODE_OPTIONS) are arguments in all
// but name, as Rules on arguments are.
func changesWhatRuns(name string) bool {
	switch name {
	case "PATH", "IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND":
		return true
	}
	return strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "DYLD_") || strings.HasPrefix(name, "BASH_FUNC_")
}

// nested reads a line a command runs as shell code (sh -c, eval).
func (r *reader) nested(src string, full form, depth int) {
	if depth >= maxNesting {
		r.add(part{form: full, rule: ShellUnreadable,
			unread: fmt.Sprintf("the part %q nests shell lines more than %d deep, so no rule can allow it", full.text, maxNesting)})
		return
	}
	r.line(src, depth+1)
}

func (r *reader) redirect(rd *syntax.Redirect) {
	if rd.Word == nil || len(rd.Word.Parts) == 0 {
		return
	}
	switch rd.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return // no file; the body's substitutions are walked
	}
	t := r.word(rd.Word)
	if (rd.Op == syntax.DplIn || rd.Op == syntax.DplOut) && t.lit && isFD(t.text) {
		return // 2>&1, >&2, <&3-
	}
	text := rd.Op.String() + t.text
	if rd.N != nil {
		text = rd.N.Value + text
	}
	write := rd.Op != syntax.RdrIn && rd.Op != syntax.DplIn
	r.redirs = append(r.redirs, redirect{text: text, target: t, write: write, denyOnly: r.denyOnly})
}

func isFD(s string) bool {
	s = strings.TrimSuffix(s, "-")
	return s == "" || strings.Trim(s, "0123456789") == ""
}

// The devices a redirection may name without leaving the workspace.
var (
	writeDevices = []string{"/dev/null", "/dev/stdout", "/dev/stderr"}
	readDevices  = []string{"/dev/null", "/dev/stdin", "/dev/zero", "/dev/random", "/dev/urandom"}
)

// judgeRedirects turns every redirection that may reach a file outside
// the workspace into a part.
func (r *reader) judgeRedirects() {
	for _, rd := range r.redirs {
		if why := r.redirectProblem(rd); why != "" {
			r.parts = append(r.parts, part{form: literal(rd.text), unread: why, rule: ShellRedirect, denyOnly: rd.denyOnly})
		}
	}
}

func (r *reader) redirectProblem(rd redirect) string {
	t, dir, devices := rd.target, "to", writeDevices
	if !rd.write {
		dir, devices = "from", readDevices
	}
	switch {
	case !t.lit || t.glob:
		return fmt.Sprintf("the redirection %s %s names its file by an expansion or a pattern, which may lead outside the workspace", dir, t.text)
	case t.tilde:
		return fmt.Sprintf("the redirection %s %s leaves the workspace (~ is a home directory)", dir, t.text)
	case slices.Contains(devices, t.text):
		return ""
	case r.ws == nil:
		return fmt.Sprintf("the redirection %s %s cannot be checked: no workspace is known", dir, t.text)
	case r.changesDir && !filepath.IsAbs(t.text):
		return fmt.Sprintf("the line changes directory, so the redirection %s %s may leave the workspace", dir, t.text)
	}
	if _, err := r.ws.Resolve(t.text); err != nil {
		return fmt.Sprintf("the redirection %s %s leaves the workspace", dir, t.text)
	}
	return ""
}

// dedupe drops every part equal to an earlier one, such as a command both
// readings of a line find.
func dedupe(parts []part) []part {
	seen := make(map[string]bool, len(parts))
	out := parts[:0]
	for _, p := range parts {
		var key strings.Builder
		fmt.Fprintf(&key, "%q %v %q %q %q %v", p.text, p.shape, p.unread, p.rule, p.note, p.denyOnly)
		for _, w := range p.also {
			fmt.Fprintf(&key, " %q %v", w.text, w.shape)
		}
		if k := key.String(); !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	return out
}

// quoteShort quotes s for a sentence, cut to about 120 bytes.
func quoteShort(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= 120 {
		return fmt.Sprintf("%q", s)
	}
	cut := 120
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", s[:cut])
}

// word is one word of a command as the shell passes it on.
type word struct {
	// text has quoting read and each expansion as written; shape has each
	// expansion as any text.
	text  string
	shape []seg
	// head is the literal text before the first expansion.
	head string
	// lit says the word has no expansion: text is what the shell passes.
	lit bool
	// glob says the word has an unquoted pattern (*, ?, […], {a,b}, an
	// extended glob): the shell may turn it into other words.
	glob bool
	// split says the word has an unquoted expansion, which the shell may
	// split into several words.
	split bool
	// tilde says the word starts with an unquoted ~.
	tilde bool
}

// bare is a word the parser gave as a name, with nothing to read.
func bare(s string) word { return word{text: s, shape: []seg{{lit: s}}, head: s, lit: true} }

func (r *reader) word(w *syntax.Word) word {
	var b wordBuilder
	for i, p := range w.Parts {
		r.piece(&b, p, false, i == 0)
	}
	out := b.word()
	if hasBraces(w) {
		out.glob = true
		out.shape = []seg{{star: true}}
	}
	return out
}

// assignWord is NAME=value (or NAME+=value, NAME[i]=value) as one word.
func (r *reader) assignWord(a *syntax.Assign) word {
	var b wordBuilder
	if a.Name != nil {
		b.lit(a.Name.Value)
	}
	if a.Index != nil {
		b.lit("[" + r.source(a.Index) + "]")
	}
	if a.Append {
		b.lit("+")
	}
	b.lit("=")
	switch {
	case a.Array != nil:
		b.expansion(r.source(a.Array), true)
	case a.Value != nil:
		for _, p := range a.Value.Parts {
			r.piece(&b, p, true, false) // an assigned value is not split
		}
	}
	return b.word()
}

// piece adds one word part; quoted says it is inside double quotes.
func (r *reader) piece(b *wordBuilder, p syntax.WordPart, quoted, first bool) {
	switch p := p.(type) {
	case *syntax.Lit:
		if quoted {
			b.lit(unescapeDouble(p.Value))
			return
		}
		if first && strings.HasPrefix(p.Value, "~") {
			b.tilde = true
		}
		v, glob := unescapeBare(p.Value)
		b.glob = b.glob || glob
		b.lit(v)
	case *syntax.SglQuoted:
		if p.Dollar {
			b.lit(ansiC(p.Value))
		} else {
			b.lit(p.Value)
		}
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			r.piece(b, q, true, false)
		}
	case *syntax.ExtGlob:
		b.glob = true
		if p.Pattern != nil {
			b.lit(p.Op.String() + p.Pattern.Value + ")")
		}
	default: // a parameter, command, arithmetic or process substitution
		b.expansion(r.source(p), quoted)
	}
}

// source is node as written, for a sentence.
func (r *reader) source(node syntax.Node) string {
	var sb strings.Builder
	if err := r.pr.Print(&sb, node); err != nil {
		return "…"
	}
	return sb.String()
}

type wordBuilder struct {
	text, head         strings.Builder
	shape              []seg
	expanded           bool
	glob, split, tilde bool
}

func (b *wordBuilder) lit(s string) {
	if s == "" {
		return
	}
	b.text.WriteString(s)
	b.shape = appendLit(b.shape, s)
	if !b.expanded {
		b.head.WriteString(s)
	}
}

func (b *wordBuilder) expansion(src string, quoted bool) {
	b.text.WriteString(src)
	b.shape = append(b.shape, seg{star: true})
	b.expanded = true
	b.split = b.split || !quoted
}

func (b *wordBuilder) word() word {
	shape := b.shape
	if len(shape) == 0 {
		shape = []seg{{lit: ""}}
	}
	return word{text: b.text.String(), shape: shape, head: b.head.String(),
		lit: !b.expanded, glob: b.glob, split: b.split, tilde: b.tilde}
}

func appendLit(shape []seg, s string) []seg {
	if n := len(shape); n > 0 && !shape[n-1].star {
		shape[n-1].lit += s
		return shape
	}
	return append(shape, seg{lit: s})
}

// formOf is the form of a command: its words joined by single spaces.
func formOf(words []word, more bool) form {
	var f form
	var sb strings.Builder
	for i, w := range words {
		if i > 0 {
			sb.WriteByte(' ')
			f.shape = appendLit(f.shape, " ")
		}
		sb.WriteString(w.text)
		for _, g := range w.shape {
			if g.star {
				f.shape = append(f.shape, g)
			} else {
				f.shape = appendLit(f.shape, g.lit)
			}
		}
	}
	if more {
		f.shape = append(f.shape, seg{star: true})
	}
	f.text = sb.String()
	return f
}

// hasBraces reports whether bash would brace-expand w ({a,b}, {1..3}).
func hasBraces(w *syntax.Word) bool {
	c := &syntax.Word{Parts: slices.Clone(w.Parts)}
	if !syntax.SplitBraces(c) {
		return false
	}
	found := false
	syntax.Walk(c, func(n syntax.Node) bool {
		_, ok := n.(*syntax.BraceExp)
		found = found || ok
		return !found
	})
	return found
}

// unescapeBare reads the backslashes of an unquoted literal and reports
// whether it holds an unquoted pattern character.
func unescapeBare(v string) (string, bool) {
	if !strings.ContainsAny(v, `\*?[`) {
		return v, false
	}
	var sb strings.Builder
	glob := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\' && i+1 < len(v):
			i++
			if v[i] != '\n' {
				sb.WriteByte(v[i])
			}
			continue
		case c == '*' || c == '?':
			glob = true
		case c == '[' && strings.IndexByte(v[i+1:], ']') >= 0:
			glob = true
		}
		sb.WriteByte(c)
	}
	return sb.String(), glob
}

// unescapeDouble reads the backslashes of a literal inside double quotes,
// where only $, `, ", \ and a newline are escaped.
func unescapeDouble(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var sb strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			switch v[i+1] {
			case '$', '`', '"', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		sb.WriteByte(v[i])
	}
	return sb.String()
}

// ansiC reads the escapes of bash's $'…', which ends at a NUL as bash's
// does.
func ansiC(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var sb strings.Builder
	digits := func(i, max int, hex bool) (int, int) {
		n, j := 0, i
		for ; j < len(v) && j < i+max; j++ {
			d, ok := digit(v[j], hex)
			if !ok {
				break
			}
			base := 8
			if hex {
				base = 16
			}
			n = n*base + d
		}
		return n, j - i
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' || i+1 == len(v) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch c = v[i]; c {
		case 'a':
			sb.WriteByte('\a')
		case 'b':
			sb.WriteByte('\b')
		case 'e', 'E':
			sb.WriteByte(0x1b)
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'v':
			sb.WriteByte('\v')
		case '\\', '\'', '"', '?':
			sb.WriteByte(c)
		case 'c':
			if i+1 < len(v) {
				i++
				sb.WriteByte(v[i] & 0x1f)
			} else {
				sb.WriteString(`\c`)
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n, k := digits(i, 3, false)
			sb.WriteByte(byte(n))
			i += k - 1
		case 'x', 'u', 'U':
			max := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			n, k := digits(i+1, max, true)
			switch {
			case k == 0:
				sb.WriteByte('\\')
				sb.WriteByte(c)
			case c == 'x':
				sb.WriteByte(byte(n))
			default:
				sb.WriteRune(rune(n))
			}
			i += k
		default:
			sb.WriteByte('\\')
			sb.WriteByte(c)
		}
	}
	s, _, _ := strings.Cut(sb.String(), "\x00")
	return s
}

func digit(c byte, hex bool) (int, bool) {
	switch {
	case c >= '0' && c <= '7':
		return int(c - '0'), true
	case c >= '8' && c <= '9':
		return int(c - '0'), hex
	case hex && c >= 'a' && c <= 'f':
		return int(c-'a') + 10, true
	case hex && c >= 'A' && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}
