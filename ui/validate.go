package ui

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/getorrery/orrery/internal/prose"
	"io"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Limits on what a surface may hold.
const (
	// MaxRasterWidth is the most cells in a raster's row.
	MaxRasterWidth = 64
	// MaxRasterHeight is the most rows in a raster.
	MaxRasterHeight = 32
	// MaxImageBytes is the most bytes an image may have once decoded: 5 MB.
	MaxImageBytes = 5_000_000
	// MaxStackDepth is how deep stacks may nest: a stack inside
	// MaxStackDepth-1 stacks is the deepest allowed.
	MaxStackDepth = 8
	// MaxTreeDepth is how many levels a tree may have.
	MaxTreeDepth = 32
)

// Validate checks a surface, {"kind": {"t": "<kind>", …}}, against its kind's
// JSON Schema, the limits (a raster of at most 64 × 32 cells, an image of at
// most 5 MB with a non-empty alt, stacks 8 deep, trees 32 deep) and the
// consistency the schema cannot state (one cell per column, one value per
// label …), checking a stack's children the same way. A refusal is an
// *Error that names the JSON path that failed and the fix, such as
// "surface /kind/rows/2/1: expected string, got number; …". An unknown kind
// is refused listing the kinds.
func Validate(surface json.RawMessage) error {
	_, err := check(surface, "surface", false)
	return err
}

// ValidateFallback checks a fallback surface like Validate, and also
// refuses any kind outside CoreKinds (text, markdown, table, tree, diff,
// progress, stream, task, question, form and stack), here or inside a stack,
// naming the kind. Its refusals start with "fallback" instead of "surface".
func ValidateFallback(surface json.RawMessage) error {
	_, err := check(surface, "fallback", true)
	return err
}

// check validates a surface and returns it decoded.
func check(raw json.RawMessage, root string, coreOnly bool) (*surfaceNode, error) {
	set, err := loadSchemas()
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Root: root, Reason: `it is empty; send one JSON object such as {"kind": {"t": "text", "value": "…"}}`}
		}
		return nil, &Error{Root: root, Reason: fmt.Sprintf(`it is not JSON (%v); send one JSON object such as {"kind": {"t": "text", "value": "…"}}`, err)}
	}
	w := &prewalk{root: root, coreOnly: coreOnly}
	if err := w.numbers(doc, ""); err != nil {
		return nil, err
	}
	if err := w.surface(doc, "", 0); err != nil {
		return nil, err
	}
	// The prewalk found a known t, so the kind object goes straight to its
	// kind's schema; a stack's children go through surface.json.
	kobj := doc.(map[string]any)["kind"]
	t := kobj.(map[string]any)["t"].(string)
	if err := set.kinds[t].Validate(kobj); err != nil {
		var verr *jsonschema.ValidationError
		if !errors.As(err, &verr) {
			return nil, &Error{Root: root, Reason: err.Error()}
		}
		path, reason := set.explain(verr, kobj)
		return nil, &Error{Root: root, Path: "/kind" + path, Reason: reason}
	}
	n, path, err := decodeSurface(raw, "")
	if err != nil {
		return nil, &Error{Root: root, Path: path, Reason: fmt.Sprintf("cannot be read (%v); send it as docs/surfaces.md describes", err)}
	}
	if path, reason := n.check(); reason != "" {
		return nil, &Error{Root: root, Path: path, Reason: reason}
	}
	return n, nil
}

// prewalk checks, before the schema, what the schema cannot say well: the
// surface wrapper, known and core kinds, limits, nesting and number range.
type prewalk struct {
	root     string
	coreOnly bool
}

func (w *prewalk) fail(path, reason string, sentinel error) error {
	return &Error{Root: w.root, Path: path, Reason: reason, sentinel: sentinel}
}

