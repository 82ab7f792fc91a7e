package component

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/getorrery/orrery/internal/prose"
	"regexp"
	"slices"
	"strconv"

	"github.com/getorrery/orrery/ui"
)

// Structure is a parsed component structure: a tree of nodes over the
// catalog orrery/1 whose string props may hold ${…} bindings. It is
// immutable and safe for concurrent use.
//
// A node is a JSON object: {"type": "<type>", <props>…, "on"?: {<event>:
// "<action>"}, "when"?: "${…}"}. The types are the surface kinds and button;
// a node's props are its kind's fields (docs/surfaces.md), except that a
// stack's children are nodes rather than surfaces. docs/bindings.md
// describes the shape and the binding grammar.
type Structure struct {
	raw     json.RawMessage
	root    *node
	actions []Action
}

// Action is one action a structure declares: the event of a node that sends
// it.
type Action struct {
	// Node is the JSON Pointer of the node in the structure, such as
	// "/children/2".
	Node string
	// Type is the node's type.
	Type string
	// Event is press, submit, select or open.
	Event string
	// Action is the action's id: what ui.intent carries and the owner
	// receives.
	Action string
}

// node is one parsed node.
type node struct {
	path     string
	typ      string
	props    []prop // by name
	children []*node
	when     *Template // nil: always shown
	hidden   bool      // when is the literal false
	on       map[string]string
	link     bool // a button with an href
}

// prop is one prop and its compiled value.
type prop struct {
	name string
	v    value
}

// value is a compiled prop value: a literal, a template, or an array or
// object of values.
type value struct {
	lit      any       // a value with no template in it
	tmpl     *Template // a string with a binding
	arr      []value
	obj      []member // by key
	isArr    bool
	isObj    bool
	bindings []bindSite // the typed bare-pointer bindings inside, relative to this value
	dynamic  bool       // some binding inside
}

type member struct {
	key string
	v   value
}

// bindSite is a typed binding to a bare pointer: the value at rel (a
// pointer relative to the node) is the data at ptr.
type bindSite struct {
	rel string
	ptr string
}

// actionPattern is what an action id looks like.
var actionPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)

const nodeShape = `a node is {"type": "<type>", <props>…}, such as {"type": "text", "value": "${/left} left"}`

// Parse checks a structure against the catalog orrery/1 and returns it
// parsed. It refuses, with an *Error naming the JSON path and the fix, a
// structure over limits.ComponentBytes (ErrTooLarge), a type outside the
// catalog (ErrUnknownType), and an unknown or missing prop, an event the
// type does not send, a bad action id, a when that is not one binding, a
// binding that does not parse, stacks nested too deep, or a static prop
// that no data could make valid (ErrStructure).
func Parse(structure json.RawMessage, limits Limits) (*Structure, error) {
	limits = limits.withDefaults()
	var compact bytes.Buffer
	if err := json.Compact(&compact, structure); err != nil {
		return nil, refuse(ErrStructure, "", fmt.Sprintf("the structure is not JSON (%v); send one JSON object: %s", err, nodeShape))
	}
	if n := compact.Len(); n > limits.ComponentBytes {
		return nil, refuse(ErrTooLarge, "", fmt.Sprintf("the structure is %s bytes, over limits.componentBytes (%s); make it smaller, moving repeated content into the data, or raise limits.componentBytes",
			prose.Group(n), prose.Group(limits.ComponentBytes)))
	}
	doc, err := decode(compact.Bytes())
	if err != nil {
		return nil, refuse(ErrStructure, "", fmt.Sprintf("the structure is not JSON (%v); send one JSON object: %s", err, nodeShape))
	}
	s := &Structure{raw: slices.Clone(compact.Bytes())}
	if s.root, err = s.parseNode(doc, "", 0); err != nil {
		return nil, err
	}
	if err := s.checkStatic(); err != nil {
		return nil, err
	}
	return s, nil
}

// MustParse is Parse with the default limits for a structure known to be
// good, such as one written in Go; it panics on a refusal.
func MustParse(structure string) *Structure {
	s, err := Parse(json.RawMessage(structure), DefaultLimits())
	if err != nil {
		panic(err)
	}
	return s
}

