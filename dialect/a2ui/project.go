package a2ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// The projection lowers orrery/1 to the A2UI basic catalog:
//
//	stack      → Column (vertical) or Row (horizontal)
//	text       → Text
//	markdown   → Text (the basic catalog's Text is simple Markdown)
//	image      → Image with a data: URL, its alt as description
//	button     → Button with a Text child; on.press sends an event named
//	             after the action, context {"orrery.event": "press"}; a
//	             link sends the event "open" with {"orrery.value": href}
//	question   → Column of the prompt (and detail) Text, a ChoicePicker of
//	             the choices bound to /_orrery/<node>/choices, a TextField
//	             bound to /_orrery/<node>/text when allowText, and a Button
//	             whose event carries both
//	other kinds (table, tree, diff, progress, stream, task, form, chart,
//	raster) → Text holding the node's text form, the same text every
//	             Orrery client shows
//
// Component ids are "root" for the top node, and the parent's id, "-" and
// the child's index below it; helpers add a suffix (root-label). Bindings
// are resolved when projecting: a data change is a new projection, sent
// whole, as the A2UI middleware for AG-UI does. The data also goes out as
// updateDataModel, so actions can pick values from it.

// ProjectComponent projects a component, its orrery/1 structure bound to
// data, to the A2UI messages of surface id: createSurface,
// updateComponents, updateDataModel. It refuses what component.Parse or
// Bind refuses.
func ProjectComponent(id string, structure, data json.RawMessage) ([]Message, error) {
	return projectCompiled(id, compileCached(structure), data)
}

// projectUncached is ProjectComponent as it was before the cache: every
// call parses and decodes the structure, and each node shown as text
// parses its subtree. Tests compare the two.
func projectUncached(id string, structure, data json.RawMessage) ([]Message, error) {
	s, err := component.Parse(structure, component.DefaultLimits())
	if err != nil {
		return nil, err
	}
	var node map[string]any
	if err := decodeJSON(structure, &node); err != nil {
		return nil, err
	}
	return projectCompiled(id, &compiled{structure: s, node: node}, data)
}

// projectCompiled binds data into a compiled structure and lowers it.
func projectCompiled(id string, c *compiled, data json.RawMessage) ([]Message, error) {
	if c.err != nil {
		return nil, c.err
	}
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	if _, err := c.structure.Bind(data); err != nil {
		return nil, err
	}
	p := &projector{id: id, data: data, bound: true, sub: c.sub}
	if err := p.node(c.node, "root"); err != nil {
		return nil, err
	}
	return p.messages(data), nil
}

// ProjectSurface projects a surface ({"kind": {…}}) to the A2UI messages of
// surface id. A surface holds no bindings: its strings are taken as they are.
func ProjectSurface(id string, surface json.RawMessage) ([]Message, error) {
	if err := ui.Validate(surface); err != nil {
		return nil, err
	}
	var s map[string]any
	if err := decodeJSON(surface, &s); err != nil {
		return nil, err
	}
	node, err := surfaceNode(s)
	if err != nil {
		return nil, err
	}
	p := &projector{id: id}
	if err := p.node(node, "root"); err != nil {
		return nil, err
	}
	return p.messages(json.RawMessage(`{}`)), nil
}

// surfaceNode turns a surface into a node: its kind's fields with "type".
func surfaceNode(s map[string]any) (map[string]any, error) {
	kind, ok := s["kind"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a surface is {\"kind\": {…}}")
	}
	n := make(map[string]any, len(kind))
	for k, v := range kind {
		n[k] = v
	}
	n["type"] = kind["t"]
	delete(n, "t")
	if kids, ok := kind["children"].([]any); ok && kind["t"] == ui.KindStack {
		out := make([]any, 0, len(kids))
		for _, c := range kids {
			cm, _ := c.(map[string]any)
			cn, err := surfaceNode(cm)
			if err != nil {
				return nil, err
			}
			out = append(out, cn)
		}
		n["children"] = out
	}
	return n, nil
}

func decodeJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}

type projector struct {
	id    string
	data  json.RawMessage
	bound bool // strings are templates over data
	comps []Component
	// sub holds the parsed subtrees shown as text, by component id; nil
	// parses them as they come.
	sub map[string]subtree
}

func (p *projector) messages(data json.RawMessage) []Message {
	return []Message{
		{Version: Version, CreateSurface: &CreateSurface{SurfaceID: p.id, CatalogID: BasicCatalogID}},
		{Version: Version, UpdateComponents: &UpdateComponents{SurfaceID: p.id, Components: p.comps}},
		{Version: Version, UpdateDataModel: &UpdateDataModel{SurfaceID: p.id, Value: data}},
	}
}

// str returns a string prop's value for the data.
func (p *projector) str(v any) string {
	s, _ := v.(string)
	if !p.bound {
		return s
	}
	t, err := component.ParseTemplate(s)
	if err != nil {
		return s
	}
	out, _ := t.Render(p.data)
	return out
}

// value returns a prop's value for the data: a typed binding gives its JSON
// value, any other string its text.
func (p *projector) value(v any) (any, bool) {
	s, ok := v.(string)
	if !ok || !p.bound {
		return v, v != nil
	}
	t, err := component.ParseTemplate(s)
	if err != nil {
		return s, true
	}
	raw, ok, err := t.Value(p.data)
	if err != nil || !ok {
		return nil, false
	}
	var out any
	if decodeJSON(raw, &out) != nil {
		return nil, false
	}
	return out, true
}

// shown reports whether a node's when lets it show.
func (p *projector) shown(n map[string]any) bool {
	w, ok := n["when"]
	if !ok {
		return true
	}
	if b, ok := w.(bool); ok {
		return b
	}
	v, ok := p.value(w)
	return ok && truthy(v)
}

