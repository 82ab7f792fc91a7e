package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/ui"
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

// showKinds lists the surface kinds and their fields for ui.show's
// description; the list is worked out once from the schemas.
var showKinds = sync.OnceValue(listKinds)

func listKinds() string {
	var b strings.Builder
	for _, kind := range ui.Kinds() {
		schema, ok := ui.Schema(kind)
		if !ok {
			continue
		}
		var s struct {
			Description string                     `json:"description"`
			Required    []string                   `json:"required"`
			Properties  map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(schema, &s) != nil {
			continue
		}
		required := map[string]bool{}
		for _, r := range s.Required {
			required[r] = true
		}
		var fields []string
		for name := range s.Properties {
			if name == "t" {
				continue
			}
			if required[name] {
				name += " (required)"
			}
			fields = append(fields, name)
		}
		sort.Strings(fields)
		fmt.Fprintf(&b, "\n- %s: %s Fields: %s.", kind, s.Description, strings.Join(fields, ", "))
	}
	return b.String()
}

func (t *showTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "ui.show",
		Description: "Places a surface on the person's screen, or replaces the one you placed under the same id (a new placement moves it). " +
			"placement is band, pane.left, pane.right, footer, inline or hidden. surface is {\"kind\": {\"t\": KIND, …fields}}, with these kinds:" + showKinds() +
			"\nInstead of surface you may send a2ui: a list of A2UI v0.9 messages (createSurface with the basic catalog, updateComponents with a root, updateDataModel) for one surface.",
		Parameters: json.RawMessage(`{"type":"object","required":["id","placement"],"additionalProperties":false,"properties":{` +
			`"id":{"type":"string","description":"your id for this surface: letters, digits, . _ -"},` +
			`"placement":{"type":"string","enum":["band","pane.left","pane.right","footer","inline","hidden"]},` +
			`"title":{"type":"string"},` +
			`"surface":{"type":"object","description":"{\"kind\": {\"t\": KIND, …}}"},` +
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
		Fallback  json.RawMessage `json:"fallback"`
		A2UI      json.RawMessage `json:"a2ui"`
	}
	if err := json.Unmarshal(c.Args, &in); err != nil {
		return tool.Result{Text: "ui.show needs {id, placement, surface}: " + err.Error(), Error: true}, nil
	}
	err := t.s.Show(ctx, ui.OwnerAgent, ShowInput{ID: in.ID, Placement: in.Placement, Title: in.Title, Surface: in.Surface, Fallback: in.Fallback, A2UI: in.A2UI})
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
