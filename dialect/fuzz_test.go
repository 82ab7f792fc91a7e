package dialect_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/dialect"
	"github.com/getorrery/orrery/kernel"
)

// FuzzEncode feeds arbitrary frame bytes to every encoder: each gives at
// least one frame, every one JSON carrying the frame's seq in the mode's
// field, and only the last with a type.
func FuzzEncode(f *testing.F) {
	files, _ := filepath.Glob("../protocol/fixtures/*.jsonl")
	for _, p := range files {
		raw, _ := os.ReadFile(p)
		for _, line := range strings.Split(string(raw), "\n")[:3] {
			f.Add([]byte(line), "CUSTOM")
		}
	}
	f.Add([]byte(`{"type":"CUSTOM","name":"orrery.placed","value":{"id":"a","owner":"agent","surface":{"kind":{"t":"text","value":"x"}}}}`), "CUSTOM")
	f.Add([]byte(`{"type":"TOOL_CALL_START","metadata":null}`), "TOOL_CALL_START")
	f.Add([]byte(`nope`), "X")
	encs := []kernel.Encoder{
		dialect.Encoder(dialect.AGUI, dialect.Options{}),
		dialect.Encoder(dialect.OpenAI, dialect.Options{}),
		dialect.Encoder(dialect.Dual, dialect.Options{}),
		dialect.WithA2UI(dialect.Encoder(dialect.OpenAI, dialect.Options{})),
	}
	f.Fuzz(func(t *testing.T, data []byte, typ string) {
		if typ == "" {
			typ = "X"
		}
		in := kernel.Frame{Seq: 42, Type: typ, Run: "r", Data: data}
		for _, enc := range encs {
			out := enc.Encode(nil, in)
			if len(out) == 0 {
				t.Fatalf("%s: Encode(%q) gave nothing", enc.Name(), data)
			}
			for i, e := range out {
				if e.Seq != 42 || (i == len(out)-1) != (e.Type != "") {
					t.Fatalf("%s: frame %d = seq %d type %q", enc.Name(), i, e.Seq, e.Type)
				}
				var v map[string]json.RawMessage
				if err := json.Unmarshal(e.Data, &v); err != nil {
					t.Fatalf("%s: Encode(%q)[%d] = %s, not a JSON object", enc.Name(), data, i, e.Data)
				}
				if got := seqField(t, e.Data); got != 42 && !strings.Contains(string(e.Data), `"type":"ACTIVITY_SNAPSHOT"`) {
					t.Fatalf("%s: Encode(%q)[%d] = %s has seq %d, want 42", enc.Name(), data, i, e.Data, got)
				}
			}
		}
	})
}
