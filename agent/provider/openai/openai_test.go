package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/provider/openai"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

const (
	testKey   = "sk-test-123"
	testModel = "gpt-4.1"
)

func text(s string) agent.Delta      { return agent.Delta{Kind: agent.DeltaText, Text: s} }
func reasoning(s string) agent.Delta { return agent.Delta{Kind: agent.DeltaReasoning, Text: s} }
func call(id, name string) agent.Delta {
	return agent.Delta{Kind: agent.DeltaToolCall, ToolCallID: id, ToolName: name}
}
func args(id, s string) agent.Delta {
	return agent.Delta{Kind: agent.DeltaToolArgs, ToolCallID: id, Text: s}
}

// simple is a one-question request with the tools whose dotted names the
// fixtures call.
func simple() agent.Request {
	return agent.Request{
		Messages: []protocol.Message{
			{ID: "s1", Role: protocol.RoleSystem, Content: protocol.TextContent("You are Orrery.")},
			{ID: "u1", Role: protocol.RoleUser, Content: protocol.TextContent("What colour is the sky?")},
		},
		Tools: []tool.Spec{
			{Name: "tools.search", Description: "Finds tools", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`)},
			{Name: "mcp.github.create_issue", Description: "Opens an issue", Parameters: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"labels":{"type":"array","items":{"type":"string"}}},"required":["title"]}`)},
			{Name: "ui.show"},
		},
	}
}

func newProvider(t *testing.T, cfg openai.Config) *openai.Provider {
	t.Helper()
	if cfg.Model == "" {
		cfg.Model = testModel
	}
	p, err := openai.New(cfg)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	return p
}

func TestStream(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		replies []reply
		want    []agent.Delta
		usage   agent.Usage
	}{
		{
			name:    "plain text with a usage chunk after finish_reason",
			key:     testKey,
			replies: []reply{{fixture: "text.sse"}},
			want:    []agent.Delta{text("Hello"), text("!"), text(" The sky"), text(" is blue"), text(".")},
			usage:   agent.Usage{InputTokens: 120, OutputTokens: 9, CachedInputTokens: 64},
		},
		{
			name:    "vLLM reasoning_content then text",
			replies: []reply{{fixture: "reasoning_vllm.sse"}},
			want: []agent.Delta{reasoning("The user"), reasoning(" asks about"), reasoning(" the sky."),
				text("It is"), text(" blue.")},
			usage: agent.Usage{InputTokens: 31, OutputTokens: 21},
		},
		{
			name:    "reasoning field then text, reasoning tokens counted",
			replies: []reply{{fixture: "reasoning_field.sse"}},
			want:    []agent.Delta{reasoning("Short"), reasoning(" answer."), text("Blue.")},
			usage:   agent.Usage{InputTokens: 40, OutputTokens: 12, ReasoningTokens: 7},
		},
		{
			name:    "parallel tool calls interleaved by index",
			key:     testKey,
			replies: []reply{{fixture: "tools_parallel.sse"}},
			want: []agent.Delta{
				call("call_Ab12", "tools.search"), args("call_Ab12", `{"que`), args("call_Ab12", `ry":"show `), args("call_Ab12", `surface"}`),
				call("call_Cd34", "mcp.github.create_issue"), args("call_Cd34", `{"title": "Fix \u00e9 \"quotes\"", "labels": [ ]}`),
			},
			usage: agent.Usage{InputTokens: 300, OutputTokens: 40, CachedInputTokens: 256},
		},
		{
			name:    "tool call only, content null",
			key:     testKey,
			replies: []reply{{fixture: "tool_only.sse"}},
			want: []agent.Delta{call("call_Zz99", "ui.show"),
				args("call_Zz99", `{"`), args("call_Zz99", `placement`), args("call_Zz99", `":"`), args("call_Zz99", `band`), args("call_Zz99", `"}`)},
			usage: agent.Usage{InputTokens: 210, OutputTokens: 18},
		},
		{
			name:    "Ollama parallel calls all at index 0",
			replies: []reply{{fixture: "tools_ollama.sse"}},
			want: []agent.Delta{call("call_k1", "tools.search"), args("call_k1", `{"query":"clock"}`),
				call("call_k2", "ui.show"), args("call_k2", `{"placement":"band"}`)},
			usage: agent.Usage{InputTokens: 90, OutputTokens: 30},
		},
		{
			name:    "text after a call started waits until the call is complete",
			replies: []reply{{fixture: "text_around_call.sse"}},
			want: []agent.Delta{text("Checking."), call("call_q1", "tools.search"),
				args("call_q1", `{"query":`), args("call_q1", `"time"}`), text(" One moment.")},
		},
		{
			name: "429 then success",
			key:  testKey,
			replies: []reply{
				{status: 429, header: map[string]string{"Retry-After-Ms": "1"},
					body: `{"error":{"message":"Rate limit reached for gpt-4.1 on tokens per min (TPM): Limit 30000, Used 30000, Requested 120. Please try again in 1ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`},
				{fixture: "text.sse"},
			},
			want:  []agent.Delta{text("Hello"), text("!"), text(" The sky"), text(" is blue"), text(".")},
			usage: agent.Usage{InputTokens: 120, OutputTokens: 9, CachedInputTokens: 64},
		},
		{
			name: "503 then success, backoff bounded by MaxRetryDelay",
			key:  testKey,
			replies: []reply{
				{status: 503, body: `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`},
				{status: 500, body: `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`},
				{fixture: "text.sse"},
			},
			want:  []agent.Delta{text("Hello"), text("!"), text(" The sky"), text(" is blue"), text(".")},
			usage: agent.Usage{InputTokens: 120, OutputTokens: 9, CachedInputTokens: 64},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.key, testModel, tt.replies...)
			p := newProvider(t, openai.Config{BaseURL: f.url(), APIKey: tt.key, MaxRetries: 2, MaxRetryDelay: time.Millisecond})
			var got []agent.Delta
			usage, err := p.Stream(context.Background(), simple(), collect(&got))
			if err != nil {
				t.Fatalf("Stream() error = %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Stream() deltas =\n%+v\nwant\n%+v", got, tt.want)
			}
			if usage != tt.usage {
				t.Errorf("Stream() usage = %+v, want %+v", usage, tt.usage)
			}
			if n := int(f.attempts.Load()); n != len(tt.replies) {
				t.Errorf("attempts = %d, want %d", n, len(tt.replies))
			}
		})
	}
}

