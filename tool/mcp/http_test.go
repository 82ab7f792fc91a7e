package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/getorrery/orrery/tool"
	orrerymcp "github.com/getorrery/orrery/tool/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startHTTP serves the test tools over streamable HTTP on a real
// listener, to requests that carry "Authorization: Bearer <token>". It
// counts the requests it refused.
func startHTTP(t *testing.T, token string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	srv := newTestServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var refused atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, &refused
}

func TestHTTP(t *testing.T) {
	ts, refused := startHTTP(t, "s3cret")
	srv := connect(t, "web", orrerymcp.ServerConfig{URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}})
	tools := toolsByName(t, srv.Tools())
	if len(tools) != len(testToolNames) {
		t.Errorf("len(Tools()) = %d, want %d", len(tools), len(testToolNames))
	}
	tests := []struct {
		tool, args, want string
		wantErr          bool
	}{
		{"add", `{"a":40,"b":2}`, "42", false},
		{"fail", `{}`, "fail was asked to fail", true},
		{"media", `{}`, "[image: image/png, 1234 bytes]", false},
	}
	for _, tt := range tests {
		res := call(t, tools, "mcp.web."+tt.tool, tt.args)
		if res.Error != tt.wantErr || !strings.Contains(res.Text, tt.want) {
			t.Errorf("%s.Call(%s) = %+v, want text containing %q, error %v", tt.tool, tt.args, res, tt.want, tt.wantErr)
		}
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("the server refused %d requests, want 0: the headers were not sent", n)
	}
}

func TestHTTPWithoutHeaders(t *testing.T) {
	ts, refused := startHTTP(t, "s3cret")
	logger, _ := testLogger(t)
	srv, err := orrerymcp.Connect(context.Background(), "web", orrerymcp.ServerConfig{URL: ts.URL + "/?key=k3y-in-url"}, logger)
	if err == nil {
		srv.Close()
		t.Fatal("Connect() without the token = nil error, want one")
	}
	for _, w := range []string{`"web"`, ts.URL, "headers", "[mcp.servers.web]"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Connect() = %q, want it to contain %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "k3y-in-url") {
		t.Errorf("Connect() = %q, shows the URL's query", err)
	}
	if refused.Load() == 0 {
		t.Errorf("the server refused no request, want the first")
	}
}

func TestHTTPServerGone(t *testing.T) {
	ts, _ := startHTTP(t, "s3cret")
	logger, _ := testLogger(t)
	// A key in the URL's query must not reach the model.
	url := ts.URL + "/mcp?key=k3y-in-url"
	srv, err := orrerymcp.Connect(context.Background(), "web", orrerymcp.ServerConfig{URL: url, Headers: map[string]string{"Authorization": "Bearer s3cret"}}, logger)
	if err != nil {
		t.Fatal(err)
	}
	tools := toolsByName(t, srv.Tools())
	ts.Close()
	res := call(t, tools, "mcp.web.add", `{"a":1,"b":2}`)
	for _, w := range []string{`MCP server "web"`, ts.URL + "/mcp", "[mcp.servers.web]", "next session"} {
		if !res.Error || !strings.Contains(res.Text, w) {
			t.Errorf("Call() on a gone server = %+v, want an error containing %q", res, w)
		}
	}
	if strings.Contains(res.Text, "k3y-in-url") {
		t.Errorf("Call() on a gone server = %q, shows the URL's query", res.Text)
	}
	// Ending the session is a DELETE the gone server cannot take; that is
	// no failure of Close.
	if err := srv.Close(); err != nil {
		t.Errorf("Close() after the server went = %v, want nil", err)
	}
}

func TestHTTPCancel(t *testing.T) {
	ts, _ := startHTTP(t, "s3cret")
	tools := toolsByName(t, connect(t, "web", orrerymcp.ServerConfig{URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}}).Tools())
	marker := filepath.Join(t.TempDir(), "started")
	args, _ := json.Marshal(map[string]any{"marker": marker})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := tools["mcp.web.sleep"].Call(ctx, tool.Call{Args: args})
		done <- err
	}()
	waitForFile(t, marker, done)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep.Call() after cancel = %v, want context.Canceled", err)
	}
	if res := call(t, tools, "mcp.web.add", `{"a":1,"b":2}`); res.Text != "3" {
		t.Errorf("add.Call() after a cancelled call = %+v, want 3", res)
	}
}

// TestTraceContext: with the W3C propagator installed, a call made under a
// span carries it to the server, in _meta.traceparent over stdio and over
// HTTP, and as the traceparent header of each HTTP request; without a span
// it carries none.
func TestTraceContext(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

	srv := newTestServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var headers atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			headers.Store(r.Header.Get("traceparent"))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	for name, cfg := range map[string]orrerymcp.ServerConfig{"stdio": stdioConfig(kindTools), "http": {URL: ts.URL}} {
		tools := toolsByName(t, connect(t, "s", cfg).Tools())
		headers.Store("")
		res, err := tools["mcp.s.meta"].Call(ctx, tool.Call{ID: "c1", Args: json.RawMessage(`{}`)})
		if err != nil || res.Text != "traceparent="+want {
			t.Errorf("%s: a call under a span = %+v, %v; want the server to get %s", name, res, err, want)
		}
		if got := headers.Load(); name == "http" && got != want {
			t.Errorf("http: the request's traceparent header is %q, want %q", got, want)
		}
		if res := call(t, tools, "mcp.s.meta", `{}`); res.Text != "traceparent=" {
			t.Errorf("%s: a call with no span = %q, want no traceparent", name, res.Text)
		}
	}
}
