package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/wI2L/jsondiff"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui"
)

// Names of the CUSTOM events that announce placements, for clients (and
// headless output) that read events rather than the state document.
const (
	PlacedEvent   = "orrery.placed"
	UnplacedEvent = "orrery.unplaced"
)

// ShowInput places a surface or a component on the screen, or replaces
// what its owner placed under the same id (a new placement moves it). It
// takes exactly one of Surface, Component or Structure.
type ShowInput struct {
	ID        string
	Placement string
	Title     string
	// Surface is a whole surface, {"kind": {…}}.
	Surface json.RawMessage
	// Component names a component the owner's manifest declares
	// ([[provides.components]]); only an extension has any.
	Component string
	// Structure is an inline structure over the catalog orrery/1,
	// registered as <owner>#<id>.
	Structure json.RawMessage
	// Data is a component's or a structure's first data: one JSON object
	// ({} when empty). It is refused with a surface.
	Data json.RawMessage
	// Fallback, when set, is what a client that cannot draw the surface or
	// component shows; it may use core kinds only.
	Fallback json.RawMessage
	// A2UI, instead of Surface, is a list of A2UI v0.9 messages for one
	// surface, checked strictly (dialect/a2ui.Validate); the surface every
	// client draws is lifted from it, and the A2UI face sends the messages.
	A2UI json.RawMessage
	// Stopped says the owner's process has stopped (an extension that
	// crashed or was stopped): clients draw the surface dimmed, marked
	// stopped. Showing it again without Stopped clears the mark.
	Stopped bool
}

// node is a placed surface or component as it sits in the state document
// at /ui/nodes/placed:<owner>:<id>: a surface, or a component's structure
// name (under /ui/components) and the pointer of its data (/data/<owner>/
// <id>). Its text form is not in it: the text is worked out from the
// surface or the bound component (ui.Text, the same everywhere) and sent
// with orrery.placed, never stored, so an update's delta stays as small as
// the change.
type node struct {
	Placement string          `json:"placement"`
	Title     string          `json:"title"`
	Owner     string          `json:"owner"`
	Surface   json.RawMessage `json:"surface,omitempty"`
	Component string          `json:"component,omitempty"`
	Data      string          `json:"data,omitempty"`
	Fallback  json.RawMessage `json:"fallback,omitempty"`
	// A2UI is the a2ui form a surface was shown with (its surfaceIds set
	// to the node), kept so that the A2UI face sends it again after a move
	// or in a snapshot, and so that its buttons' actions can be checked.
	A2UI json.RawMessage `json:"a2ui,omitempty"`
	// Stopped marks a surface whose owner's process has stopped.
	Stopped bool `json:"stopped,omitempty"`
}

