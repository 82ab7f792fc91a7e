package a2ui_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/dialect/a2ui"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui"
)

// validateAll checks each message against the official v0.9 schema and
// the whole list with Validate, the strict check ui.show's a2ui form gets.
func validateAll(t *testing.T, msgs []a2ui.Message) {
	t.Helper()
	for i, m := range msgs {
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := a2ui.CheckSchema(raw); err != nil {
			t.Errorf("message %d %s fails the official schema: %v", i, raw, err)
		}
	}
	list, _ := json.Marshal(msgs)
	if _, err := a2ui.Validate(list); err != nil {
		t.Errorf("Validate(projection) = %v, want nil\n%s", err, list)
	}
}

func components(t *testing.T, msgs []a2ui.Message) map[string]a2ui.Component {
	t.Helper()
	out := map[string]a2ui.Component{}
	for _, m := range msgs {
		if m.UpdateComponents != nil {
			for _, c := range m.UpdateComponents.Components {
				out[c["id"].(string)] = c
			}
		}
	}
	return out
}

// TestProjectComponent projects components with bindings, hidden nodes,
// buttons, links, questions and kinds the basic catalog lacks; each
// projection passes the official A2UI v0.9 schema with the basic catalog.
func TestProjectComponent(t *testing.T) {
	for _, tc := range []struct {
		name, structure, data string
		check                 func(t *testing.T, c map[string]a2ui.Component)
	}{
		{
			name:      "stack with bindings",
			structure: `{"type":"stack","children":[{"type":"text","value":"${/left} left"},{"type":"markdown","value":"**${/name}**"},{"type":"text","value":"gone","when":"${/hide}"}]}`,
			data:      `{"left":3,"name":"build","hide":false}`,
			check: func(t *testing.T, c map[string]a2ui.Component) {
				if c["root"]["component"] != "Column" {
					t.Errorf("root = %v, want a Column", c["root"])
				}
				if c["root-0"]["text"] != "3 left" || c["root-1"]["text"] != "**build**" {
					t.Errorf("texts = %v, %v, want the bound values", c["root-0"], c["root-1"])
				}
				if _, ok := c["root-2"]; ok {
					t.Errorf("a node hidden by when was projected: %v", c["root-2"])
				}
			},
		},
		{
			name:      "buttons and a link",
			structure: `{"type":"stack","direction":"horizontal","children":[{"type":"button","label":"Deploy ${/env}","on":{"press":"deploy"}},{"type":"button","label":"Docs","href":"https://example.com/docs"}]}`,
			data:      `{"env":"prod"}`,
			check: func(t *testing.T, c map[string]a2ui.Component) {
				if c["root"]["component"] != "Row" {
					t.Errorf("root = %v, want a Row", c["root"])
				}
				b, _ := json.Marshal(c["root-0"]["action"])
				if string(b) != `{"event":{"context":{"orrery.event":"press"},"name":"deploy"}}` {
					t.Errorf("button action = %s", b)
				}
				if c["root-0-label"]["text"] != "Deploy prod" {
					t.Errorf("button label = %v", c["root-0-label"])
				}
				l, _ := json.Marshal(c["root-1"]["action"])
				if string(l) != `{"event":{"context":{"orrery.event":"open","orrery.value":"https://example.com/docs"},"name":"open"}}` {
					t.Errorf("link action = %s, want an open event for the host", l)
				}
			},
		},
		{
			name:      "question",
			structure: `{"type":"question","prompt":"Region?","choices":[{"label":"EU","value":"eu"},{"label":"US"}],"allowText":true,"on":{"submit":"region"}}`,
			data:      `{}`,
			check: func(t *testing.T, c map[string]a2ui.Component) {
				if c["root-choices"]["component"] != "ChoicePicker" || c["root-text"]["component"] != "TextField" {
					t.Errorf("question parts = %v, %v", c["root-choices"], c["root-text"])
				}
				if c["root-send"]["component"] != "Button" {
					t.Errorf("no submit button: %v", c["root-send"])
				}
			},
		},
		{
			name:      "kinds without a basic counterpart are their text form",
			structure: `{"type":"stack","children":[{"type":"table","columns":["Name"],"rows":"${/rows}"},{"type":"progress","value":"${/done}","label":"build"}]}`,
			data:      `{"rows":[["alpha"],["beta"]],"done":50}`,
			check: func(t *testing.T, c map[string]a2ui.Component) {
				if s, _ := c["root-0"]["text"].(string); !strings.Contains(s, "alpha") || !strings.Contains(s, "beta") {
					t.Errorf("table text = %q, want its rows", s)
				}
				if s, _ := c["root-1"]["text"].(string); !strings.Contains(s, "50") {
					t.Errorf("progress text = %q, want 50%%", s)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := a2ui.ProjectComponent("placed:agent:card", json.RawMessage(tc.structure), json.RawMessage(tc.data))
			if err != nil {
				t.Fatalf("ProjectComponent() = %v", err)
			}
			if len(msgs) != 3 || msgs[0].CreateSurface == nil || msgs[0].CreateSurface.CatalogID != a2ui.BasicCatalogID ||
				msgs[1].UpdateComponents == nil || msgs[2].UpdateDataModel == nil {
				t.Fatalf("messages = %+v, want createSurface (basic catalog), updateComponents, updateDataModel", msgs)
			}
			validateAll(t, msgs)
			tc.check(t, components(t, msgs))
		})
	}
	if _, err := a2ui.ProjectComponent("x", json.RawMessage(`{"type":"video"}`), nil); err == nil {
		t.Errorf("ProjectComponent(unknown type) = nil, want the catalog's refusal")
	}
}

// TestProjectSurface projects every example surface of docs/surfaces.md
// that is a whole surface, and deleteSurface, through the schema.
func TestProjectSurface(t *testing.T) {
	for _, s := range []string{
		`{"kind":{"t":"text","value":"build: ok"}}`,
		`{"kind":{"t":"markdown","value":"# Release\n- fast"}}`,
		`{"kind":{"t":"stack","children":[{"kind":{"t":"text","value":"a"}},{"kind":{"t":"progress","value":0.25,"label":"copy"}}]}}`,
		`{"kind":{"t":"image","mime":"image/png","data":"iVBORw0KGgo=","alt":"a dot"}}`,
	} {
		msgs, err := a2ui.ProjectSurface("s1", json.RawMessage(s))
		if err != nil {
			t.Fatalf("ProjectSurface(%s) = %v", s, err)
		}
		validateAll(t, msgs)
	}
	raw, _ := json.Marshal(a2ui.Delete("s1"))
	if err := a2ui.CheckSchema(raw); err != nil {
		t.Errorf("Delete() = %s fails the schema: %v", raw, err)
	}
	if _, err := a2ui.ProjectSurface("s1", json.RawMessage(`{"kind":{"t":"nope"}}`)); err == nil {
		t.Errorf("ProjectSurface(unknown kind) = nil, want a refusal")
	}
}

// TestActivity: the carrier is ACTIVITY_SNAPSHOT a2ui-surface with
// content.a2ui_operations, and it is a valid AG-UI event.
func TestActivity(t *testing.T) {
	msgs, err := a2ui.ProjectSurface("s1", json.RawMessage(`{"kind":{"t":"text","value":"hi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := a2ui.Activity("s1", msgs)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(ev)
	back, err := protocol.DecodeEvent(raw)
	if err != nil {
		t.Fatalf("DecodeEvent(%s) = %v", raw, err)
	}
	act := back.(*protocol.ActivitySnapshot)
	if act.ActivityType != "a2ui-surface" || act.MessageID != "a2ui-surface-s1" || act.Replace == nil || !*act.Replace {
		t.Errorf("activity = %s", raw)
	}
	var content struct {
		Ops []json.RawMessage `json:"a2ui_operations"`
	}
	if err := json.Unmarshal(act.Content, &content); err != nil || len(content.Ops) != 3 {
		t.Errorf("content = %s, want three a2ui_operations", act.Content)
	}
}

// TestOfficialExamples: every example the npm package ships for the basic
// catalog passes Validate, except those that use what Orrery refuses.
func TestOfficialExamples(t *testing.T) {
	files, _ := filepath.Glob("testdata/examples/*.json")
	if len(files) == 0 {
		t.Fatal("no examples in testdata/examples")
	}
	passed := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ex struct {
			Messages json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(raw, &ex); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		_, err = a2ui.Validate(ex.Messages)
		var e *a2ui.Error
		switch {
		case err == nil:
			passed++
		case errors.As(err, &e) && (strings.Contains(e.Msg, "not taken") || strings.Contains(e.Msg, "markup")):
			// Orrery's own rule (a remote URL, openUrl, markup): refused on purpose.
			t.Logf("%s: refused by Orrery's rule: %v", filepath.Base(f), err)
		default:
			t.Errorf("%s: Validate() = %v, want nil", filepath.Base(f), err)
		}
	}
	t.Logf("%d of %d official examples pass Validate", passed, len(files))
	if passed < len(files)/2 {
		t.Errorf("only %d of %d official examples pass", passed, len(files))
	}
}

// TestValidateRefuses: each bad a2ui form is refused naming its path.
func TestValidateRefuses(t *testing.T) {
	head := `{"version":"v0.9","createSurface":{"surfaceId":"s","catalogId":"https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}},`
	comps := func(c string) string {
		return `[` + head + `{"version":"v0.9","updateComponents":{"surfaceId":"s","components":[` + c + `]}}]`
	}
	for _, tc := range []struct {
		name, list, path, says string
	}{
		{"not a list", `{"version":"v0.9"}`, "", "JSON array"},
		{"unknown component", comps(`{"id":"root","component":"Iframe","src":"x"}`), "/1/updateComponents/components/0/component", "unknown component \"Iframe\""},
		{"unknown property", comps(`{"id":"root","component":"Text","text":"hi","style":"color:red"}`), "/1/updateComponents/components/0/style", "Text has no property \"style\""},
		{"bad binding", comps(`{"id":"root","component":"Text","text":{"path":""}}`), "/1/updateComponents/components/0/text/path", "not a JSON Pointer"},
		{"dangling reference", comps(`{"id":"root","component":"Column","children":["a","b"]},{"id":"a","component":"Text","text":"x"}`), "/1/updateComponents/components/0/children/1", "no component \"b\""},
		{"function action", comps(`{"id":"root","component":"Button","child":"l","action":{"functionCall":{"call":"openUrl","args":{"url":"https://x"},"returnType":"void"}}},{"id":"l","component":"Text","text":"go"}`), "/1/updateComponents/components/0/action/functionCall", "not taken"},
		{"html", comps(`{"id":"root","component":"Text","text":"<script>alert(1)</script>"}`), "/1/updateComponents/components/0/text", "markup"},
		{"remote image", comps(`{"id":"root","component":"Image","url":"http://evil.example/x.png"}`), "/1/updateComponents/components/0/url", "https"},
		{"other catalog", `[{"version":"v0.9","createSurface":{"surfaceId":"s","catalogId":"https://evil.example/catalog.json"}}]`, "/0/createSurface/catalogId", "basic catalog"},
		{"no root", comps(`{"id":"main","component":"Text","text":"hi"}`), "", "no component with id \"root\""},
		{"schema: bad enum", comps(`{"id":"root","component":"Text","text":"hi","variant":"huge"}`), "/1/updateComponents/components/0", "schema"},
		{"wrong version", `[{"version":"v0.8","deleteSurface":{"surfaceId":"s"}}]`, "/0/version", "v0.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a2ui.Validate(json.RawMessage(tc.list))
			var e *a2ui.Error
			if !errors.As(err, &e) {
				t.Fatalf("Validate() = %v, want an *a2ui.Error", err)
			}
			if !strings.HasPrefix(e.Path, tc.path) || !strings.Contains(e.Msg, tc.says) {
				t.Errorf("Validate() = path %q %q, want path %q saying %q", e.Path, e.Msg, tc.path, tc.says)
			}
		})
	}
}

// TestToIntent: an action from a renderer becomes the owner's intent; a
// surface the caller cannot act on, or an undeclared action, is refused.
func TestToIntent(t *testing.T) {
	surfaces := func(id string) ([]string, bool) {
		if id == "placed:agent:card" {
			return []string{"deploy", "region"}, true
		}
		return nil, false
	}
	msg := `{"version":"v0.9","action":{"name":"region","surfaceId":"placed:agent:card","sourceComponentId":"root-send","timestamp":"2026-01-15T12:00:00Z","context":{"orrery.event":"submit","choices":["eu"],"text":""}}}`
	a, err := a2ui.ParseAction(json.RawMessage(msg))
	if err != nil {
		t.Fatalf("ParseAction() = %v", err)
	}
	in, err := a2ui.ToIntent(a, surfaces)
	if err != nil {
		t.Fatalf("ToIntent() = %v", err)
	}
	if in.Node != "placed:agent:card" || in.Action != "region" || string(in.Value) != `{"choices":["eu"],"text":""}` {
		t.Errorf("ToIntent() = %+v %s", in, in.Value)
	}
	// A form's fields, as the renderer resolved its context, reach the
	// owner whole; Orrery's own keys stay out.
	a, err = a2ui.ParseAction(json.RawMessage(`{"name":"deploy","surfaceId":"placed:agent:card","sourceComponentId":"f","context":{"orrery.event":"submit","name":"Bob","age":42,"tags":["a"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if in, err := a2ui.ToIntent(a, surfaces); err != nil || string(in.Value) != `{"age":42,"name":"Bob","tags":["a"]}` {
		t.Errorf("ToIntent(form) = %s, %v; want the form's fields", in.Value, err)
	}
	// The AG-UI form: a bare userAction.
	a, err = a2ui.ParseAction(json.RawMessage(`{"name":"deploy","surfaceId":"placed:agent:card","sourceComponentId":"root-0","context":{"orrery.event":"press"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if in, err := a2ui.ToIntent(a, surfaces); err != nil || in.Action != "deploy" || in.Value != nil {
		t.Errorf("ToIntent(userAction) = %+v, %v", in, err)
	}
	for _, bad := range []a2ui.Action{
		{Name: "deploy", SurfaceID: "placed:ext:other:card"},
		{Name: "rm", SurfaceID: "placed:agent:card"},
	} {
		if _, err := a2ui.ToIntent(bad, surfaces); err == nil {
			t.Errorf("ToIntent(%+v) = nil, want a refusal", bad)
		}
	}
	if _, err := a2ui.ParseAction(json.RawMessage(`{"version":"v0.9","action":{"name":"x"}}`)); err == nil {
		t.Errorf("ParseAction(no surfaceId) = nil, want the schema's refusal")
	}
}

// TestLift: every official example lifts to a valid orrery surface whose
// text form holds its bound data; a list template expands over its array.
func TestLift(t *testing.T) {
	files, _ := filepath.Glob("testdata/examples/*.json")
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		var ex struct {
			Messages json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(raw, &ex); err != nil {
			t.Fatal(err)
		}
		msgs, err := a2ui.Validate(ex.Messages)
		if err != nil {
			continue
		}
		surfaces, err := a2ui.Lift(msgs)
		if err != nil {
			t.Errorf("%s: Lift() = %v", filepath.Base(f), err)
			continue
		}
		if len(surfaces) == 0 {
			t.Errorf("%s: Lift() gave no surface", filepath.Base(f))
		}
	}
	list := `[{"version":"v0.9","createSurface":{"surfaceId":"s","catalogId":"https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}},
	{"version":"v0.9","updateComponents":{"surfaceId":"s","components":[
	  {"id":"root","component":"Column","children":["title","items","name","go"]},
	  {"id":"title","component":"Text","text":{"call":"formatString","args":{"value":"Order for ${/user/name}"},"returnType":"string"}},
	  {"id":"items","component":"List","children":{"componentId":"row","path":"/items"}},
	  {"id":"row","component":"Text","text":{"path":"label"}},
	  {"id":"name","component":"TextField","label":"Name","value":{"path":"/user/name"}},
	  {"id":"go","component":"Button","child":"go-t","action":{"event":{"name":"order"}}},
	  {"id":"go-t","component":"Text","text":"Order"}]}},
	{"version":"v0.9","updateDataModel":{"surfaceId":"s","value":{"user":{"name":"Ada"},"items":[{"label":"tea"},{"label":"cake"}]}}}]`
	msgs, err := a2ui.Validate(json.RawMessage(list))
	if err != nil {
		t.Fatal(err)
	}
	surfaces, err := a2ui.Lift(msgs)
	if err != nil {
		t.Fatal(err)
	}
	text, err := ui.Text(surfaces["s"])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Order for Ada", "tea", "cake", "Name: Ada", "[ Order ]"} {
		if !strings.Contains(text, want) {
			t.Errorf("lifted text form %q lacks %q", text, want)
		}
	}
}
