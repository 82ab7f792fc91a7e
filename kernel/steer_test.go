package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// chunk is one OpenAI chat.completion.chunk SSE event.
func chunk(delta string, finish string) string {
	f := "null"
	if finish != "" {
		f = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-test\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, f)
}

// TestSteerReachesTheModel drives a session with the real OpenAI provider
// against a local server speaking the chat completions stream: a steer sent
// while the first model call streams is in the conversation of the next.
func TestSteerReachesTheModel(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		inFirst := make(chan struct{})
		release := make(chan struct{})
		var second []byte
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			fl := w.(http.Flusher)
			if !strings.Contains(string(body), `"role":"tool"`) {
				// The first call: a tool call, held open until the steer is in.
				io.WriteString(w, chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"echo","arguments":""}}]}`, ""))
				io.WriteString(w, chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"text\":\"x\"}"}}]}`, ""))
				fl.Flush()
				close(inFirst)
				<-release
				io.WriteString(w, chunk(`{}`, "tool_calls"))
			} else {
				second = body
				io.WriteString(w, chunk(`{"role":"assistant","content":"ok, vitest"}`, ""))
				io.WriteString(w, chunk(`{}`, "stop"))
			}
			io.WriteString(w, "data: [DONE]\n\n")
		}))
		defer srv.Close()
		resolver := &models.Resolver{Getenv: func(k string) string {
			return map[string]string{"OPENAI_BASE_URL": srv.URL + "/v1", "OPENAI_API_KEY": "sk-test"}[k]
		}}
		e := mode.newEnv(t, "openai:gpt-test", func(c *kernel.Config) { c.Models = resolver.Resolve })
		s := e.session(t)
		w := watch(t, s, kernel.Caller{})
		if _, err := s.Send(context.Background(), kernel.SendInput{Text: "write the tests"}); err != nil {
			t.Fatal(err)
		}
		<-inFirst
		if _, err := s.Send(context.Background(), kernel.SendInput{Text: "use vitest", Steer: true}); err != nil {
			t.Fatal(err)
		}
		close(release)
		end := w.until(terminal)
		if _, ok := end.(*protocol.RunFinished); !ok {
			t.Fatalf("terminal = %#v, want RUN_FINISHED", end)
		}
		var req struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(second, &req); err != nil {
			t.Fatalf("second request %s: %v", second, err)
		}
		var roles []string
		steered := false
		for _, m := range req.Messages {
			roles = append(roles, m.Role)
			if m.Role == "user" && strings.Contains(string(m.Content), "use vitest") {
				steered = true
			}
		}
		if !steered {
			t.Errorf("the model's next request has messages %v without the steer: %s", roles, second)
		}
		if got := text(w.evs); !strings.Contains(got, "ok, vitest") {
			t.Errorf("run text = %q, want the second answer", got)
		}
	})
}
