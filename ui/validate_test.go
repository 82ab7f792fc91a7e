package ui_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/getorrery/orrery/ui"
)

// pngBytes is a 1×1 PNG.
const pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

// imageOf returns an image surface whose data decodes to n bytes that start
// like a PNG.
func imageOf(n int) string {
	b := make([]byte, n)
	copy(b, "\x89PNG\r\n\x1a\n")
	return `{"kind": {"t": "image", "mime": "image/png", "alt": "a picture", "data": "` + base64.StdEncoding.EncodeToString(b) + `"}}`
}

func rasterOf(w, h int) string {
	rows := make([]string, h)
	for i := range rows {
		rows[i] = `"` + strings.Repeat("#", w) + `"`
	}
	return `{"kind": {"t": "raster", "palette": {"#": "#ffffff"}, "rows": [` + strings.Join(rows, ",") + `]}}`
}

const kindsList = "text, markdown, table, tree, diff, progress, stream, task, question, form, stack, chart, raster and image"

// refusals are surfaces Validate refuses, each with its exact refusal.
var refusals = []struct {
	name, surface, want string
	is                  error
}{
	// The surface itself.
	{"empty", ``, `surface: it is empty; send one JSON object such as {"kind": {"t": "text", "value": "…"}}`, nil},
	{"not JSON", `{"kind": `, `surface: it is not JSON (unexpected EOF); send one JSON object such as {"kind": {"t": "text", "value": "…"}}`, nil},
	{"trailing data", `{"kind": {"t": "text", "value": "a"}} {}`, `surface: it is not JSON (invalid character after top-level value); send one JSON object such as {"kind": {"t": "text", "value": "…"}}`, nil},
	{"array", `[]`, `surface: expected object, got array; a surface is {"kind": {"t": "<kind>", …}}`, nil},
	{"no kind", `{}`, `surface /kind: required field is missing; a surface is {"kind": {"t": "<kind>", …}}`, nil},
	{"extra field", `{"kind": {"t": "text", "value": "a"}, "title": "x"}`, `surface /title: unknown field; a surface is {"kind": {"t": "<kind>", …}} and nothing else`, nil},
	{"kind not object", `{"kind": "text"}`, `surface /kind: expected object, got string; a surface is {"kind": {"t": "<kind>", …}}`, nil},
	{"no t", `{"kind": {}}`, `surface /kind/t: required field is missing; t names the kind: text, markdown, table, tree, diff, progress, stream, task, question, form, stack, chart, raster or image`, nil},
	{"t not string", `{"kind": {"t": 5}}`, `surface /kind/t: expected string, got number; t names the kind: text, markdown, table, tree, diff, progress, stream, task, question, form, stack, chart, raster or image`, nil},
	{"unknown kind", `{"kind": {"t": "pie"}}`, `surface /kind/t: unknown kind "pie"; the kinds are ` + kindsList, ui.ErrUnknownKind},
	{"number out of range", `{"kind": {"t": "progress", "value": 1e999}}`, `surface /kind/value: the number 1e999 is out of range; send a number a float64 holds (at most about 1.8e308 in size)`, nil},

	// Schema failures, naming the path.
	{"table cell type", `{"kind": {"t": "table", "columns": ["a", "b"], "rows": [["x", "y"], ["x", "y"], ["x", 1]]}}`,
		`surface /kind/rows/2/1: expected string, got number; each cell is a string: format numbers and dates before sending them`, nil},
	{"missing field", `{"kind": {"t": "text"}}`, `surface /kind/value: required field is missing; value is the text, a string; a newline breaks the line`, nil},
	{"unknown field", `{"kind": {"t": "text", "value": "a", "colour": "red"}}`, `surface /kind/colour: unknown field; the fields here are t, value`, nil},
	{"enum", `{"kind": {"t": "task", "title": "x", "status": "ok"}}`, `surface /kind/status: expected one of "pending", "running", "done", "failed", "cancelled", "blocked", got "ok"`, nil},
	{"missing ref field", `{"kind": {"t": "task", "title": "x"}}`, `surface /kind/status: required field is missing; status is pending, running, done, failed, cancelled or blocked`, nil},
	{"empty columns", `{"kind": {"t": "table", "columns": [], "rows": []}}`, `surface /kind/columns: must not be empty; columns holds the header labels, one string per column (1 to 64 columns)`, nil},
	{"minimum", `{"kind": {"t": "progress", "value": -1}}`, `surface /kind/value: expected at least 0, got -1; value is how far it got, a number from 0 to max; leave it out while the amount is unknown`, nil},
	{"exclusive minimum", `{"kind": {"t": "progress", "value": 1, "max": 0}}`, `surface /kind/max: expected more than 0, got 0; max is the value at completion, a number above 0 (100 when left out)`, nil},
	{"tree label", `{"kind": {"t": "tree", "nodes": [{"label": "a", "children": [{"label": 1}]}]}}`, `surface /kind/nodes/0/children/0/label: expected string, got number; label is the node's text, one line`, nil},
	{"pattern", `{"kind": {"t": "raster", "rows": ["#"], "palette": {"#": "#fffff"}}}`, `surface /kind/palette/#: "#fffff" is not in the expected form; each colour is "#rrggbb"`, nil},
	{"pattern key", `{"kind": {"t": "raster", "rows": ["#"], "palette": {"##": "#ffffff"}}}`, `surface /kind/palette/##: key not allowed; palette maps each character a row uses, other than space, to a colour "#rrggbb"`, nil},
	{"form value type", `{"kind": {"t": "form", "fields": [{"name": "a", "type": "number", "value": "x"}]}}`, `surface /kind/fields/0/value: expected number, got string; a number field's value is a number`, nil},
	{"form choices on text", `{"kind": {"t": "form", "fields": [{"name": "a", "type": "text", "choices": ["x"]}]}}`, `surface /kind/fields/0/choices: not allowed here; only a choice or multichoice field has choices: remove them or change the type`, nil},
	{"form choice without choices", `{"kind": {"t": "form", "fields": [{"name": "a", "type": "choice"}]}}`, `surface /kind/fields/0/choices: required field is missing; choices holds a choice or multichoice field's options, 1 to 64 strings`, nil},
	{"image mime", `{"kind": {"t": "image", "mime": "image/svg+xml", "data": "` + pngBase64 + `", "alt": "x"}}`, `surface /kind/mime: expected one of "image/png", "image/jpeg", "image/gif", "image/webp", got "image/svg+xml"`, nil},
	{"empty stack", `{"kind": {"t": "stack", "children": []}}`, `surface /kind/children: must not be empty; children holds the child surfaces (1 to 64), each {"kind": {…}}; stacks nest at most 8 deep`, nil},

	// Stacks check their children recursively.
	{"stack child schema", `{"kind": {"t": "stack", "children": [{"kind": {"t": "text", "value": "ok"}}, {"kind": {"t": "table", "columns": ["a"], "rows": [[1]]}}]}}`,
		`surface /kind/children/1/kind/rows/0/0: expected string, got number; each cell is a string: format numbers and dates before sending them`, nil},
	{"stack child unknown kind", `{"kind": {"t": "stack", "children": [{"kind": {"t": "pie"}}]}}`, `surface /kind/children/0/kind/t: unknown kind "pie"; the kinds are ` + kindsList, ui.ErrUnknownKind},
	{"stack child extra field", `{"kind": {"t": "stack", "children": [{"kind": {"t": "text", "value": "x"}, "x": 1}]}}`, `surface /kind/children/0/x: unknown field; a surface is {"kind": {"t": "<kind>", …}} and nothing else`, nil},
	{"stack child consistency", `{"kind": {"t": "stack", "children": [{"kind": {"t": "stack", "children": [{"kind": {"t": "progress", "value": 7, "max": 5}}]}}]}}`,
		`surface /kind/children/0/kind/children/0/kind/value: 7 is more than max 5; send a value from 0 to max, or raise max`, nil},
	{"stack too deep", strings.Repeat(`{"kind": {"t": "stack", "children": [`, 9) + `{"kind": {"t": "text", "value": "x"}}` + strings.Repeat(`]}}`, 9),
		`surface /kind/children/0/kind/children/0/kind/children/0/kind/children/0/kind/children/0/kind/children/0/kind/children/0/kind/children/0/kind: stacks nest at most 8 deep and this one is 9 deep; flatten the inner stacks`, ui.ErrLimit},

	// Consistency the schema cannot state.
	{"row length", `{"kind": {"t": "table", "columns": ["a", "b"], "rows": [["x", "y"], ["x"]]}}`, `surface /kind/rows/1: this row has 1 cell and the table has 2 columns; give every row one cell per column`, nil},
	{"align length", `{"kind": {"t": "table", "columns": ["a"], "rows": [], "align": ["left", "right"]}}`, `surface /kind/align: align has 2 entries and the table has 1 column; give one alignment per column`, nil},
	{"progress over max", `{"kind": {"t": "progress", "value": 120}}`, `surface /kind/value: 120 is more than max 100; send a value from 0 to max, or raise max`, nil},
	{"question without answers", `{"kind": {"t": "question", "prompt": "x"}}`, `surface /kind: a question needs choices or "allowText": true; add one or the other`, nil},
	{"question duplicate", `{"kind": {"t": "question", "prompt": "x", "choices": [{"label": "a"}, {"label": "b", "value": "a"}]}}`, `surface /kind/choices/1: its value "a" is also choice 0's; give every choice its own value`, nil},
	{"question answer", `{"kind": {"t": "question", "prompt": "x", "choices": [{"label": "a"}], "answer": {"choices": ["b"]}}}`, `surface /kind/answer/choices/0: "b" is not the value of any choice; answer with the values of the question's choices`, nil},
	{"question two answers", `{"kind": {"t": "question", "prompt": "x", "choices": [{"label": "a"}, {"label": "b"}], "answer": {"choices": ["a", "b"]}}}`, `surface /kind/answer/choices: 2 choices picked, and a question without "multiple": true takes one; keep one or set multiple`, nil},
	{"question typed answer", `{"kind": {"t": "question", "prompt": "x", "choices": [{"label": "a"}], "answer": {"text": "c"}}}`, `surface /kind/answer/text: a typed answer needs "allowText": true; remove the text or allow it`, nil},
	{"form duplicate name", `{"kind": {"t": "form", "fields": [{"name": "a", "type": "text"}, {"name": "a", "type": "boolean"}]}}`, `surface /kind/fields/1/name: the name "a" is also field 0's; give every field its own name`, nil},
	{"form choice value", `{"kind": {"t": "form", "fields": [{"name": "a", "type": "choice", "choices": ["x"], "value": "y"}]}}`, `surface /kind/fields/0/value: "y" is not one of the field's choices; use one of them`, nil},
	{"form number range", `{"kind": {"t": "form", "fields": [{"name": "n", "type": "number", "min": 1, "max": 9, "value": 12}]}}`, `surface /kind/fields/0/value: 12 is more than max 9; send a value from min to max`, nil},
	{"chart several unnamed", `{"kind": {"t": "chart", "kind": "line", "series": [{"values": [1]}, {"label": "b", "values": [2]}]}}`, `surface /kind/series/0/label: a chart with several series names each one, since colour is never the only signal; add a label`, nil},
	{"chart labels needed", `{"kind": {"t": "chart", "kind": "bars", "series": [{"values": [1, 2]}]}}`, `surface /kind/labels: a bars chart names each category; add labels, one per value`, nil},
	{"chart value count", `{"kind": {"t": "chart", "kind": "columns", "labels": ["a"], "series": [{"values": [1, 2]}]}}`, `surface /kind/series/0/values: 2 values for 1 label; give one value per label`, nil},
	{"chart kind", `{"kind": {"t": "chart", "kind": "pie", "series": [{"values": [1]}]}}`, `surface /kind/kind: expected one of "bars", "columns", "stacked", "line", "area", "scatter", "sparkline", "donut", "gauge", got "pie"`, nil},
	{"chart value type", `{"kind": {"t": "chart", "kind": "bars", "labels": ["a"], "series": [{"values": ["1"]}]}}`, `surface /kind/series/0/values/0: expected number, got string; each value is a number`, nil},
	{"scatter pair", `{"kind": {"t": "chart", "kind": "scatter", "series": [{"values": [1]}]}}`, `surface /kind/series/0/values/0: expected array, got number; a scatter chart reads each value as an [x, y] pair of numbers`, nil},
	{"scatter labels", `{"kind": {"t": "chart", "kind": "scatter", "labels": ["a"], "series": [{"values": [[1, 2]]}]}}`, `surface /kind/labels: not allowed here; a scatter chart has no labels: name each series instead`, nil},
	{"gauge values", `{"kind": {"t": "chart", "kind": "gauge", "series": [{"values": [1, 2, 3]}]}}`, `surface /kind/series/0/values: expected at most 2 items, got 3; a gauge's values are [value] or [value, max]; max is 100 when left out`, nil},
	{"gauge max", `{"kind": {"t": "chart", "kind": "gauge", "series": [{"values": [1, 0]}]}}`, `surface /kind/series/0/values/1: a gauge's max must be above 0, got 0; send [value, max] with max above 0, or [value] for a max of 100`, nil},
	{"stacked negative", `{"kind": {"t": "chart", "kind": "stacked", "labels": ["a"], "series": [{"values": [-1]}]}}`, `surface /kind/series/0/values/0: expected at least 0, got -1; stacked and donut charts draw absolute amounts: each value is a number of at least 0`, nil},
	{"raster palette", `{"kind": {"t": "raster", "rows": ["#x"], "palette": {"#": "#ffffff"}}}`, `surface /kind/rows/0: cell 1 is "x", which the palette does not name; add "x" to palette`, nil},
	{"raster ragged", `{"kind": {"t": "raster", "rows": ["#", "##"], "palette": {"#": "#ffffff"}}}`, `surface /kind/rows/1: this row has 2 cells and row 0 has 1; give every row the same number of cells (pad with spaces)`, nil},
	{"image bytes", `{"kind": {"t": "image", "mime": "image/jpeg", "data": "` + pngBase64 + `", "alt": "x"}}`, `surface /kind/data: the bytes are not JPEG; send the image's own bytes, or the mime that matches them`, nil},
	{"image base64", `{"kind": {"t": "image", "mime": "image/png", "data": "!!!!", "alt": "x"}}`, `surface /kind/data: is not standard base64 (illegal base64 data at input byte 0); encode the image's bytes with padding, no line breaks`, nil},

	// Limits.
	{"raster too wide", rasterOf(65, 1), `surface /kind/rows/0: a raster is at most 64 × 32 cells and this row has 65 cells; scale it down to 64 cells a row or fewer`, ui.ErrLimit},
	{"raster too tall", rasterOf(1, 33), `surface /kind/rows: a raster is at most 64 × 32 cells and this one has 33 rows; scale it down to 32 rows or fewer`, ui.ErrLimit},
	{"image too big", imageOf(ui.MaxImageBytes + 1), `surface /kind/data: the image is 5,000,001 bytes once decoded, over the limit of 5 MB (5,000,000 bytes); send a smaller image`, ui.ErrLimit},
	{"image without alt", `{"kind": {"t": "image", "mime": "image/png", "data": "` + pngBase64 + `"}}`, `surface /kind/alt: an image needs a non-empty alt; describe the image in words, which is what shows where it cannot be drawn`, nil},
	{"image blank alt", `{"kind": {"t": "image", "mime": "image/png", "data": "` + pngBase64 + `", "alt": " \n"}}`, `surface /kind/alt: an image needs a non-empty alt; describe the image in words, which is what shows where it cannot be drawn`, nil},
	{"tree too deep", `{"kind": {"t": "tree", "nodes": [` + strings.Repeat(`{"label": "x", "children": [`, 33) + strings.Repeat(`]}`, 33) + `]}}`,
		`surface /kind/nodes/0` + strings.Repeat(`/children/0`, 32) + `: a tree is at most 32 levels deep; flatten its deepest levels`, ui.ErrLimit},
}