func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name     string
		replies  []reply
		attempts int
		code     string
		says     []string // pieces the message must contain
		deltas   int      // deltas emitted before the error
	}{
		{
			name:     "final 401",
			replies:  []reply{{status: 401, body: `{"error":{"message":"Incorrect API key provided: sk-test-***123. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`}},
			attempts: 1,
			code:     "provider_auth",
			says:     []string{"OPENAI_API_KEY", "--model offline", "Incorrect API key"},
		},
		{
			name:     "final 429 after retries",
			replies:  []reply{{status: 429, header: map[string]string{"Retry-After-Ms": "1"}, body: `{"error":{"message":"Rate limit reached for gpt-4.1.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`}},
			attempts: 3,
			code:     "provider_rate_limited",
			says:     []string{"rate limiting", "2 retries", "try again"},
		},
		{
			name:     "429 insufficient quota",
			replies:  []reply{{status: 429, header: map[string]string{"x-should-retry": "false"}, body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`}},
			attempts: 1,
			code:     "provider_rate_limited",
			says:     []string{"no quota", "billing"},
		},
		{
			name:     "final 500 after retries",
			replies:  []reply{{status: 500, body: `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`}},
			attempts: 3,
			code:     "provider_unavailable",
			says:     []string{"500", "try again later"},
		},
		{
			name:     "404 model",
			replies:  []reply{{status: 404, body: `{"error":{"message":"The model ` + "`gpt-4.1`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`}},
			attempts: 1,
			code:     "provider_model_not_found",
			says:     []string{`"gpt-4.1"`, "--model openai:NAME"},
		},
		{
			name:     "404 with a plain-text body",
			replies:  []reply{{status: 404, header: map[string]string{"Content-Type": "text/plain"}, body: "404 page not found"}},
			attempts: 1,
			code:     "provider_model_not_found",
			says:     []string{`"gpt-4.1"`, "--model openai:NAME", "base URL"},
		},
		{
			name:     "error object mid-stream",
			replies:  []reply{{fixture: "error_midstream.sse"}},
			attempts: 1,
			code:     "provider_unavailable",
			says:     []string{"The server had an error", "try again"},
			deltas:   1,
		},
		{
			name:     "a named error event mid-stream",
			replies:  []reply{{fixture: "error_event.sse"}},
			attempts: 1,
			code:     "provider_rate_limited",
			says:     []string{"Rate limit reached", "wait a minute"},
			deltas:   1,
		},
		{
			name:     "invalid JSON mid-stream",
			replies:  []reply{{fixture: "invalid_json.sse"}},
			attempts: 1,
			code:     "provider_error",
			says:     []string{"not a JSON object", "try again"},
			deltas:   1,
		},
		{
			name:     "stream cut off before [DONE]",
			replies:  []reply{{fixture: "cut.sse"}},
			attempts: 1,
			code:     "provider_unavailable",
			says:     []string{"stopped before it finished", "try again"},
			deltas:   2,
		},
		{
			name:     "a JSON answer instead of a stream",
			replies:  []reply{{status: 200, header: map[string]string{"Content-Type": "application/json"}, body: `{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`}},
			attempts: 1,
			code:     "provider_error",
			says:     []string{"instead of a stream", `"stream": true`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, testKey, testModel, tt.replies...)
			p := newProvider(t, openai.Config{BaseURL: f.url(), APIKey: testKey, MaxRetries: 2, MaxRetryDelay: time.Millisecond})
			var got []agent.Delta
			_, err := p.Stream(context.Background(), simple(), collect(&got))
			var ae *agent.Error
			if !errors.As(err, &ae) {
				t.Fatalf("Stream() error = %v (%T), want an *agent.Error", err, err)
			}
			if ae.Code != tt.code {
				t.Errorf("Stream() error code = %q, want %q (message %q)", ae.Code, tt.code, ae.Message)
			}
			for _, s := range tt.says {
				if !strings.Contains(ae.Message, s) {
					t.Errorf("Stream() error message = %q, want it to contain %q", ae.Message, s)
				}
			}
			if n := int(f.attempts.Load()); n != tt.attempts {
				t.Errorf("attempts = %d, want %d", n, tt.attempts)
			}
			if len(got) != tt.deltas {
				t.Errorf("Stream() emitted %d deltas before failing, want %d: %+v", len(got), tt.deltas, got)
			}
		})
	}
}

func TestStreamConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String() + "/v1"
	l.Close()
	p := newProvider(t, openai.Config{BaseURL: base, MaxRetries: 1, MaxRetryDelay: time.Millisecond})
	_, err = p.Stream(context.Background(), simple(), func(agent.Delta) error { return nil })
	var ae *agent.Error
	if !errors.As(err, &ae) {
		t.Fatalf("Stream() error = %v, want an *agent.Error", err)
	}
	if ae.Code != "provider_unavailable" || !strings.Contains(ae.Message, "not answering") || !strings.Contains(ae.Message, l.Addr().String()) {
		t.Errorf("Stream() error = %q (code %q), want provider_unavailable naming the server as not answering", ae.Message, ae.Code)
	}
}

func TestStreamCancel(t *testing.T) {
	t.Run("from emit", func(t *testing.T) {
		f := newFake(t, testKey, testModel, reply{fixture: "text.sse", hold: true})
		p := newProvider(t, openai.Config{BaseURL: f.url(), APIKey: testKey})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var got []agent.Delta
		_, err := p.Stream(ctx, simple(), func(d agent.Delta) error {
			got = append(got, d)
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Stream() error = %v, want one that is context.Canceled", err)
		}
		var ae *agent.Error
		if !errors.As(err, &ae) || ae.Code != "cancelled" {
			t.Errorf("Stream() error = %#v, want an *agent.Error with code cancelled", err)
		}
		if len(got) != 1 {
			t.Errorf("Stream() emitted %d deltas after the cancel, want none: %+v", len(got)-1, got)
		}
	})
	t.Run("while waiting for the server", func(t *testing.T) {
		f := newFake(t, testKey, testModel, reply{fixture: "cut.sse", hold: true})
		p := newProvider(t, openai.Config{BaseURL: f.url(), APIKey: testKey})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-f.sent
			cancel()
		}()
		_, err := p.Stream(ctx, simple(), func(agent.Delta) error { return nil })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Stream() error = %v, want one that is context.Canceled", err)
		}
	})
}

func TestStreamEmitError(t *testing.T) {
	f := newFake(t, testKey, testModel, reply{fixture: "text.sse"})
	p := newProvider(t, openai.Config{BaseURL: f.url(), APIKey: testKey})
	stop := errors.New("stop here")
	n := 0
	_, err := p.Stream(context.Background(), simple(), func(agent.Delta) error {
		n++
		return stop
	})
	if err != stop {
		t.Errorf("Stream() error = %v, want emit's own error", err)
	}
	if n != 1 {
		t.Errorf("emit called %d times, want 1", n)
	}
}

// TestRequest checks what goes out: the conversation in chat completions
// roles, dotted tool names mapped to the API's pattern, the parameters.
func TestRequest(t *testing.T) {
	req := simple()
	req.Messages = []protocol.Message{
		{ID: "s1", Role: protocol.RoleSystem, Content: protocol.TextContent("You are Orrery.")},
		{ID: "d1", Role: protocol.RoleDeveloper, Content: protocol.TextContent("Answer briefly.")},
		{ID: "u1", Role: protocol.RoleUser, Content: protocol.TextContent("Show me something.")},
		{ID: "r1", Role: protocol.RoleReasoning, Content: protocol.TextContent("I should search.")},
		{ID: "a1", Role: protocol.RoleAssistant, Content: protocol.TextContent("Let me look."), ToolCalls: []protocol.ToolCall{
			{ID: "call_1", Type: "function", Function: protocol.FunctionCall{Name: "tools.search", Arguments: `{"query":"show"}`}},
			{ID: "call_2", Type: "function", Function: protocol.FunctionCall{Name: "ui.show"}},
		}},
		{ID: "t1", Role: protocol.RoleTool, ToolCallID: "call_1", Content: protocol.TextContent(`{"tools":[{"name":"ui.show"}]}`)},
		{ID: "t2", Role: protocol.RoleTool, ToolCallID: "call_2", Error: "placement refused"},
		{ID: "x1", Role: protocol.RoleActivity, ActivityType: "progress", Content: protocol.Content{Object: json.RawMessage(`{"done":1}`)}},
		{ID: "a2", Role: protocol.RoleAssistant},
		{ID: "u2", Role: protocol.RoleUser, Content: protocol.PartsContent([]protocol.ContentPart{
			{Type: "text", Text: "Look at these"},
			{Type: "image", Source: &protocol.Source{Type: "url", Value: "https://example.com/a.png"}},
			{Type: "image", Source: &protocol.Source{Type: "data", Value: "aGk=", MimeType: "image/png"}},
			{Type: "audio", Source: &protocol.Source{Type: "data", Value: "aGk=", MimeType: "audio/wav"}},
		})},
	}
	wantMessages := `[
		{"role":"system","content":"You are Orrery."},
		{"role":"system","content":"Answer briefly."},
		{"role":"user","content":"Show me something."},
		{"role":"assistant","content":"Let me look.","tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"tools__search","arguments":"{\"query\":\"show\"}"}},
			{"id":"call_2","type":"function","function":{"name":"ui__show","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"{\"tools\":[{\"name\":\"ui.show\"}]}"},
		{"role":"tool","tool_call_id":"call_2","content":"error: placement refused"},
		{"role":"user","content":[
			{"type":"text","text":"Look at these"},
			{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,aGk="}},
			{"type":"text","text":"[an attachment of type audio was left out: this model's API takes only text and images]"}]}
	]`
	wantTools := `[
		{"type":"function","function":{"name":"tools__search","description":"Finds tools","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}},
		{"type":"function","function":{"name":"mcp__github__create_issue","description":"Opens an issue","parameters":{"type":"object","properties":{"title":{"type":"string"},"labels":{"type":"array","items":{"type":"string"}}},"required":["title"]}}},
		{"type":"function","function":{"name":"ui__show","parameters":{"type":"object","properties":{}}}}
	]`

	t.Run("compatible server", func(t *testing.T) {
		f := newFake(t, "", "llama3.2", reply{fixture: "text.sse"})
		p := newProvider(t, openai.Config{Model: "llama3.2", BaseURL: f.url(), MaxTokens: 500})
		if _, err := p.Stream(context.Background(), req, collect(new([]agent.Delta))); err != nil {
			t.Fatalf("Stream() error = %v", err)
		}
		body := f.body(0)
		jsonEqual(t, "messages", body["messages"], wantMessages)
		jsonEqual(t, "tools", body["tools"], wantTools)
		if body["max_tokens"] != 500.0 || body["max_completion_tokens"] != nil {
			t.Errorf("max_tokens = %v, max_completion_tokens = %v, want 500 and absent", body["max_tokens"], body["max_completion_tokens"])
		}
	})

	t.Run("OpenAI", func(t *testing.T) {
		f := newFake(t, testKey, testModel, reply{fixture: "text.sse"})
		// The requests go to api.openai.com; the transport carries them
		// to the fake instead.
		p := newProvider(t, openai.Config{APIKey: testKey, MaxTokens: 500, HTTPClient: &http.Client{Transport: redirect(f.srv.URL)}})
		if _, err := p.Stream(context.Background(), req, collect(new([]agent.Delta))); err != nil {
			t.Fatalf("Stream() error = %v", err)
		}
		body := f.body(0)
		msgs := body["messages"].([]any)
		if role := msgs[1].(map[string]any)["role"]; role != "developer" {
			t.Errorf("messages[1].role = %v, want developer", role)
		}
		if body["max_completion_tokens"] != 500.0 || body["max_tokens"] != nil {
			t.Errorf("max_completion_tokens = %v, max_tokens = %v, want 500 and absent", body["max_completion_tokens"], body["max_tokens"])
		}
	})
}

// redirect sends every request to the server at target, keeping the path.
type redirect string

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	u, err := url.Parse(string(r))
	if err != nil {
		return nil, err
	}
	if req.URL.Host != "api.openai.com" {
		return nil, errors.New("request to " + req.URL.Host + ", want api.openai.com")
	}
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host, req.Host = u.Scheme, u.Host, u.Host
	return http.DefaultTransport.RoundTrip(req)
}

func jsonEqual(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want for %s: %v", what, err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.MarshalIndent(got, "", "  ")
		ww, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("request %s =\n%s\nwant\n%s", what, g, ww)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		cfg  openai.Config
		code string // "" means New succeeds
		says []string
	}{
		{"OpenAI without a key", openai.Config{Model: "gpt-4.1"}, "provider_auth", []string{"OPENAI_API_KEY", "--model offline"}},
		{"OpenAI base URL spelled out, no key", openai.Config{Model: "gpt-4.1", BaseURL: "https://api.openai.com/v1"}, "provider_auth", []string{"OPENAI_API_KEY", "--model offline"}},
		{"local server without a key", openai.Config{Model: "llama3.2", BaseURL: "http://localhost:11434/v1"}, "", nil},
		{"OpenAI with a key", openai.Config{Model: "gpt-4.1", APIKey: "sk-x"}, "", nil},
		{"no model", openai.Config{APIKey: "sk-x"}, "provider_error", []string{"--model openai:NAME"}},
		{"base URL without a scheme", openai.Config{Model: "m", BaseURL: "localhost:11434"}, "provider_error", []string{"localhost:11434", "http://"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := openai.New(tt.cfg)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("New() error = %v", err)
				}
				if p.Name() != "openai" || p.Model() != tt.cfg.Model {
					t.Errorf("Name(), Model() = %q, %q, want openai, %q", p.Name(), p.Model(), tt.cfg.Model)
				}
				return
			}
			var ae *agent.Error
			if !errors.As(err, &ae) || ae.Code != tt.code {
				t.Fatalf("New() error = %v, want an *agent.Error with code %s", err, tt.code)
			}
			for _, s := range tt.says {
				if !strings.Contains(ae.Message, s) {
					t.Errorf("New() error = %q, want it to contain %q", ae.Message, s)
				}
			}
		})
	}
}