func (s *Structure) parseNode(v any, path string, stacks int) (*node, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, refuse(ErrStructure, path, fmt.Sprintf("%s: expected a node object, got %s; %s", structAt(path), prose.JSONType(v), nodeShape))
	}
	tv, ok := obj["type"]
	if !ok {
		return nil, refuse(ErrStructure, path+"/type", fmt.Sprintf("structure %s/type: a node needs a type; the types of %s are %s", path, CatalogID, typeNames()))
	}
	name, ok := tv.(string)
	if !ok {
		return nil, refuse(ErrStructure, path+"/type", fmt.Sprintf("structure %s/type: expected a string, got %s; the types of %s are %s", path, prose.JSONType(tv), CatalogID, typeNames()))
	}
	t, ok := lookupType(name)
	if !ok {
		return nil, refuse(ErrUnknownType, path+"/type", fmt.Sprintf("structure %s/type: unknown type %q; the types of %s are %s", path, prose.Shorten(name), CatalogID, typeNames()))
	}
	n := &node{path: path, typ: name}
	if name == ui.KindStack {
		if stacks+1 > ui.MaxStackDepth {
			return nil, refuse(ErrStructure, path, fmt.Sprintf("%s: stacks nest at most %d deep and this one is %d deep; flatten the inner stacks", structAt(path), ui.MaxStackDepth, stacks+1))
		}
	}
	for _, k := range sortedKeys(obj) {
		kp := path + "/" + escapeToken(k)
		switch {
		case k == "type":
		case k == "on":
			if err := n.parseOn(obj[k], kp, t); err != nil {
				return nil, err
			}
		case k == "when":
			if err := n.parseWhen(obj[k], kp); err != nil {
				return nil, err
			}
		case k == "children" && name == ui.KindStack:
			kids, ok := obj[k].([]any)
			if !ok {
				return nil, refuse(ErrStructure, kp, fmt.Sprintf("structure %s: expected an array of nodes, got %s; a stack's children are nodes, such as [{\"type\": \"text\", \"value\": \"…\"}]", kp, prose.JSONType(obj[k])))
			}
			if len(kids) == 0 {
				return nil, refuse(ErrStructure, kp, fmt.Sprintf("structure %s: a stack needs at least one child node", kp))
			}
			for i, c := range kids {
				child, err := s.parseNode(c, kp+"/"+strconv.Itoa(i), stacks+1)
				if err != nil {
					return nil, err
				}
				n.children = append(n.children, child)
			}
		default:
			if _, ok := t.prop(k); !ok {
				hint := ""
				if k == "t" {
					hint = "; a node names its type with type, not t"
				}
				return nil, refuse(ErrStructure, kp, fmt.Sprintf("structure %s: a %s has no prop %s%s; its props are %s, and any node may have on and when", kp, name, prose.Shorten(k), hint, t.propNames()))
			}
			v, err := compileValue(obj[k], kp, "/"+escapeToken(k))
			if err != nil {
				return nil, err
			}
			n.props = append(n.props, prop{name: k, v: v})
		}
	}
	for _, p := range t.Props {
		if _, has := obj[p.Name]; p.Required && !has {
			return nil, refuse(ErrStructure, path+"/"+p.Name, fmt.Sprintf("structure %s/%s: a %s needs %s; %s", path, p.Name, name, p.Name, prose.Clause(p.Description)))
		}
	}
	if name == TypeButton {
		if _, ok := obj["href"]; ok {
			n.link = true
			if _, ok := obj["on"]; ok {
				return nil, refuse(ErrStructure, path+"/on", fmt.Sprintf("structure %s/on: a link opens through the host with the action %q and sends nothing to its owner; remove on, or remove href to make a button that sends press", path, ActionOpen))
			}
			s.actions = append(s.actions, Action{Node: path, Type: name, Event: EventOpen, Action: ActionOpen})
		}
	}
	for _, ev := range sortedKeys(n.on) {
		s.actions = append(s.actions, Action{Node: path, Type: name, Event: ev, Action: n.on[ev]})
	}
	return n, nil
}

func (n *node) parseOn(v any, path string, t Type) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return refuse(ErrStructure, path, fmt.Sprintf(`structure %s: expected an object, got %s; on maps an event to an action, such as {"press": "retry"}`, path, prose.JSONType(v)))
	}
	n.on = map[string]string{}
	for _, ev := range sortedKeys(obj) {
		ep := path + "/" + escapeToken(ev)
		if !slices.Contains(t.Events, ev) {
			what := "sends no events"
			if len(t.Events) > 0 {
				what = "sends " + list(t.Events, "and") + " only"
			}
			return refuse(ErrStructure, ep, fmt.Sprintf("structure %s: a %s %s, not %s; the events are press (button), submit (form, question), select (table, tree, question) and open (table, tree)", ep, t.Name, what, prose.Shorten(ev)))
		}
		a, ok := obj[ev].(string)
		if !ok || !actionPattern.MatchString(a) {
			return refuse(ErrStructure, ep, fmt.Sprintf("structure %s: an action is a string of 1 to 64 letters, digits, _, ., : or - that starts with a letter or digit, such as \"retry\"; got %s", ep, prose.Display(obj[ev])))
		}
		n.on[ev] = a
	}
	return nil
}

