package protocol_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/protocol/internal/schemagen"
)

// TestGeneratedFilesCurrent fails when protocol.schema.json or protocol.d.ts
// no longer matches the Go types.
func TestGeneratedFilesCurrent(t *testing.T) {
	schema, dts, err := schemagen.Generate()
	if err != nil {
		t.Fatalf("schemagen.Generate() error = %v", err)
	}
	for _, f := range []struct {
		name string
		want []byte
	}{
		{schemagen.SchemaFile, schema},
		{schemagen.TypeScriptFile, dts},
	} {
		got, err := os.ReadFile(f.name)
		if err != nil {
			t.Errorf("read %s: %v: run go generate ./protocol", f.name, err)
			continue
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is stale (%s): run go generate ./protocol", f.name, firstDiff(got, f.want))
		}
	}
}

// firstDiff describes the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d is %q, want %q", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("it has %d lines, want %d", len(g), len(w))
}

// TestGenerateDeterministic checks that two runs give the same bytes.
func TestGenerateDeterministic(t *testing.T) {
	schema1, dts1, err := schemagen.Generate()
	if err != nil {
		t.Fatalf("schemagen.Generate() error = %v", err)
	}
	for range 5 {
		schema2, dts2, err := schemagen.Generate()
		if err != nil {
			t.Fatalf("schemagen.Generate() error = %v", err)
		}
		if !bytes.Equal(schema1, schema2) || !bytes.Equal(dts1, dts2) {
			t.Fatal("schemagen.Generate() differs between runs, want the same bytes")
		}
	}
}

// TestSchemaCoversTypes checks the schema's shape: a definition per event
// with its wire type as a constant, the two unions, and the special cases.
func TestSchemaCoversTypes(t *testing.T) {
	data, err := os.ReadFile(schemagen.SchemaFile)
	if err != nil {
		t.Fatalf("read %s: %v", schemagen.SchemaFile, err)
	}
	if !bytes.HasSuffix(data, []byte("}\n")) {
		t.Errorf("%s does not end with a newline", schemagen.SchemaFile)
	}
	type node = map[string]any
	var schema struct {
		Schema string          `json:"$schema"`
		OneOf  []node          `json:"oneOf"`
		Defs   map[string]node `json:"$defs"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("json.Unmarshal(%s) error = %v", schemagen.SchemaFile, err)
	}
	if want := "https://json-schema.org/draft/2020-12/schema"; schema.Schema != want {
		t.Errorf("$schema = %q, want %q", schema.Schema, want)
	}
	if len(schema.OneOf) != 2 {
		t.Errorf("len(oneOf) = %d, want 2 (Event, Request)", len(schema.OneOf))
	}
	events, _ := schema.Defs["Event"]["oneOf"].([]any)
	if len(events) != len(protocol.EventTypes()) {
		t.Errorf("len($defs.Event.oneOf) = %d, want %d", len(events), len(protocol.EventTypes()))
	}
	requests, _ := schema.Defs["Request"]["oneOf"].([]any)
	if len(requests) != len(protocol.RequestKinds()) {
		t.Errorf("len($defs.Request.oneOf) = %d, want %d", len(requests), len(protocol.RequestKinds()))
	}
	for _, et := range protocol.EventTypes() {
		name := reflect.TypeOf(protocol.NewEvent(et)).Elem().Name()
		def, ok := schema.Defs[name]
		if !ok {
			t.Errorf("$defs.%s is missing", name)
			continue
		}
		props, _ := def["properties"].(node)
		typ, _ := props["type"].(node)
		if typ["const"] != string(et) {
			t.Errorf("$defs.%s.properties.type = %v, want {\"const\": %q}", name, typ, et)
		}
	}
	for _, name := range []string{
		"RunAgentInput", "Message", "Content", "ContentPart", "Source", "ToolCall", "FunctionCall", "Tool",
		"Context", "ResumeEntry", "TokenUsage", "RunResult", "Outcome", "Interrupt", "PatchOp", "OrreryMeta",
		"Metadata", "SessionNew", "SessionList", "SessionRead", "RunSend", "RunCancel", "RunInput",
		"SessionNewReply", "SessionListReply", "SessionSummary", "SessionReadReply", "RunSendReply", "Empty",
		"Reply", "ErrorBody",
	} {
		if _, ok := schema.Defs[name]; !ok {
			t.Errorf("$defs.%s is missing", name)
		}
	}
	if got := schema.Defs["Metadata"]["additionalProperties"]; got != true {
		t.Errorf("$defs.Metadata.additionalProperties = %v, want true", got)
	}
	if parts, _ := schema.Defs["Content"]["oneOf"].([]any); len(parts) != 3 {
		t.Errorf("len($defs.Content.oneOf) = %d, want 3 (string, parts, object)", len(parts))
	}
}
