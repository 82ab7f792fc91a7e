package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/getorrery/orrery/agent/provider/script"
	"github.com/getorrery/orrery/server"
)

// oaClient is the official OpenAI SDK pointed at the harness.
func (h *harness) oaClient(opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{
		option.WithBaseURL(h.url + "/v1/"), option.WithAPIKey("unused-on-loopback"),
		option.WithHTTPClient(h.client), option.WithMaxRetries(0),
	}
	return openai.NewClient(append(base, opts...)...)
}

var weatherTool = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("The weather in a city."),
	Parameters: openai.FunctionParameters{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required": []string{"city"},
	},
})

// toolScript: the model calls the kernel's echo tool (never shown to the
// caller), then says something and calls the caller's get_weather; after
// the caller's answer it replies.
func toolScript(t *testing.T) string {
	return writeScript(t,
		script.Turn{ToolCalls: []script.ToolCall{{Name: "echo", Args: json.RawMessage(`{"text":"ping"}`)}}, Usage: &script.Usage{InputTokens: 5, OutputTokens: 1}},
		script.Turn{Text: []string{"Let me ", "look."}, ToolCalls: []script.ToolCall{{Name: "get_weather", Args: json.RawMessage(`{"city":"Oslo"}`)}}, Usage: &script.Usage{InputTokens: 7, OutputTokens: 2}},
		script.Turn{Text: []string{"It is ", "sunny."}, Usage: &script.Usage{InputTokens: 9, OutputTokens: 3}},
	)
}

