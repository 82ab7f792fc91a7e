package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/provider/anthropic"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

const (
	testKey   = "sk-ant-api03-test-key"
	testModel = "claude-sonnet-4-5"
)

// reply is one answer of the fake Messages API.
type reply struct {
	status  int
	headers map[string]string
	body    string
	hold    bool // keep the stream open after body until the client leaves
}

// sseReply replays testdata/name as a 200 event stream.
func sseReply(t *testing.T, name string) reply {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: http.StatusOK, headers: map[string]string{"Content-Type": "text/event-stream; charset=utf-8"}, body: string(data)}
}

// errReply is an error response as the API documents it. retry-after-ms
// keeps the SDK's backoff short.
func errReply(status int, typ, msg string) reply {
	body := fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`, typ, msg)
	return reply{status: status, body: body, headers: map[string]string{
		"Content-Type":   "application/json",
		"request-id":     "req_011CSHoEeqs5C35K2UUqR7Fy",
		"retry-after-ms": "1",
	}}
}

// fake is a local stand-in for POST /v1/messages. It checks every request
// the way the API would see it and answers with its replies in turn (the
// last one repeats).
type fake struct {
	t         *testing.T
	key       string // the x-api-key expected; "" expects none
	model     string
	maxTokens float64
	replies   []reply
	// check, when set, checks the body of request n (1-based).
	check func(t *testing.T, n int, body map[string]any)

	attempts atomic.Int32
	done     chan struct{}
}

var versionRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

func newFake(t *testing.T, replies ...reply) *fake {
	return &fake{t: t, key: testKey, model: testModel, maxTokens: anthropic.DefaultMaxTokens, replies: replies, done: make(chan struct{})}
}

// start serves f and returns its base URL.
func (f *fake) start() string {
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	f.t.Cleanup(srv.Close)
	f.t.Cleanup(func() { close(f.done) }) // runs first: releases held streams
	return srv.URL
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	t := f.t
	n := int(f.attempts.Add(1))
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		t.Errorf("request = %s %s, want POST /v1/messages", r.Method, r.URL.Path)
	}
	if got := r.Header.Get("x-api-key"); got != f.key {
		t.Errorf("x-api-key = %q, want %q", got, f.key)
	}
	if got := r.Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none (the key goes in x-api-key)", got)
	}
	if got := r.Header.Get("anthropic-version"); !versionRE.MatchString(got) {
		t.Errorf("anthropic-version = %q, want a date like 2023-06-01", got)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		t.Errorf("request body is not JSON: %v", err)
	}
	if body["stream"] != true {
		t.Errorf("body.stream = %v, want true", body["stream"])
	}
	if body["model"] != f.model {
		t.Errorf("body.model = %v, want %q", body["model"], f.model)
	}
	if body["max_tokens"] != f.maxTokens {
		t.Errorf("body.max_tokens = %v, want %v", body["max_tokens"], f.maxTokens)
	}
	if msgs, _ := body["messages"].([]any); len(msgs) == 0 {
		t.Errorf("body.messages = %v, want a non-empty list", body["messages"])
	}
	if f.check != nil {
		f.check(t, n, body)
	}

	rep := f.replies[min(n, len(f.replies))-1]
	for k, v := range rep.headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write([]byte(rep.body))
	if rep.hold {
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-f.done:
		}
	}
}

func newProvider(t *testing.T, baseURL string, mods ...func(*anthropic.Config)) *anthropic.Provider {
	t.Helper()
	cfg := anthropic.Config{Model: testModel, BaseURL: baseURL, APIKey: testKey}
	for _, m := range mods {
		m(&cfg)
	}
	p, err := anthropic.New(cfg)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	return p
}

// collect streams req and renders the deltas as "kind:…" strings.
func collect(ctx context.Context, p *anthropic.Provider, req agent.Request) ([]string, agent.Usage, error) {
	var got []string
	usage, err := p.Stream(ctx, req, func(d agent.Delta) error {
		got = append(got, render(d))
		return nil
	})
	return got, usage, err
}

func render(d agent.Delta) string {
	switch d.Kind {
	case agent.DeltaText:
		return "text:" + d.Text
	case agent.DeltaReasoning:
		return "reason:" + d.Text
	case agent.DeltaToolCall:
		return "call:" + d.ToolCallID + ":" + d.ToolName
	case agent.DeltaToolArgs:
		return "args:" + d.ToolCallID + ":" + d.Text
	}
	return fmt.Sprintf("unknown(%d)", d.Kind)
}

func hello() []protocol.Message {
	return []protocol.Message{{ID: "u1", Role: protocol.RoleUser, Content: protocol.TextContent("Hi")}}
}

var testTools = []tool.Spec{
	{Name: "tools.search", Description: "Finds tools.", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`)},
	{Name: "clock", Description: "Tells the time."},
	{Name: "ui.show", Description: "Shows a surface.", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)},
}

