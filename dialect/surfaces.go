package dialect

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/getorrery/orrery/dialect/a2ui"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// WithA2UI returns an encoder that adds the A2UI face to inner (nil: the
// frames as logged). Before a frame that changes what a placed node shows,
// it sends an ACTIVITY_SNAPSHOT {activityType: "a2ui-surface"} holding the
// node projected to A2UI v0.9 (surfaceId placed:<owner>:<id>), whole:
//
//   - orrery.placed of a surface: the surface, or the a2ui form it was
//     shown with;
//   - a STATE_DELTA that places a component, moves it, or changes its
//     structure or its data: the component bound to its data (read from
//     the state after the delta);
//   - a STATE_DELTA that only streams chunks onto a stream surface: the
//     surface;
//   - orrery.unplaced: deleteSurface;
//   - a STATE_SNAPSHOT: every node it holds, so a client that starts from
//     a snapshot (a run's, or a seq-0 one) draws what is on the screen.
//
// The snapshot has the frame's seq and no type of its own (it continues
// that seq), and goes through inner like any frame. A node that does not
// project is left out. The encoder is a kernel.StateEncoder: without the
// state (Encode), components are not projected.
func WithA2UI(inner kernel.Encoder) kernel.Encoder {
	return a2uiEncoder{inner: inner}
}

type a2uiEncoder struct {
	inner kernel.Encoder
}

var _ kernel.StateEncoder = a2uiEncoder{}

func (e a2uiEncoder) Name() string {
	if e.inner == nil {
		return "a2ui"
	}
	return e.inner.Name() + "+a2ui"
}

func (e a2uiEncoder) encode(dst []kernel.Frame, f kernel.Frame) []kernel.Frame {
	if e.inner == nil {
		return append(dst, f)
	}
	return e.inner.Encode(dst, f)
}

// Encode is EncodeState without the state: placements of surfaces,
// removals and snapshots only.
func (e a2uiEncoder) Encode(dst []kernel.Frame, f kernel.Frame) []kernel.Frame {
	return e.EncodeState(dst, f, nil)
}

// EncodeState sends, before f, the A2UI snapshots of the nodes f changes,
// reading components from state, the document after f.
func (e a2uiEncoder) EncodeState(dst []kernel.Frame, f kernel.Frame, state []byte) []kernel.Frame {
	switch f.Type {
	case string(protocol.TypeCustom), string(protocol.TypeStateDelta), string(protocol.TypeStateSnapshot):
		start := len(dst)
		for _, act := range activitiesFor(f, state) {
			dst = e.encode(dst, act)
		}
		for i := start; i < len(dst); i++ {
			dst[i].Type = ""
		}
	}
	return e.encode(dst, f)
}

// activitiesFor returns the A2UI activity frames f stands for, with its seq
// and session.
func activitiesFor(f kernel.Frame, state []byte) []kernel.Frame {
	ev, err := protocol.DecodeEvent(f.Data)
	if err != nil {
		return nil
	}
	var views []nodeView
	switch e := ev.(type) {
	case *protocol.Custom:
		views = placementViews(e)
	case *protocol.StateDelta:
		views = deltaViews(e.Delta, state)
	case *protocol.StateSnapshot:
		views = snapshotViews(e.Snapshot)
	}
	var out []kernel.Frame
	for _, v := range views {
		if act, ok := activityFrame(f, ev, v); ok {
			out = append(out, act)
		}
	}
	return out
}

// nodeView is one placed node as the A2UI face sends it: deleted, an a2ui
// form, a surface, or a component's structure and data.
type nodeView struct {
	id        string // placed:<owner>:<id>
	deleted   bool
	form      json.RawMessage
	surface   json.RawMessage
	structure json.RawMessage
	data      json.RawMessage
}

func (v nodeView) messages() ([]a2ui.Message, error) {
	switch {
	case v.deleted:
		return []a2ui.Message{a2ui.Delete(v.id)}, nil
	case len(v.form) > 0:
		// Shown as an a2ui form: its own messages, checked when shown.
		var msgs []a2ui.Message
		err := json.Unmarshal(v.form, &msgs)
		return msgs, err
	case len(v.structure) > 0:
		return a2ui.ProjectComponent(v.id, v.structure, v.data)
	default:
		return a2ui.ProjectSurface(v.id, v.surface)
	}
}

func activityFrame(f kernel.Frame, ev protocol.Event, v nodeView) (kernel.Frame, bool) {
	msgs, err := v.messages()
	if err != nil {
		return kernel.Frame{}, false
	}
	act, err := a2ui.Activity(v.id, msgs)
	if err != nil {
		return kernel.Frame{}, false
	}
	h := ev.Header()
	act.Timestamp = h.Timestamp
	meta := act.Orrery()
	meta.Seq = f.Seq
	if h.Metadata != nil && h.Metadata.Orrery != nil {
		meta.Session = h.Metadata.Orrery.Session
	}
	data, err := json.Marshal(act)
	if err != nil {
		return kernel.Frame{}, false
	}
	return kernel.Frame{Seq: f.Seq, Type: string(protocol.TypeActivitySnapshot), Run: f.Run, Data: data}, true
}

// placementViews reads orrery.placed of a surface and orrery.unplaced. A
// component's placement is sent from the STATE_DELTA before it, which
// the state after it completes.
func placementViews(c *protocol.Custom) []nodeView {
	if c.Name != kernel.PlacedEvent && c.Name != kernel.UnplacedEvent {
		return nil
	}
	var p kernel.Placed
	if json.Unmarshal(c.Value, &p) != nil || p.ID == "" || p.Owner == "" {
		return nil
	}
	v := nodeView{id: nodeID(p.Owner, p.ID)}
	switch {
	case c.Name == kernel.UnplacedEvent:
		v.deleted = true
	case len(p.A2UI) > 0:
		v.form = p.A2UI
	case len(p.Surface) > 0:
		v.surface = p.Surface
	default:
		return nil
	}
	return []nodeView{v}
}