// TestChatCompletions drives POST /v1/chat/completions with the official
// openai-go SDK, streamed and not: the caller's tool comes back as a tool
// call and the kernel's echo does not, the caller answers it in a second
// request on the same session, and usage is reported.
func TestChatCompletions(t *testing.T) {
	h := newHarness(t)
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "whole", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			sess := "chat-" + name
			client := h.oaClient(option.WithHeader("Orrery-Session", sess))
			ctx := context.Background()
			params := openai.ChatCompletionNewParams{
				Model:    openai.ChatModel(toolScript(t)),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Oslo?")},
				Tools:    []openai.ChatCompletionToolUnionParam{weatherTool},
			}
			ask := func(p openai.ChatCompletionNewParams) openai.ChatCompletion {
				t.Helper()
				if !stream {
					c, err := client.Chat.Completions.New(ctx, p)
					if err != nil {
						t.Fatalf("Chat.Completions.New() = %v", err)
					}
					return *c
				}
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				s := client.Chat.Completions.NewStreaming(ctx, p)
				defer s.Close()
				var acc openai.ChatCompletionAccumulator
				n := 0
				for s.Next() {
					if !acc.AddChunk(s.Current()) {
						t.Fatalf("AddChunk(%s) = false", s.Current().RawJSON())
					}
					n++
				}
				if err := s.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
				if n < 4 {
					t.Errorf("%d chunks, want the answer streamed in several", n)
				}
				return acc.ChatCompletion
			}

			first := ask(params)
			if len(first.Choices) != 1 {
				t.Fatalf("choices = %d, want 1", len(first.Choices))
			}
			ch := first.Choices[0]
			if ch.FinishReason != "tool_calls" {
				t.Errorf("finish_reason = %q, want tool_calls", ch.FinishReason)
			}
			if ch.Message.Content != "Let me look." {
				t.Errorf("content = %q, want %q", ch.Message.Content, "Let me look.")
			}
			if len(ch.Message.ToolCalls) != 1 {
				t.Fatalf("tool_calls = %+v, want only the caller's get_weather (echo is the kernel's)", ch.Message.ToolCalls)
			}
			call := ch.Message.ToolCalls[0]
			if call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"Oslo"}` || call.ID == "" {
				t.Errorf("tool call = %+v, want get_weather({\"city\":\"Oslo\"}) with an id", call)
			}
			if u := first.Usage; u.PromptTokens != 12 || u.CompletionTokens != 3 || u.TotalTokens != 15 {
				t.Errorf("usage = %d/%d/%d, want 12/3/15 (both model steps)", u.PromptTokens, u.CompletionTokens, u.TotalTokens)
			}

			// The caller runs its tool and sends the whole conversation back.
			params.Messages = append(params.Messages, ch.Message.ToParam(), openai.ToolMessage(`{"sky":"clear"}`, call.ID))
			second := ask(params)
			if got := second.Choices[0].Message.Content; got != "It is sunny." {
				t.Errorf("second answer = %q, want %q", got, "It is sunny.")
			}
			if got := second.Choices[0].FinishReason; got != "stop" {
				t.Errorf("second finish_reason = %q, want stop", got)
			}
			// The session holds one person's message, the tool's answer once,
			// and no copy of the assistant's first answer.
			var users, tools, toolResults int
			for _, raw := range h.read(t, sess, 0).Frames {
				f := decodeFrame(t, raw)
				switch {
				case f.Type == "CUSTOM" && strings.Contains(string(raw), `"orrery.user.message"`):
					users++
				case f.Type == "RUN_STARTED":
					tools += strings.Count(string(raw), `"role":"tool"`)
					if strings.Count(string(raw), `"role":"assistant"`) > 0 {
						t.Errorf("RUN_STARTED %s logs the assistant's message again", raw)
					}
				case f.Type == "TOOL_CALL_RESULT":
					toolResults++
				}
			}
			if users != 1 || tools != 1 || toolResults != 1 {
				t.Errorf("log has %d user messages, %d caller tool results, %d kernel tool results; want 1, 1, 1", users, tools, toolResults)
			}
		})
	}
}

// TestChatSessionByUser: the user field picks the session, creating it the
// first time and continuing it the next.
func TestChatSessionByUser(t *testing.T) {
	h := newHarness(t)
	client := h.oaClient()
	model := writeScript(t, script.Turn{Text: []string{"one"}}, script.Turn{Text: []string{"two"}})
	p := openai.ChatCompletionNewParams{Model: openai.ChatModel(model), User: openai.String("person-7"),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("first")}}
	var resp *http.Response
	c, err := client.Chat.Completions.New(context.Background(), p, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("Orrery-Session"); got != "person-7" {
		t.Errorf("Orrery-Session = %q, want person-7", got)
	}
	p.Messages = append(p.Messages, c.Choices[0].Message.ToParam(), openai.UserMessage("second"))
	c, err = client.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Choices[0].Message.Content; got != "two" {
		t.Errorf("second answer = %q, want two", got)
	}
	var list []summary = h.sessions(t)
	if len(list) != 1 || list[0].ID != "person-7" {
		t.Errorf("sessions = %+v, want only person-7", list)
	}
}

// TestChatModels lists the models with the SDK.
func TestChatModels(t *testing.T) {
	h := newHarness(t)
	client := h.oaClient()
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) == 0 || page.Data[0].ID != "orrery" {
		t.Errorf("models = %+v, want orrery first", page.Data)
	}
}

// TestChatBadInput: bodies of the wrong shape get OpenAI's error shape,
// naming the param, and the SDK reads them as *openai.Error.
func TestChatBadInput(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, body string
		status     int
		param      string
	}{
		{"not JSON", `{"model":`, 400, ""},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "model"},
		{"messages a string", `{"model":"orrery","messages":"hi"}`, 400, "messages"},
		{"no messages", `{"model":"orrery","messages":[]}`, 400, "messages"},
		{"bad role", `{"model":"orrery","messages":[{"role":"robot","content":"hi"}]}`, 400, "messages[0].role"},
		{"tool without id", `{"model":"orrery","messages":[{"role":"tool","content":"x"}]}`, 400, "messages[0].tool_call_id"},
		{"image part", `{"model":"orrery","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "messages[0].content"},
		{"bad tool", `{"model":"orrery","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web"}]}`, 400, "tools[0].type"},
		{"n 2", `{"model":"orrery","n":2,"messages":[{"role":"user","content":"hi"}]}`, 400, "n"},
		{"unknown model", `{"model":"nosuch:thing","messages":[{"role":"user","content":"hi"}]}`, 400, "model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := h.send(t, http.MethodPost, "/v1/chat/completions", http.Header{"Content-Type": {"application/json"}}, tc.body)
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Param   string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" {
				t.Fatalf("body %s is not OpenAI's error shape: %v", body, err)
			}
			if status != tc.status || e.Error.Param != tc.param || e.Error.Type != "invalid_request_error" {
				t.Errorf("= %d %s, want %d with param %q", status, body, tc.status, tc.param)
			}
			if !strings.Contains(e.Error.Message, ":") {
				t.Errorf("message %q does not say what to do", e.Error.Message)
			}
		})
	}
	// The SDK surfaces it as *openai.Error.
	client := h.oaClient()
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "orrery"})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "messages" {
		t.Errorf("SDK error = %v, want *openai.Error 400 on messages", err)
	}
	if len(h.sessions(t)) != 0 {
		t.Errorf("refused requests created sessions: %+v", h.sessions(t))
	}
}

// TestChatAuth: off loopback the endpoint needs a node token, which an
// OpenAI SDK sends as its API key; without one the refusal is OpenAI's
// error shape.
func TestChatAuth(t *testing.T) {
	r := newTxRig(t, txRigOptions{})
	status, _, body := r.post(t, r.remote, http.MethodGet, "/v1/models", nil, "")
	var e struct {
		Error struct {
			Type, Message string
		} `json:"error"`
	}
	if status != http.StatusUnauthorized || json.Unmarshal(body, &e) != nil || e.Error.Type != "authentication_error" || e.Error.Message == "" {
		t.Errorf("GET /v1/models with no token = %d %s, want 401 in OpenAI's shape", status, body)
	}
	for _, tc := range []struct {
		key  string
		want bool
	}{{r.good, true}, {r.revoked, false}, {"orr_wrong", false}} {
		client := openai.NewClient(option.WithBaseURL(r.remote.URL+"/v1/"), option.WithAPIKey(tc.key), option.WithMaxRetries(0))
		_, err := client.Models.List(context.Background())
		var apiErr *openai.Error
		switch {
		case tc.want && err != nil:
			t.Errorf("Models.List() with a good token = %v", err)
		case !tc.want && (!errors.As(err, &apiErr) || apiErr.StatusCode != 401):
			t.Errorf("Models.List() with key %q = %v, want a 401 *openai.Error", tc.key, err)
		}
	}
}

