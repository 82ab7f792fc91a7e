package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// instance is one component shown under a node: its structure, its last
// good data and the pacing of its updates. It is owned by the session actor.
type instance struct {
	owner     ui.Owner
	id        string
	name      string // the structure's key under /ui/components
	structure *component.Structure
	data      *component.Data
	pace      *component.Coalescer
	stop      func() bool // stops the pending flush timer; nil when none runs
}

// stopTimer stops the instance's pending flush, if any.
func (in *instance) stopTimer() {
	if in.stop != nil {
		in.stop()
		in.stop = nil
	}
}

// clockFunc is a component.Clock reading a func, such as Config.Now.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// DataUpdate changes a component's data: exactly one of Set (the whole new
// object, which the kernel diffs into the smallest change) or Patch (RFC
// 6902 operations, applied in order, all or none).
type DataUpdate struct {
	Set   json.RawMessage
	Patch json.RawMessage
}

// Data updates the data of the component owner showed under id (ui/data).
// An owner may change only an id it showed with a component or a structure.
// A refused update (not one object, over limits.dataBytes, refused by the
// component's schema, a patch that does not apply, data that does not bind)
// names the path and keeps the last good data. Accepted updates are logged
// as STATE_DELTA under /data/<owner>/<id>, at most limits.dataUpdatesPerSec
// a second: faster ones are coalesced, the last value going out at the next
// allowed moment.
func (s *Session) Data(ctx context.Context, owner ui.Owner, id string, up DataUpdate) error {
	var err error
	if derr := s.do(ctx, func() { err = s.updateData(owner, id, up) }); derr != nil {
		return derr
	}
	return err
}

func (s *Session) updateData(owner ui.Owner, id string, up DataUpdate) error {
	s.assertActor()
	if (len(up.Set) > 0) == (len(up.Patch) > 0) {
		return &RequestError{Msg: `ui.data takes exactly one of set (the whole new object, such as {"failed": 2}) or patch (RFC 6902 operations, such as [{"op": "replace", "path": "/failed", "value": 3}])`}
	}
	nodeID := ui.NodeID(owner, id)
	inst, err := s.instance(nodeID)
	if err != nil {
		return err
	}
	if inst == nil {
		return s.notAComponent(owner, id, nodeID)
	}
	if len(up.Set) > 0 {
		_, err = inst.data.Set(up.Set)
	} else {
		err = patchData(inst.data, up.Patch)
	}
	if err != nil {
		var re *RequestError
		if errors.As(err, &re) {
			return err
		}
		return refuse(err)
	}
	publish, wait := inst.pace.Update()
	switch {
	case publish:
		return s.publishData(inst)
	case wait > 0:
		s.flushAfter(inst, wait)
	}
	return nil
}

// patchData applies a patch to data. evanphx/json-patch v5.9.11 panics on
// a test operation whose value holds null inside an array (lazyNode.equal
// on a nil node); the panic would take the session down, so it becomes a
// refusal, and the data, which Patch changes only after the patch applied,
// keeps its last good value.
func patchData(d *component.Data, ops json.RawMessage) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &RequestError{Msg: "the patch could not be applied (its test operation compares a value holding null, which the JSON Patch library cannot): nothing was applied; send set with the whole object instead, or test a smaller value"}
		}
	}()
	_, err = d.Patch(ops)
	return err
}

// notAComponent is the refusal of a data update for an id owner did not
// show with a component or a structure.
func (s *Session) notAComponent(owner ui.Owner, id, nodeID string) error {
	prev, err := s.state.node(nodeID)
	if err != nil {
		return err
	}
	if prev != nil {
		return &RequestError{Msg: fmt.Sprintf("%s placed a surface under %q, not a component: ui.data changes only an id shown with a component or a structure; show it again with component or structure and data", owner, id)}
	}
	return &RequestError{Msg: fmt.Sprintf("%s has shown no component under %q: an owner changes the data only of an id it showed itself with a component or a structure; show one with ui.show first", owner, id)}
}

// flushAfter starts the timer that publishes inst's held update. Runs on
// the actor.
func (s *Session) flushAfter(inst *instance, wait time.Duration) {
	inst.stopTimer()
	// Posted to this actor only: a timer never loads an unloaded session.
	a := s.current()
	inst.stop = s.k.cfg.AfterFunc(wait, func() { s.post(a, func() { s.flushData(inst) }) })
}

