package component_test

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

var update = flag.Bool("update", false, "rewrite ui/component/testdata/bind/*.golden from Bind")

// bindCase is one testdata/bind/*.json input.
type bindCase struct {
	Structure json.RawMessage `json:"structure"`
	Data      json.RawMessage `json:"data"`
}

func bindInputs(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "bind", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/bind/*.json inputs")
	}
	return files
}

func readBindCase(t testing.TB, path string) bindCase {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c bindCase
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// TestBindGolden binds every testdata/bind/*.json and checks the text form
// against the .golden beside it (go test ./ui/component -update rewrites
// them). The bound surface must be one ui.Validate accepts, and the text
// form ui.Text of it.
func TestBindGolden(t *testing.T) {
	for _, in := range bindInputs(t) {
		t.Run(strings.TrimSuffix(filepath.Base(in), ".json"), func(t *testing.T) {
			c := readBindCase(t, in)
			s, err := component.Parse(c.Structure, component.Limits{})
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			b, err := s.Bind(c.Data)
			if err != nil {
				t.Fatalf("Bind() error: %v", err)
			}
			if err := ui.Validate(b.Surface); err != nil {
				t.Errorf("ui.Validate(bound surface) = %v, want nil", err)
			}
			if text, err := ui.Text(b.Surface); err != nil || text != b.Text {
				t.Errorf("ui.Text(bound surface) = %q, %v; want Bound.Text %q", text, err, b.Text)
			}
			again, err := s.Bind(c.Data)
			if err != nil || again.Text != b.Text || string(again.Surface) != string(b.Surface) {
				t.Errorf("Bind() a second time = %+v, %v; want the same as the first", again, err)
			}
			got := b.Text
			if len(b.Links) > 0 {
				got += "\n--- links\n" + strings.Join(b.Links, "\n")
			}
			golden := strings.TrimSuffix(in, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./ui/component -update to write it)", err)
			}
			if got+"\n" != string(want) {
				t.Errorf("Bind() text =\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestBindSurface checks the bound tree itself: typed bindings keep their
// JSON type, a button is a text surface, hidden nodes are left out.
func TestBindSurface(t *testing.T) {
	tests := []struct {
		structure, data, want string
	}{
		{`{"type":"progress","value":"${/v}","max":"${/m}","label":"${/v} done"}`, `{"v":3,"m":4}`,
			`{"kind":{"label":"3 done","max":4,"t":"progress","value":3}}`},
		{`{"type":"progress","value":"${/v}"}`, `{}`, `{"kind":{"t":"progress"}}`},
		{`{"type":"button","label":"Go","on":{"press":"go"}}`, `{}`, `{"kind":{"t":"text","value":"[ Go ]"}}`},
		{`{"type":"button","label":"Go","href":"${/h}"}`, `{"h":"a.md"}`, `{"kind":{"t":"text","value":"Go (a.md)"}}`},
		{`{"type":"button","label":"Go","href":"${/h}"}`, `{}`, `{"kind":{"t":"text","value":"[ Go ]"}}`},
		{`{"type":"stack","children":[{"type":"text","value":"a","when":"${/a}"},{"type":"text","value":"b"}]}`, `{"a":false}`,
			`{"kind":{"children":[{"kind":{"t":"text","value":"b"}}],"t":"stack"}}`},
		{`{"type":"stack","children":[{"type":"text","value":"a","when":"${/a}"}]}`, `{}`, `{"kind":{"t":"text","value":""}}`},
		{`{"type":"table","columns":["a","b"],"rows":[["${/x}","\\${/x}"]]}`, `{"x":"1"}`,
			`{"kind":{"columns":["a","b"],"rows":[["1","${/x}"]],"t":"table"}}`},
		{`{"type":"table","columns":["a"],"rows":[["#${/x}"]]}`, `{"x":1}`,
			`{"kind":{"columns":["a"],"rows":[["#1"]],"t":"table"}}`},
	}
	for _, tt := range tests {
		s := component.MustParse(tt.structure)
		b, err := s.Bind(json.RawMessage(tt.data))
		if err != nil {
			t.Errorf("Bind(%s) into %s error: %v", tt.data, tt.structure, err)
			continue
		}
		if string(b.Surface) != tt.want {
			t.Errorf("Bind(%s) into %s = %s, want %s", tt.data, tt.structure, b.Surface, tt.want)
		}
	}
}

// TestBindRefusals checks that data which does not bind into a valid tree
// is refused naming the data path and the prop it is bound to.
func TestBindRefusals(t *testing.T) {
	tests := []struct {
		name, structure, data string
		sentinel              error
		path, dataPath        string
		want                  string
	}{
		{"array as data", `{"type":"text","value":"x"}`, `[1,2]`, component.ErrNotObject, "", "",
			`the data is an array, not an object; data is one JSON object, such as {"items": [...]} around an array`},
		{"scalar as data", `{"type":"text","value":"x"}`, `"x"`, component.ErrNotObject, "", "", "the data is a string, not an object"},
		{"not JSON", `{"type":"text","value":"x"}`, `{"a":`, component.ErrNotObject, "", "", "the data is not JSON"},
		{"wrong cell type", `{"type":"table","columns":["a","b"],"rows":"${/rows}"}`, `{"rows":[["x","y"],["z",7]]}`, component.ErrBind, "/rows", "/rows/1/1",
			"the data at /rows/1/1, bound to structure /rows, does not fit: expected string, got number; each cell is a string"},
		{"missing required", `{"type":"stack","children":[{"type":"text","value":"${/msg}"}]}`, `{}`, component.ErrBind, "/children/0/value", "/msg",
			"the data at /msg, bound to structure /children/0/value, does not fit: required field is missing"},
		{"enum through a template", `{"type":"task","title":"t","status":"${/s}ing"}`, `{"s":"fly"}`, component.ErrBind, "/status", "",
			`structure /status: expected one of "pending", "running", "done", "failed", "cancelled", "blocked", got "flying"`},
		{"label not a string", `{"type":"button","label":"${/l}","on":{"press":"p"}}`, `{"l":3}`, component.ErrBind, "/label", "/l",
			"the data at /l, bound to structure /label, does not fit: a button's label must be a non-empty string, got a number"},
		{"label missing", `{"type":"button","label":"${/l}","on":{"press":"p"}}`, `{}`, component.ErrBind, "/label", "/l",
			"a button's label must be a non-empty string, got nothing"},
		{"forbidden link", `{"type":"button","label":"x","href":"${/h}"}`, `{"h":"javascript:alert(1)"}`, component.ErrLink, "/href", "/h",
			`the data at /h, bound to structure /href, does not fit: the link "javascript:alert(1)" is refused: a link never runs code`},
		{"link not a string", `{"type":"button","label":"x","href":"${/h}"}`, `{"h":[1]}`, component.ErrBind, "/href", "/h", "a link's href must be a string, got an array"},
		{"too many stack children", `{"type":"stack","children":[{"type":"text","value":"${/a}"}` + strings.Repeat(`,{"type":"text","value":"${/a}"}`, 64) + `]}`, `{"a":"x"}`,
			component.ErrBind, "/children", "", "structure /children: expected at most 64 items, got 65"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := component.MustParse(tt.structure)
			_, err := s.Bind(json.RawMessage(tt.data))
			var e *component.Error
			if !errors.As(err, &e) {
				t.Fatalf("Bind() = %v, want an *Error", err)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("Bind() = %v, want it to match %v", err, tt.sentinel)
			}
			if e.Path != tt.path || e.DataPath != tt.dataPath {
				t.Errorf("Bind() paths = %q, %q; want %q, %q", e.Path, e.DataPath, tt.path, tt.dataPath)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Bind() = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestBoundShows checks that a link is shown only when the bound tree has
// it, byte for byte.
func TestBoundShows(t *testing.T) {
	s := component.MustParse(`{"type":"stack","children":[
		{"type":"button","label":"a","href":"${/a}"},
		{"type":"button","label":"b","href":"https://x.org/b","when":"${/showB}"}]}`)
	b, err := s.Bind(json.RawMessage(`{"a":"docs/a.md","showB":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"docs/a.md"}; !slices.Equal(b.Links, want) {
		t.Errorf("Links = %v, want %v", b.Links, want)
	}
	for href, want := range map[string]bool{"docs/a.md": true, "https://x.org/b": false, "docs/a.md ": false, "./docs/a.md": false} {
		if got := b.Shows(href); got != want {
			t.Errorf("Shows(%q) = %v, want %v", href, got, want)
		}
	}
}
