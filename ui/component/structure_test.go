package component_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// nestedStacks returns n stacks, one inside the other, around a text.
func nestedStacks(n int) string {
	s := `{"type":"text","value":"x"}`
	for range n {
		s = `{"type":"stack","children":[` + s + `]}`
	}
	return s
}

// TestParseRefusals checks each way a structure is refused: the sentinel,
// the path and a message that names the path and the fix.
func TestParseRefusals(t *testing.T) {
	big := `{"type":"text","value":"` + strings.Repeat("x", component.DefaultComponentBytes) + `"}`
	tests := []struct {
		name      string
		structure string
		sentinel  error
		path      string
		want      string
	}{
		{"unknown type", `{"type":"chart2"}`, component.ErrUnknownType, "/type",
			`structure /type: unknown type "chart2"; the types of orrery/1 are text, markdown, table, tree, diff, progress, stream, task, question, form, stack, chart, raster, image and button`},
		{"unknown type in a stack", `{"type":"stack","children":[{"type":"text","value":"a"},{"type":"link","href":"x"}]}`, component.ErrUnknownType, "/children/1/type",
			`structure /children/1/type: unknown type "link"`},
		{"over componentBytes", big, component.ErrTooLarge, "",
			"the structure is 65,562 bytes, over limits.componentBytes (65,536); make it smaller"},
		{"not JSON", `{"type":`, component.ErrStructure, "", "the structure is not JSON"},
		{"not an object", `[{"type":"text"}]`, component.ErrStructure, "", "the structure: expected a node object, got array"},
		{"no type", `{"value":"x"}`, component.ErrStructure, "/type", "structure /type: a node needs a type"},
		{"type not a string", `{"type":3}`, component.ErrStructure, "/type", "structure /type: expected a string, got number"},
		{"unknown prop", `{"type":"text","value":"x","colour":"red"}`, component.ErrStructure, "/colour",
			"structure /colour: a text has no prop colour; its props are value, and any node may have on and when"},
		{"t instead of type", `{"type":"text","t":"text","value":"x"}`, component.ErrStructure, "/t", "a node names its type with type, not t"},
		{"missing prop", `{"type":"table","columns":["a"]}`, component.ErrStructure, "/rows", "structure /rows: a table needs rows"},
		{"button without label", `{"type":"button","on":{"press":"go"}}`, component.ErrStructure, "/label", "structure /label: a button needs label"},
		{"event the type does not send", `{"type":"text","value":"x","on":{"press":"go"}}`, component.ErrStructure, "/on/press",
			"structure /on/press: a text sends no events, not press"},
		{"unknown event", `{"type":"button","label":"Go","on":{"click":"go"}}`, component.ErrStructure, "/on/click",
			"a button sends press only, not click"},
		{"bad action id", `{"type":"button","label":"Go","on":{"press":"go now"}}`, component.ErrStructure, "/on/press", `an action is a string of 1 to 64 letters`},
		{"on not an object", `{"type":"button","label":"Go","on":"go"}`, component.ErrStructure, "/on", "on maps an event to an action"},
		{"link with on", `{"type":"button","label":"Docs","href":"https://x.org","on":{"press":"x"}}`, component.ErrStructure, "/on",
			`a link opens through the host with the action "open"`},
		{"when with text around", `{"type":"text","value":"x","when":"if ${/a}"}`, component.ErrStructure, "/when", "when takes one binding"},
		{"when a number", `{"type":"text","value":"x","when":1}`, component.ErrStructure, "/when", "expected a string or boolean, got number"},
		{"binding does not parse", `{"type":"stack","children":[{"type":"text","value":"${/a"}]}`, component.ErrStructure, "/children/0/value",
			"structure /children/0/value: the binding does not parse at offset 0: the binding is not closed"},
		{"binding in an array", `{"type":"table","columns":["a","${b}"],"rows":[]}`, component.ErrStructure, "/columns/1", "the binding does not parse at offset 2"},
		{"children not an array", `{"type":"stack","children":{}}`, component.ErrStructure, "/children", "a stack's children are nodes"},
		{"no children", `{"type":"stack","children":[]}`, component.ErrStructure, "/children", "a stack needs at least one child node"},
		{"child not a node", `{"type":"stack","children":["x"]}`, component.ErrStructure, "/children/0", "structure /children/0: expected a node object, got string"},
		{"stacks too deep", nestedStacks(ui.MaxStackDepth + 1), component.ErrStructure, strings.Repeat("/children/0", ui.MaxStackDepth),
			"stacks nest at most 8 deep and this one is 9 deep"},
		{"static prop no data can fix", `{"type":"progress","value":"half"}`, component.ErrStructure, "/value",
			"structure /value: expected number, got string"},
		{"static enum", `{"type":"task","title":"t","status":"green"}`, component.ErrStructure, "/status", "structure /status: expected one of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := component.Parse(json.RawMessage(tt.structure), component.Limits{})
			var e *component.Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse() = %v, want an *Error", err)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("Parse() = %v, want it to match %v", err, tt.sentinel)
			}
			if e.Path != tt.path {
				t.Errorf("Parse() path = %q, want %q", e.Path, tt.path)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse() = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestParseLimit checks that componentBytes counts compact JSON and can be
// raised.
func TestParseLimit(t *testing.T) {
	s := `{"type": "text",    "value": "` + strings.Repeat("x", 90) + `"}`
	if _, err := component.Parse(json.RawMessage(s), component.Limits{ComponentBytes: 120}); err != nil {
		t.Errorf("Parse() of 118 compact bytes under a 120-byte limit = %v, want nil", err)
	}
	if _, err := component.Parse(json.RawMessage(s), component.Limits{ComponentBytes: 100}); !errors.Is(err, component.ErrTooLarge) {
		t.Errorf("Parse() under a 100-byte limit = %v, want ErrTooLarge", err)
	}
	deep := nestedStacks(ui.MaxStackDepth)
	if _, err := component.Parse(json.RawMessage(deep), component.Limits{}); err != nil {
		t.Errorf("Parse() of stacks 8 deep = %v, want nil", err)
	}
}

func TestActions(t *testing.T) {
	s := component.MustParse(`{"type":"stack","children":[
		{"type":"table","columns":["a"],"rows":"${/rows}","on":{"select":"pick","open":"show"}},
		{"type":"button","label":"Retry","on":{"press":"retry"}},
		{"type":"button","label":"Docs","href":"docs/ci.md"},
		{"type":"form","fields":[{"name":"n","type":"text"}],"on":{"submit":"save"}},
		{"type":"question","prompt":"Which?","on":{"select":"pick"}}
	]}`)
	want := []component.Action{
		{Node: "/children/0", Type: "table", Event: "open", Action: "show"},
		{Node: "/children/0", Type: "table", Event: "select", Action: "pick"},
		{Node: "/children/1", Type: "button", Event: "press", Action: "retry"},
		{Node: "/children/2", Type: "button", Event: "open", Action: "open"},
		{Node: "/children/3", Type: "form", Event: "submit", Action: "save"},
		{Node: "/children/4", Type: "question", Event: "select", Action: "pick"},
	}
	if got := s.Actions(); !slices.Equal(got, want) {
		t.Errorf("Actions() = %v, want %v", got, want)
	}
	for _, a := range []string{"show", "pick", "retry", "open", "save"} {
		if err := s.CheckAction(a); err != nil {
			t.Errorf("CheckAction(%q) = %v, want nil", a, err)
		}
	}
}

// TestUndeclaredAction checks the refusal of an action no node declares.
func TestUndeclaredAction(t *testing.T) {
	tests := []struct {
		structure, action, want string
	}{
		{`{"type":"button","label":"Retry","on":{"press":"retry"}}`, "rerun",
			`the component declares no action "rerun"; send one it declares: "retry"`},
		{`{"type":"stack","children":[{"type":"button","label":"A","on":{"press":"b"}},{"type":"button","label":"A","on":{"press":"a"}},{"type":"button","label":"C","on":{"press":"a"}}]}`, "c",
			`the component declares no action "c"; send one it declares: "a" or "b"`},
		{`{"type":"text","value":"x"}`, "open",
			`the component declares no action "open", and no action at all; declare one in a node's on`},
	}
	for _, tt := range tests {
		err := component.MustParse(tt.structure).CheckAction(tt.action)
		if !errors.Is(err, component.ErrUndeclaredAction) || err.Error() != tt.want && !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("CheckAction(%q) = %v, want ErrUndeclaredAction starting %q", tt.action, err, tt.want)
		}
	}
}

// TestStructureJSON checks that a structure is kept as sent, compacted.
func TestStructureJSON(t *testing.T) {
	s := component.MustParse("{\"type\": \"text\",\n \"value\": \"${/left} left\"}")
	if got, want := string(s.JSON()), `{"type":"text","value":"${/left} left"}`; got != want {
		t.Errorf("JSON() = %s, want %s", got, want)
	}
}

// TestCatalog checks the catalog lists every surface kind and button, with
// a kind's props read from its schema.
func TestCatalog(t *testing.T) {
	cat := component.Catalog()
	var names []string
	for _, ty := range cat {
		names = append(names, ty.Name)
	}
	if want := append(ui.Kinds(), "button"); !slices.Equal(names, want) {
		t.Fatalf("Catalog() names = %v, want %v", names, want)
	}
	for _, ty := range cat {
		switch ty.Name {
		case "table":
			var props []string
			for _, p := range ty.Props {
				props = append(props, p.Name)
				if (p.Name == "columns" || p.Name == "rows") != p.Required {
					t.Errorf("table prop %s Required = %v", p.Name, p.Required)
				}
			}
			if want := []string{"align", "columns", "rows"}; !slices.Equal(props, want) {
				t.Errorf("table props = %v, want %v", props, want)
			}
			if want := []string{"select", "open"}; !slices.Equal(ty.Events, want) {
				t.Errorf("table events = %v, want %v", ty.Events, want)
			}
		case "button":
			if want := []string{"press"}; !slices.Equal(ty.Events, want) {
				t.Errorf("button events = %v, want %v", ty.Events, want)
			}
		case "text":
			if len(ty.Events) != 0 || ty.Description == "" {
				t.Errorf("text = %+v, want no events and a description", ty)
			}
		}
	}
}
