package anthropic_test

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
	"github.com/getorrery/orrery/agent/provider/anthropic"
)

// bodyTransport answers every request with body as a 200 event stream. The
// fuzz test uses it instead of a server so that each input costs no
// connection.
type bodyTransport []byte

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(b)),
		Request:    r,
	}, nil
}

// FuzzStream feeds arbitrary bytes as the answer's SSE body. Stream must
// return (no panic, no hang), fail only with an *agent.Error, succeed only
// on a stream that has a message_stop, and send tool arguments only for the
// call it started last, with nothing else between them.
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
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n"))
	f.Add([]byte("event: error\ndata: not json\n\n"))
	f.Add([]byte("event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":9e18,\"cache_read_input_tokens\":9e18,\"output_tokens\":1e30}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))

	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := anthropic.New(anthropic.Config{
			APIKey:     "k",
			BaseURL:    "http://fake.invalid",
			HTTPClient: &http.Client{Transport: bodyTransport(body)},
			MaxRetries: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		open := "" // the call whose arguments may follow
		usage, err := p.Stream(context.Background(), agent.Request{Messages: hello(), Tools: testTools}, func(d agent.Delta) error {
			switch d.Kind {
			case agent.DeltaToolCall:
				open = d.ToolCallID
			case agent.DeltaToolArgs:
				if open == "" || d.ToolCallID != open {
					t.Fatalf("DeltaToolArgs for %q, but the open call is %q", d.ToolCallID, open)
				}
			default:
				open = ""
			}
			return nil
		})
		if usage.InputTokens < 0 || usage.OutputTokens < 0 || usage.CachedInputTokens < 0 || usage.ReasoningTokens < 0 {
			t.Fatalf("Stream() usage = %+v, want no negative count", usage)
		}
		var ae *agent.Error
		if err != nil && !errors.As(err, &ae) {
			t.Fatalf("Stream() error = %v (%T), want an *agent.Error", err, err)
		}
		if err == nil && !bytes.Contains(body, []byte("message_stop")) {
			t.Fatalf("Stream() succeeded on a body without message_stop")
		}
	})
}