func nodeID(owner, id string) string { return "placed:" + owner + ":" + id }

// uiState is the part of the shared state the A2UI face reads.
type uiState struct {
	UI struct {
		Nodes      map[string]stateNode       `json:"nodes"`
		Components map[string]json.RawMessage `json:"components"`
	} `json:"ui"`
	Data map[string]map[string]json.RawMessage `json:"data"`
}

type stateNode struct {
	Owner     string          `json:"owner"`
	Surface   json.RawMessage `json:"surface"`
	Component string          `json:"component"`
	A2UI      json.RawMessage `json:"a2ui"`
}

// view returns how node id (placed:<owner>:<id>) stands in st.
func (st *uiState) view(id string) (nodeView, bool) {
	n, ok := st.UI.Nodes[id]
	if !ok {
		return nodeView{}, false
	}
	v := nodeView{id: id}
	switch {
	case n.Component != "":
		structure, ok := st.UI.Components[n.Component]
		if !ok {
			return nodeView{}, false
		}
		v.structure = structure
		owner, local, ok := splitNode(id)
		if !ok || owner != n.Owner {
			return nodeView{}, false
		}
		v.data = st.Data[owner][local]
	case len(n.A2UI) > 0:
		v.form = n.A2UI
	case len(n.Surface) > 0:
		v.surface = n.Surface
	default:
		return nodeView{}, false
	}
	return v, true
}

// splitNode splits placed:<owner>:<id>; the owner is agent, config or
// ext:<name>, so the id is what follows the owner.
func splitNode(id string) (owner, local string, ok bool) {
	rest, ok := strings.CutPrefix(id, "placed:")
	if !ok {
		return "", "", false
	}
	if strings.HasPrefix(rest, "ext:") {
		i := strings.Index(rest[len("ext:"):], ":")
		if i < 0 {
			return "", "", false
		}
		i += len("ext:")
		return rest[:i], rest[i+1:], true
	}
	owner, local, ok = strings.Cut(rest, ":")
	return owner, local, ok
}

// snapshotViews returns every node of a snapshot, in node id order.
func snapshotViews(doc json.RawMessage) []nodeView {
	var st uiState
	if json.Unmarshal(doc, &st) != nil {
		return nil
	}
	ids := make([]string, 0, len(st.UI.Nodes))
	for id := range st.UI.Nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []nodeView
	for _, id := range ids {
		if v, ok := st.view(id); ok {
			out = append(out, v)
		}
	}
	return out
}

// deltaViews returns the nodes a delta changes that no orrery.placed or
// orrery.unplaced announces: components (placed, moved, their structure or
// data changed) and stream surfaces that took chunks. state is the
// document after the delta; without it nothing is returned.
func deltaViews(ops []protocol.PatchOp, state []byte) []nodeView {
	if len(state) == 0 || len(ops) == 0 {
		return nil
	}
	// What the delta touches: nodes by id, structures by name, data by
	// owner (all of an owner's when the id is ""), or all data.
	nodes := map[string]bool{}
	structures := map[string]bool{}
	data := map[string]map[string]bool{}
	allData := false
	chunksOnly := true
	for _, op := range ops {
		tok := pointer(op.Path)
		if len(tok) == 0 {
			allData = true
			continue
		}
		isChunk := op.Op == "add" && len(tok) >= 6 && tok[0] == "ui" && tok[1] == "nodes" &&
			tok[3] == "surface" && tok[4] == "kind" && tok[5] == "chunks" && len(tok) <= 7
		if !isChunk {
			chunksOnly = false
		}
		switch {
		case tok[0] == "ui" && len(tok) >= 3 && tok[1] == "nodes":
			nodes[tok[2]] = true
		case tok[0] == "ui" && len(tok) >= 3 && tok[1] == "components":
			structures[tok[2]] = true
		case tok[0] == "data" && len(tok) == 1:
			allData = true
		case tok[0] == "data":
			owner := tok[1]
			if data[owner] == nil {
				data[owner] = map[string]bool{}
			}
			if len(tok) == 2 {
				data[owner][""] = true
			} else {
				data[owner][tok[2]] = true
			}
		}
	}
	if len(nodes) == 0 && len(structures) == 0 && len(data) == 0 && !allData {
		return nil
	}
	var st uiState
	if json.Unmarshal(state, &st) != nil {
		return nil
	}
	ids := make([]string, 0, len(st.UI.Nodes))
	for id := range st.UI.Nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []nodeView
	for _, id := range ids {
		n := st.UI.Nodes[id]
		touched := nodes[id]
		if n.Component == "" {
			// A surface changes with orrery.placed, except when chunks
			// stream onto it.
			if !touched || !chunksOnly {
				continue
			}
		} else if !touched && !structures[n.Component] && !allData {
			owner, local, ok := splitNode(id)
			if !ok || !(data[owner][""] || data[owner][local]) {
				continue
			}
		}
		if v, ok := st.view(id); ok {
			out = append(out, v)
		}
	}
	return out
}

// pointer splits a JSON Pointer into its unescaped tokens.
func pointer(p string) []string {
	if p == "" || p[0] != '/' {
		return nil
	}
	tok := strings.Split(p[1:], "/")
	for i, t := range tok {
		tok[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tok
}
