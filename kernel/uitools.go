package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// searchable returns the tools a session's model finds with tools.search:
// its ui tools and the kernel's searchable tools (MCP servers' tools …).
func searchable(s *Session) *tool.Set {
	tools := []tool.Tool{&showTool{s: s}, &hideTool{s: s}}
	for _, spec := range s.k.cfg.Searchable.Specs() {
		t, _ := s.k.cfg.Searchable.Lookup(spec.Name)
		tools = append(tools, t)
	}
	return tool.NewSet(tools...)
}

type showTool struct{ s *Session }

var _ tool.Tool = (*showTool)(nil)

// showCatalog lists the node types of the catalog orrery/1 (the surface
// kinds and button), their fields and events, for ui.show's description,
// which is what tools.search answers; it is worked out once.
var showCatalog = sync.OnceValue(listCatalog)

func listCatalog() string {
	var b strings.Builder
	for _, t := range component.Catalog() {
		var fields []string
		for _, p := range t.Props {
			name := p.Name
			if p.Required {
				name += " (required)"
			}
			fields = append(fields, name)
		}
		if t.Name == ui.KindStack {
			fields = append(fields, "children (nodes, in a structure)")
		}
		fmt.Fprintf(&b, "\n- %s: %s Fields: %s.", t.Name, t.Description, strings.Join(fields, ", "))
		if len(t.Events) > 0 {
			fmt.Fprintf(&b, " Events: %s.", strings.Join(t.Events, ", "))
		}
	}
	return b.String()
}

func (t *showTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "ui.show",
		Description: "Places a surface or a live component on the person's screen, or replaces the one you placed under the same id (a new placement moves it). " +
			"placement is band, pane.left, pane.right, footer, inline or hidden. Send exactly one of: " +
			"surface, {\"kind\": {\"t\": KIND, …fields}}; or structure with data: a component, a tree of nodes {\"type\": TYPE, …fields, \"on\": {EVENT: ACTION}, \"when\": \"${/flag}\"} " +
			"(a stack's children are nodes; on and when are optional) and data, one JSON object the nodes read with ${/json/pointer} templates in strings, " +
			"such as {\"type\": \"text\", \"value\": \"${/left} left\"} with {\"left\": 3}; a string that is exactly one ${…} keeps the value's JSON type. " +
			"To change a component, call ui.show again with the same id and the whole new data. A person's action on your component (an event its on names) reaches you on your next turn as a note \"[ext:ui] <id>: <action> <value>\". " +
			"A button with an href is a link the host opens. Instead of surface you may send a2ui: a list of A2UI v0.9 messages (createSurface with the basic catalog, updateComponents with a root, updateDataModel) for one surface. " +
			"The types (catalog orrery/1), with their fields and events:" + showCatalog(),
		Parameters: json.RawMessage(`{"type":"object","required":["id","placement"],"additionalProperties":false,"properties":{` +
			`"id":{"type":"string","description":"your id for this surface: letters, digits, . _ -"},` +
			`"placement":{"type":"string","enum":["band","pane.left","pane.right","footer","inline","hidden"]},` +
			`"title":{"type":"string"},` +
			`"surface":{"type":"object","description":"{\"kind\": {\"t\": KIND, …}}"},` +
			`"structure":{"type":"object","description":"a component's tree of nodes {\"type\": TYPE, …}; send data with it"},` +
			`"data":{"type":"object","description":"the structure's data: one JSON object"},` +
			`"component":{"type":"string","description":"an extension's declared component: extensions only; you compose a structure instead"},` +
			`"fallback":{"type":"object","description":"a surface of a core kind for clients that cannot draw this one"},` +
			`"a2ui":{"type":"array","items":{"type":"object"},"description":"instead of surface: A2UI v0.9 messages for one surface"}}}`),
		// Placing is governed by the placement rules, not the consent gate.
		ReadOnly: true,
	}
}

func (t *showTool) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	var in struct {
		ID        string          `json:"id"`
		Placement string          `json:"placement"`
		Title     string          `json:"title"`
		Surface   json.RawMessage `json:"surface"`
		Structure json.RawMessage `json:"structure"`
		Data      json.RawMessage `json:"data"`
		Component string          `json:"component"`
		Fallback  json.RawMessage `json:"fallback"`
		A2UI      json.RawMessage `json:"a2ui"`
	}
	if err := json.Unmarshal(c.Args, &in); err != nil {
		return tool.Result{Text: "ui.show needs {id, placement} and one of surface or structure with data: " + err.Error(), Error: true}, nil
	}
	err := t.s.Show(ctx, ui.OwnerAgent, ShowInput{ID: in.ID, Placement: in.Placement, Title: in.Title, Surface: in.Surface,
		Structure: in.Structure, Data: in.Data, Component: in.Component, Fallback: in.Fallback, A2UI: in.A2UI})
	return toolOutcome(err, fmt.Sprintf("placed %s in %s", in.ID, in.Placement))
}

type hideTool struct{ s *Session }

var _ tool.Tool = (*hideTool)(nil)

func (t *hideTool) Spec() tool.Spec {
	return tool.Spec{
		Name:        "ui.hide",
		Description: "Removes a surface you placed with ui.show, by its id.",
		Parameters:  json.RawMessage(`{"type":"object","required":["id"],"additionalProperties":false,"properties":{"id":{"type":"string"}}}`),
		ReadOnly:    true,
	}
}

func (t *hideTool) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	var in struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(c.Args, &in); err != nil {
		return tool.Result{Text: "ui.hide needs {id}: " + err.Error(), Error: true}, nil
	}
	return toolOutcome(t.s.Hide(ctx, ui.OwnerAgent, in.ID), "removed "+in.ID)
}

// toolOutcome turns a refusal into a result the model reads (so it can fix
// its call) and any other error into the tool's failure.
func toolOutcome(err error, ok string) (tool.Result, error) {
	var refused *RequestError
	switch {
	case err == nil:
		return tool.Result{Text: ok}, nil
	case errors.As(err, &refused):
		return tool.Result{Text: refused.Msg, Error: true}, nil
	default:
		return tool.Result{}, err
	}
}