func TestValidateRefuses(t *testing.T) {
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			err := ui.Validate(json.RawMessage(tc.surface))
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("Validate() = %q,\nwant %q", err, tc.want)
			}
			var e *ui.Error
			if !errors.As(err, &e) {
				t.Errorf("Validate() = %T, want *ui.Error", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(Validate(), %v) = false, want true", tc.is)
			}
		})
	}
}

// TestValidateLimitsEdge checks that surfaces exactly at a limit pass.
func TestValidateLimitsEdge(t *testing.T) {
	for name, s := range map[string]string{
		"raster 64×32": rasterOf(64, 32),
		"image 5 MB":   imageOf(ui.MaxImageBytes),
		"stack 8 deep": strings.Repeat(`{"kind": {"t": "stack", "children": [`, 8) + `{"kind": {"t": "text", "value": "x"}}` + strings.Repeat(`]}}`, 8),
		"tree 32 deep": `{"kind": {"t": "tree", "nodes": [` + strings.Repeat(`{"label": "x", "children": [`, 32) + strings.Repeat(`]}`, 32) + `]}}`,
	} {
		if err := ui.Validate(json.RawMessage(s)); err != nil {
			t.Errorf("Validate(%s) = %v, want nil", name, err)
		}
	}
}

// TestValidateSeedExamples checks the surfaces the seed itself shows.
func TestValidateSeedExamples(t *testing.T) {
	for _, s := range []string{
		`{"kind": {"t": "chart", "kind": "columns", "unit": "s", "labels": ["mon", "tue", "wed"], "series": [{"label": "build", "values": [212, 198, 240]}]}}`,
		`{"kind": {"t": "text", "value": "build times: mon 212 s, tue 198 s, wed 240 s"}}`,
		`{"kind": {"t": "text", "value": "3 of 5 green"}}`,
	} {
		if err := ui.Validate(json.RawMessage(s)); err != nil {
			t.Errorf("Validate(%s) = %v, want nil", s, err)
		}
	}
}

