package web_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/getorrery/orrery/ui/component"
)

// bindingCases are templates and data whose text the page must write as
// ui/component does: docs/bindings.md's examples and formats, and edge
// cases of numbers, pointers and comparisons.
var bindingCases = []struct{ template, data string }{
	{"${/left} left", `{"left": 3}`},
	{"${/failed} failed of ${/runs|count:run}", `{"failed": 2, "runs": 5}`},
	{"${/n|number}", `{"n": 1234567.5}`},
	{"${/n|number:2}", `{"n": 2.675}`},
	{"${/p|percent}", `{"p": 0.2999}`},
	{"${/p|percent:1}", `{"p": 0.12345}`},
	{"${/d|duration}", `{"d": 3725}`},
	{"${/d|duration} ${/e|duration} ${/f|duration} ${/g|duration}", `{"d": 0.35, "e": 0, "f": 200000, "g": -61}`},
	{"${/n|count:run} ${/one|count:run} ${/n|count:child,children} ${/n|count:box} ${/n|count:city} ${/n|count:day}", `{"n": 3, "one": 1}`},
	{"${/o|json}", `{"o": {"b": 1, "a": 2}}`},
	{"${/o} ${/a} ${/t} ${/z}", `{"o": {"b": [1, 2], "a": "x<&>"}, "a": [true, null], "t": false, "z": null}`},
	{"${/big} ${/f} ${/small} ${/huge} ${/neg}", `{"big": 12345678901234, "f": 1.5, "small": 0.00001, "huge": 1e300, "neg": -0.25}`},
	{"${/n > 1000}, ${/name == \"orrery\"}, ${!/flag}, ${/a < /b}, ${/s >= \"b\"}, ${/x == null}, ${/one == 1.0}", `{"n": 1234.5, "name": "orrery", "flag": true, "a": 1, "b": 2, "s": "c", "one": 1}`},
	{"${!/e} ${!/o} ${!/z} ${!/s}", `{"e": [], "o": {}, "z": 0, "s": ""}`},
	{"${/a~1b} ${/c~0d} ${/list/1} ${/list/9} ${/list/01}", `{"a/b": "slash", "c~d": "tilde", "list": ["x", "y"]}`},
	{`\${/n} stays, } too, ${ /n | number:0 }`, `{"n": 1234.5678}`},
	{"${/n|number:1} ${/m|number:0} ${/q|percent:2}", `{"n": -0.04, "m": 999.5, "q": 1}`},
	{"${/s|number} ${/missing|number}|", `{"s": "text"}`},
}

func TestBindingsMatchGo(t *testing.T) {
	cases := bindingCases
	// The Go fuzzer's corpus adds the odd cases it found.
	files, _ := filepath.Glob(filepath.Join("..", "ui", "component", "testdata", "fuzz", "FuzzTemplate", "*"))
	for _, f := range files {
		tmpl, data, ok := readCorpus(t, f)
		if ok {
			cases = append(cases, struct{ template, data string }{tmpl, data})
		}
	}
	r := newRig(t, rigOptions{})
	ctx := browser(t, 1280, 800)
	openNewSession(t, ctx, r.http.URL)
	checked := 0
	for _, c := range cases {
		tp, perr := component.ParseTemplate(c.template)
		var want string
		if perr == nil {
			var err error
			if want, err = tp.Render(json.RawMessage(c.data)); err != nil {
				continue // not JSON: nothing to compare
			}
		}
		got := evalJS[map[string]any](t, ctx, `(() => { try { return {text: window.orrery.render(`+js(c.template)+`, JSON.parse(`+js(c.data)+`))}; } catch (e) { return {error: String(e.message)}; } })()`)
		switch {
		case perr != nil && got["error"] == nil:
			t.Errorf("template %q: the page wrote %q, want a refusal like Go's: %v", c.template, got["text"], perr)
		case perr == nil && got["error"] != nil:
			t.Errorf("template %q: the page refused it (%v), want %q", c.template, got["error"], want)
		case perr == nil && got["text"] != want:
			t.Errorf("template %q with %s: page = %q, want %q (Go)", c.template, c.data, got["text"], want)
		}
		checked++
	}
	t.Logf("%d templates compared with ui/component", checked)
	if checked < len(bindingCases) {
		t.Errorf("compared %d templates, want at least the %d written here", checked, len(bindingCases))
	}
}

// readCorpus reads a FuzzTemplate corpus file: a template and its data.
func readCorpus(t *testing.T, path string) (string, string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "string(") || !strings.HasPrefix(lines[2], "[]byte(") {
		return "", "", false
	}
	tmpl, err1 := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"))
	data, err2 := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[2], "[]byte("), ")"))
	// Invalid UTF-8 never reaches a browser: the kernel's JSON carries text.
	if err1 != nil || err2 != nil || !json.Valid([]byte(data)) || !utf8.ValidString(tmpl) || !utf8.ValidString(data) {
		return "", "", false
	}
	return tmpl, data, true
}
