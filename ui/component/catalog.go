package component

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/getorrery/orrery/ui"
)

// CatalogID names the catalog a structure is checked against.
const CatalogID = "orrery/1"

// TypeButton is the one node type that is not a surface kind: a button, or
// a link when it has an href.
const TypeButton = "button"

// The events a node may declare in on, each naming the action it sends.
const (
	// EventPress is a button pressed.
	EventPress = "press"
	// EventSubmit is a form or question submitted.
	EventSubmit = "submit"
	// EventSelect is a choice made: a table row, a tree node, a question's
	// choice.
	EventSelect = "select"
	// EventOpen is a table row or tree node opened; a link's open goes to
	// the host instead (see Link).
	EventOpen = "open"
)

// ActionOpen is the action a link sends: ui.intent {action: "open", value:
// <href>}. The host opens the href when the bound tree shows it.
const ActionOpen = "open"

// Type describes one node type of the catalog orrery/1: what the search
// answer for ui.show lists, so a model can write a structure.
type Type struct {
	// Name is the node's type, such as "table" or "button".
	Name string
	// Description says what it draws.
	Description string
	// Props are its props, in name order.
	Props []Prop
	// Events are the events it may declare in on.
	Events []string
}

// Prop describes one prop of a node type.
type Prop struct {
	// Name is the prop's key in the node.
	Name string
	// Required reports whether every node of the type must have it.
	Required bool
	// Description says what it holds.
	Description string
}

// events says which events each node type may declare.
var events = map[string][]string{
	TypeButton:      {EventPress},
	ui.KindForm:     {EventSubmit},
	ui.KindQuestion: {EventSelect, EventSubmit},
	ui.KindTable:    {EventSelect, EventOpen},
	ui.KindTree:     {EventSelect, EventOpen},
}

// buttonType is the one type with no surface schema.
var buttonType = Type{
	Name:        TypeButton,
	Description: "A button sends its press action; with an href it is a link, which the host opens, and its text form is label (href).",
	Props: []Prop{
		{Name: "href", Description: "Href makes the button a link: an http:// or https:// URL or a relative path inside the workspace."},
		{Name: "label", Required: true, Description: "Label is the button's text, a non-empty string."},
	},
	Events: []string{EventPress},
}

var loadCatalog = sync.OnceValues(buildCatalog)

// buildCatalog reads each surface kind's props from its embedded schema.
func buildCatalog() (map[string]Type, error) {
	cat := map[string]Type{TypeButton: buttonType}
	for _, k := range ui.Kinds() {
		raw, ok := ui.Schema(k)
		if !ok {
			return nil, fmt.Errorf("build catalog %s: no schema for kind %s", CatalogID, k)
		}
		var sch struct {
			Description string   `json:"description"`
			Required    []string `json:"required"`
			Properties  map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(raw, &sch); err != nil {
			return nil, fmt.Errorf("build catalog %s: read the schema of %s: %w", CatalogID, k, err)
		}
		t := Type{Name: k, Description: sch.Description, Events: slices.Clone(events[k])}
		for name, p := range sch.Properties {
			if name == "t" {
				continue
			}
			t.Props = append(t.Props, Prop{Name: name, Required: slices.Contains(sch.Required, name), Description: p.Description})
		}
		sort.Slice(t.Props, func(i, j int) bool { return t.Props[i].Name < t.Props[j].Name })
		if t.Events == nil {
			t.Events = []string{}
		}
		cat[k] = t
	}
	return cat, nil
}

// Catalog returns every node type of orrery/1, the surface kinds in the
// order ui.Kinds lists them and then button.
func Catalog() []Type {
	cat, err := loadCatalog()
	if err != nil {
		panic(err) // the schemas are embedded: this is a build error
	}
	out := make([]Type, 0, len(cat))
	for _, k := range append(ui.Kinds(), TypeButton) {
		t := cat[k]
		t.Props = slices.Clone(t.Props)
		t.Events = slices.Clone(t.Events)
		out = append(out, t)
	}
	return out
}

// typeNames lists the catalog's types for a refusal.
func typeNames() string {
	names := append(ui.Kinds(), TypeButton)
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// lookupType returns a node type of the catalog.
func lookupType(name string) (Type, bool) {
	cat, err := loadCatalog()
	if err != nil {
		panic(err)
	}
	t, ok := cat[name]
	return t, ok
}

func (t Type) prop(name string) (Prop, bool) {
	for _, p := range t.Props {
		if p.Name == name {
			return p, true
		}
	}
	return Prop{}, false
}

func (t Type) propNames() string {
	names := make([]string, len(t.Props))
	for i, p := range t.Props {
		names[i] = p.Name
	}
	return list(names, "and")
}

// list joins names as "a, b and c".
func list(names []string, conj string) string {
	switch len(names) {
	case 0:
		return "none"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}
