package openai_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getorrery/orrery/agent"
)

// reply is what the fake answers to one attempt.
type reply struct {
	status  int               // 0 means 200 with an SSE body
	header  map[string]string // extra response headers
	fixture string            // testdata file replayed as the SSE body
	body    string            // the body when fixture is empty
	hold    bool              // keep the stream open until the client leaves
}

// fake is a local stand-in for an OpenAI-compatible server: it checks each
// request against the documented chat completions shape and replays the
// recorded fixture of the attempt's reply.
type fake struct {
	t        *testing.T
	srv      *httptest.Server
	key      string // the expected bearer token; "" means no Authorization header
	model    string
	replies  []reply // by attempt; the last one repeats
	attempts atomic.Int32
	sent     chan struct{} // closed once a held stream's body is out

	mu     sync.Mutex
	bodies []map[string]any // every request body, decoded
}

var wireName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func newFake(t *testing.T, key, model string, replies ...reply) *fake {
	t.Helper()
	f := &fake{t: t, key: key, model: model, replies: replies, sent: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// url is the base URL a Provider should use.
func (f *fake) url() string { return f.srv.URL + "/v1" }

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	n := int(f.attempts.Add(1))
	if bad := f.check(r); bad != "" {
		f.t.Errorf("fake server: %s", bad)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","param":null,"code":null}}`, bad)
		return
	}
	rep := f.replies[min(n, len(f.replies))-1]
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	body := rep.body
	if rep.fixture != "" {
		data, err := os.ReadFile(filepath.Join("testdata", rep.fixture))
		if err != nil {
			f.t.Errorf("fake server: %v", err)
			return
		}
		body = string(data)
	}
	if rep.status != 0 && rep.status != http.StatusOK {
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(rep.status)
		io.WriteString(w, body)
		return
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, body)
	w.(http.Flusher).Flush()
	if rep.hold {
		close(f.sent)
		<-r.Context().Done()
	}
}

// check returns what is wrong with a request, or "".
func (f *fake) check(r *http.Request) string {
	if r.Method != http.MethodPost {
		return "method is " + r.Method + ", want POST"
	}
	if r.URL.Path != "/v1/chat/completions" {
		return "path is " + r.URL.Path + ", want /v1/chat/completions"
	}
	auth := r.Header.Get("Authorization")
	if f.key == "" && auth != "" {
		return "Authorization is " + auth + ", want none"
	}
	if f.key != "" && auth != "Bearer "+f.key {
		return "Authorization is " + auth + ", want Bearer " + f.key
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return "Content-Type is " + ct + ", want application/json"
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return "body is not JSON: " + err.Error()
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	if body["stream"] != true {
		return fmt.Sprintf("stream is %v, want true", body["stream"])
	}
	so, _ := body["stream_options"].(map[string]any)
	if so["include_usage"] != true {
		return fmt.Sprintf("stream_options is %v, want include_usage true", body["stream_options"])
	}
	if body["model"] != f.model {
		return fmt.Sprintf("model is %v, want %s", body["model"], f.model)
	}
	msgs, ok := body["messages"].([]any)
	if !ok || len(msgs) == 0 {
		return fmt.Sprintf("messages is %v, want a non-empty array", body["messages"])
	}
	for i, m := range msgs {
		mm, _ := m.(map[string]any)
		switch mm["role"] {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return fmt.Sprintf("messages[%d].role is %v", i, mm["role"])
		}
	}
	if tools, present := body["tools"]; present {
		list, _ := tools.([]any)
		for i, tl := range list {
			tm, _ := tl.(map[string]any)
			fn, _ := tm["function"].(map[string]any)
			name, _ := fn["name"].(string)
			if tm["type"] != "function" || !wireName.MatchString(name) {
				return fmt.Sprintf("tools[%d] is %v, want a function whose name matches %s", i, tl, wireName)
			}
			if _, ok := fn["parameters"].(map[string]any); !ok {
				return fmt.Sprintf("tools[%d].function.parameters is %v, want an object", i, fn["parameters"])
			}
		}
	}
	return ""
}

// body returns the i-th request body the fake received.
func (f *fake) body(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.bodies) {
		f.t.Fatalf("fake server got %d requests, want at least %d", len(f.bodies), i+1)
	}
	return f.bodies[i]
}

// collect returns an emit func that records deltas and fails on a
// DeltaToolArgs that does not belong to the call open in the loop.
func collect(deltas *[]agent.Delta) func(agent.Delta) error {
	return func(d agent.Delta) error {
		*deltas = append(*deltas, d)
		return checkOrder(*deltas)
	}
}

// checkOrder reports a DeltaToolArgs that does not follow its call: the
// agent loop takes arguments only for the latest call started, while no
// text or reasoning came after it.
func checkOrder(deltas []agent.Delta) error {
	open, openID := false, ""
	for i, d := range deltas {
		switch d.Kind {
		case agent.DeltaToolCall:
			open, openID = true, d.ToolCallID
		case agent.DeltaToolArgs:
			if !open {
				return fmt.Errorf("delta %d: tool arguments %q follow no open call", i, d.Text)
			}
			if d.ToolCallID != "" && d.ToolCallID != openID {
				return fmt.Errorf("delta %d: tool arguments for %q while %q is open", i, d.ToolCallID, openID)
			}
		case agent.DeltaText, agent.DeltaReasoning:
			open = false
		default:
			return fmt.Errorf("delta %d: unknown kind %d", i, d.Kind)
		}
	}
	return nil
}