// surface checks one surface at path, inside depth stacks.
func (w *prewalk) surface(v any, path string, depth int) error {
	const shape = `a surface is {"kind": {"t": "<kind>", …}}`
	obj, ok := v.(map[string]any)
	if !ok {
		return w.fail(path, fmt.Sprintf("expected object, got %s; %s", prose.JSONType(v), shape), nil)
	}
	for _, k := range sortedKeys(obj) {
		if k != "kind" {
			return w.fail(at(path, k), "unknown field; "+shape+" and nothing else", nil)
		}
	}
	kv, ok := obj["kind"]
	if !ok {
		return w.fail(at(path, "kind"), "required field is missing; "+shape, nil)
	}
	kobj, ok := kv.(map[string]any)
	if !ok {
		return w.fail(at(path, "kind"), fmt.Sprintf("expected object, got %s; %s", prose.JSONType(kv), shape), nil)
	}
	kpath := at(path, "kind")
	tv, ok := kobj["t"]
	if !ok {
		return w.fail(at(kpath, "t"), "required field is missing; t names the kind: "+kindList(kinds, "or"), nil)
	}
	t, ok := tv.(string)
	if !ok {
		return w.fail(at(kpath, "t"), fmt.Sprintf("expected string, got %s; t names the kind: %s", prose.JSONType(tv), kindList(kinds, "or")), nil)
	}
	if !IsKind(t) {
		return w.fail(at(kpath, "t"), fmt.Sprintf("unknown kind %s; the kinds are %s", prose.Quote(t), kindList(kinds, "and")), ErrUnknownKind)
	}
	if w.coreOnly && !IsCore(t) {
		return w.fail(at(kpath, "t"), fmt.Sprintf("%s is not a core kind, and a fallback may use core kinds only: %s", t, kindList(coreKinds, "or")), ErrNotCore)
	}
	switch t {
	case KindStack:
		if depth+1 > MaxStackDepth {
			return w.fail(kpath, fmt.Sprintf("stacks nest at most %d deep and this one is %d deep; flatten the inner stacks", MaxStackDepth, depth+1), ErrLimit)
		}
		children, _ := kobj["children"].([]any)
		for i, c := range children {
			if err := w.surface(c, at(kpath, "children", i), depth+1); err != nil {
				return err
			}
		}
	case KindTree:
		nodes, _ := kobj["nodes"].([]any)
		if p := treeTooDeep(nodes, at(kpath, "nodes"), 1); p != "" {
			return w.fail(p, fmt.Sprintf("a tree is at most %d levels deep; flatten its deepest levels", MaxTreeDepth), ErrLimit)
		}
	case KindRaster:
		return w.raster(kobj, kpath)
	case KindImage:
		return w.image(kobj, kpath)
	}
	return nil
}

// treeTooDeep returns the path of the first node deeper than MaxTreeDepth.
func treeTooDeep(nodes []any, path string, level int) string {
	for i, n := range nodes {
		obj, ok := n.(map[string]any)
		if !ok {
			continue
		}
		if level > MaxTreeDepth {
			return at(path, i)
		}
		children, _ := obj["children"].([]any)
		if p := treeTooDeep(children, at(path, i, "children"), level+1); p != "" {
			return p
		}
	}
	return ""
}

func (w *prewalk) raster(kobj map[string]any, kpath string) error {
	rows, _ := kobj["rows"].([]any)
	if len(rows) > MaxRasterHeight {
		return w.fail(at(kpath, "rows"), fmt.Sprintf("a raster is at most %d × %d cells and this one has %d rows; scale it down to %d rows or fewer",
			MaxRasterWidth, MaxRasterHeight, len(rows), MaxRasterHeight), ErrLimit)
	}
	for i, r := range rows {
		s, ok := r.(string)
		if !ok {
			continue
		}
		if n := utf8.RuneCountInString(s); n > MaxRasterWidth {
			return w.fail(at(kpath, "rows", i), fmt.Sprintf("a raster is at most %d × %d cells and this row has %d cells; scale it down to %d cells a row or fewer",
				MaxRasterWidth, MaxRasterHeight, n, MaxRasterWidth), ErrLimit)
		}
	}
	return nil
}

func (w *prewalk) image(kobj map[string]any, kpath string) error {
	alt, isString := kobj["alt"].(string)
	if _, present := kobj["alt"]; !present || isString && strings.TrimSpace(alt) == "" {
		return w.fail(at(kpath, "alt"), "an image needs a non-empty alt; describe the image in words, which is what shows where it cannot be drawn", nil)
	}
	data, ok := kobj["data"].(string)
	if !ok {
		return nil
	}
	if n := base64.StdEncoding.DecodedLen(len(data)) - strings.Count(data[max(0, len(data)-2):], "="); n > MaxImageBytes {
		return w.fail(at(kpath, "data"), fmt.Sprintf("the image is %s bytes once decoded, over the limit of 5 MB (%s bytes); send a smaller image",
			prose.Group(n), prose.Group(MaxImageBytes)), ErrLimit)
	}
	return nil
}

