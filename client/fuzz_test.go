package client

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzSSEReader feeds arbitrary bytes to the SSE parser: it must not panic,
// and every event it returns is the data lines of one event.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("id: 1\ndata: {\"type\":\"RUN_STARTED\"}\n\n: keepalive\n\ndata: a\ndata: b\n\n"))
	f.Add([]byte("data: x\r\n\r\nevent: e\nretry: 5\ndata:y\n\n"))
	f.Add([]byte("data"))
	f.Add([]byte("\n\n\n:\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := newSSEReader(bytes.NewReader(in), 1<<12)
		for range 1 << 12 {
			data, err := r.next(nil)
			if err != nil {
				return
			}
			if len(data) > 1<<12 {
				t.Fatalf("event of %d bytes passed the %d-byte limit", len(data), 1<<12)
			}
		}
	})
}

// FuzzStateApply folds arbitrary frames into a State: it must not panic,
// and its results must stay valid JSON.
func FuzzStateApply(f *testing.F) {
	f.Add([]byte(`{"type":"STATE_SNAPSHOT","snapshot":{"a":[1]}}`), []byte(`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a/-","value":2}]}`))
	f.Add([]byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`), []byte(`{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}`))
	f.Add([]byte(`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u","role":"user","content":[{"type":"text","text":"hi"}]}]}`), []byte(`{"type":"ACTIVITY_DELTA","messageId":"u","activityType":"x","patch":[]}`))
	f.Add([]byte(`{"type":"CUSTOM","name":"orrery.user.message","value":{"id":"u","content":"hi"}}`), []byte(`{"type":"TOOL_CALL_CHUNK","delta":"x"}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		st := NewState()
		for _, data := range [][]byte{a, b, a} {
			_ = st.Apply(Frame{Data: data})
		}
		if _, err := json.Marshal(st.Messages()); err != nil {
			t.Fatalf("Messages() does not encode: %v", err)
		}
		if doc := st.Shared(); doc != nil && !json.Valid(doc) {
			t.Fatalf("Shared() = %s, not valid JSON", doc)
		}
	})
}