// countChats counts the POST /v1/chat/completions requests that reach the
// harness's server, retries included.
func countChats(h *harness) *atomic.Int64 {
	var n atomic.Int64
	next := h.client.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	h.client = &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions") {
			n.Add(1)
		}
		return next.RoundTrip(r)
	})}
	return &n
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestChatFailedTurnIsNotRetried: a turn that ran and failed is answered
// with 422, OpenAI's error shape and x-should-retry: false, so the
// official SDK with its default retries sends the request once and the
// session logs the user's message once.
func TestChatFailedTurnIsNotRetried(t *testing.T) {
	h := newHarness(t)
	posts := countChats(h)
	model := writeScript(t, script.Turn{Error: "the provider fell over"})
	client := openai.NewClient(option.WithBaseURL(h.url+"/v1/"), option.WithAPIKey("unused-on-loopback"), option.WithHTTPClient(h.client))
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    openai.ChatModel(model),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("do something with side effects")},
	})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(oe.Message, "the agent's run failed") {
		t.Fatalf("a failed turn = %v, want a 422 *openai.Error saying the run failed", err)
	}
	if got := oe.Response.Header.Get("x-should-retry"); got != "false" {
		t.Errorf("x-should-retry = %q, want false", got)
	}
	if n := posts.Load(); n != 1 {
		t.Errorf("the SDK sent the request %d times, want once", n)
	}
}

// TestChatModel: GET /v1/models/{id} answers a model the list has, and a
// model or route it does not have gets OpenAI's 404 shape, which the SDK
// reads as *openai.Error.
func TestChatModel(t *testing.T) {
	h := newHarness(t)
	client := h.oaClient()
	m, err := client.Models.Get(context.Background(), "orrery")
	if err != nil || m.ID != "orrery" || m.Object != "model" {
		t.Fatalf("Models.Get(orrery) = %+v, %v", m, err)
	}
	_, err = client.Models.Get(context.Background(), "nope")
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusNotFound || oe.Code != "model_not_found" || oe.Param != "model" {
		t.Errorf("Models.Get(nope) = %v, want 404 model_not_found", err)
	}
	_, err = client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "orrery", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusNotFound || oe.Code != "unknown_url" || !strings.Contains(oe.Message, "POST /v1/chat/completions") {
		t.Errorf("an embeddings request = %v, want OpenAI's 404 naming what is served", err)
	}
}

// TestChatIdempotencyKey: requests with the same Idempotency-Key, sent at
// once while the first one's turn runs, all get its answer, and only one
// turn runs; the key with another body is refused; another key runs anew.
func TestChatIdempotencyKey(t *testing.T) {
	h := newHarness(t)
	model := writeScript(t, script.Turn{Text: []string{"slow ", "answer"}, DelayMS: 200}, script.Turn{Text: []string{"second"}})
	send := func(key, text string) (int, http.Header, string) {
		body, _ := json.Marshal(map[string]any{"model": model, "user": "idem", "messages": []map[string]string{{"role": "user", "content": text}}})
		req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	type answer struct {
		code     int
		body     string
		replayed bool
		session  string
	}
	answers := make([]answer, 3)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			code, hdr, body := send("k1", "hello")
			answers[i] = answer{code, body, hdr.Get("Idempotent-Replayed") == "true", hdr.Get(server.SessionHeader)}
		})
	}
	wg.Wait()
	replayed := 0
	for _, a := range answers {
		if a.code != http.StatusOK || a.body != answers[0].body {
			t.Errorf("answers %+v: want the same 200 answer three times", answers)
			break
		}
		if a.replayed {
			replayed++
		}
	}
	if replayed != 2 {
		t.Errorf("%d answers were replayed, want 2 of 3", replayed)
	}
	runs := func() int {
		var read struct {
			Frames []struct {
				Type string `json:"type"`
			} `json:"frames"`
		}
		h.control(t, map[string]any{"t": "session.read", "id": "r", "session": answers[0].session}, &read)
		n := 0
		for _, f := range read.Frames {
			if f.Type == "RUN_STARTED" {
				n++
			}
		}
		return n
	}
	if n := runs(); n != 1 {
		t.Errorf("%d turns ran, want 1", n)
	}
	if code, _, body := send("k1", "something else"); code != http.StatusUnprocessableEntity || !strings.Contains(body, "idempotency_key_reused") {
		t.Errorf("the key with another body = %d %s, want 422 idempotency_key_reused", code, body)
	}
	if code, _, _ := send("k2", "hello"); code != http.StatusOK || runs() != 2 {
		t.Errorf("a new key = %d with %d turns, want a second turn", code, runs())
	}
}
