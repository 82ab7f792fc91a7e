package interop_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// TestOpenAINodeSDK drives /v1 with the official `openai` npm package and
// its default retries: a chat completion whose turn fails reaches the
// server once (the SDK obeys x-should-retry: false rather than retrying
// the 4xx or 5xx it would otherwise retry) and is an APIError in OpenAI's
// shape; an unknown model is its NotFoundError with code model_not_found.
func TestOpenAINodeSDK(t *testing.T) {
	data := t.TempDir()
	model := scriptModel(t, data, map[string]any{"error": "the provider fell over"})
	target, _ := serveKernel(t, data, model)
	// A proxy in front counts the requests and the SDK's retry counter.
	u, _ := url.Parse(target)
	var mu sync.Mutex
	var posts []string
	// Rewrite adds no X-Forwarded-For: the server sees a program on this
	// machine, as it would without the proxy.
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) }}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mu.Lock()
			posts = append(posts, r.Header.Get("x-stainless-retry-count"))
			mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	out := nodeScript(t, "openai.mjs", "--url", proxy.URL, "--model", "orrery")
	type apiError struct {
		OK                  bool
		Status              int
		Code, Type, Message string
		ShouldRetry         *string
	}
	var res struct{ Failed, Missing apiError }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("openai.mjs printed %q: %v", out, err)
	}
	if f := res.Failed; f.Status != http.StatusUnprocessableEntity || f.Type != "server_error" || f.ShouldRetry == nil || *f.ShouldRetry != "false" {
		t.Errorf("the failed turn's error = %+v, want a 422 with x-should-retry false", f)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posts) != 1 || posts[0] != "0" {
		t.Errorf("the SDK sent %d POSTs (retry counts %q), want one, retry count 0", len(posts), posts)
	}
	if m := res.Missing; m.Status != http.StatusNotFound || m.Code != "model_not_found" {
		t.Errorf("an unknown model's error = %+v, want 404 model_not_found", m)
	}
}