func TestStream(t *testing.T) {
	tests := []struct {
		name      string
		fixture   string
		tools     []tool.Spec
		want      []string
		wantUsage agent.Usage
		wantCode  string // "" for success
		wantMsg   string // a part of the error message
	}{
		{
			name: "plain text with pings", fixture: "text.sse",
			want:      []string{"text:Hello", "text:, world!"},
			wantUsage: agent.Usage{InputTokens: 25, OutputTokens: 15},
		},
		{
			name: "thinking then text", fixture: "thinking.sse",
			want: []string{
				"reason:The GCD of 1071 and 462: ",
				"reason:1071 = 2 × 462 + 147, 462 = 3 × 147 + 21, 147 = 7 × 21.",
				"text:The GCD is 21.",
			},
			wantUsage: agent.Usage{InputTokens: 40, OutputTokens: 64, ReasoningTokens: 50},
		},
		{
			name: "redacted thinking emits nothing", fixture: "redacted.sse",
			want:      []string{"reason:Some of my reasoning was redacted.", "text:Done."},
			wantUsage: agent.Usage{InputTokens: 31, OutputTokens: 22},
		},
		{
			name: "two tool calls, names mapped back", fixture: "tools.sse", tools: testTools,
			want: []string{
				"text:I'll search and show it.",
				"call:toolu_01T1x1fJ34qAmk2tNTrN7Up6:tools.search",
				`args:toolu_01T1x1fJ34qAmk2tNTrN7Up6:{"query": "sh`,
				`args:toolu_01T1x1fJ34qAmk2tNTrN7Up6:ow table"}`,
				"call:toolu_01VGUz8jPjbFbqS4yTt9tKcE:clock",
			},
			wantUsage: agent.Usage{InputTokens: 472, OutputTokens: 89},
		},
		{
			name: "cumulative usage takes the last count", fixture: "usage.sse",
			want:      []string{"text:One", "text: two", "text: three."},
			wantUsage: agent.Usage{InputTokens: 12 + 300 + 2048, OutputTokens: 20, CachedInputTokens: 2048},
		},
		{
			name: "error event mid-stream", fixture: "error_overloaded.sse",
			want:      []string{"text:Let me"},
			wantUsage: agent.Usage{InputTokens: 18, OutputTokens: 1},
			wantCode:  anthropic.CodeUnavailable, wantMsg: "Anthropic is overloaded (mid-answer, overloaded_error: Overloaded): try again",
		},
		{
			name: "invalid JSON mid-stream", fixture: "invalid_json.sse",
			want:      []string{"text:Hi"},
			wantUsage: agent.Usage{InputTokens: 18, OutputTokens: 1},
			wantCode:  anthropic.CodeError, wantMsg: "not valid JSON",
		},
		{
			name: "stream cut off before message_stop", fixture: "cutoff.sse",
			want:      []string{"text:Once upon"},
			wantUsage: agent.Usage{InputTokens: 21, OutputTokens: 4},
			wantCode:  anthropic.CodeError, wantMsg: "cut off before its message_stop event",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, sseReply(t, tc.fixture))
			f.check = func(t *testing.T, _ int, body map[string]any) {
				wantJSON(t, "messages", body["messages"], `[{"role":"user","content":[{"type":"text","text":"Hi"}]}]`)
				if _, ok := body["thinking"]; ok {
					t.Errorf("body.thinking = %v, want none without a thinking budget", body["thinking"])
				}
			}
			p := newProvider(t, f.start())
			got, usage, err := collect(context.Background(), p, agent.Request{Messages: hello(), Tools: tc.tools})
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Stream() deltas = %q, want %q", got, tc.want)
			}
			if usage != tc.wantUsage {
				t.Errorf("Stream() usage = %+v, want %+v", usage, tc.wantUsage)
			}
			checkErr(t, err, tc.wantCode, tc.wantMsg)
		})
	}
}

