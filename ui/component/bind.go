package component

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/getorrery/orrery/internal/prose"
	"slices"
	"strings"

	"github.com/getorrery/orrery/ui"
)

// Bound is a structure bound to one data object: a plain surface tree, its
// text form and the links it shows.
type Bound struct {
	// Surface is the bound tree as a surface, {"kind": {…}}, that
	// ui.Validate accepts. A button is a text surface reading "[ label ]",
	// a link one reading "label (href)"; a node hidden by when is left out,
	// and a tree with nothing shown is an empty text surface.
	Surface json.RawMessage
	// Text is the text form: ui.Text of Surface.
	Text string
	// Links are the hrefs of the links the tree shows, in document order,
	// each once.
	Links []string
}

// Shows reports whether the bound tree shows a link to href, byte for byte:
// the one condition, with CheckHref, for the host to open it.
func (b *Bound) Shows(href string) bool { return slices.Contains(b.Links, href) }

// Bind binds data, one JSON object, into the structure. It returns the
// bound tree, or an *Error (ErrBind) naming the path that failed: the data
// path and the prop it is bound to, such as "the data at /runs/2/1, bound
// to structure /rows, does not fit: expected string, got number; …". Data
// that is not one object is refused with ErrNotObject, a link to a
// forbidden target with ErrLink.
func (s *Structure) Bind(data json.RawMessage) (*Bound, error) {
	v, err := decode(data)
	if err != nil {
		return nil, refuse(ErrNotObject, "", fmt.Sprintf("the data is not JSON (%v); send one JSON object such as {\"failed\": 0}", err))
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, notObject(v)
	}
	b, err := s.bind(v)
	if err != nil {
		var e *bindError
		if errors.As(err, &e) {
			return nil, e.refusal()
		}
		return nil, err
	}
	return b, nil
}

func notObject(v any) *Error {
	return refuse(ErrNotObject, "", fmt.Sprintf("the data is %s, not an object; data is one JSON object, such as {\"items\": [...]} around an array", prose.Article(prose.JSONType(v))))
}

// bindError is a bind failure before it becomes an *Error: static is true
// when the failing prop holds no binding, so no data could fix it.
type bindError struct {
	path     string // in the structure
	dataPath string // in the data, for a bare-pointer binding
	reason   string
	static   bool
	sentinel error
}

func (e *bindError) Error() string { return e.refusal().Error() }

func (e *bindError) refusal() *Error {
	sentinel := e.sentinel
	if sentinel == nil {
		sentinel = ErrBind
	}
	out := &Error{Path: e.path, DataPath: e.dataPath, sentinel: sentinel}
	if e.dataPath != "" {
		out.msg = fmt.Sprintf("%s, bound to %s, does not fit: %s", dataAt(e.dataPath), structAt(e.path), e.reason)
	} else {
		out.msg = structAt(e.path) + ": " + e.reason
	}
	return out
}

// site is where a node landed in the bound surface.
type site struct {
	surface string // pointer of its surface object, such as /kind/children/1
	n       *node
}

type binder struct {
	data  any
	sites []site
	links []string
}

// bind binds decoded data.
func (s *Structure) bind(data any) (*Bound, error) {
	b := &binder{data: data}
	kind, shown, err := b.node(s.root, "")
	if err != nil {
		return nil, err
	}
	if !shown {
		kind = emptyText()
	}
	surface, err := marshal(map[string]any{"kind": kind})
	if err != nil {
		return nil, fmt.Errorf("bind component: encode surface: %w", err)
	}
	text, err := ui.Text(surface)
	if err != nil {
		var ue *ui.Error
		if errors.As(err, &ue) {
			return nil, b.explain(ue)
		}
		return nil, fmt.Errorf("bind component: %w", err)
	}
	return &Bound{Surface: surface, Text: text, Links: b.links}, nil
}

func emptyText() map[string]any { return map[string]any{"t": ui.KindText, "value": ""} }

// node binds one node whose surface sits at surface; shown is false when
// its when is false.
func (b *binder) node(n *node, surface string) (map[string]any, bool, error) {
	if n.hidden || n.when != nil && !truthy(n.when.value(b.data)) {
		return nil, false, nil
	}
	b.sites = append(b.sites, site{surface: surface, n: n})
	kind := map[string]any{"t": n.typ}
	for _, p := range n.props {
		if v, ok := p.v.eval(b.data); ok {
			kind[p.name] = v
		}
	}
	switch n.typ {
	case TypeButton:
		return b.button(n, kind)
	case ui.KindStack:
		var kids []any
		for _, c := range n.children {
			ck, shown, err := b.node(c, fmt.Sprintf("%s/kind/children/%d", surface, len(kids)))
			if err != nil {
				return nil, false, err
			}
			if shown {
				kids = append(kids, map[string]any{"kind": ck})
			}
		}
		if len(kids) == 0 {
			return emptyText(), true, nil
		}
		kind["children"] = kids
	}
	return kind, true, nil
}

// button binds a button or link into a text surface.
func (b *binder) button(n *node, kind map[string]any) (map[string]any, bool, error) {
	label, ok := kind["label"].(string)
	if !ok || strings.TrimSpace(label) == "" {
		got := "an empty string"
		if !ok {
			got = prose.Article(prose.JSONType(kind["label"]))
			if _, has := kind["label"]; !has {
				got = "nothing"
			}
		}
		return nil, false, b.propError(n, "/label", fmt.Sprintf("a button's label must be a non-empty string, got %s; bind it to a string or write the label", got))
	}
	hv, has := kind["href"]
	if !has {
		return map[string]any{"t": ui.KindText, "value": "[ " + label + " ]"}, true, nil
	}
	href, ok := hv.(string)
	if !ok {
		return nil, false, b.propError(n, "/href", fmt.Sprintf("a link's href must be a string, got %s; bind it to an http(s) URL or a workspace path", prose.Article(prose.JSONType(hv))))
	}
	if _, err := CheckHref(href); err != nil {
		e := b.propError(n, "/href", err.Error())
		e.sentinel = ErrLink
		return nil, false, e
	}
	if !slices.Contains(b.links, href) {
		b.links = append(b.links, href)
	}
	return map[string]any{"t": ui.KindText, "value": label + " (" + href + ")"}, true, nil
}

// propError is a failure at rel (a pointer relative to node n).
func (b *binder) propError(n *node, rel, reason string) *bindError {
	e := &bindError{path: n.path + rel, reason: reason}
	// Only a node with no binding at all fails the same for every data.
	e.static = n.when == nil
	for _, p := range n.props {
		if p.v.dynamic {
			e.static = false
		}
		for _, bs := range p.v.bindings {
			if rel == bs.rel || strings.HasPrefix(rel, bs.rel+"/") {
				e.dataPath = bs.ptr + rel[len(bs.rel):]
				e.path = n.path + bs.rel
			}
		}
	}
	return e
}

// explain maps a refusal of the bound surface back to the structure and the
// data.
func (b *binder) explain(ue *ui.Error) error {
	var best *site
	for i := range b.sites {
		s := &b.sites[i]
		prefix := s.surface + "/kind"
		if ue.Path == prefix || strings.HasPrefix(ue.Path, prefix+"/") {
			if best == nil || len(s.surface) > len(best.surface) {
				best = s
			}
		}
	}
	if best == nil {
		return &bindError{path: "", reason: ue.Reason}
	}
	rel := strings.TrimPrefix(ue.Path, best.surface+"/kind")
	if rel == "/t" {
		rel = ""
	}
	return b.propError(best.n, rel, ue.Reason)
}