func truthy(v any) bool {
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

func (p *projector) add(c Component) { p.comps = append(p.comps, c) }

func (p *projector) text(id, s string) {
	p.add(Component{"id": id, "component": "Text", "text": s})
}

// node lowers one node as component id.
func (p *projector) node(n map[string]any, id string) error {
	if !p.shown(n) {
		if id == "root" {
			p.text(id, "")
		}
		return nil
	}
	typ, _ := n["type"].(string)
	on, _ := n["on"].(map[string]any)
	switch typ {
	case ui.KindStack:
		kids, _ := n["children"].([]any)
		var ids []string
		for i, k := range kids {
			km, _ := k.(map[string]any)
			if !p.shown(km) {
				continue
			}
			cid := id + "-" + strconv.Itoa(i)
			if err := p.node(km, cid); err != nil {
				return err
			}
			ids = append(ids, cid)
		}
		name := "Column"
		if p.str(n["direction"]) == "horizontal" {
			name = "Row"
		}
		if ids == nil {
			ids = []string{}
		}
		p.add(Component{"id": id, "component": name, "children": ids})
	case ui.KindText, ui.KindMarkdown:
		p.text(id, p.str(n["value"]))
	case ui.KindImage:
		url := "data:" + p.str(n["mime"]) + ";base64," + p.str(n["data"])
		p.add(Component{"id": id, "component": "Image", "url": url, "description": p.str(n["alt"])})
	case component.TypeButton:
		label := id + "-label"
		p.text(label, p.str(n["label"]))
		b := Component{"id": id, "component": "Button", "child": label}
		if href, ok := n["href"]; ok {
			b["action"] = event(component.ActionOpen, map[string]any{"orrery.event": component.EventOpen, "orrery.value": p.str(href)})
		} else if a, ok := on[component.EventPress].(string); ok {
			b["action"] = event(a, map[string]any{"orrery.event": component.EventPress})
			b["variant"] = "primary"
		} else {
			// A button with no action still needs one in A2UI: it sends an
			// event the owner never declared, which ToIntent refuses.
			b["action"] = event("orrery.none", map[string]any{"orrery.event": component.EventPress})
		}
		p.add(b)
	case ui.KindQuestion:
		return p.question(n, id, on)
	default:
		text, err := p.textForm(n, id)
		if err != nil {
			return err
		}
		p.text(id, text)
	}
	return nil
}

func event(name string, context map[string]any) map[string]any {
	return map[string]any{"event": map[string]any{"name": name, "context": context}}
}

// question lowers a question to a Column of its parts.
func (p *projector) question(n map[string]any, id string, on map[string]any) error {
	var parts []string
	prompt := id + "-prompt"
	p.add(Component{"id": prompt, "component": "Text", "text": p.str(n["prompt"]), "variant": "h4"})
	parts = append(parts, prompt)
	if d, ok := n["detail"]; ok {
		p.text(id+"-detail", p.str(d))
		parts = append(parts, id+"-detail")
	}
	base := "/_orrery/" + id
	context := map[string]any{}
	if choices, ok := n["choices"].([]any); ok && len(choices) > 0 {
		var opts []any
		for _, c := range choices {
			cm, _ := c.(map[string]any)
			label := p.str(cm["label"])
			value := label
			if v, ok := cm["value"]; ok {
				value = p.str(v)
			}
			opts = append(opts, map[string]any{"label": label, "value": value})
		}
		variant := "mutuallyExclusive"
		if m, _ := p.value(n["multiple"]); m == true {
			variant = "multipleSelection"
		}
		p.add(Component{"id": id + "-choices", "component": "ChoicePicker", "variant": variant, "options": opts,
			"value": map[string]any{"path": base + "/choices"}})
		parts = append(parts, id+"-choices")
		context["choices"] = map[string]any{"path": base + "/choices"}
	}
	if t, _ := p.value(n["allowText"]); t == true {
		p.add(Component{"id": id + "-text", "component": "TextField", "label": "Answer", "value": map[string]any{"path": base + "/text"}})
		parts = append(parts, id+"-text")
		context["text"] = map[string]any{"path": base + "/text"}
	}
	ev, action := "", ""
	for _, e := range []string{component.EventSubmit, component.EventSelect} {
		if a, ok := on[e].(string); ok {
			ev, action = e, a
			break
		}
	}
	if action != "" {
		context["orrery.event"] = ev
		p.text(id+"-send-label", "Answer")
		p.add(Component{"id": id + "-send", "component": "Button", "variant": "primary", "child": id + "-send-label",
			"action": event(action, context)})
		parts = append(parts, id+"-send")
	}
	p.add(Component{"id": id, "component": "Column", "children": parts})
	return nil
}

// textForm is the text every Orrery client shows for a node of a kind the
// basic catalog lacks.
func (p *projector) textForm(n map[string]any, id string) (string, error) {
	if !p.bound {
		kind := make(map[string]any, len(n))
		for k, v := range n {
			kind[k] = v
		}
		kind["t"] = kind["type"]
		delete(kind, "type")
		raw, err := json.Marshal(map[string]any{"kind": kind})
		if err != nil {
			return "", err
		}
		return ui.Text(raw)
	}
	st, ok := p.sub[id]
	if !ok {
		raw, err := json.Marshal(n)
		if err != nil {
			return "", err
		}
		st.structure, st.err = component.Parse(raw, component.DefaultLimits())
	}
	if st.err != nil {
		return "", fmt.Errorf("project node: %w", st.err)
	}
	b, err := st.structure.Bind(p.data)
	if err != nil {
		return "", fmt.Errorf("project node: %w", err)
	}
	return b.Text, nil
}
