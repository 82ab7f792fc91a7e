package a2ui

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/getorrery/orrery/ui"
)

// Lift turns a validated list of A2UI messages into the orrery surface of
// each surface it builds, so that every Orrery client (terminal, web, a
// program reading the text form) draws an A2UI form the same way as any
// other surface; renderers that speak A2UI get the messages themselves.
// Components are taken as the messages leave them (later updateComponents
// replace earlier ones by id), data as updateDataModel leaves it, and
// bindings are resolved against it: Column, List, Card, Tabs and Modal
// become stacks, Row a horizontal stack, Text markdown, an Image with a
// data: URL an image, and inputs and buttons a text line (label: value,
// [ label ]). A surface that deleteSurface removed is left out. The result
// passes ui.Validate.
func Lift(msgs []Message) (map[string]json.RawMessage, error) {
	type state struct {
		comps map[string]Component
		data  any
	}
	surfaces := map[string]*state{}
	var order []string
	get := func(id string) *state {
		s := surfaces[id]
		if s == nil {
			s = &state{comps: map[string]Component{}, data: map[string]any{}}
			surfaces[id] = s
			order = append(order, id)
		}
		return s
	}
	for _, m := range msgs {
		switch {
		case m.CreateSurface != nil:
			get(m.CreateSurface.SurfaceID)
		case m.UpdateComponents != nil:
			s := get(m.UpdateComponents.SurfaceID)
			for _, c := range m.UpdateComponents.Components {
				id, _ := c["id"].(string)
				s.comps[id] = c
			}
		case m.UpdateDataModel != nil:
			s := get(m.UpdateDataModel.SurfaceID)
			var v any
			if len(m.UpdateDataModel.Value) > 0 {
				if err := decodeJSON(m.UpdateDataModel.Value, &v); err != nil {
					return nil, err
				}
			}
			s.data = setPath(s.data, m.UpdateDataModel.Path, v, len(m.UpdateDataModel.Value) > 0)
		case m.DeleteSurface != nil:
			delete(surfaces, m.DeleteSurface.SurfaceID)
		}
	}
	out := map[string]json.RawMessage{}
	for _, id := range order {
		s, ok := surfaces[id]
		if !ok {
			continue
		}
		l := &lifter{comps: s.comps, data: s.data}
		kind := l.node("root", "", 0)
		raw, err := json.Marshal(map[string]any{"kind": kind})
		if err != nil {
			return nil, err
		}
		if err := ui.Validate(raw); err != nil {
			return nil, fmt.Errorf("lift a2ui surface %s: %w", id, err)
		}
		out[id] = raw
	}
	return out, nil
}

// setPath sets (or, without value, removes) the data at an A2UI path; ""
// and "/" mean the whole model.
func setPath(root any, path string, v any, set bool) any {
	toks := pointerTokens(path)
	if len(toks) == 0 {
		if !set {
			return map[string]any{}
		}
		return v
	}
	m, ok := root.(map[string]any)
	if !ok {
		m = map[string]any{}
	}
	cur := m
	for _, t := range toks[:len(toks)-1] {
		next, ok := cur[t].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[t] = next
		}
		cur = next
	}
	last := toks[len(toks)-1]
	if set {
		cur[last] = v
	} else {
		delete(cur, last)
	}
	return m
}

func pointerTokens(p string) []string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return nil
	}
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts
}

// lifter lowers one surface's components.
type lifter struct {
	comps map[string]Component
	data  any
	seen  int
}

// Limits of an orrery surface that a lift respects.
const (
	maxChildren = 64
	maxDepth    = 7 // stacks below the top one
	maxNodes    = 2000
)

// resolve reads a JSON Pointer, absolute or relative to base.
func (l *lifter) resolve(p, base string) (any, bool) {
	if !strings.HasPrefix(p, "/") {
		p = strings.TrimSuffix(base, "/") + "/" + p
	}
	var cur any = l.data
	for _, t := range pointerTokens(p) {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

var interpolation = regexp.MustCompile(`\$\{([^}]*)\}`)

// str renders a dynamic value as text.
func (l *lifter) str(v any, base string) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return x.String()
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			parts = append(parts, l.str(e, base))
		}
		return strings.Join(parts, ", ")
	case map[string]any:
		if p, ok := x["path"].(string); ok && len(x) == 1 {
			v, _ := l.resolve(p, base)
			return l.str(v, base)
		}
		if call, _ := x["call"].(string); call != "" {
			args, _ := x["args"].(map[string]any)
			if call == "formatString" {
				s, _ := args["value"].(string)
				s = interpolation.ReplaceAllStringFunc(s, func(m string) string {
					v, _ := l.resolve(strings.TrimSpace(m[2:len(m)-1]), base)
					return l.str(v, base)
				})
				return strings.ReplaceAll(s, `\${`, "${")
			}
			if v, ok := args["value"]; ok {
				return l.str(v, base)
			}
			return ""
		}
		b, _ := json.Marshal(x)
		return string(b)
	}
	return fmt.Sprint(v)
}

