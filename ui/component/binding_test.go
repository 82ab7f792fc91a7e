package component_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/getorrery/orrery/ui/component"
)

const bindingData = `{
  "name": "build", "left": 3, "one": 1, "zero": 0, "neg": -2.5, "big": 12345678901234567890,
  "ratio": 0.29, "almost": 0.99999, "secs": 3725, "ms": 0.35, "day": 90061,
  "ok": true, "off": false, "none": null, "empty": "", "list": [1, "two", {"b": 2, "a": 1}],
  "obj": {"z": "<&>", "a": [true]}, "status": "ok", "a/b": "slash", "m~n": "tilde",
  "runs": [{"name": "lint"}], "price": 2.675, "huge": 1e400, "tiny": 0.00001, "thousand": 1234567.5
}`

func TestRender(t *testing.T) {
	tests := []struct {
		template, want string
	}{
		{"plain text", "plain text"},
		{"", ""},
		{`\${/name}`, "${/name}"},
		{`a \ b \$ {c} }`, `a \ b \$ {c} }`},
		{"${/name}", "build"},
		{"${/left} left", "3 left"},
		{"${ /left }", "3"},
		{"${/missing}|", "|"},
		{"${/none}", ""},
		{"${/ok} ${/off}", "true false"},
		{"${/list}", `[1,"two",{"a":1,"b":2}]`},
		{"${/obj}", `{"a":[true],"z":"<&>"}`},
		{"${/runs/0/name}", "lint"},
		{"${/runs/1/name}", ""},
		{"${/runs/01/name}", ""},
		{"${/a~1b} ${/m~0n}", "slash tilde"},
		{"${/neg}", "-2.5"},
		{"${/big}", "12345678901234567890"},
		{"${/huge}", "1e400"},
		{"${/tiny}", "1e-05"},
		{`${"lit"}${3}${true}${null}`, "lit3true"},
		{`${"a}b"}`, "a}b"},
		// Comparisons yield booleans.
		{"${/left > 0}", "true"},
		{"${/left >= 3} ${/left < 3} ${/left <= 3}", "true false true"},
		{`${/status == "ok"} ${/status != "ok"}`, "true false"},
		{"${/left == 3.0}", "true"},
		{"${/missing == null} ${/none == null}", "true true"},
		{`${/left > "2"}`, "false"},
		{`${/name > "a"}`, "true"},
		{"${/list == /list}", "true"},
		{"${!/ok} ${!/off} ${!/missing} ${!/empty} ${!/zero} ${!/list}", "false true true true true false"},
		// Formats.
		{"${/thousand|number}", "1,234,567.5"},
		{"${/price|number:2}", "2.68"},
		{"${/neg|number:0}", "-3"},
		{"${/left|number:2}", "3.00"},
		{"${/big|number}", "12,345,678,901,234,567,890"},
		{"${/ratio|percent}", "29%"},
		{"${/almost|percent}", "99%"},
		{"${/almost|percent:2}", "99.99%"},
		{"${/one|percent}", "100%"},
		{"${/secs|duration}", "1h 2m"},
		{"${/day|duration}", "1d 1h"},
		{"${/ms|duration}", "350ms"},
		{"${/zero|duration}", "0s"},
		{"${/left|duration}", "3s"},
		{"${/one|count:run} ${/left|count:run}", "1 run 3 runs"},
		{"${/left|count:child,children}", "3 children"},
		{"${/left|count:entry} ${/left|count:box} ${/left|count:day}", "3 entries 3 boxes 3 days"},
		{"${/thousand|count:byte}", "1,234,567.5 bytes"},
		{"${/name|number}", "build"},
		{"${/obj|json}", `{"a":[true],"z":"<&>"}`},
		{"${/name|json}", `"build"`},
		{"${/missing|json}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.template, func(t *testing.T) {
			tmpl, err := component.ParseTemplate(tt.template)
			if err != nil {
				t.Fatalf("ParseTemplate(%q) error: %v", tt.template, err)
			}
			got, err := tmpl.Render([]byte(bindingData))
			if err != nil {
				t.Fatalf("Render() error: %v", err)
			}
			if got != tt.want {
				t.Errorf("Render() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestValue checks that a prop holding exactly one binding keeps the
// JSON type, and that anything else is text.
func TestValue(t *testing.T) {
	tests := []struct {
		template string
		want     string // "" means no value: the prop is left out
	}{
		{"${/left}", "3"},
		{"${/big}", "12345678901234567890"},
		{"${/list}", `[1,"two",{"a":1,"b":2}]`},
		{"${/ok}", "true"},
		{"${/left > 1}", "true"},
		{"${/missing == null}", "true"},
		{"${/left|number:1}", `"3.0"`},
		{"${/missing}", ""},
		{"${/none}", ""},
		{"${/missing|number}", ""},
		{" ${/left}", `" 3"`},
		{"${/left}${/left}", `"33"`},
		{"text", `"text"`},
		{`\${/left}`, `"${/left}"`},
	}
	for _, tt := range tests {
		t.Run(tt.template, func(t *testing.T) {
			tmpl, err := component.ParseTemplate(tt.template)
			if err != nil {
				t.Fatalf("ParseTemplate(%q) error: %v", tt.template, err)
			}
			got, ok, err := tmpl.Value([]byte(bindingData))
			if err != nil {
				t.Fatalf("Value() error: %v", err)
			}
			if !ok {
				got = nil
			}
			if string(got) != tt.want {
				t.Errorf("Value() = %s (ok %v), want %s", got, ok, tt.want)
			}
		})
	}
}

// TestParseTemplateRefusals checks that every malformed binding is refused
// with the offset and a fix.
func TestParseTemplateRefusals(t *testing.T) {
	tests := []struct {
		template string
		offset   int
		want     string
	}{
		{"${/a", 0, "the binding is not closed; end it with }"},
		{"ab${}", 4, "the binding is empty"},
		{"${ }", 2, "the binding is empty"},
		{"${name}", 2, `"name" is not a value; write a JSON pointer such as /name`},
		{"${/a ==}", 7, "a value is missing"},
		{"${/a = 1}", 5, `unexpected "= 1"`},
		{"${/a | upper}", 7, `unknown format "upper"`},
		{"${/a |}", 6, "the format is missing after |"},
		{"${/a|number:9}", 5, "number takes a number of decimals from 0 to 6"},
		{"${/a|count}", 5, "count takes a noun"},
		{"${/a|count:1x}", 5, "count takes a noun"},
		{"${/a|json:2}", 5, "json takes no argument"},
		{"${/a~2}", 2, "has a ~ that is not ~0 or ~1"},
		{"${01}", 2, `"01" is not a JSON number`},
		{`${"abc}`, 2, `the string is not closed`},
		{`${"a\x"}`, 2, "the string is not a JSON string"},
		{"${!/a == 1}", 6, "! applies to one value"},
		{"${/a ${/b}}", 5, `unexpected "${/b"`},
		{"${/a}${", 5, "the binding is not closed"},
	}
	for _, tt := range tests {
		t.Run(tt.template, func(t *testing.T) {
			_, err := component.ParseTemplate(tt.template)
			var se *component.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("ParseTemplate(%q) = %v, want a *SyntaxError", tt.template, err)
			}
			if se.Offset != tt.offset || !strings.Contains(se.Reason, tt.want) {
				t.Errorf("ParseTemplate(%q) = offset %d %q, want offset %d containing %q", tt.template, se.Offset, se.Reason, tt.offset, tt.want)
			}
		})
	}
}
