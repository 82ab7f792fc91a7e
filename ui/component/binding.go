package component

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/getorrery/orrery/internal/prose"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A Template is a parsed string prop: literal text and ${…} bindings. It only
// reads, compares and formats the data; it runs no code. docs/bindings.md
// gives the grammar:
//
//	template = *( text / "\${" / "${" expr "}" )
//	expr     = [ "!" ] operand [ cmp operand ] [ "|" format ]
//	operand  = pointer / string / number / "true" / "false" / "null"
//	cmp      = "==" / "!=" / "<" / "<=" / ">" / ">="
//	format   = "number" [":" digits] / "percent" [":" digits] / "duration"
//	         / "count:" noun [ "," plural ] / "json"
//
// A pointer is an RFC 6901 JSON Pointer into the data, such as /runs/0/name;
// it ends at white space or "|", so a comparison needs a space before its
// operator. The zero Template is the empty string.
type Template struct {
	parts []part
}

// part is literal text or one binding.
type part struct {
	lit  string
	expr *expr
}

// expr is one binding: ${[!]left [op right] [|format]}.
type expr struct {
	src    string // as written between ${ and }
	not    bool
	left   operand
	op     string // "" when there is no comparison
	right  operand
	format format
}

// operand is a pointer into the data or a literal value.
type operand struct {
	ptr     []string // reference tokens; nil for a literal
	isPtr   bool
	pointer string // the pointer as written
	lit     any    // string, json.Number, bool or nil
}

// format turns a value into text: "" for none.
type format struct {
	name     string // number, percent, duration, count, json
	places   int    // number and percent: decimals; -1 when not given
	singular string // count
	plural   string // count
}

// SyntaxError is a template that does not parse. Offset is the byte offset
// into the string where the problem is.
type SyntaxError struct {
	Offset int
	Reason string
}

// Error returns the problem and its fix as one sentence.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("at offset %d: %s", e.Offset, e.Reason)
}

// ParseTemplate parses a string prop. A string with no ${ is literal text;
// \${ writes a literal ${. It fails with a *SyntaxError naming the offset.
func ParseTemplate(s string) (*Template, error) {
	t := &Template{}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		switch {
		case s[i] == '\\' && strings.HasPrefix(s[i+1:], "${"):
			lit.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end, err := exprEnd(s, i+2)
			if err != nil {
				return nil, err
			}
			e, err := parseExpr(s[i+2:end], i+2)
			if err != nil {
				return nil, err
			}
			flush()
			t.parts = append(t.parts, part{expr: e})
			i = end + 1
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	flush()
	return t, nil
}

// exprEnd returns the index of the } that closes the binding whose
// expression starts at s[start], skipping } inside quoted strings.
func exprEnd(s string, start int) (int, error) {
	for i := start; i < len(s); i++ {
		switch s[i] {
		case '}':
			return i, nil
		case '"':
			j, ok := stringEnd(s, i)
			if !ok {
				return 0, &SyntaxError{Offset: i, Reason: `the string is not closed; end it with "`}
			}
			i = j
		}
	}
	return 0, &SyntaxError{Offset: start - 2, Reason: `the binding is not closed; end it with }, or write \${ for a literal ${`}
}

// stringEnd returns the index of the quote that closes the JSON string that
// starts at s[i].
func stringEnd(s string, i int) (int, bool) {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j, true
		}
	}
	return 0, false
}

// Typed reports whether the template is exactly one binding, so a prop
// holding it takes the binding's JSON value rather than text.
func (t *Template) Typed() bool {
	return len(t.parts) == 1 && t.parts[0].expr != nil
}

// Static returns the template's text and true when it has no binding.
func (t *Template) Static() (string, bool) {
	switch len(t.parts) {
	case 0:
		return "", true
	case 1:
		if t.parts[0].expr == nil {
			return t.parts[0].lit, true
		}
	}
	return "", false
}

// Render returns the template's text for the data, one JSON object or
// value: each binding is converted to text as docs/bindings.md says, and a
// missing value is the empty string. It fails only when data is not JSON.
func (t *Template) Render(data json.RawMessage) (string, error) {
	v, err := decode(data)
	if err != nil {
		return "", fmt.Errorf("render template: %w", err)
	}
	return t.render(v), nil
}

