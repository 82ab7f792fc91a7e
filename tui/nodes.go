package tui

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// node is a placed surface as the shared state holds it at
// /ui/nodes/placed:<owner>:<id>, ready to draw.
type node struct {
	Node      string // placed:<owner>:<id>
	ID        string // the owner's id
	Placement string
	Title     string
	Owner     string
	// Surface is what to draw: the placed surface, or a component's
	// structure bound to its data.
	Surface json.RawMessage
	// Err says why a component could not be bound; it is drawn instead.
	Err string
	// Links are the hrefs a component's bound tree shows.
	Links []string
	// Actions maps a component root's events (press, select, submit, open)
	// to its action ids.
	Actions map[string]string
	// Stopped is set when the owner is a stopped extension.
	Stopped bool
	order   int
}

// ext returns the extension id of an ext:<id> owner.
func (n *node) ext() (string, bool) {
	return strings.CutPrefix(n.Owner, "ext:")
}

// rawNode is a node as stored in the state document.
type rawNode struct {
	Placement string          `json:"placement"`
	Title     string          `json:"title"`
	Owner     string          `json:"owner"`
	Surface   json.RawMessage `json:"surface"`
	Fallback  json.RawMessage `json:"fallback"`
	Component string          `json:"component"`
	Data      json.RawMessage `json:"data"`
	State     string          `json:"state"`
}

// doc is the part of the shared state document the TUI reads.
type doc struct {
	UI struct {
		Nodes      map[string]rawNode         `json:"nodes"`
		Components map[string]json.RawMessage `json:"components"`
	} `json:"ui"`
	Surfaces map[string]json.RawMessage            `json:"surfaces"`
	Data     map[string]map[string]json.RawMessage `json:"data"`
}

// binder binds components and remembers the last good binding of each
// node, so that an update that cannot be bound draws the last good tree
// (late, never dropped: the next good update is drawn in full).
type binder struct {
	structures map[string]*component.Structure // by structure JSON
	bound      map[string]bindResult           // by node id
}

type bindResult struct {
	structure, data string
	b               *component.Bound
	err             string
}

// bind returns the bound tree of a component node.
func (bd *binder) bind(nodeID string, structure, data json.RawMessage) (*component.Bound, string) {
	if prev, ok := bd.bound[nodeID]; ok && prev.structure == string(structure) && prev.data == string(data) {
		return prev.b, prev.err
	}
	if bd.structures == nil {
		bd.structures = make(map[string]*component.Structure)
		bd.bound = make(map[string]bindResult)
	}
	st, ok := bd.structures[string(structure)]
	if !ok {
		var err error
		st, err = component.Parse(structure, component.DefaultLimits())
		if err != nil {
			return nil, err.Error()
		}
		if len(bd.structures) > 256 {
			clear(bd.structures)
		}
		bd.structures[string(structure)] = st
	}
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	b, err := st.Bind(data)
	res := bindResult{structure: string(structure), data: string(data), b: b}
	if err != nil {
		if prev, ok := bd.bound[nodeID]; ok && prev.b != nil {
			// Keep drawing the last good tree.
			res.b = prev.b
		}
		res.err = err.Error()
	}
	bd.bound[nodeID] = res
	return res.b, res.err
}

// rootActions reads the root node's on map of a structure.
func rootActions(structure json.RawMessage) map[string]string {
	var root struct {
		On map[string]string `json:"on"`
	}
	_ = json.Unmarshal(structure, &root)
	return root.On
}

// parseNodes returns the placed nodes of a state document in the order
// they were first placed: order numbers each node id by its first
// orrery.placed; a node that came in a snapshot is numbered after them, by
// id.
func parseNodes(d *doc, bd *binder, order map[string]int, stopped map[string]bool) []*node {
	ids := make([]string, 0, len(d.UI.Nodes))
	for id := range d.UI.Nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if _, ok := order[id]; !ok {
			order[id] = len(order) + 1
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		if order[ids[i]] != order[ids[j]] {
			return order[ids[i]] < order[ids[j]]
		}
		return ids[i] < ids[j]
	})
	out := make([]*node, 0, len(ids))
	for _, id := range ids {
		r := d.UI.Nodes[id]
		n := &node{Node: id, Placement: r.Placement, Title: r.Title, Owner: r.Owner, Surface: r.Surface, order: order[id]}
		if _, short, err := ui.ParseNodeID(id); err == nil {
			n.ID = short
		} else {
			n.ID = strings.TrimPrefix(id, "placed:")
		}
		if r.Component != "" {
			structure := d.UI.Components[r.Component]
			data := resolveData(d, r)
			if structure == nil {
				n.Err = "its component " + r.Component + " is not in the state yet"
			} else {
				b, err := bd.bind(id, structure, data)
				if b != nil {
					n.Surface, n.Links = b.Surface, b.Links
				}
				n.Err = err
				n.Actions = rootActions(structure)
			}
		}
		if len(n.Surface) == 0 && len(r.Fallback) > 0 {
			n.Surface = r.Fallback
		}
		if e, ok := n.ext(); ok && (stopped[e] || r.State == "stopped" || isStoppedSurface(r.Surface)) {
			n.Stopped = true
		}
		out = append(out, n)
	}
	return out
}

// resolveData finds a component node's data: its data pointer
// ("/data/<owner>/<id>"), or the data itself when the node holds an object.
func resolveData(d *doc, r rawNode) json.RawMessage {
	var ptr string
	if json.Unmarshal(r.Data, &ptr) == nil {
		parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
		if len(parts) == 3 && parts[0] == "data" {
			owner := strings.ReplaceAll(strings.ReplaceAll(parts[1], "~1", "/"), "~0", "~")
			id := strings.ReplaceAll(strings.ReplaceAll(parts[2], "~1", "/"), "~0", "~")
			return d.Data[owner][id]
		}
		return nil
	}
	if len(r.Data) > 0 && r.Data[0] == '{' {
		return r.Data
	}
	return nil
}

// isStoppedSurface reports whether a surface is the one the extension host
// puts in place of a stopped extension's: a text reading "stopped: …".
func isStoppedSurface(raw json.RawMessage) bool {
	var sf struct {
		Kind struct {
			T     string `json:"t"`
			Value string `json:"value"`
		} `json:"kind"`
	}
	return json.Unmarshal(raw, &sf) == nil && sf.Kind.T == "text" && strings.HasPrefix(sf.Kind.Value, "stopped: ")
}