func TestValidateFallback(t *testing.T) {
	for _, tc := range []struct {
		name, surface, want string
	}{
		{"chart", `{"kind": {"t": "chart", "kind": "bars", "labels": ["a"], "series": [{"values": [1]}]}}`,
			`fallback /kind/t: chart is not a core kind, and a fallback may use core kinds only: text, markdown, table, tree, diff, progress, stream, task, question, form or stack`},
		{"raster", `{"kind": {"t": "raster", "rows": ["#"], "palette": {"#": "#ffffff"}}}`,
			`fallback /kind/t: raster is not a core kind, and a fallback may use core kinds only: text, markdown, table, tree, diff, progress, stream, task, question, form or stack`},
		{"image in a stack", `{"kind": {"t": "stack", "children": [{"kind": {"t": "text", "value": "x"}}, {"kind": {"t": "image", "mime": "image/png", "data": "` + pngBase64 + `", "alt": "x"}}]}}`,
			`fallback /kind/children/1/kind/t: image is not a core kind, and a fallback may use core kinds only: text, markdown, table, tree, diff, progress, stream, task, question, form or stack`},
		{"schema failure", `{"kind": {"t": "text", "value": 3}}`,
			`fallback /kind/value: expected string, got number; value is the text, a string; a newline breaks the line`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ui.ValidateFallback(json.RawMessage(tc.surface))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("ValidateFallback() = %v,\nwant %q", err, tc.want)
			}
			if strings.Contains(tc.want, "not a core kind") && !errors.Is(err, ui.ErrNotCore) {
				t.Errorf("errors.Is(ValidateFallback(), ErrNotCore) = false, want true")
			}
		})
	}
	for _, k := range ui.CoreKinds() {
		if !ui.IsCore(k) || !ui.IsKind(k) {
			t.Errorf("IsCore(%q), IsKind(%q) = false, want true", k, k)
		}
	}
	for _, in := range goldenInputs(t) {
		raw, _ := os.ReadFile(in)
		err := ui.ValidateFallback(raw)
		core := !strings.Contains(string(raw), `"t": "chart"`) && !strings.Contains(string(raw), `"t": "raster"`) && !strings.Contains(string(raw), `"t": "image"`)
		if core && err != nil {
			t.Errorf("ValidateFallback(%s) = %v, want nil", in, err)
		}
		if !core && !errors.Is(err, ui.ErrNotCore) {
			t.Errorf("ValidateFallback(%s) = %v, want ErrNotCore", in, err)
		}
	}
}

// TestValidateAccepts checks that every golden input is valid.
func TestValidateAccepts(t *testing.T) {
	for _, in := range goldenInputs(t) {
		raw, _ := os.ReadFile(in)
		if err := ui.Validate(raw); err != nil {
			t.Errorf("Validate(%s) = %v", in, err)
		}
	}
}

// TestSchemas checks that every kind's schema is there and is JSON.
func TestSchemas(t *testing.T) {
	for _, name := range append([]string{"surface", "kind"}, ui.Kinds()...) {
		b, ok := ui.Schema(name)
		if !ok {
			t.Errorf("Schema(%q) missing", name)
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Errorf("Schema(%q) is not JSON: %v", name, err)
		}
		if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("Schema(%q) $schema = %v, want draft 2020-12", name, doc["$schema"])
		}
	}
	if _, ok := ui.Schema("pie"); ok {
		t.Errorf(`Schema("pie") found, want none`)
	}
}
