package schemagen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// jsonSchema renders the model as a JSON Schema (draft 2020-12) whose $defs
// hold every definition and whose root is one event or one request.
func (m *model) jsonSchema() ([]byte, error) {
	defs := make(map[string]any, len(m.defs))
	for name, def := range m.defs {
		defs[name] = def.schema()
	}
	root := map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"title":       "Orrery protocol",
		"description": header + " A frame is an Event (AG-UI 1.0 with Orrery's metadata); a client's intent is a Request.",
		"oneOf":       []any{ref("Event").schema(), ref("Request").schema()},
		"$defs":       defs,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // map keys come out sorted
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("encode schema: %w", err)
	}
	return buf.Bytes(), nil
}

func (d *definition) schema() map[string]any {
	switch d.kind {
	case defContent:
		return map[string]any{"oneOf": []any{
			map[string]any{"type": "string"},
			map[string]any{"type": "array", "items": ref(contentPart.Name()).schema()},
			map[string]any{"type": "object"},
		}}
	case defUnion:
		members := make([]any, len(d.members))
		for i, name := range d.members {
			members[i] = ref(name).schema()
		}
		return map[string]any{"oneOf": members}
	}
	props := make(map[string]any, len(d.props))
	var required []string
	for _, p := range d.props {
		props[p.name] = p.typ.schema()
		if p.required {
			required = append(required, p.name)
		}
	}
	s := map[string]any{"type": "object", "additionalProperties": d.open}
	if len(props) > 0 {
		s["properties"] = props
	}
	if len(required) > 0 {
		slices.Sort(required)
		s["required"] = required
	}
	return s
}

func (e *typeExpr) schema() map[string]any {
	switch e.kind {
	case kindString:
		if e.pattern != "" {
			return map[string]any{"type": "string", "pattern": e.pattern}
		}
		return map[string]any{"type": "string"}
	case kindInteger:
		return map[string]any{"type": "integer"}
	case kindUnsigned:
		return map[string]any{"type": "integer", "minimum": 0}
	case kindNumber:
		return map[string]any{"type": "number"}
	case kindBool:
		return map[string]any{"type": "boolean"}
	case kindObject:
		return map[string]any{"type": "object"}
	case kindRef:
		return map[string]any{"$ref": "#/$defs/" + e.ref}
	case kindArray:
		return map[string]any{"type": "array", "items": e.elem.schema()}
	case kindMap:
		return map[string]any{"type": "object", "additionalProperties": e.elem.schema()}
	case kindConst:
		return map[string]any{"const": e.values[0]}
	case kindEnum:
		return map[string]any{"type": "string", "enum": e.values}
	}
	return map[string]any{} // kindAny
}

// typeScript renders the model as TypeScript declarations: the Event union
// and the events in the order of the spec, the Request union and the
// requests, then every other definition by name.
func (m *model) typeScript() []byte {
	var b strings.Builder
	b.WriteString("// " + header + "\n")
	var order []string
	order = append(order, "Event")
	order = append(order, m.events...)
	order = append(order, "Request")
	order = append(order, m.requests...)
	var rest []string
	for name := range m.defs {
		if !slices.Contains(order, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range append(order, rest...) {
		b.WriteString("\n")
		m.defs[name].writeTS(&b)
	}
	return []byte(b.String())
}

func (d *definition) writeTS(b *strings.Builder) {
	switch d.kind {
	case defContent:
		fmt.Fprintf(b, "export type %s = string | %s[] | Record<string, unknown>;\n", d.name, contentPart.Name())
		return
	case defUnion:
		fmt.Fprintf(b, "export type %s =\n", d.name)
		for i, name := range d.members {
			end := ""
			if i == len(d.members)-1 {
				end = ";"
			}
			fmt.Fprintf(b, "  | %s%s\n", name, end)
		}
		return
	}
	if len(d.props) == 0 && !d.open {
		fmt.Fprintf(b, "export type %s = Record<string, never>;\n", d.name)
		return
	}
	fmt.Fprintf(b, "export interface %s {\n", d.name)
	for _, p := range d.props {
		opt := "?"
		if p.required {
			opt = ""
		}
		fmt.Fprintf(b, "  %s%s: %s;\n", tsKey(p.name), opt, p.typ.ts())
	}
	if d.open {
		b.WriteString("  [key: string]: unknown;\n")
	}
	b.WriteString("}\n")
}

var tsIdent = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

func tsKey(name string) string {
	if tsIdent.MatchString(name) {
		return name
	}
	return tsString(name)
}

func tsString(s string) string {
	q, _ := json.Marshal(s) // a JSON string is a TypeScript string literal
	return string(q)
}

func (e *typeExpr) ts() string {
	switch e.kind {
	case kindString:
		return "string"
	case kindInteger, kindUnsigned, kindNumber:
		return "number"
	case kindBool:
		return "boolean"
	case kindObject:
		return "Record<string, unknown>"
	case kindRef:
		return e.ref
	case kindArray:
		elem := e.elem.ts()
		if strings.Contains(elem, " | ") {
			elem = "(" + elem + ")"
		}
		return elem + "[]"
	case kindMap:
		return "Record<string, " + e.elem.ts() + ">"
	case kindConst, kindEnum:
		lits := make([]string, len(e.values))
		for i, v := range e.values {
			lits[i] = tsString(v)
		}
		return strings.Join(lits, " | ")
	}
	return "unknown" // kindAny
}