func (n *node) parseWhen(v any, path string) error {
	const help = `when takes one binding such as "${/failed > 0}", or true or false`
	switch x := v.(type) {
	case bool:
		n.hidden = !x
		return nil
	case string:
		t, err := ParseTemplate(x)
		if err != nil {
			return refuse(ErrStructure, path, fmt.Sprintf("structure %s: the binding does not parse %v", path, err))
		}
		if !t.Typed() {
			return refuse(ErrStructure, path, fmt.Sprintf("structure %s: %s, with nothing around it", path, help))
		}
		n.when = t
		return nil
	}
	return refuse(ErrStructure, path, fmt.Sprintf("structure %s: expected a string or boolean, got %s; %s", path, prose.JSONType(v), help))
}

// compileValue compiles a prop value at path (rel is its pointer relative
// to the node): every string in it is a template.
func compileValue(v any, path, rel string) (value, error) {
	switch x := v.(type) {
	case string:
		t, err := ParseTemplate(x)
		if err != nil {
			return value{}, refuse(ErrStructure, path, fmt.Sprintf("structure %s: the binding does not parse %v", path, err))
		}
		if s, ok := t.Static(); ok {
			return value{lit: s}, nil
		}
		out := value{tmpl: t, dynamic: true}
		if p, ok := t.pointerOf(); ok {
			out.bindings = []bindSite{{rel: rel, ptr: p}}
		}
		return out, nil
	case []any:
		out := value{isArr: true, arr: make([]value, len(x))}
		for i, e := range x {
			ev, err := compileValue(e, path+"/"+strconv.Itoa(i), rel+"/"+strconv.Itoa(i))
			if err != nil {
				return value{}, err
			}
			out.arr[i] = ev
			out.dynamic = out.dynamic || ev.dynamic
			out.bindings = append(out.bindings, ev.bindings...)
		}
		if !out.dynamic {
			return value{lit: v}, nil
		}
		return out, nil
	case map[string]any:
		out := value{isObj: true}
		for _, k := range sortedKeys(x) {
			ev, err := compileValue(x[k], path+"/"+escapeToken(k), rel+"/"+escapeToken(k))
			if err != nil {
				return value{}, err
			}
			out.obj = append(out.obj, member{key: k, v: ev})
			out.dynamic = out.dynamic || ev.dynamic
			out.bindings = append(out.bindings, ev.bindings...)
		}
		if !out.dynamic {
			return value{lit: v}, nil
		}
		return out, nil
	}
	return value{lit: v}, nil
}

// eval returns the value for the data, and false when a typed binding
// yields nothing (the prop or member is then left out; in an array it is
// null, so indices keep their meaning).
func (v value) eval(data any) (any, bool) {
	switch {
	case v.tmpl != nil:
		return v.tmpl.value(data)
	case v.isArr:
		out := make([]any, len(v.arr))
		for i, e := range v.arr {
			out[i], _ = e.eval(data)
		}
		return out, true
	case v.isObj:
		out := make(map[string]any, len(v.obj))
		for _, m := range v.obj {
			if x, ok := m.v.eval(data); ok {
				out[m.key] = x
			}
		}
		return out, true
	}
	return v.lit, true
}

// JSON returns the structure as compact JSON, as it was sent: what the
// state's ui.components holds for clients to bind.
func (s *Structure) JSON() json.RawMessage { return slices.Clone(s.raw) }

// Actions returns every action the structure declares, in document order;
// a link declares open.
func (s *Structure) Actions() []Action { return slices.Clone(s.actions) }

// CheckAction returns nil when some node declares action, and otherwise an
// *Error (ErrUndeclaredAction) listing the actions it declares.
func (s *Structure) CheckAction(action string) error {
	var names []string
	for _, a := range s.actions {
		if a.Action == action {
			return nil
		}
		if !slices.Contains(names, a.Action) {
			names = append(names, a.Action)
		}
	}
	if len(names) == 0 {
		return refuse(ErrUndeclaredAction, "", fmt.Sprintf(`the component declares no action %q, and no action at all; declare one in a node's on, such as {"type": "button", "label": "Retry", "on": {"press": "retry"}}`, prose.Shorten(action)))
	}
	slices.Sort(names)
	return refuse(ErrUndeclaredAction, "", fmt.Sprintf("the component declares no action %q; send one it declares: %s", prose.Shorten(action), list(quoteAll(names), "or")))
}

// checkStatic binds the structure to {} and refuses a failure in a prop
// with no binding in it, which no data could fix.
func (s *Structure) checkStatic() error {
	_, err := s.bind(map[string]any{})
	var e *bindError
	if errors.As(err, &e) && e.static {
		return refuse(ErrStructure, e.path, structAt(e.path)+": "+e.reason)
	}
	return nil
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}

// structAt names a place in the structure in a refusal.
func structAt(p string) string {
	if p == "" {
		return "the structure"
	}
	return "structure " + p
}

// dataAt names a place in the data in a refusal.
func dataAt(p string) string {
	if p == "" {
		return "the data"
	}
	return "the data at " + p
}
