package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// FuzzChatCompletions posts arbitrary bodies to POST /v1/chat/completions
// on a rig that makes no sessions: every answer is JSON, either a chat
// completion or OpenAI's error shape with a message.
func FuzzChatCompletions(f *testing.F) {
	for _, s := range []string{
		`{"model":"orrery","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"orrery","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"model":"orrery","messages":[{"role":"tool","content":"x","tool_call_id":"c"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}`,
		`{"model":"orrery","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}],"n":1,"user":"u"}`,
		`{"model":1}`, `{"messages":null}`, `[]`, `null`, ``, `{"model":"orrery","messages":[{"role":"user","content":{}}]}`,
	} {
		f.Add([]byte(s))
	}
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		status, _, data := r.post(t, r.local, http.MethodPost, "/v1/chat/completions", map[string]string{"Content-Type": "application/json"}, string(body))
		var v map[string]json.RawMessage
		if err := json.Unmarshal(data, &v); err != nil {
			if status == http.StatusOK && strings.HasPrefix(string(data), "data: ") {
				return // a stream
			}
			t.Fatalf("status %d body %q: not JSON", status, data)
		}
		if status == http.StatusOK {
			return
		}
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("status %d body %s: want OpenAI's error shape", status, data)
		}
	})
}
