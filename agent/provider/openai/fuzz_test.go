package openai_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/provider/openai"
)

// sseBody answers every request with its bytes as an SSE stream, in memory,
// so the fuzzer spends its time in the decoder.
type sseBody []byte

func (b sseBody) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Status:     "200 OK",
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    io.NopCloser(bytes.NewReader(b)),
		Request: req,
	}, nil
}

// FuzzStream feeds arbitrary bytes as the SSE body of an answer: Stream must
// return (no panic, no hang), fail only with an *agent.Error, and never
// emit tool arguments that do not follow their call.
func FuzzStream(f *testing.F) {
	fixtures, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil || len(fixtures) == 0 {
		f.Fatalf("no fixtures: %v", err)
	}
	for _, name := range fixtures {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("data: [DONE]\n\n"))
	f.Add([]byte("event: error\ndata: {\"error\":{\"message\":\"overloaded\",\"type\":\"overloaded_error\"}}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":null,\"usage\":{\"prompt_tokens\":1}}\n\n: keepalive\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := openai.New(openai.Config{
			Model:      "m",
			BaseURL:    "http://fuzz.invalid/v1",
			MaxRetries: -1,
			HTTPClient: &http.Client{Transport: sseBody(body)},
		})
		if err != nil {
			t.Fatal(err)
		}
		var deltas []agent.Delta
		_, err = p.Stream(context.Background(), simple(), collect(&deltas))
		if err == nil {
			return
		}
		var ae *agent.Error
		if !errors.As(err, &ae) {
			// collect's own error: arguments out of order.
			t.Fatalf("Stream() error = %v (%T), want an *agent.Error", err, err)
		}
		if ae.Message == "" || ae.Code == "" {
			t.Fatalf("Stream() error = %#v, want a code and a message", ae)
		}
	})
}
