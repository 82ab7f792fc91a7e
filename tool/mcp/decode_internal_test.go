package mcp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// These tests reach the unexported decoders of what a server or a model
// sends: a server's input schema, a model's arguments, a server's result.

func TestParameters(t *testing.T) {
	tests := []struct {
		schema any
		want   string
	}{
		{nil, `{"type":"object"}`},
		{map[string]any{}, `{"type":"object"}`},
		{"string", `{"type":"object"}`},
		{[]any{1, 2}, `{"type":"object"}`},
		{json.RawMessage(`null`), `{"type":"object"}`},
		{map[string]any{"type": "object"}, `{"type":"object"}`},
		{
			map[string]any{"properties": map[string]any{"q": map[string]any{"type": "string"}}},
			`{"properties":{"q":{"type":"string"}},"type":"object"}`,
		},
		{
			json.RawMessage(`{"type":"object","required":["q"],"properties":{"q":{"type":"string"}}}`),
			`{"type":"object","required":["q"],"properties":{"q":{"type":"string"}}}`,
		},
	}
	for _, tt := range tests {
		if got := string(parameters(tt.schema)); got != tt.want {
			t.Errorf("parameters(%v) = %s, want %s", tt.schema, got, tt.want)
		}
	}
}

func FuzzParameters(f *testing.F) {
	for _, s := range []string{`null`, `{}`, `"x"`, `[]`, `{"type":"object"}`, `{"properties":{"a":{}}}`, `{"type":["object","null"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var schema any
		if json.Unmarshal(data, &schema) != nil {
			return
		}
		got := parameters(schema)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(got, &m); err != nil || m == nil {
			t.Fatalf("parameters(%s) = %s, not a JSON object: %v", data, got, err)
		}
		if _, ok := m["type"]; !ok {
			t.Fatalf("parameters(%s) = %s, want a type", data, got)
		}
	})
}

func FuzzObjectArgs(f *testing.F) {
	for _, s := range []string{``, ` `, `{}`, `{"a":1}`, ` {"a":[1,{"b":null}]} `, `null`, `[]`, `"{}"`, `{"a":1} {}`, `{"a":`, "\ufeff{}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		args, ok := objectArgs(data)
		var m map[string]json.RawMessage
		err := json.Unmarshal(data, &m)
		isObject := err == nil && m != nil
		empty := len(bytes.Trim(data, jsonSpace)) == 0
		if ok != (isObject || empty) {
			t.Fatalf("objectArgs(%q) ok = %v, want %v (a JSON object, or nothing)", data, ok, isObject || empty)
		}
		if !ok {
			return
		}
		var back map[string]json.RawMessage
		if err := json.Unmarshal(args, &back); err != nil || back == nil {
			t.Fatalf("objectArgs(%q) = %q, not a JSON object: %v", data, args, err)
		}
		if len(back) != len(m) {
			t.Fatalf("objectArgs(%q) = %q, with %d keys, want %d", data, args, len(back), len(m))
		}
	})
}

func TestResultOf(t *testing.T) {
	tests := []struct {
		wire    string
		want    string
		wantErr bool
	}{
		{`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`, "a\nb", false},
		{`{"content":[],"isError":true}`, "the tool reported an error without saying what it was", true},
		{`{"content":[{"type":"text","text":"no"}],"isError":true}`, "no", true},
		{`{"content":[],"structuredContent":{"n":1}}`, `{"n":1}`, false},
		{`{"content":[{"type":"image","mimeType":"image/jpeg","data":"AAECAw=="}]}`, "[image: image/jpeg, 4 bytes]", false},
		{`{"content":[{"type":"audio","data":""}]}`, "[audio: type unknown, 0 bytes]", false},
		{`{"content":[{"type":"resource_link","uri":"file:///a","name":"a"}]}`, "[resource link: file:///a, type unknown, size unknown]", false},
		{`{"content":[{"type":"resource","resource":{"uri":"mem://b","mimeType":"application/octet-stream","blob":"AAE="}}]}`, "[resource: mem://b, application/octet-stream, 2 bytes]", false},
	}
	for _, tt := range tests {
		var r mcp.CallToolResult
		if err := json.Unmarshal([]byte(tt.wire), &r); err != nil {
			t.Fatalf("unmarshal %s: %v", tt.wire, err)
		}
		got := resultOf(&r)
		if got.Text != tt.want || got.Error != tt.wantErr {
			t.Errorf("resultOf(%s) = %+v, want text %q, error %v", tt.wire, got, tt.want, tt.wantErr)
		}
	}
}

func FuzzResultOf(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"hi"}]}`,
		`{"content":[],"isError":true}`,
		`{"content":[{"type":"image","mimeType":"image/png","data":"AAAA"},{"type":"text","text":"x"}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"u","text":"t"}}],"structuredContent":[1]}`,
		`{"content":[{"type":"resource_link","uri":"u","name":"n","size":3}]}`,
		`{"content":[{"type":"audio","mimeType":"audio/wav","data":""}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r mcp.CallToolResult
		if json.Unmarshal(data, &r) != nil {
			return
		}
		got := resultOf(&r)
		if got.Error != r.IsError {
			t.Fatalf("resultOf(%s).Error = %v, want %v", data, got.Error, r.IsError)
		}
		if r.IsError && strings.TrimSpace(got.Text) == "" {
			t.Fatalf("resultOf(%s) is an error without text", data)
		}
		lines := 0
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				if !strings.Contains(got.Text, tc.Text) {
					t.Fatalf("resultOf(%s) = %q, lost the text %q", data, got.Text, tc.Text)
				}
				continue
			}
			lines++
		}
		if n := strings.Count(got.Text, "\n["); lines > 0 && n < lines-1 {
			t.Fatalf("resultOf(%s) = %q, want a line for each of %d blocks that are not text", data, got.Text, lines)
		}
	})
}
