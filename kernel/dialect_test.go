package kernel_test

import (
	"encoding/json"
	"testing"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

func TestTagSession(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{"kernel frame", `{"type":"TEXT_MESSAGE_END","timestamp":1,"metadata":{"orrery":{"seq":7}},"messageId":"m"}`},
		{"extra metadata key before orrery", `{"type":"TEXT_MESSAGE_END","metadata":{"agui":1,"orrery":{"seq":7}},"messageId":"m"}`},
		{"rawEvent holding a frame", `{"type":"RAW","rawEvent":{"metadata":{"orrery":{"seq":1}}},"metadata":{"orrery":{"seq":7}},"event":{}}`},
		{"custom value holding a frame", `{"type":"CUSTOM","metadata":{"orrery":{"seq":7}},"name":"x","value":{"metadata":{"orrery":{"seq":1}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := kernel.TagSession([]byte(tt.data), `s"1`)
			ev, err := protocol.DecodeEvent(out)
			if err != nil {
				t.Fatalf("TagSession() = %s, not an event: %v", out, err)
			}
			if o := ev.Header().Metadata.Orrery; o == nil || o.Session != `s"1` || o.Seq != 7 {
				t.Errorf("TagSession() = %s, want metadata.orrery {seq 7, session s\"1}", out)
			}
			var before, after map[string]json.RawMessage
			json.Unmarshal([]byte(tt.data), &before)
			json.Unmarshal(out, &after)
			for k, v := range before {
				if k != "metadata" && string(after[k]) != string(v) {
					t.Errorf("field %s = %s, want it unchanged: %s", k, after[k], v)
				}
			}
		})
	}
}