// Value returns what a prop holding the template gets: for a typed binding
// its JSON value, with ok false when the value is missing or null (the prop
// is then left out); otherwise the rendered text as a JSON string.
func (t *Template) Value(data json.RawMessage) (value json.RawMessage, ok bool, err error) {
	v, err := decode(data)
	if err != nil {
		return nil, false, fmt.Errorf("evaluate template: %w", err)
	}
	out, ok := t.value(v)
	if !ok {
		return nil, false, nil
	}
	b, err := marshal(out)
	if err != nil {
		return nil, false, fmt.Errorf("evaluate template: %w", err)
	}
	return b, true, nil
}

// render returns the template's text for decoded data.
func (t *Template) render(data any) string {
	if s, ok := t.Static(); ok {
		return s
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.expr == nil {
			b.WriteString(p.lit)
			continue
		}
		v, ok := p.expr.eval(data)
		if ok {
			b.WriteString(toText(v))
		}
	}
	return b.String()
}

// value returns a prop's value for decoded data, and false when a typed
// binding yields nothing.
func (t *Template) value(data any) (any, bool) {
	if t.Typed() {
		v, ok := t.parts[0].expr.eval(data)
		if !ok || v == nil {
			return nil, false
		}
		return v, true
	}
	return t.render(data), true
}

// pointerOf returns the data pointer of a typed binding that is a bare
// pointer, with no comparison or format, and whether it is one.
func (t *Template) pointerOf() (string, bool) {
	if !t.Typed() {
		return "", false
	}
	e := t.parts[0].expr
	if e.not || e.op != "" || e.format.name != "" || !e.left.isPtr {
		return "", false
	}
	return e.left.pointer, true
}

// eval returns the binding's value and whether there is one: a missing
// pointer with no comparison has none.
func (e *expr) eval(data any) (any, bool) {
	l, lok := e.left.eval(data)
	var v any
	switch {
	case e.not:
		v = !truthy(l, lok)
	case e.op != "":
		r, rok := e.right.eval(data)
		v = compare(e.op, l, lok, r, rok)
	default:
		if !lok {
			return nil, false
		}
		v = l
	}
	if e.format.name != "" {
		if v == nil {
			return nil, false
		}
		return e.format.apply(v), true
	}
	return v, true
}

func (o operand) eval(data any) (any, bool) {
	if !o.isPtr {
		return o.lit, true
	}
	return lookup(data, o.ptr)
}