// checkErr checks that err is nil when code is "", or an *agent.Error with
// that code whose message contains msg.
func checkErr(t *testing.T, err error, code, msg string) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Errorf("Stream() error = %v, want none", err)
		}
		return
	}
	var ae *agent.Error
	if !errors.As(err, &ae) {
		t.Fatalf("Stream() error = %v (%T), want an *agent.Error", err, err)
	}
	if ae.Code != code || !strings.Contains(ae.Message, msg) {
		t.Errorf("Stream() error = {%s: %s}, want code %s and a message containing %q", ae.Code, ae.Message, code, msg)
	}
}

// wantJSON compares got (decoded JSON) with the JSON text want.
func wantJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON for %s: %v", what, err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.Marshal(got)
		t.Errorf("body.%s =\n%s\nwant\n%s", what, g, want)
	}
}

func TestRequestConversion(t *testing.T) {
	msgs := []protocol.Message{
		{ID: "s1", Role: protocol.RoleSystem, Content: protocol.TextContent("You are Orrery.")},
		{ID: "u1", Role: protocol.RoleUser, Content: protocol.TextContent("Show the time")},
		{ID: "d1", Role: protocol.RoleDeveloper, Content: protocol.TextContent("Prefer tables.")},
		{ID: "u2", Role: protocol.RoleUser, Content: protocol.PartsContent([]protocol.ContentPart{
			{Type: "text", Text: "and this"},
			{Type: "image", Source: &protocol.Source{Type: "data", Value: "aGk=", MimeType: "image/png"}},
		})},
		{ID: "r1", Role: protocol.RoleReasoning, Content: protocol.TextContent("I should call tools.")},
		{ID: "a1", Role: protocol.RoleAssistant, Content: protocol.TextContent("Calling tools."), ToolCalls: []protocol.ToolCall{
			{ID: "toolu_1", Type: "function", Function: protocol.FunctionCall{Name: "ui.show", Arguments: `{"id":"t"}`}},
			{ID: "call:2", Type: "function", Function: protocol.FunctionCall{Name: "clock"}},
		}},
		{ID: "t1", Role: protocol.RoleTool, ToolCallID: "toolu_1", Content: protocol.TextContent("shown")},
		{ID: "t2", Role: protocol.RoleTool, ToolCallID: "call:2", Error: "clock broke"},
		{ID: "act1", Role: protocol.RoleActivity, ActivityType: "progress", Content: protocol.Content{Object: json.RawMessage(`{"done":1}`)}},
		{ID: "u3", Role: protocol.RoleUser, Content: protocol.TextContent("thanks; now file it")},
		{ID: "a2", Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{
			{ID: "toolu_3", Type: "function", Function: protocol.FunctionCall{Name: "mcp.github.create_issue", Arguments: `{"title":"x"}`}},
		}},
		// The run of a2 was cancelled: toolu_3 has no result.
		{ID: "u4", Role: protocol.RoleUser, Content: protocol.TextContent("never mind")},
	}
	tools := []tool.Spec{
		{Name: "ui.show", Description: "Shows a surface.", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`)},
		{Name: "clock", Description: "Tells the time."},
		{Name: "mcp.github.create_issue", Parameters: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}}}`)},
	}
	idRE := regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	f := newFake(t, sseReply(t, "text.sse"))
	f.check = func(t *testing.T, _ int, body map[string]any) {
		wantJSON(t, "system", body["system"], `[{"type":"text","text":"You are Orrery."},{"type":"text","text":"Prefer tables."}]`)
		wantJSON(t, "tools", body["tools"], `[
			{"name":"ui_show","description":"Shows a surface.","input_schema":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}},
			{"name":"clock","description":"Tells the time.","input_schema":{"type":"object","properties":{}}},
			{"name":"mcp_github_create_issue","input_schema":{"type":"object","properties":{"title":{"type":"string"}}}}]`)
		// "call:2" is not a valid tool_use id; it is sent sanitized, the same
		// in the tool_use and in its tool_result.
		var id2 string
		if msgs, ok := body["messages"].([]any); ok && len(msgs) > 1 {
			if content, ok := msgs[1].(map[string]any)["content"].([]any); ok && len(content) > 2 {
				id2, _ = content[2].(map[string]any)["id"].(string)
			}
		}
		if !idRE.MatchString(id2) || id2 == "call:2" {
			t.Errorf("tool_use id for call:2 = %q, want one matching %s", id2, idRE)
		}
		wantJSON(t, "messages", body["messages"], fmt.Sprintf(`[
			{"role":"user","content":[
				{"type":"text","text":"Show the time"},
				{"type":"text","text":"and this"},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGk="}}]},
			{"role":"assistant","content":[
				{"type":"text","text":"Calling tools."},
				{"type":"tool_use","id":"toolu_1","name":"ui_show","input":{"id":"t"}},
				{"type":"tool_use","id":%[1]q,"name":"clock","input":{}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"shown"}]},
				{"type":"tool_result","tool_use_id":%[1]q,"is_error":true,"content":[{"type":"text","text":"clock broke"}]},
				{"type":"text","text":"thanks; now file it"}]},
			{"role":"assistant","content":[
				{"type":"tool_use","id":"toolu_3","name":"mcp_github_create_issue","input":{"title":"x"}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"toolu_3","is_error":true,"content":[{"type":"text","text":"This call has no result: its run ended before the tool finished."}]},
				{"type":"text","text":"never mind"}]}]`, id2))
	}
	p := newProvider(t, f.start())
	if _, _, err := collect(context.Background(), p, agent.Request{Messages: msgs, Tools: tools}); err != nil {
		t.Fatalf("Stream() = %v", err)
	}
	if n := f.attempts.Load(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

func TestRequestEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		msgs []protocol.Message
		want string // body.messages
	}{
		{
			name: "opens with the assistant",
			msgs: []protocol.Message{
				{ID: "a0", Role: protocol.RoleAssistant, Content: protocol.TextContent("Hello, how can I help?")},
				{ID: "u1", Role: protocol.RoleUser, Content: protocol.TextContent("Hi")},
			},
			want: `[{"role":"user","content":[{"type":"text","text":"(The conversation opens with the assistant's message below.)"}]},
				{"role":"assistant","content":[{"type":"text","text":"Hello, how can I help?"}]},
				{"role":"user","content":[{"type":"text","text":"Hi"}]}]`,
		},
		{
			name: "blank messages left out, same roles merged",
			msgs: []protocol.Message{
				{ID: "u1", Role: protocol.RoleUser, Content: protocol.TextContent("one")},
				{ID: "a1", Role: protocol.RoleAssistant, Content: protocol.TextContent("  ")},
				{ID: "u2", Role: protocol.RoleUser, Content: protocol.TextContent("two")},
			},
			want: `[{"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}]`,
		},
		{
			name: "a result for no call becomes text",
			msgs: []protocol.Message{
				{ID: "u1", Role: protocol.RoleUser, Content: protocol.TextContent("go")},
				{ID: "t1", Role: protocol.RoleTool, ToolCallID: "toolu_gone", Content: protocol.TextContent("42")},
			},
			want: `[{"role":"user","content":[{"type":"text","text":"go"},{"type":"text","text":"Result of tool call toolu_gone: 42"}]}]`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, sseReply(t, "text.sse"))
			f.check = func(t *testing.T, _ int, body map[string]any) {
				wantJSON(t, "messages", body["messages"], tc.want)
			}
			p := newProvider(t, f.start())
			if _, _, err := collect(context.Background(), p, agent.Request{Messages: tc.msgs}); err != nil {
				t.Fatalf("Stream() = %v", err)
			}
		})
	}
}

