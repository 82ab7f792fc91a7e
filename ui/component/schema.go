package component

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/getorrery/orrery/internal/prose"
	neturl "net/url"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is the JSON Schema a declared component ([[provides.components]])
// gives for its data. A schema that is not valid JSON Schema still makes a
// Schema: Err reports the problem and Check refuses every data with it, so
// every show and update of that component is refused, naming the fix. It is
// immutable and safe for concurrent use.
type Schema struct {
	component string
	sch       *jsonschema.Schema
	err       error
}

// schemaURLBase is the base URL a component's schema is compiled under.
// Nothing is fetched from it: the compiler has no loader, so a schema can
// reference only itself.
const schemaURLBase = "https://github.com/getorrery/orrery/components/"

// NewSchema compiles the data schema of the declared component named
// component. The schema is draft 2020-12 unless its $schema says otherwise;
// it may reference only itself (no file:// or network refs).
func NewSchema(component string, schema json.RawMessage) *Schema {
	s := &Schema{component: component}
	bad := func(problem string) *Schema {
		s.err = refuse(ErrBadSchema, "", fmt.Sprintf("component %q: its data schema is not valid JSON Schema (%s); fix it under [[provides.components]] in orrery.toml", component, problem))
		return s
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return bad(fmt.Sprintf("it is not JSON: %v", err))
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(nil)
	c.DefaultDraft(jsonschema.Draft2020)
	url := schemaURLBase + neturl.PathEscape(component) + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return bad(oneLineError(err))
	}
	sch, err := c.Compile(url)
	if err != nil {
		return bad(schemaProblem(err, doc, url))
	}
	s.sch = sch
	return s
}

// Err returns nil for a valid schema, and otherwise the refusal (wrapping
// ErrBadSchema) that every Check returns.
func (s *Schema) Err() error { return s.err }

// Check fills the schema's defaults into data, one JSON object, validates
// it, and returns it filled, as compact JSON. Defaults come from properties,
// items, prefixItems, $ref and allOf (not from branches such as anyOf or
// if/then, where the branch taken is not known). A refusal is an *Error:
// ErrBadSchema for an invalid schema, ErrNotObject, or ErrDataSchema naming
// the path, such as "the data at /runs/0/name does not match the schema of
// component "runs": expected string, got number; …".
func (s *Schema) Check(data json.RawMessage) (json.RawMessage, error) {
	if s.err != nil {
		return nil, s.err
	}
	v, err := decode(data)
	if err != nil {
		return nil, refuse(ErrNotObject, "", fmt.Sprintf("the data is not JSON (%v); send one JSON object", err))
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, notObject(v)
	}
	v, err = s.check(v)
	if err != nil {
		return nil, err
	}
	out, err := marshal(v)
	if err != nil {
		return nil, fmt.Errorf("check component data: %w", err)
	}
	return out, nil
}

// check fills defaults into decoded data, in place, and validates it.
func (s *Schema) check(v any) (any, error) {
	if s.err != nil {
		return nil, s.err
	}
	v = fillDefaults(s.sch, v, 0)
	if err := s.sch.Validate(v); err != nil {
		var verr *jsonschema.ValidationError
		if !errors.As(err, &verr) {
			return nil, fmt.Errorf("check component data: %w", err)
		}
		path, reason := explain(verr, v, false)
		return nil, refuse(ErrDataSchema, path, fmt.Sprintf("%s does not match the schema of component %q: %s; send data the schema accepts", dataAt(path), s.component, reason))
	}
	return v, nil
}

// maxDefaultDepth bounds the schemas followed through $ref while filling
// defaults, so a recursive schema always ends.
const maxDefaultDepth = 64

// fillDefaults fills the defaults sch gives into v and returns it.
func fillDefaults(sch *jsonschema.Schema, v any, depth int) any {
	if sch == nil || depth > maxDefaultDepth {
		return v
	}
	v = fillDefaults(sch.Ref, v, depth+1)
	for _, sub := range sch.AllOf {
		v = fillDefaults(sub, v, depth+1)
	}
	switch x := v.(type) {
	case map[string]any:
		for _, name := range sortedKeys(sch.Properties) {
			ps := sch.Properties[name]
			cur, ok := x[name]
			if !ok {
				d, found := defaultOf(ps, depth)
				if !found {
					continue
				}
				cur = d
			}
			x[name] = fillDefaults(ps, cur, depth+1)
		}
	case []any:
		for i := range x {
			var item *jsonschema.Schema
			switch {
			case i < len(sch.PrefixItems):
				item = sch.PrefixItems[i]
			case sch.Items2020 != nil:
				item = sch.Items2020
			default:
				switch it := sch.Items.(type) {
				case *jsonschema.Schema:
					item = it
				case []*jsonschema.Schema:
					if i < len(it) {
						item = it[i]
					}
				}
			}
			x[i] = fillDefaults(item, x[i], depth+1)
		}
	}
	return v
}