// Placed is the value of an orrery.placed event: a surface, or a
// component's structure name and data, and the text form.
type Placed struct {
	ID        string          `json:"id"`
	Placement string          `json:"placement"`
	Owner     string          `json:"owner"`
	Title     string          `json:"title"`
	Surface   json.RawMessage `json:"surface,omitempty"`
	Component string          `json:"component,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Text      string          `json:"text"`
	// A2UI is the a2ui form the surface was shown with, as the A2UI face
	// sends it.
	A2UI json.RawMessage `json:"a2ui,omitempty"`
	// Stopped marks a surface whose owner's process has stopped.
	Stopped bool `json:"stopped,omitempty"`
}

// Unplaced is the value of an orrery.unplaced event.
type Unplaced struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
}

// Show places in.Surface for owner. It is all-or-none: a refusal (a surface
// that fails its schema, a host-only id, a non-core fallback, an unknown
// placement) names what failed and changes nothing.
func (s *Session) Show(ctx context.Context, owner ui.Owner, in ShowInput) error {
	var err error
	if derr := s.do(ctx, func() { err = s.show(owner, in) }); derr != nil {
		return derr
	}
	return err
}

// Hide removes what owner placed under id.
func (s *Session) Hide(ctx context.Context, owner ui.Owner, id string) error {
	var err error
	if derr := s.do(ctx, func() { err = s.hide(owner, id) }); derr != nil {
		return derr
	}
	return err
}

func refuse(err error) error { return &RequestError{Msg: err.Error()} }

func (s *Session) show(owner ui.Owner, in ShowInput) error {
	s.assertActor()
	if _, err := ui.ParseOwner(string(owner)); err != nil {
		return refuse(err)
	}
	if err := ui.CheckID(owner, in.ID); err != nil {
		return refuse(err)
	}
	placement, err := ui.ParsePlacement(in.Placement)
	if err != nil {
		return refuse(err)
	}
	if err := s.k.cfg.Permissions.CheckPlacement(owner, placement); err != nil {
		return refuse(err)
	}
	if want, ok := s.k.cfg.Placements[in.ID]; ok {
		// The person's configured placement moves it (config wins).
		if p, err := ui.ParsePlacement(want); err == nil {
			placement = p
		}
	}
	var a2uiOps json.RawMessage
	if len(in.A2UI) > 0 {
		if len(in.Surface) > 0 || in.Component != "" || len(in.Structure) > 0 {
			return &RequestError{Msg: "ui.show takes a2ui instead of surface, component or structure, not beside one: send one form"}
		}
		if in.Surface, a2uiOps, err = liftA2UI(owner, in.ID, in.A2UI); err != nil {
			return refuse(err)
		}
	}
	forms := 0
	for _, set := range []bool{len(in.Surface) > 0, in.Component != "", len(in.Structure) > 0} {
		if set {
			forms++
		}
	}
	if forms != 1 {
		return &RequestError{Msg: "ui.show takes exactly one of surface (a whole surface), component (one the manifest declares) or structure (an inline structure over the catalog orrery/1); or an a2ui form; send one of them"}
	}
	if len(in.Fallback) > 0 {
		if err := ui.ValidateFallback(in.Fallback); err != nil {
			return refuse(err)
		}
	}
	if len(in.Surface) == 0 {
		return s.showComponent(owner, in, placement)
	}
	if len(in.Data) > 0 {
		return &RequestError{Msg: "data goes with a component or a structure, not with a surface: put the values in the surface, or send a structure that binds them with data"}
	}
	text, err := ui.Text(in.Surface)
	if err != nil {
		return refuse(err)
	}
	return s.place(owner, in.ID, placement, in.Title, in.Surface, in.Fallback, text, a2uiOps, in.Stopped)
}

// place puts a checked surface under owner's id and announces it. A
// component shown there before leaves with its data and, when no other node
// uses it, its structure. a2uiOps is the a2ui form it was shown with, if
// any, for the A2UI face; stopped marks it as its owner's process having
// stopped. Runs on the actor.
func (s *Session) place(owner ui.Owner, id string, placement ui.Placement, title string, surface, fallback json.RawMessage, text string, a2uiOps json.RawMessage, stopped bool) error {
	view, err := s.state.view()
	if err != nil {
		return err
	}
	nodeID := ui.NodeID(owner, id)
	next := node{Placement: string(placement), Title: title, Owner: string(owner), Surface: surface, Fallback: fallback, A2UI: a2uiOps, Stopped: stopped}
	ops, err := nodeChange(view.UI.Nodes[nodeID], ui.NodePath(owner, id), next)
	if err != nil {
		return err
	}
	ops = append(ops, dropOps(view, owner, id, nodeID)...)
	placed := Placed{ID: id, Placement: string(placement), Owner: string(owner), Title: title, Surface: surface, Text: text, A2UI: a2uiOps, Stopped: stopped}
	if err := s.emitPlacement(ops, placed); err != nil {
		return err
	}
	s.forgetInstance(nodeID)
	return nil
}

// emitPlacement logs a placement's state change and its orrery.placed.
// Runs on the actor.
func (s *Session) emitPlacement(ops []protocol.PatchOp, p Placed) error {
	placed, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode placed: %w", err)
	}
	var evs []protocol.Event
	if !s.snapshotted {
		// A client replaying this session from seq 1 needs a baseline for
		// the delta: the state as it stands (no run has sent one yet).
		evs = append(evs, &protocol.StateSnapshot{Snapshot: bytes.Clone(s.state.JSON())})
	}
	if len(ops) > 0 {
		evs = append(evs, &protocol.StateDelta{Delta: ops})
	}
	evs = append(evs, &protocol.Custom{Name: PlacedEvent, Value: placed})
	return s.emit(s.runID(), evs...)
}

func (s *Session) hide(owner ui.Owner, id string) error {
	s.assertActor()
	prev, err := s.state.node(ui.NodeID(owner, id))
	if err != nil {
		return err
	}
	if prev == nil {
		return &RequestError{Msg: fmt.Sprintf("%s has placed nothing under %q: there is nothing to hide", owner, id)}
	}
	unplaced, err := json.Marshal(Unplaced{ID: id, Owner: string(owner)})
	if err != nil {
		return err
	}
	view, err := s.state.view()
	if err != nil {
		return err
	}
	nodeID := ui.NodeID(owner, id)
	ops := append([]protocol.PatchOp{{Op: "remove", Path: ui.NodePath(owner, id)}}, dropOps(view, owner, id, nodeID)...)
	if err := s.emit(s.runID(),
		&protocol.StateDelta{Delta: ops},
		&protocol.Custom{Name: UnplacedEvent, Value: unplaced}); err != nil {
		return err
	}
	s.forgetInstance(nodeID)
	return nil
}

// runID is the id of the run in flight, or "". Runs on the actor.
func (s *Session) runID() string {
	if s.run != nil {
		return s.run.id
	}
	return ""
}

// diff returns the minimal add/replace/remove operations that turn prev
// into next, both at base.
func diff(base string, prev, next []byte) ([]protocol.PatchOp, error) {
	patch, err := jsondiff.CompareJSON(prev, next)
	if err != nil {
		return nil, fmt.Errorf("diff node: %w", err)
	}
	ops := make([]protocol.PatchOp, 0, len(patch))
	for _, op := range patch {
		p := protocol.PatchOp{Op: op.Type, Path: base + op.Path}
		if op.Type != jsondiff.OperationRemove {
			v, err := json.Marshal(op.Value)
			if err != nil {
				return nil, fmt.Errorf("diff node: %w", err)
			}
			p.Value = v
		}
		switch op.Type {
		case jsondiff.OperationAdd, jsondiff.OperationReplace, jsondiff.OperationRemove:
		default:
			return nil, fmt.Errorf("diff node: unexpected %s operation", op.Type)
		}
		ops = append(ops, p)
	}
	return ops, nil
}

// nodes returns the placed nodes by node id.
func (s *stateDoc) nodes() (map[string]json.RawMessage, error) {
	var doc struct {
		UI struct {
			Nodes map[string]json.RawMessage `json:"nodes"`
		} `json:"ui"`
	}
	if err := json.Unmarshal(s.doc, &doc); err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	return doc.UI.Nodes, nil
}

// node returns the JSON of the placed node id, or nil when there is none.
func (s *stateDoc) node(id string) (json.RawMessage, error) {
	nodes, err := s.nodes()
	return nodes[id], err
}

// Move moves the placed node (placed:<owner>:<id>) to placement, for actor:
// its owner, or ui.OwnerConfig for the person's own layout changes.
func (s *Session) Move(ctx context.Context, actor ui.Owner, node, placement string) error {
	var err error
	if derr := s.do(ctx, func() { err = s.move(actor, node, placement) }); derr != nil {
		return derr
	}
	return err
}

// HideNode hides the placed node for actor, as Move checks it.
func (s *Session) HideNode(ctx context.Context, actor ui.Owner, node string) error {
	var err error
	if derr := s.do(ctx, func() {
		owner, id, perr := ui.ParseNodeID(node)
		if perr != nil {
			err = refuse(perr)
			return
		}
		if perr := ui.CheckLayout(actor, owner, id); perr != nil {
			err = refuse(perr)
			return
		}
		err = s.hide(owner, id)
	}); derr != nil {
		return derr
	}
	return err
}

func (s *Session) move(actor ui.Owner, nodeID, to string) error {
	s.assertActor()
	owner, id, err := ui.ParseNodeID(nodeID)
	if err != nil {
		return refuse(err)
	}
	if err := ui.CheckLayout(actor, owner, id); err != nil {
		return refuse(err)
	}
	placement, err := ui.ParsePlacement(to)
	if err != nil {
		return refuse(err)
	}
	prev, err := s.state.node(nodeID)
	if err != nil {
		return err
	}
	if prev == nil {
		return &RequestError{Msg: fmt.Sprintf("nothing is placed as %s: list the nodes in the state's /ui/nodes", nodeID)}
	}
	var n node
	if err := json.Unmarshal(prev, &n); err != nil {
		return fmt.Errorf("read node %s: %w", nodeID, err)
	}
	if n.Placement == string(placement) {
		return nil
	}
	n.Placement = string(placement)
	value, _ := json.Marshal(n.Placement)
	p := Placed{ID: id, Placement: n.Placement, Owner: n.Owner, Title: n.Title, Surface: n.Surface, A2UI: n.A2UI}
	if n.Component != "" {
		inst, err := s.instance(nodeID)
		if err != nil {
			return fmt.Errorf("component of %s: %w", nodeID, err)
		}
		if inst == nil {
			return fmt.Errorf("component of %s is missing from the state", nodeID)
		}
		p.Component, p.Data, p.Text = n.Component, inst.data.JSON(), inst.data.Bound().Text
	} else if p.Text, err = ui.Text(n.Surface); err != nil {
		return fmt.Errorf("text of %s: %w", nodeID, err)
	}
	placed, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode placed: %w", err)
	}
	return s.emit(s.runID(),
		&protocol.StateDelta{Delta: []protocol.PatchOp{{Op: "replace", Path: ui.NodePath(owner, id) + "/placement", Value: value}}},
		&protocol.Custom{Name: PlacedEvent, Value: placed})
}

// AppendChunk streams text onto a stream surface owner placed under id: the
// first piece adds …/kind/chunks as a one-element array, each next piece
// adds …/kind/chunks/-. The surface's text is kind.value and its chunks
// joined.
func (s *Session) AppendChunk(ctx context.Context, owner ui.Owner, id, chunk string) error {
	var err error
	if derr := s.do(ctx, func() { err = s.appendChunk(owner, id, chunk) }); derr != nil {
		return derr
	}
	return err
}

func (s *Session) appendChunk(owner ui.Owner, id, chunk string) error {
	s.assertActor()
	prev, err := s.state.node(ui.NodeID(owner, id))
	if err != nil {
		return err
	}
	if prev == nil {
		return &RequestError{Msg: fmt.Sprintf("%s has placed nothing under %q: show a stream surface first", owner, id)}
	}
	var n struct {
		Surface struct {
			Kind struct {
				T      string            `json:"t"`
				Chunks []json.RawMessage `json:"chunks"`
			} `json:"kind"`
		} `json:"surface"`
	}
	if err := json.Unmarshal(prev, &n); err != nil {
		return fmt.Errorf("read node: %w", err)
	}
	if n.Surface.Kind.T == "" {
		return &RequestError{Msg: fmt.Sprintf("%s is a component: only a stream surface takes chunks; change a component with ui.data", id)}
	}
	if n.Surface.Kind.T != ui.KindStream {
		return &RequestError{Msg: fmt.Sprintf("%s is a %s surface: only a stream surface takes chunks", id, n.Surface.Kind.T)}
	}
	path := ui.NodePath(owner, id) + "/surface/kind/chunks"
	op := protocol.PatchOp{Op: "add", Path: path + "/-"}
	op.Value, _ = json.Marshal(chunk)
	if n.Surface.Kind.Chunks == nil {
		op.Path = path
		op.Value, _ = json.Marshal([]string{chunk})
	}
	return s.emit(s.runID(), &protocol.StateDelta{Delta: []protocol.PatchOp{op}})
}

// NodePlacement returns where the placed node is now.
func (s *Session) NodePlacement(ctx context.Context, nodeID string) (string, error) {
	var placement string
	var err error
	if derr := s.do(ctx, func() {
		if _, _, perr := ui.ParseNodeID(nodeID); perr != nil {
			err = refuse(perr)
			return
		}
		prev, nerr := s.state.node(nodeID)
		if nerr != nil || prev == nil {
			err = nerr
			if err == nil {
				err = &RequestError{Msg: fmt.Sprintf("nothing is placed as %s: list the nodes in the state's /ui/nodes", nodeID)}
			}
			return
		}
		var n node
		err = json.Unmarshal(prev, &n)
		placement = n.Placement
	}); derr != nil {
		return "", derr
	}
	return placement, err
}

// RemoveOwner removes every node owner placed, as when an extension
// unloads: its surfaces go with it.
func (s *Session) RemoveOwner(ctx context.Context, owner ui.Owner) error {
	var err error
	if derr := s.do(ctx, func() { err = s.removeOwner(owner) }); derr != nil {
		return derr
	}
	return err
}

func (s *Session) removeOwner(owner ui.Owner) error {
	s.assertActor()
	nodes, err := s.state.nodes()
	if err != nil {
		return err
	}
	var ids []string
	for nodeID := range nodes {
		if o, id, err := ui.ParseNodeID(nodeID); err == nil && o == owner {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := s.hide(owner, id); err != nil {
			return err
		}
	}
	return nil
}
