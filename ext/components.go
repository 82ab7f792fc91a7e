package ext

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// Components is the kernel's side of components, as the host uses it: a
// registry of declared components per owner, showing a component or an
// inline structure with its first data, and data updates (set or patch) by
// owner and id. The host calls it from each extension's ordered queue.
//
// The default (Config.Components nil) draws each component as its bound
// surface through Session.Show, checking data with ui/component; a kernel
// that stores /ui/components and /data itself replaces it.
type Components interface {
	// Declare registers owner's [[provides.components]].
	Declare(owner ui.Owner, decls []ComponentDecl) error
	// Show shows a declared component (q.Component) or an inline structure
	// (q.Structure) with its first data (q.Data; {} when absent).
	Show(ctx context.Context, s *kernel.Session, owner ui.Owner, q ShowParams) error
	// Data changes the data of a component owner showed under q.ID.
	Data(ctx context.Context, s *kernel.Session, owner ui.Owner, q DataParams) error
	// Hidden says owner's id in s no longer shows a component.
	Hidden(s *kernel.Session, owner ui.Owner, id string)
	// Forget drops everything owner has in s.
	Forget(s *kernel.Session, owner ui.Owner)
}

// boundComponents is the default Components: each instance's data is
// checked by ui/component and its bound surface is placed as a surface.
type boundComponents struct {
	mu        sync.Mutex // guards declared and instances
	declared  map[ui.Owner]map[string]declared
	instances map[instanceKey]*boundInstance
}

type declared struct {
	structure *component.Structure
	schema    *component.Schema
}

type instanceKey struct {
	session string
	owner   ui.Owner
	id      string
}

type boundInstance struct {
	data             *component.Data
	placement, title string
	fallback         json.RawMessage
}

var _ Components = (*boundComponents)(nil)

func (b *boundComponents) Declare(owner ui.Owner, decls []ComponentDecl) error {
	set := make(map[string]declared, len(decls))
	for _, d := range decls {
		st, err := component.Parse(json.RawMessage(d.Structure), component.DefaultLimits())
		if err != nil {
			return fmt.Errorf("component %s: %w", d.Name, err)
		}
		set[d.Name] = declared{structure: st, schema: component.NewSchema(d.Name, json.RawMessage(d.Schema))}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.declared == nil {
		b.declared = make(map[ui.Owner]map[string]declared)
	}
	b.declared[owner] = set
	return nil
}

func (b *boundComponents) Show(ctx context.Context, s *kernel.Session, owner ui.Owner, q ShowParams) error {
	opts := component.Options{}
	if q.Component != "" {
		b.mu.Lock()
		d, ok := b.declared[owner][q.Component]
		b.mu.Unlock()
		if !ok {
			return &kernel.RequestError{Msg: fmt.Sprintf("%s declares no component %q: declare it in [[provides.components]] in orrery.toml, or send an inline structure", owner, q.Component)}
		}
		if err := d.schema.Err(); err != nil {
			return &kernel.RequestError{Msg: err.Error()}
		}
		opts.Structure, opts.Schema = d.structure, d.schema
	} else {
		st, err := component.Parse(q.Structure, component.DefaultLimits())
		if err != nil {
			return &kernel.RequestError{Msg: err.Error()}
		}
		opts.Structure = st
	}
	first := q.Data
	if len(first) == 0 {
		first = json.RawMessage("{}")
	}
	data, err := component.NewData(first, opts)
	if err != nil {
		return &kernel.RequestError{Msg: err.Error()}
	}
	inst := &boundInstance{data: data, placement: q.Placement, title: q.Title, fallback: q.Fallback}
	if err := b.draw(ctx, s, owner, q.ID, inst); err != nil {
		return err
	}
	b.mu.Lock()
	if b.instances == nil {
		b.instances = make(map[instanceKey]*boundInstance)
	}
	b.instances[instanceKey{s.ID(), owner, q.ID}] = inst
	b.mu.Unlock()
	return nil
}

func (b *boundComponents) draw(ctx context.Context, s *kernel.Session, owner ui.Owner, id string, inst *boundInstance) error {
	return s.Show(ctx, owner, kernel.ShowInput{ID: id, Placement: inst.placement, Title: inst.title, Surface: inst.data.Bound().Surface, Fallback: inst.fallback})
}

func (b *boundComponents) Data(ctx context.Context, s *kernel.Session, owner ui.Owner, q DataParams) error {
	key := instanceKey{s.ID(), owner, q.ID}
	b.mu.Lock()
	inst, ok := b.instances[key]
	b.mu.Unlock()
	if !ok {
		return &kernel.RequestError{Msg: fmt.Sprintf("%s showed no component or structure under %q: ui/data changes only an id shown with a component or a structure; ui/show it first", owner, q.ID)}
	}
	var err error
	if len(q.Set) > 0 {
		_, err = inst.data.Set(q.Set)
	} else {
		_, err = inst.data.Patch(q.Patch)
	}
	if err != nil {
		return &kernel.RequestError{Msg: err.Error()}
	}
	return b.draw(ctx, s, owner, q.ID, inst)
}

func (b *boundComponents) Hidden(s *kernel.Session, owner ui.Owner, id string) {
	b.mu.Lock()
	delete(b.instances, instanceKey{s.ID(), owner, id})
	b.mu.Unlock()
}

func (b *boundComponents) Forget(s *kernel.Session, owner ui.Owner) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.instances {
		if k.session == s.ID() && k.owner == owner {
			delete(b.instances, k)
		}
	}
}
