package dialect_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/getorrery/orrery/dialect"
	"github.com/getorrery/orrery/kernel"
)

// TestForAGUI0 rewrites only what AG-UI 0.0.x refuses: a RUN_FINISHED
// outcome with pending client calls, or one 0.0.x has no type for.
func TestForAGUI0(t *testing.T) {
	enc := dialect.ForAGUI0(nil)
	for _, tc := range []struct{ name, in, want string }{
		{"pending client calls", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success","pendingToolCallIds":["c1"]},"metadata":{"orrery":{"seq":9}}}`,
			`{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success"},"metadata":{"orrery":{"seq":9,"pendingToolCallIds":["c1"]}}}`},
		{"cancelled", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"cancelled"},"metadata":{"orrery":{"seq":9}}}`,
			`{"type":"RUN_FINISHED","threadId":"t","runId":"r","metadata":{"orrery":{"seq":9,"cancelled":true}}}`},
		{"success as it is", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success"}}`, `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success"}}`},
		{"another frame", `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}`, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in struct{ Type string }
			_ = json.Unmarshal([]byte(tc.in), &in)
			out := enc.Encode(nil, kernel.Frame{Seq: 9, Type: in.Type, Data: []byte(tc.in)})
			if len(out) != 1 || out[0].Seq != 9 {
				t.Fatalf("Encode = %v, want one frame with the seq", out)
			}
			var got, want any
			_ = json.Unmarshal(out[0].Data, &got)
			_ = json.Unmarshal([]byte(tc.want), &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Encode = %s, want %s", out[0].Data, tc.want)
			}
		})
	}
}
