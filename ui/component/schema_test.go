package component_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/getorrery/orrery/ui/component"
)

const runsSchema = `{
  "type": "object",
  "required": ["runs"],
  "properties": {
    "failed": {"type": "integer", "minimum": 0, "default": 0},
    "title": {"$ref": "#/$defs/title"},
    "runs": {"type": "array", "items": {"$ref": "#/$defs/run"}},
    "opts": {"type": "object", "default": {}, "properties": {"color": {"type": "boolean", "default": true}}}
  },
  "additionalProperties": false,
  "$defs": {
    "title": {"type": "string", "default": "CI"},
    "run": {"type": "object", "required": ["name"], "additionalProperties": false,
            "properties": {"name": {"type": "string"}, "status": {"enum": ["ok", "failed"], "default": "ok"}}}
  }
}`

// TestSchemaDefaults checks that defaults are filled, through $ref, items
// and into a default object, before validation.
func TestSchemaDefaults(t *testing.T) {
	s := component.NewSchema("runs", json.RawMessage(runsSchema))
	if err := s.Err(); err != nil {
		t.Fatalf("Err() = %v, want nil", err)
	}
	got, err := s.Check(json.RawMessage(`{"runs": [{"name": "lint"}, {"name": "unit", "status": "failed"}]}`))
	if err != nil {
		t.Fatalf("Check() error: %v", err)
	}
	want := `{"failed":0,"opts":{"color":true},"runs":[{"name":"lint","status":"ok"},{"name":"unit","status":"failed"}],"title":"CI"}`
	if string(got) != want {
		t.Errorf("Check() = %s, want %s", got, want)
	}
}

// TestSchemaRefusals checks that data the schema refuses names the path.
func TestSchemaRefusals(t *testing.T) {
	s := component.NewSchema("runs", json.RawMessage(runsSchema))
	tests := []struct {
		name, data string
		sentinel   error
		path       string
		want       string
	}{
		{"wrong type deep", `{"runs": [{"name": 7}]}`, component.ErrDataSchema, "/runs/0/name",
			`the data at /runs/0/name does not match the schema of component "runs": expected string, got number; send data the schema accepts`},
		{"missing required", `{"failed": 1}`, component.ErrDataSchema, "/runs", `the data at /runs does not match the schema of component "runs": a required field is missing`},
		{"enum", `{"runs": [{"name": "a", "status": "green"}]}`, component.ErrDataSchema, "/runs/0/status", `expected one of "ok", "failed", got "green"`},
		{"extra field", `{"runs": [], "colour": 1}`, component.ErrDataSchema, "/colour", "the schema allows no such field"},
		{"minimum", `{"runs": [], "failed": -1}`, component.ErrDataSchema, "/failed", "expected at least 0, got -1"},
		{"default then validated", `{"runs": [], "opts": {"color": "yes"}}`, component.ErrDataSchema, "/opts/color", "expected boolean, got string"},
		{"array", `[1]`, component.ErrNotObject, "", "the data is an array, not an object"},
		{"null", `null`, component.ErrNotObject, "", "the data is null, not an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Check(json.RawMessage(tt.data))
			var e *component.Error
			if !errors.As(err, &e) || !errors.Is(err, tt.sentinel) {
				t.Fatalf("Check() = %v, want an *Error matching %v", err, tt.sentinel)
			}
			if e.Path != tt.path {
				t.Errorf("Check() path = %q, want %q", e.Path, tt.path)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check() = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestInvalidSchema checks that a schema that is not valid JSON Schema
// refuses every check and every data of its component, naming the problem.
func TestInvalidSchema(t *testing.T) {
	tests := []struct {
		name, schema, want string
	}{
		{"not JSON", `{"type": `, "it is not JSON"},
		{"bad keyword value", `{"type": "objekt"}`, `at /type: expected one of "array", "boolean"`},
		{"remote ref", `{"$ref": "https://example.com/s.json"}`, "example.com"},
		{"file ref", `{"$ref": "file:///etc/passwd"}`, "file:///etc/passwd"},
		{"bad regexp", `{"properties": {"a": {"pattern": "("}}}`, "pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := component.NewSchema("runs", json.RawMessage(tt.schema))
			err := s.Err()
			if !errors.Is(err, component.ErrBadSchema) {
				t.Fatalf("Err() = %v, want ErrBadSchema", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, `component "runs": its data schema is not valid JSON Schema (`) ||
				!strings.HasSuffix(msg, "); fix it under [[provides.components]] in orrery.toml") || !strings.Contains(msg, tt.want) {
				t.Errorf("Err() = %q, want the component, the problem (containing %q) and the fix", msg, tt.want)
			}
			for _, data := range []string{`{}`, `{"a": 1}`} {
				if _, err := s.Check(json.RawMessage(data)); err == nil || err.Error() != msg {
					t.Errorf("Check(%s) = %v, want %q", data, err, msg)
				}
			}
			_, err = component.NewData(json.RawMessage(`{}`), component.Options{Schema: s})
			if !errors.Is(err, component.ErrBadSchema) {
				t.Errorf("NewData() with the schema = %v, want ErrBadSchema", err)
			}
		})
	}
}