// defaultOf returns a copy of the default of sch, or of the schema it
// references.
func defaultOf(sch *jsonschema.Schema, depth int) (any, bool) {
	for ; sch != nil && depth <= maxDefaultDepth; depth++ {
		if sch.Default != nil {
			return deepCopy(*sch.Default), true
		}
		sch = sch.Ref
	}
	return nil, false
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// explain picks one failure of a validation: the deepest, and among equals
// the most basic (a wrong type, then a missing field …), so the same data
// always gets the same refusal. With meta (a schema checked against the
// metaschema) a wrong type ranks last: the metaschema allows several types
// where one was meant, and the other failure says more.
func explain(verr *jsonschema.ValidationError, doc any, meta bool) (string, string) {
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
		c := leaf(e, doc)
		if meta && c.rank == 0 {
			c.rank = 6
		}
		c2 := &cand{path: c.path, reason: c.reason, rank: c.rank, depth: strings.Count(c.path, "/")}
		if best == nil || c2.depth > best.depth ||
			c2.depth == best.depth && (c2.rank < best.rank ||
				c2.rank == best.rank && (c2.path < best.path || c2.path == best.path && c2.reason < best.reason)) {
			best = c2
		}
	}
	visit(verr)
	if best == nil {
		return "", "it does not match"
	}
	return best.path, best.reason
}

type leafFailure struct {
	path, reason string
	rank         int
}

// leaf explains one failed keyword.
func leaf(e *jsonschema.ValidationError, doc any) leafFailure {
	path := pointerOf(e.InstanceLocation)
	val, _ := lookup(doc, e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		return leafFailure{path, fmt.Sprintf("expected %s, got %s", strings.Join(k.Want, " or "), prose.JSONType(val)), 0}
	case *kind.Required:
		missing := slices.Sorted(slices.Values(k.Missing))
		return leafFailure{path + "/" + escapeToken(missing[0]), "a required field is missing", 1}
	case *kind.Const:
		return leafFailure{path, fmt.Sprintf("expected %s, got %s", prose.Display(k.Want), prose.Display(val)), 2}
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = prose.Display(w)
		}
		return leafFailure{path, fmt.Sprintf("expected one of %s, got %s", strings.Join(want, ", "), prose.Display(val)), 3}
	case *kind.AdditionalProperties:
		props := slices.Sorted(slices.Values(k.Properties))
		return leafFailure{path + "/" + escapeToken(props[0]), "the schema allows no such field", 4}
	case *kind.FalseSchema:
		return leafFailure{path, "the schema allows nothing here", 5}
	case *kind.Minimum:
		return leafFailure{path, fmt.Sprintf("expected at least %s, got %s", k.Want.RatString(), k.Got.RatString()), 5}
	case *kind.Maximum:
		return leafFailure{path, fmt.Sprintf("expected at most %s, got %s", k.Want.RatString(), k.Got.RatString()), 5}
	case *kind.ExclusiveMinimum:
		return leafFailure{path, fmt.Sprintf("expected more than %s, got %s", k.Want.RatString(), k.Got.RatString()), 5}
	case *kind.ExclusiveMaximum:
		return leafFailure{path, fmt.Sprintf("expected less than %s, got %s", k.Want.RatString(), k.Got.RatString()), 5}
	case *kind.MinItems:
		return leafFailure{path, fmt.Sprintf("expected at least %d items, got %d", k.Want, k.Got), 5}
	case *kind.MaxItems:
		return leafFailure{path, fmt.Sprintf("expected at most %d items, got %d", k.Want, k.Got), 5}
	case *kind.MinLength:
		return leafFailure{path, fmt.Sprintf("expected at least %d characters, got %d", k.Want, k.Got), 5}
	case *kind.MaxLength:
		return leafFailure{path, fmt.Sprintf("expected at most %d characters, got %d", k.Want, k.Got), 5}
	case *kind.Pattern:
		return leafFailure{path, fmt.Sprintf("%s does not match the pattern %s", prose.Display(k.Got), k.Want), 5}
	}
	return leafFailure{path, e.ErrorKind.LocalizedString(message.NewPrinter(language.English)), 5}
}

// pointerOf joins reference tokens into a JSON Pointer.
func pointerOf(toks []string) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

// schemaProblem says in one line why a schema does not compile: for a
// schema the metaschema refuses, the one path and reason explain picks.
func schemaProblem(err error, doc any, url string) string {
	var sve *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &verr) {
		path, reason := explain(verr, doc, true)
		return fmt.Sprintf("at %s: %s", where(path), reason)
	}
	var lue *jsonschema.LoadURLError
	if errors.As(err, &lue) {
		return fmt.Sprintf("it references %s, and a component's schema may reference only itself, with refs such as #/$defs/run", lue.URL)
	}
	return strings.ReplaceAll(oneLineError(err), url, "the schema")
}

// where names a pointer in a schema problem: "/" for the whole.
func where(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// oneLineError writes an error on one line.
func oneLineError(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