func TestEmptyConversationRefused(t *testing.T) {
	f := newFake(t, sseReply(t, "text.sse"))
	p := newProvider(t, f.start())
	msgs := []protocol.Message{{ID: "s1", Role: protocol.RoleSystem, Content: protocol.TextContent("You are Orrery.")}}
	_, _, err := collect(context.Background(), p, agent.Request{Messages: msgs})
	checkErr(t, err, anthropic.CodeError, "send a prompt")
	if n := f.attempts.Load(); n != 0 {
		t.Errorf("requests = %d, want 0", n)
	}
}

func TestRetriesAndFailures(t *testing.T) {
	text := func(t *testing.T) reply { return sseReply(t, "text.sse") }
	tests := []struct {
		name         string
		model        string
		replies      func(t *testing.T) []reply
		wantAttempts int32
		wantCode     string
		wantMsg      []string
	}{
		{
			name: "429 then success",
			replies: func(t *testing.T) []reply {
				return []reply{errReply(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"), text(t)}
			},
			wantAttempts: 2,
		},
		{
			name: "500 and 529 then success",
			replies: func(t *testing.T) []reply {
				return []reply{errReply(500, "api_error", "Internal server error"), errReply(529, "overloaded_error", "Overloaded"), text(t)}
			},
			wantAttempts: 3,
		},
		{
			name:         "final 401",
			replies:      func(*testing.T) []reply { return []reply{errReply(401, "authentication_error", "invalid x-api-key")} },
			wantAttempts: 1, wantCode: anthropic.CodeAuth,
			wantMsg: []string{"invalid x-api-key", "ANTHROPIC_API_KEY", "--model offline"},
		},
		{
			name:         "final 403",
			replies:      func(*testing.T) []reply { return []reply{errReply(403, "permission_error", "not allowed")} },
			wantAttempts: 1, wantCode: anthropic.CodeAuth,
			wantMsg: []string{"ANTHROPIC_API_KEY", "--model offline"},
		},
		{
			name:         "final 429 after retries",
			replies:      func(*testing.T) []reply { return []reply{errReply(429, "rate_limit_error", "slow down")} },
			wantAttempts: 3, wantCode: anthropic.CodeRateLimited,
			wantMsg: []string{"rate-limited", "retried 2 times", "try again"},
		},
		{
			name:         "final 529 after retries",
			replies:      func(*testing.T) []reply { return []reply{errReply(529, "overloaded_error", "Overloaded")} },
			wantAttempts: 3, wantCode: anthropic.CodeUnavailable,
			wantMsg: []string{"overloaded", "retried 2 times", "try again"},
		},
		{
			name:         "final 503 after retries",
			replies:      func(*testing.T) []reply { return []reply{errReply(503, "api_error", "unavailable")} },
			wantAttempts: 3, wantCode: anthropic.CodeUnavailable,
			wantMsg: []string{"503", "try again"},
		},
		{
			name:  "404 model",
			model: "claude-nope-9",
			replies: func(*testing.T) []reply {
				return []reply{errReply(404, "not_found_error", "model: claude-nope-9")}
			},
			wantAttempts: 1, wantCode: anthropic.CodeNotFound,
			wantMsg: []string{`"claude-nope-9"`, "--model anthropic:NAME"},
		},
		{
			name: "400 names the API's reason",
			replies: func(*testing.T) []reply {
				return []reply{errReply(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")}
			},
			wantAttempts: 1, wantCode: anthropic.CodeError,
			wantMsg: []string{"prompt is too long", "start a new session"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.replies(t)...)
			model := testModel
			if tc.model != "" {
				model = tc.model
				f.model = model
			}
			p := newProvider(t, f.start(), func(c *anthropic.Config) { c.Model = model })
			got, _, err := collect(context.Background(), p, agent.Request{Messages: hello()})
			if n := f.attempts.Load(); n != tc.wantAttempts {
				t.Errorf("attempts = %d, want %d", n, tc.wantAttempts)
			}
			if tc.wantCode == "" {
				if err != nil {
					t.Fatalf("Stream() = %v, want success", err)
				}
				if want := []string{"text:Hello", "text:, world!"}; !reflect.DeepEqual(got, want) {
					t.Errorf("Stream() deltas = %q, want %q", got, want)
				}
				return
			}
			for _, m := range tc.wantMsg {
				checkErr(t, err, tc.wantCode, m)
			}
			if len(got) != 0 {
				t.Errorf("Stream() deltas = %q, want none", got)
			}
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p := newProvider(t, url, func(c *anthropic.Config) { c.MaxRetries = -1 })
	_, _, err := collect(context.Background(), p, agent.Request{Messages: hello()})
	checkErr(t, err, anthropic.CodeUnavailable, "the server at "+url+" is not answering")
}

func TestNotAnEventStream(t *testing.T) {
	f := newFake(t, reply{status: 200, headers: map[string]string{"Content-Type": "text/html"}, body: "<html>proxy login</html>"})
	p := newProvider(t, f.start())
	_, _, err := collect(context.Background(), p, agent.Request{Messages: hello()})
	checkErr(t, err, anthropic.CodeError, `Content-Type "text/html", not an event stream`)
}

func TestCancelMidStream(t *testing.T) {
	held := sseReply(t, "held.sse")
	held.hold = true
	f := newFake(t, held)
	p := newProvider(t, f.start())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	usage, err := p.Stream(ctx, agent.Request{Messages: hello()}, func(d agent.Delta) error {
		got = append(got, render(d))
		cancel() // the fake keeps the stream open: only the cancel ends it
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Stream() error = %v, want one that is context.Canceled", err)
	}
	checkErr(t, err, anthropic.CodeCancelled, "cancelled")
	if want := []string{"text:Thinking about"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Stream() deltas = %q, want %q", got, want)
	}
	if want := (agent.Usage{InputTokens: 9, OutputTokens: 1}); usage != want {
		t.Errorf("Stream() usage = %+v, want %+v", usage, want)
	}
}

func TestEmitErrorReturnedAsIs(t *testing.T) {
	f := newFake(t, sseReply(t, "tools.sse"))
	p := newProvider(t, f.start())
	stop := errors.New("run stopped")
	n := 0
	_, err := p.Stream(context.Background(), agent.Request{Messages: hello(), Tools: testTools}, func(agent.Delta) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Errorf("Stream() error = %v, want the emit error itself", err)
	}
	if n != 2 {
		t.Errorf("emit calls = %d, want 2 (none after the error)", n)
	}
}

func TestThinkingKeptForToolLoop(t *testing.T) {
	f := newFake(t, sseReply(t, "thinking_tools.sse"), sseReply(t, "text.sse"))
	f.maxTokens = anthropic.DefaultMaxTokens + 2048
	var mu sync.Mutex
	var bodies []map[string]any
	f.check = func(t *testing.T, _ int, body map[string]any) {
		wantJSON(t, "thinking", body["thinking"], `{"type":"enabled","budget_tokens":2048}`)
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
	}
	p := newProvider(t, f.start(), func(c *anthropic.Config) { c.ThinkingBudget = 2048 })
	clock := []tool.Spec{{Name: "clock", Description: "Tells the time."}}
	msgs := []protocol.Message{{ID: "u1", Role: protocol.RoleUser, Content: protocol.TextContent("What time is it?")}}

	got, usage, err := collect(context.Background(), p, agent.Request{Messages: msgs, Tools: clock})
	if err != nil {
		t.Fatalf("Stream() = %v", err)
	}
	want := []string{
		"reason:The person wants the time; the clock tool tells it.",
		"call:toolu_01A09q90qw90lq917835lq9:clock",
		"args:toolu_01A09q90qw90lq917835lq9:{}",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Stream() deltas = %q, want %q", got, want)
	}
	if want := (agent.Usage{InputTokens: 350, OutputTokens: 71, ReasoningTokens: 40}); usage != want {
		t.Errorf("Stream() usage = %+v, want %+v", usage, want)
	}

	// The loop's next step: the transcript holds the reasoning as text, the
	// call and its result. The thinking goes back signed, before the call.
	msgs = append(msgs,
		protocol.Message{ID: "r1", Role: protocol.RoleReasoning, Content: protocol.TextContent("The person wants the time; the clock tool tells it.")},
		protocol.Message{ID: "a1", Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{
			{ID: "toolu_01A09q90qw90lq917835lq9", Type: "function", Function: protocol.FunctionCall{Name: "clock", Arguments: "{}"}},
		}},
		protocol.Message{ID: "t1", Role: protocol.RoleTool, ToolCallID: "toolu_01A09q90qw90lq917835lq9", Content: protocol.TextContent("12:00")},
	)
	if _, _, err := collect(context.Background(), p, agent.Request{Messages: msgs, Tools: clock}); err != nil {
		t.Fatalf("second Stream() = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("requests = %d, want 2", len(bodies))
	}
	wantJSON(t, "messages", bodies[1]["messages"], `[
		{"role":"user","content":[{"type":"text","text":"What time is it?"}]},
		{"role":"assistant","content":[
			{"type":"thinking","thinking":"The person wants the time; the clock tool tells it.","signature":"EuYBCkQYAiJAr4Wc2hBf3G"},
			{"type":"redacted_thinking","data":"EmwKAhgBEgyRedactedBlockData"},
			{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"clock","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A09q90qw90lq917835lq9","content":[{"type":"text","text":"12:00"}]}]}]`)
}

func TestAdaptiveThinking(t *testing.T) {
	f := newFake(t, sseReply(t, "thinking.sse"))
	f.check = func(t *testing.T, _ int, body map[string]any) {
		wantJSON(t, "thinking", body["thinking"], `{"type":"adaptive"}`)
	}
	p := newProvider(t, f.start(), func(c *anthropic.Config) { c.AdaptiveThinking = true })
	got, _, err := collect(context.Background(), p, agent.Request{Messages: hello()})
	if err != nil {
		t.Fatalf("Stream() = %v", err)
	}
	if len(got) != 3 || !strings.HasPrefix(got[0], "reason:") {
		t.Errorf("Stream() deltas = %q, want reasoning then text", got)
	}
}

func TestNoKeyForCustomBaseURL(t *testing.T) {
	f := newFake(t, sseReply(t, "text.sse"))
	f.key = ""
	p := newProvider(t, f.start(), func(c *anthropic.Config) { c.APIKey = "" })
	if _, _, err := collect(context.Background(), p, agent.Request{Messages: hello()}); err != nil {
		t.Fatalf("Stream() = %v", err)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     anthropic.Config
		wantErr []string // parts of the error; none for success
	}{
		{name: "missing key", cfg: anthropic.Config{}, wantErr: []string{"ANTHROPIC_API_KEY", "--model offline"}},
		{name: "key only", cfg: anthropic.Config{APIKey: testKey}},
		{name: "base URL without key", cfg: anthropic.Config{BaseURL: "http://127.0.0.1:8080"}},
		{name: "base URL not http", cfg: anthropic.Config{APIKey: testKey, BaseURL: "ftp://x"}, wantErr: []string{"not an http(s) URL"}},
		{name: "thinking budget below minimum", cfg: anthropic.Config{APIKey: testKey, ThinkingBudget: 100}, wantErr: []string{"at least 1024"}},
		{name: "thinking budget over max tokens", cfg: anthropic.Config{APIKey: testKey, ThinkingBudget: 4096, MaxTokens: 4096}, wantErr: []string{"less than max_tokens"}},
		{name: "budget and adaptive", cfg: anthropic.Config{APIKey: testKey, ThinkingBudget: 2048, AdaptiveThinking: true}, wantErr: []string{"choose one"}},
		{name: "negative max tokens", cfg: anthropic.Config{APIKey: testKey, MaxTokens: -1}, wantErr: []string{"positive"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := anthropic.New(tc.cfg)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("New() = %v, want success", err)
				}
				if p.Name() != "anthropic" || p.Model() != anthropic.DefaultModel {
					t.Errorf("Name(), Model() = %q, %q, want anthropic, %s", p.Name(), p.Model(), anthropic.DefaultModel)
				}
				return
			}
			if err == nil {
				t.Fatalf("New() = nil error, want one containing %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New() error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
