package component_test

import (
	"encoding/json"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// FuzzTemplate checks that parsing and evaluating a template never panics,
// that evaluation is deterministic, that a prop's value is valid JSON and,
// for a template that is not one binding, the rendered text; and that a
// string without ${ is its own text. The corpus is kept in
// testdata/fuzz/FuzzTemplate.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		"plain", `\${/a}`, "${/a}", "${/a} left", "${/n|number:2}", "${/p|percent}", "${/d|duration}",
		"${/n|count:run}", "${/n|count:child,children}", "${/o|json}", `${/s == "ok"}`, "${/n > 0}", "${!/b}",
		`${"lit}"}`, "${/a~1b/0}", "${", "${}", "${/a", "${/a |}", "${1e400|percent:6}", "${-0|number}",
	} {
		f.Add(s, []byte(bindingData))
	}
	f.Add("${/x|number:3}", []byte(`{"x": 123456789012345678901234567890.123}`))
	f.Add("${/x|percent:2}", []byte(`{"x": -0.00001}`))
	f.Fuzz(func(t *testing.T, s string, data []byte) {
		if !utf8.ValidString(s) {
			return // a template comes from a JSON string, always valid UTF-8
		}
		tmpl, err := component.ParseTemplate(s)
		if err != nil {
			return
		}
		if !strings.Contains(s, "${") {
			if got, _ := tmpl.Render([]byte(`{}`)); got != s {
				t.Fatalf("Render(%q) = %q, want the string itself", s, got)
			}
		}
		if !json.Valid(data) {
			data = []byte(bindingData)
		}
		text, err := tmpl.Render(data)
		if err != nil {
			t.Fatalf("Render() error on valid JSON: %v", err)
		}
		if again, _ := tmpl.Render(data); again != text {
			t.Fatalf("Render() = %q, then %q", text, again)
		}
		v, ok, err := tmpl.Value(data)
		if err != nil {
			t.Fatalf("Value() error: %v", err)
		}
		if ok && !json.Valid(v) {
			t.Fatalf("Value() = %s, not JSON", v)
		}
		if !tmpl.Typed() {
			want, _ := json.Marshal(text)
			var got string
			if !ok || json.Unmarshal(v, &got) != nil || got != text {
				t.Fatalf("Value() = %s, %v; want the text %s", v, ok, want)
			}
		}
	})
}

// FuzzBind checks that parsing a structure and binding data never panic,
// and that whatever binds is a surface ui.Validate accepts, whose text form
// is ui.Text's, whose links pass CheckHref, and that binding again gives
// the same. The corpus is kept in testdata/fuzz/FuzzBind.
func FuzzBind(f *testing.F) {
	for _, in := range bindInputs(f) {
		c := readBindCase(f, in)
		f.Add([]byte(c.Structure), []byte(c.Data))
	}
	f.Add([]byte(`{"type":"stack","children":[{"type":"button","label":"${/l}","href":"${/h}"}]}`), []byte(`{"l":"x","h":"a/../b"}`))
	f.Add([]byte(`{"type":"table","columns":["a"],"rows":"${/r}"}`), []byte(`{"r":[[1]]}`))
	f.Fuzz(func(t *testing.T, structure, data []byte) {
		s, err := component.Parse(structure, component.Limits{})
		if err != nil {
			return
		}
		b, err := s.Bind(data)
		if err != nil {
			return
		}
		if err := ui.Validate(b.Surface); err != nil {
			t.Fatalf("Bind() gave a surface ui.Validate refuses: %v\n%s", err, b.Surface)
		}
		if text, err := ui.Text(b.Surface); err != nil || text != b.Text {
			t.Fatalf("ui.Text() = %q, %v; want %q", text, err, b.Text)
		}
		for _, h := range b.Links {
			if _, err := component.CheckHref(h); err != nil {
				t.Fatalf("Bind() showed a link CheckHref refuses: %v", err)
			}
		}
		again, err := s.Bind(data)
		if err != nil || string(again.Surface) != string(b.Surface) || again.Text != b.Text {
			t.Fatalf("Bind() again = %v, %v; want the same", again, err)
		}
	})
}

// FuzzCheckHref checks that an accepted link is an http(s) URL or a clean
// relative path with no .. element, never a path that leaves the workspace.
func FuzzCheckHref(f *testing.F) {
	for _, s := range []string{"https://example.com/a", "docs/a.md", "./a//b/", "../x", "/etc", "file:///x", `a\b`, "~/x",
		"javascript:x", "c:/x", "//h/x", "a/./../../b", "http://u@h/", ".", "a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, href string) {
		l, err := component.CheckHref(href)
		if err != nil {
			return
		}
		if l.Href != href {
			t.Fatalf("Href = %q, want %q", l.Href, href)
		}
		if l.IsURL() {
			if lower := strings.ToLower(href); !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
				t.Fatalf("CheckHref(%q) accepted a URL that is not http(s)", href)
			}
			return
		}
		p := l.Path
		if p == "" || strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, `\`) || path.Clean(p) != p {
			t.Fatalf("CheckHref(%q) = path %q, which may leave the workspace", href, p)
		}
		for _, el := range strings.Split(p, "/") {
			if el == ".." {
				t.Fatalf("CheckHref(%q) = path %q with ..", href, p)
			}
		}
	})
}