// flushData publishes inst's held update when its moment has come. Runs on
// the actor.
func (s *Session) flushData(inst *instance) {
	s.assertActor()
	if s.comps[ui.NodeID(inst.owner, inst.id)] != inst {
		return // hidden or shown anew since
	}
	inst.stop = nil
	publish, wait := inst.pace.Flush()
	switch {
	case publish:
		if err := s.publishData(inst); err != nil {
			s.k.log.Error("publish component data", "session", s.id, "owner", inst.owner, "id", inst.id, "err", err)
		}
	case wait > 0:
		s.flushAfter(inst, wait)
	}
}

// flushAllData publishes every held update at once, as the session stops:
// nothing accepted is dropped. Runs on the actor.
func (s *Session) flushAllData() {
	s.assertActor()
	for _, inst := range s.comps {
		inst.stopTimer()
		if inst.pace.Pending() {
			if err := s.publishData(inst); err != nil {
				s.k.log.Error("publish component data", "session", s.id, "owner", inst.owner, "id", inst.id, "err", err)
			}
		}
	}
}

// publishData logs the change from the data last published to inst's last
// good data. Runs on the actor.
func (s *Session) publishData(inst *instance) error {
	ops, err := inst.data.Publish()
	if err != nil {
		return fmt.Errorf("publish data of %s: %w", inst.id, err)
	}
	if len(ops) == 0 {
		return nil
	}
	base := dataPath(inst.owner, inst.id)
	for i := range ops {
		ops[i].Path = base + ops[i].Path
	}
	return s.emit(s.runID(), &protocol.StateDelta{Delta: ops})
}

// uiView is the part of the state document that placing and hiding a
// component reads.
type uiView struct {
	UI struct {
		Nodes      map[string]json.RawMessage `json:"nodes"`
		Components map[string]json.RawMessage `json:"components"`
	} `json:"ui"`
	Data map[string]map[string]json.RawMessage `json:"data"`
}