// numbers refuses a number no float64 holds, anywhere in v.
func (w *prewalk) numbers(v any, path string) error {
	switch x := v.(type) {
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return w.fail(path, fmt.Sprintf("the number %s is out of range; send a number a float64 holds (at most about 1.8e308 in size)", prose.Shorten(string(x))), nil)
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if err := w.numbers(x[k], at(path, k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := w.numbers(e, at(path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// explain turns a schema failure into one path and one reason: the deepest
// failing value, and among equals the most basic problem (a wrong type before
// a missing field before a value outside an enum …), so the same surface
// always gets the same refusal.
func (s *schemaSet) explain(verr *jsonschema.ValidationError, doc any) (string, string) {
	type cand struct {
		path, reason string
		depth, rank  int
	}
	var best *cand
	var visit func(e *jsonschema.ValidationError)
	visit = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				visit(c)
			}
			return
		}
		path, reason, rank := s.leaf(e, doc)
		c := &cand{path: path, reason: reason, depth: len(splitPointer(path)), rank: rank}
		if best == nil || c.depth > best.depth ||
			c.depth == best.depth && (c.rank < best.rank ||
				c.rank == best.rank && (c.path < best.path || c.path == best.path && c.reason < best.reason)) {
			best = c
		}
	}
	visit(verr)
	if best == nil {
		return "", "does not match its schema; send it as docs/surfaces.md describes"
	}
	return best.path, best.reason
}

// leaf explains one failed keyword: its path, reason and rank.
func (s *schemaSet) leaf(e *jsonschema.ValidationError, doc any) (string, string, int) {
	path := pointer(e.InstanceLocation...)
	val, _ := valueAt(doc, e.InstanceLocation)
	hint := s.description(e.SchemaURL)
	var reason string
	rank := 5
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		rank = 0
		reason = fmt.Sprintf("expected %s, got %s", strings.Join(k.Want, " or "), prose.JSONType(val))
	case *kind.Required:
		rank = 1
		missing := slices.Sorted(slices.Values(k.Missing))
		path = at(path, missing[0])
		reason = "required field is missing"
		hint = s.propertyDescription(e.SchemaURL, missing[0])
	case *kind.Const:
		rank = 2
		reason = fmt.Sprintf("expected %s, got %s", prose.Display(k.Want), prose.Display(val))
	case *kind.Enum:
		rank = 3
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = prose.Display(w)
		}
		reason = fmt.Sprintf("expected one of %s, got %s", strings.Join(want, ", "), prose.Display(val))
		hint = ""
	case *kind.AdditionalProperties:
		rank = 4
		props := slices.Sorted(slices.Values(k.Properties))
		path = at(path, props[0])
		if sch := s.schemaAt(e.SchemaURL); sch != nil {
			if fields, ok := sch["properties"].(map[string]any); ok {
				reason = "unknown field; the fields here are " + strings.Join(slices.Sorted(maps.Keys(fields)), ", ")
				hint = ""
				break
			}
		}
		reason = "key not allowed"
	case *kind.MinItems:
		reason = countReason("at least", k.Want, k.Got, "item")
	case *kind.MaxItems:
		reason = countReason("at most", k.Want, k.Got, "item")
	case *kind.MinLength:
		reason = countReason("at least", k.Want, k.Got, "character")
	case *kind.MaxLength:
		reason = countReason("at most", k.Want, k.Got, "character")
	case *kind.Minimum:
		reason = fmt.Sprintf("expected at least %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMinimum:
		reason = fmt.Sprintf("expected more than %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.Maximum:
		reason = fmt.Sprintf("expected at most %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMaximum:
		reason = fmt.Sprintf("expected less than %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.Pattern:
		reason = fmt.Sprintf("%s is not in the expected form", prose.Display(k.Got))
	case *kind.Not, *kind.FalseSchema:
		reason = "not allowed here"
	default:
		reason = e.ErrorKind.LocalizedString(message.NewPrinter(language.English))
	}
	if hint != "" {
		reason += "; " + hint
	}
	return path, reason, rank
}

func countReason(bound string, want, got int, noun string) string {
	if bound == "at least" && want == 1 {
		return "must not be empty"
	}
	return fmt.Sprintf("expected %s %d %s, got %d", bound, want, plural(want, noun), got)
}

// description returns the description of the schema at loc, as a clause.
func (s *schemaSet) description(loc string) string {
	sch := s.schemaAt(loc)
	if sch == nil {
		return ""
	}
	d, _ := sch["description"].(string)
	return prose.Clause(d)
}

// propertyDescription returns the description of property name in the
// schema at loc or, when that schema does not declare it (an if/then branch),
// in the nearest enclosing schema that does.
func (s *schemaSet) propertyDescription(loc, name string) string {
	url, frag, _ := strings.Cut(loc, "#")
	toks := splitPointer(frag)
	for n := len(toks); n >= 0; n-- {
		sch := s.schemaAt(url + "#" + pointer(append(slices.Clone(toks[:n]), "properties", name)...))
		if sch == nil {
			continue
		}
		if d, ok := sch["description"].(string); ok {
			return prose.Clause(d)
		}
		if ref, ok := sch["$ref"].(string); ok {
			if strings.HasPrefix(ref, "#") {
				return s.description(url + ref)
			}
			return s.description(schemaBase + ref + "#")
		}
		return ""
	}
	return ""
}

// valueAt returns the value at the reference tokens in doc.
func valueAt(doc any, toks []string) (any, bool) {
	v := doc
	for _, t := range toks {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[t]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	f, _ := r.Float64()
	return formatNumber(f)
}

func plural(n int, noun string) string {
	switch {
	case n == 1:
		return noun
	case strings.HasSuffix(noun, "y"):
		return noun[:len(noun)-1] + "ies"
	}
	return noun + "s"
}

// kindList joins names as "a, b, c and d" (or "or").
func kindList(names []string, conj string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