// lookup returns the value at the reference tokens in data.
func lookup(data any, toks []string) (any, bool) {
	v := data
	for _, t := range toks {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[t]; !ok {
				return nil, false
			}
		case []any:
			i, ok := arrayIndex(t)
			if !ok || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// arrayIndex reads an RFC 6901 array index: 0 or digits without a leading
// zero.
func arrayIndex(t string) (int, bool) {
	if t == "" || len(t) > 9 || len(t) > 1 && t[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return 0, false
		}
		n = n*10 + int(t[i]-'0')
	}
	return n, true
}

// truthy is false for a missing value, null, false, 0, "", [] and {}.
func truthy(v any, ok bool) bool {
	if !ok {
		return false
	}
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case json.Number:
		f, _ := strconv.ParseFloat(string(x), 64)
		return f != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// compare applies a comparison. A missing value compares as null. == and
// != compare JSON values (numbers by value); the order operators compare two
// numbers or two strings and are false for anything else.
func compare(op string, l any, lok bool, r any, rok bool) bool {
	if !lok {
		l = nil
	}
	if !rok {
		r = nil
	}
	switch op {
	case "==":
		return equal(l, r)
	case "!=":
		return !equal(l, r)
	}
	var c int
	switch a := l.(type) {
	case json.Number:
		b, ok := r.(json.Number)
		if !ok {
			return false
		}
		x, y := number(a), number(b)
		switch {
		case x < y:
			c = -1
		case x > y:
			c = 1
		case x == y:
			c = 0
		default:
			return false // NaN never happens in JSON, but stay total
		}
	case string:
		b, ok := r.(string)
		if !ok {
			return false
		}
		c = strings.Compare(a, b)
	default:
		return false
	}
	switch op {
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	return false
}

// equal reports whether two decoded JSON values are equal, numbers by value.
func equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && (x == y || number(x) == number(y))
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// number reads a JSON number; one out of float64's range reads as ±Inf.
func number(n json.Number) float64 {
	f, _ := strconv.ParseFloat(string(n), 64)
	return f
}

// parseExpr parses the expression between ${ and }; off is its offset in
// the template, for errors.
func parseExpr(src string, off int) (*expr, error) {
	p := &exprParser{s: src, off: off}
	e := &expr{src: src}
	p.space()
	if p.done() {
		return nil, p.fail(0, "the binding is empty; write a JSON pointer such as ${/name}")
	}
	if p.peek() == '!' {
		e.not = true
		p.i++
		p.space()
	}
	var err error
	if e.left, err = p.operand(); err != nil {
		return nil, err
	}
	p.space()
	if op := p.cmp(); op != "" {
		if e.not {
			return nil, p.fail(p.i-len(op), "! applies to one value and cannot start a comparison; compare with == false instead")
		}
		e.op = op
		p.space()
		if e.right, err = p.operand(); err != nil {
			return nil, err
		}
		p.space()
	}
	if !p.done() && p.peek() == '|' {
		p.i++
		p.space()
		if e.format, err = p.format(); err != nil {
			return nil, err
		}
		p.space()
	}
	if !p.done() {
		return nil, p.fail(p.i, fmt.Sprintf("unexpected %q; a binding is one value, an optional comparison (== != < <= > >=) and an optional |format", p.rest()))
	}
	return e, nil
}

type exprParser struct {
	s   string
	i   int
	off int
}

func (p *exprParser) done() bool   { return p.i >= len(p.s) }
func (p *exprParser) peek() byte   { return p.s[p.i] }
func (p *exprParser) rest() string { return prose.Shorten(p.s[p.i:]) }

func (p *exprParser) fail(at int, reason string) error {
	return &SyntaxError{Offset: p.off + at, Reason: reason}
}

func (p *exprParser) space() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// word reads up to white space or |.
func (p *exprParser) word() string {
	start := p.i
	for !p.done() && !strings.ContainsRune(" \t\n\r|", rune(p.s[p.i])) {
		p.i++
	}
	return p.s[start:p.i]
}

const operandHelp = `a JSON pointer such as /name, a "string", a number, true, false or null`

func (p *exprParser) operand() (operand, error) {
	if p.done() {
		return operand{}, p.fail(p.i, "a value is missing; write "+operandHelp)
	}
	start := p.i
	switch c := p.peek(); {
	case c == '/':
		w := p.word()
		toks, err := splitPointer(w)
		if err != nil {
			return operand{}, p.fail(start, err.Error())
		}
		return operand{isPtr: true, ptr: toks, pointer: w}, nil
	case c == '"':
		end, ok := stringEnd(p.s, p.i)
		if !ok {
			return operand{}, p.fail(start, `the string is not closed; end it with "`)
		}
		var s string
		if err := json.Unmarshal([]byte(p.s[start:end+1]), &s); err != nil {
			return operand{}, p.fail(start, "the string is not a JSON string; escape quotes and backslashes with a backslash")
		}
		p.i = end + 1
		return operand{lit: s}, nil
	case c == '-' || c >= '0' && c <= '9':
		w := p.word()
		if !isJSONNumber(w) {
			return operand{}, p.fail(start, fmt.Sprintf("%q is not a JSON number; write numbers such as 3, -1.5 or 2e3", prose.Shorten(w)))
		}
		return operand{lit: json.Number(w)}, nil
	}
	w := p.word()
	switch {
	case strings.HasPrefix(w, "true"):
		p.i = start + 4
		return operand{lit: true}, nil
	case strings.HasPrefix(w, "false"):
		p.i = start + 5
		return operand{lit: false}, nil
	case strings.HasPrefix(w, "null"):
		p.i = start + 4
		return operand{lit: nil}, nil
	}
	if w == "" {
		w = p.s[start:min(start+1, len(p.s))]
	}
	return operand{}, p.fail(start, fmt.Sprintf("%q is not a value; write %s (a pointer starts with /)", prose.Shorten(w), operandHelp))
}

func (p *exprParser) cmp() string {
	for _, op := range []string{"==", "!=", "<=", ">=", "<", ">"} {
		if strings.HasPrefix(p.s[p.i:], op) {
			p.i += len(op)
			return op
		}
	}
	return ""
}

// formatHelp lists the formats for a refusal.
const formatHelp = "the formats are number, number:<decimals>, percent, percent:<decimals>, duration, count:<noun>[,<plural>] and json"

// maxPlaces is the most decimals number and percent write.
const maxPlaces = 6

func (p *exprParser) format() (format, error) {
	start := p.i
	w := p.word()
	name, arg, hasArg := strings.Cut(w, ":")
	f := format{name: name, places: -1}
	switch name {
	case "number", "percent":
		if !hasArg {
			return f, nil
		}
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 || n > maxPlaces || arg != strconv.Itoa(n) {
			return f, p.fail(start, fmt.Sprintf("%s takes a number of decimals from 0 to %d, such as %s:1", name, maxPlaces, name))
		}
		f.places = n
		return f, nil
	case "count":
		one, many, _ := strings.Cut(arg, ",")
		if !hasArg || !isNoun(one) || many != "" && !isNoun(many) || strings.HasSuffix(arg, ",") {
			return f, p.fail(start, "count takes a noun and optionally its plural, such as count:run or count:child,children (letters, - and ' only)")
		}
		f.singular, f.plural = one, many
		if many == "" {
			f.plural = pluralOf(one)
		}
		return f, nil
	case "duration", "json":
		if hasArg {
			return f, p.fail(start, fmt.Sprintf("%s takes no argument; write |%s", name, name))
		}
		return f, nil
	}
	if w == "" {
		return f, p.fail(start, "the format is missing after |; "+formatHelp)
	}
	return f, p.fail(start, fmt.Sprintf("unknown format %q; %s", prose.Shorten(w), formatHelp))
}

func isNoun(s string) bool {
	if s == "" || utf8.RuneCountInString(s) > 32 {
		return false
	}
	for _, r := range s {
		if !unicode.IsLetter(r) && r != '-' && r != '\'' {
			return false
		}
	}
	return true
}

// pluralOf is the English plural count uses when none is given: -es after
// s, x, z, ch and sh; -ies for a consonant then y; -s otherwise.
func pluralOf(noun string) string {
	lower := strings.ToLower(noun)
	switch {
	case strings.HasSuffix(lower, "s"), strings.HasSuffix(lower, "x"), strings.HasSuffix(lower, "z"),
		strings.HasSuffix(lower, "ch"), strings.HasSuffix(lower, "sh"):
		return noun + "es"
	case len(lower) >= 2 && lower[len(lower)-1] == 'y' && !strings.ContainsRune("aeiou", rune(lower[len(lower)-2])):
		return noun[:len(noun)-1] + "ies"
	}
	return noun + "s"
}

// splitPointer splits an RFC 6901 JSON Pointer into unescaped tokens.
func splitPointer(p string) ([]string, error) {
	if p == "" {
		return []string{}, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("%q is not a JSON pointer; a pointer starts with /, such as /runs/0/name", prose.Shorten(p))
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		if !strings.Contains(t, "~") {
			continue
		}
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 >= len(t) || t[j+1] != '0' && t[j+1] != '1') {
				return nil, fmt.Errorf("the pointer %q has a ~ that is not ~0 or ~1; write ~0 for ~ and ~1 for /", prose.Shorten(p))
			}
		}
		t = strings.ReplaceAll(t, "~1", "/")
		toks[i] = strings.ReplaceAll(t, "~0", "~")
	}
	return toks, nil
}

// escapeToken escapes one reference token for a JSON Pointer.
func escapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// isJSONNumber reports whether s is a number in JSON's grammar.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i == len(s)
}

// decode reads JSON keeping numbers as json.Number.
func decode(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data[d.InputOffset():])) > 0 {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

// marshal writes a decoded value as compact JSON without HTML escaping;
// object keys are sorted, so the bytes depend only on the value.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