func text(s string) map[string]any { return map[string]any{"t": ui.KindText, "value": s} }

// node lowers component id (bindings relative to base) to a surface kind.
func (l *lifter) node(id, base string, depth int) map[string]any {
	c, ok := l.comps[id]
	if l.seen++; !ok || l.seen > maxNodes {
		return text("")
	}
	switch name, _ := c["component"].(string); name {
	case "Text":
		return map[string]any{"t": ui.KindMarkdown, "value": l.str(c["text"], base)}
	case "Column", "List", "Row":
		dir := "vertical"
		if name == "Row" || c["direction"] == "horizontal" {
			dir = "horizontal"
		}
		return l.stack(l.children(c["children"], base), dir, depth)
	case "Card":
		s, _ := c["child"].(string)
		return l.node(s, base, depth)
	case "Modal":
		s, _ := c["content"].(string)
		return l.node(s, base, depth)
	case "Tabs":
		tabs, _ := c["tabs"].([]any)
		var kids []child
		for _, t := range tabs {
			tm, _ := t.(map[string]any)
			s, _ := tm["child"].(string)
			kids = append(kids, child{label: l.str(tm["title"], base)}, child{id: s, base: base})
		}
		return l.stack(kids, "vertical", depth)
	case "Image":
		url := l.str(c["url"], base)
		alt := l.str(c["description"], base)
		if m := dataImage.FindStringSubmatch(url); m != nil && strings.TrimSpace(alt) != "" {
			return map[string]any{"t": ui.KindImage, "mime": "image/" + m[1], "data": url[len(m[0]):], "alt": alt}
		}
		if alt == "" {
			alt = "image"
		}
		return text("[" + alt + "]")
	case "Icon":
		return text(l.str(c["name"], base))
	case "Divider":
		return text("────────")
	case "Video", "AudioPlayer":
		return text("[" + strings.ToLower(name) + "] " + l.str(c["description"], base))
	case "Button":
		s, _ := c["child"].(string)
		return text("[ " + l.plain(s, base) + " ]")
	case "CheckBox":
		mark := "[ ]"
		if v, _ := l.value(c["value"], base); v == true {
			mark = "[x]"
		}
		return text(mark + " " + l.str(c["label"], base))
	default: // TextField, ChoicePicker, Slider, DateTimeInput
		label := l.str(c["label"], base)
		v := l.str(c["value"], base)
		if label == "" {
			return text(v)
		}
		return text(label + ": " + v)
	}
}

// value resolves a dynamic value to its data.
func (l *lifter) value(v any, base string) (any, bool) {
	if m, ok := v.(map[string]any); ok {
		if p, ok := m["path"].(string); ok {
			return l.resolve(p, base)
		}
	}
	return v, v != nil
}

// plain is the text of a component, for a button's label.
func (l *lifter) plain(id, base string) string {
	c := l.comps[id]
	if c == nil {
		return ""
	}
	if c["component"] == "Text" {
		return l.str(c["text"], base)
	}
	if c["component"] == "Icon" {
		return l.str(c["name"], base)
	}
	return id
}

// child is a stack entry: a component at base, or a label.
type child struct {
	id, base, label string
}

func (l *lifter) children(v any, base string) []child {
	var out []child
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			s, _ := e.(string)
			out = append(out, child{id: s, base: base})
		}
	case map[string]any:
		tmpl, _ := x["componentId"].(string)
		p, _ := x["path"].(string)
		if !strings.HasPrefix(p, "/") {
			p = strings.TrimSuffix(base, "/") + "/" + p
		}
		items, _ := l.resolve(p, "")
		switch it := items.(type) {
		case []any:
			for i := range it {
				out = append(out, child{id: tmpl, base: p + "/" + strconv.Itoa(i)})
			}
		case map[string]any:
			for k := range it {
				out = append(out, child{id: tmpl, base: p + "/" + k})
			}
		}
	}
	return out
}

func (l *lifter) stack(kids []child, dir string, depth int) map[string]any {
	if len(kids) == 0 {
		return text("")
	}
	var nodes []any
	for i, k := range kids {
		if i == maxChildren-1 && len(kids) > maxChildren {
			nodes = append(nodes, map[string]any{"kind": text(fmt.Sprintf("… %d more", len(kids)-i))})
			break
		}
		var n map[string]any
		switch {
		case k.id == "":
			n = text(k.label)
		case depth >= maxDepth:
			n = text(l.flat(k.id, k.base))
		default:
			n = l.node(k.id, k.base, depth+1)
		}
		nodes = append(nodes, map[string]any{"kind": n})
	}
	return map[string]any{"t": ui.KindStack, "direction": dir, "children": nodes}
}

// flat is a subtree too deep for a stack, as lines of text.
func (l *lifter) flat(id, base string) string {
	n := l.node(id, base, maxDepth)
	raw, _ := json.Marshal(map[string]any{"kind": n})
	s, err := ui.Text(raw)
	if err != nil {
		return ""
	}
	return s
}