func (s *stateDoc) view() (uiView, error) {
	var v uiView
	if err := json.Unmarshal(s.doc, &v); err != nil {
		return v, fmt.Errorf("read state: %w", err)
	}
	return v, nil
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// componentPath is where the structure name lives: /ui/components/<name>.
func componentPath(name string) string { return "/ui/components/" + pointerEscaper.Replace(name) }

// dataPath is where the data of owner's id lives: /data/<owner>/<id>.
func dataPath(owner ui.Owner, id string) string {
	return "/data/" + pointerEscaper.Replace(string(owner)) + "/" + pointerEscaper.Replace(id)
}

// inlineName names an inline structure: <owner>#<id>.
func inlineName(owner ui.Owner, id string) string { return string(owner) + "#" + id }

// declaredName names a declared component's structure: <owner>:<name>.
func declaredName(owner ui.Owner, name string) string { return string(owner) + ":" + name }

// resolveComponent returns the structure a component show names (its name
// under /ui/components, the parsed structure and a declared component's
// schema), or the refusal.
func (s *Session) resolveComponent(owner ui.Owner, in ShowInput) (string, *component.Structure, *component.Schema, error) {
	if in.Component == "" {
		st, err := component.Parse(in.Structure, s.k.cfg.Limits)
		if err != nil {
			return "", nil, nil, refuse(err)
		}
		return inlineName(owner, in.ID), st, nil, nil
	}
	ext, isExt := owner.Ext()
	if !isExt {
		if by := s.k.components.declaredBy(in.Component); len(by) > 0 {
			return "", nil, nil, &RequestError{Msg: fmt.Sprintf("component %q belongs to %s: %s cannot show an extension's declared component; compose your own structure and send it as structure with data", in.Component, by[0], owner)}
		}
		return "", nil, nil, &RequestError{Msg: fmt.Sprintf("%s cannot name a component: only an extension declares components; compose your own structure and send it as structure with data", owner)}
	}
	reg := s.k.components.extension(owner)
	var d declared
	var ok bool
	if reg != nil {
		d, ok = reg.components[in.Component]
	}
	if !ok {
		var names []string
		if reg != nil {
			for n := range reg.components {
				names = append(names, n)
			}
			slices.Sort(names)
		}
		have := "it declares none"
		if len(names) > 0 {
			have = "it declares " + strings.Join(names, ", ")
		}
		return "", nil, nil, &RequestError{Msg: fmt.Sprintf("extension %s declares no component %q (%s): declare it under [[provides.components]] in orrery.toml, or send an inline structure with data", ext, in.Component, have)}
	}
	if d.err != nil {
		return "", nil, nil, &RequestError{Msg: d.err.Error()}
	}
	if d.schema != nil && d.schema.Err() != nil {
		return "", nil, nil, refuse(d.schema.Err())
	}
	return declaredName(owner, in.Component), d.structure, d.schema, nil
}

// showComponent places a component (a declared one or an inline structure)
// with its first data. Runs on the actor, after show's checks.
func (s *Session) showComponent(owner ui.Owner, in ShowInput, placement ui.Placement) error {
	name, st, schema, err := s.resolveComponent(owner, in)
	if err != nil {
		return err
	}
	first := in.Data
	if len(first) == 0 {
		first = json.RawMessage(`{}`)
	}
	data, err := component.NewData(first, component.Options{Limits: s.k.cfg.Limits, Schema: schema, Structure: st})
	if err != nil {
		return refuse(err)
	}
	view, err := s.state.view()
	if err != nil {
		return err
	}
	nodeID := ui.NodeID(owner, in.ID)
	var ops []protocol.PatchOp
	structure := st.JSON()
	switch prev, ok := view.UI.Components[name]; {
	case !ok:
		ops = append(ops, protocol.PatchOp{Op: "add", Path: componentPath(name), Value: structure})
	case !jsonEqual(prev, structure):
		ops = append(ops, protocol.PatchOp{Op: "replace", Path: componentPath(name), Value: structure})
	}
	dataOps, err := addDataOps(view, owner, in.ID, data.JSON())
	if err != nil {
		return err
	}
	ops = append(ops, dataOps...)
	next := node{Placement: string(placement), Title: in.Title, Owner: string(owner), Component: name, Data: dataPath(owner, in.ID), Fallback: in.Fallback}
	nodeOps, err := nodeChange(view.UI.Nodes[nodeID], ui.NodePath(owner, in.ID), next)
	if err != nil {
		return err
	}
	ops = append(ops, nodeOps...)
	if prevNode, ok := view.UI.Nodes[nodeID]; ok {
		if old := componentOf(prevNode); old != "" && old != name && !usedElsewhere(view, old, nodeID) {
			ops = append(ops, protocol.PatchOp{Op: "remove", Path: componentPath(old)})
		}
	}
	bound := data.Bound()
	placed := Placed{ID: in.ID, Placement: string(placement), Owner: string(owner), Title: in.Title, Component: name, Data: data.JSON(), Text: bound.Text}
	if err := s.emitPlacement(ops, placed); err != nil {
		return err
	}
	inst := &instance{owner: owner, id: in.ID, name: name, structure: st, data: data}
	if old := s.comps[nodeID]; old != nil {
		old.stopTimer()
		inst.pace = old.pace // a new show does not reset the pace
	}
	if inst.pace == nil {
		inst.pace = component.NewCoalescer(s.k.cfg.Limits.DataUpdatesPerSec, clockFunc(s.k.cfg.Now))
	}
	s.comps[nodeID] = inst
	return nil
}

// nodeChange returns the operations that turn the node at path (prev, nil
// when none) into next.
func nodeChange(prev json.RawMessage, path string, next node) ([]protocol.PatchOp, error) {
	raw, err := json.Marshal(next)
	if err != nil {
		return nil, fmt.Errorf("encode node: %w", err)
	}
	if prev == nil {
		return []protocol.PatchOp{{Op: "add", Path: path, Value: raw}}, nil
	}
	return diff(path, prev, raw)
}

// addDataOps returns the operations that put data at /data/<owner>/<id>: an
// add never assumes a parent the client may lack, and data already there is
// changed by its smallest diff.
func addDataOps(view uiView, owner ui.Owner, id string, data json.RawMessage) ([]protocol.PatchOp, error) {
	switch byOwner, ok := view.Data[string(owner)]; {
	case view.Data == nil:
		v, err := json.Marshal(map[string]map[string]json.RawMessage{string(owner): {id: data}})
		if err != nil {
			return nil, fmt.Errorf("encode data: %w", err)
		}
		return []protocol.PatchOp{{Op: "add", Path: "/data", Value: v}}, nil
	case !ok:
		v, err := json.Marshal(map[string]json.RawMessage{id: data})
		if err != nil {
			return nil, fmt.Errorf("encode data: %w", err)
		}
		return []protocol.PatchOp{{Op: "add", Path: "/data/" + pointerEscaper.Replace(string(owner)), Value: v}}, nil
	default:
		prev, ok := byOwner[id]
		if !ok {
			return []protocol.PatchOp{{Op: "add", Path: dataPath(owner, id), Value: data}}, nil
		}
		ops, err := component.Diff(prev, data)
		if err != nil {
			return nil, fmt.Errorf("diff data: %w", err)
		}
		base := dataPath(owner, id)
		for i := range ops {
			ops[i].Path = base + ops[i].Path
		}
		return ops, nil
	}
}

// dropOps returns the operations that remove what the component node
// nodeID of owner's id leaves behind when it goes or becomes a surface: its
// data (and /data/<owner>, or /data itself, when they would be left empty)
// and its structure when no other node uses it.
func dropOps(view uiView, owner ui.Owner, id, nodeID string) []protocol.PatchOp {
	var ops []protocol.PatchOp
	if byOwner, ok := view.Data[string(owner)]; ok {
		if _, ok := byOwner[id]; ok {
			switch {
			case len(byOwner) > 1:
				ops = append(ops, protocol.PatchOp{Op: "remove", Path: dataPath(owner, id)})
			case len(view.Data) > 1:
				ops = append(ops, protocol.PatchOp{Op: "remove", Path: "/data/" + pointerEscaper.Replace(string(owner))})
			default:
				ops = append(ops, protocol.PatchOp{Op: "remove", Path: "/data"})
			}
		}
	}
	if name := componentOf(view.UI.Nodes[nodeID]); name != "" && !usedElsewhere(view, name, nodeID) {
		ops = append(ops, protocol.PatchOp{Op: "remove", Path: componentPath(name)})
	}
	return ops
}

// componentOf returns the structure name a node shows, or "" for a surface.
func componentOf(raw json.RawMessage) string {
	if raw == nil {
		return ""
	}
	var n struct {
		Component string `json:"component"`
	}
	_ = json.Unmarshal(raw, &n)
	return n.Component
}

// usedElsewhere reports whether a node other than nodeID shows the
// structure name.
func usedElsewhere(view uiView, name, nodeID string) bool {
	for id, raw := range view.UI.Nodes {
		if id != nodeID && componentOf(raw) == name {
			return true
		}
	}
	return false
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(a, b json.RawMessage) bool {
	ops, err := component.Diff(a, b)
	return err == nil && len(ops) == 0
}

// instance returns the component shown as nodeID, or nil when none is.
// After a restart it rebuilds the instance from the state document (the
// structure at /ui/components, the data at /data) and the registry. Runs on
// the actor.
func (s *Session) instance(nodeID string) (*instance, error) {
	s.assertActor()
	if inst := s.comps[nodeID]; inst != nil {
		return inst, nil
	}
	view, err := s.state.view()
	if err != nil {
		return nil, err
	}
	raw, ok := view.UI.Nodes[nodeID]
	if !ok {
		return nil, nil
	}
	var n node
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("read node %s: %w", nodeID, err)
	}
	if n.Component == "" {
		return nil, nil
	}
	owner, id, err := ui.ParseNodeID(nodeID)
	if err != nil {
		return nil, err
	}
	st, err := component.Parse(view.UI.Components[n.Component], s.k.cfg.Limits)
	if err != nil {
		return nil, fmt.Errorf("rebuild component %s: %w", nodeID, err)
	}
	var schema *component.Schema
	if comp, ok := strings.CutPrefix(n.Component, string(owner)+":"); ok {
		if reg := s.k.components.extension(owner); reg != nil {
			if d, ok := reg.components[comp]; ok && d.schema != nil && d.schema.Err() == nil {
				schema = d.schema
			}
		}
	}
	opts := component.Options{Limits: s.k.cfg.Limits, Schema: schema, Structure: st}
	data, err := component.NewData(view.Data[string(owner)][id], opts)
	if err != nil {
		// The data was good when shown; the schema or limits changed
		// since. Keep it bound, unchecked, so the owner can fix it.
		opts.Schema = nil
		opts.Limits.DataBytes = max(opts.Limits.DataBytes, len(view.Data[string(owner)][id]))
		if data, err = component.NewData(view.Data[string(owner)][id], opts); err != nil {
			return nil, fmt.Errorf("rebuild component %s: %w", nodeID, err)
		}
	}
	inst := &instance{owner: owner, id: id, name: n.Component, structure: st, data: data,
		pace: component.NewCoalescer(s.k.cfg.Limits.DataUpdatesPerSec, clockFunc(s.k.cfg.Now))}
	s.comps[nodeID] = inst
	return inst, nil
}

// forgetInstance drops the component shown as nodeID. Runs on the actor.
func (s *Session) forgetInstance(nodeID string) {
	if inst := s.comps[nodeID]; inst != nil {
		inst.stopTimer()
		delete(s.comps, nodeID)
	}
}
