package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serverEnv, when set in the environment, makes the test binary an MCP
// server of that kind on stdin and stdout instead of running the tests:
// the tests start real server processes by running themselves.
const serverEnv = "ORRERY_MCP_TEST_SERVER"

// Kinds of test server.
const (
	kindTools  = "tools"  // the test tools, on stdio
	kindBroken = "broken" // complains on stderr and exits 3 without speaking MCP
)

func TestMain(m *testing.M) {
	if kind := os.Getenv(serverEnv); kind != "" {
		os.Exit(runServer(kind))
	}
	os.Exit(m.Run())
}

func runServer(kind string) int {
	switch kind {
	case kindTools:
		if err := newTestServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			return 1
		}
		return 0
	case kindBroken:
		fmt.Fprintln(os.Stderr, "fatal: BROKEN_TOKEN is not set")
		return 3
	}
	fmt.Fprintln(os.Stderr, "unknown test server kind", kind)
	return 2
}

// testToolNames are the tools newTestServer offers, in its order.
var testToolNames = []string{"add", "args", "crash", "env", "fail", "media", "meta", "pid", "sleep", "structured"}

// newTestServer returns an MCP server with the test tools. It lists two
// tools a page, so a client must follow the cursor to see them all.
func newTestServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "orrery-test", Version: "1"}, &mcp.ServerOptions{PageSize: 2})

	type addIn struct {
		A float64 `json:"a" jsonschema:"the first addend"`
		B float64 `json:"b" jsonschema:"the second addend"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "Adds a and b.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return text(strconv.FormatFloat(in.A+in.B, 'f', -1, 64)), nil, nil
		})
	srv.AddTool(&mcp.Tool{Name: "args", Description: "Returns its arguments as it got them.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(string(req.Params.Arguments)), nil
		})
	srv.AddTool(&mcp.Tool{Name: "meta", Description: "Returns the traceparent of its call's _meta.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tp, _ := req.Params.Meta["traceparent"].(string)
			return text("traceparent=" + tp), nil
		})
	srv.AddTool(&mcp.Tool{Name: "crash", Description: "Exits the server in the middle of the call.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "crashing as asked")
			os.Exit(3)
			return nil, nil
		})
	srv.AddTool(&mcp.Tool{Name: "env", Description: "Tells ORRERY_TEST_VALUE and the working directory.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			wd, _ := os.Getwd()
			return text(os.Getenv("ORRERY_TEST_VALUE") + "\n" + wd + "\n" + os.Getenv("OPENAI_API_KEY")), nil
		})
	srv.AddTool(&mcp.Tool{Name: "fail", Description: "Always fails.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			r := text("fail was asked to fail")
			r.IsError = true
			return r, nil
		})
	srv.AddTool(&mcp.Tool{Name: "media", Description: "Returns one block of every kind.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			size := int64(2048)
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "here is everything"},
				&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, 1234)},
				&mcp.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 99)},
				&mcp.ResourceLink{URI: "file:///tmp/report.pdf", Name: "report", MIMEType: "application/pdf", Size: &size},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://note", MIMEType: "text/plain", Text: "hello"}},
				&mcp.TextContent{Text: "and that is all"},
			}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "pid", Description: "Tells the server's process id.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(strconv.Itoa(os.Getpid())), nil
		})
	type sleepIn struct {
		Marker string `json:"marker" jsonschema:"a file the tool creates once it has started"`
		Deaf   bool   `json:"deaf,omitempty" jsonschema:"ignore cancellation and sleep for an hour"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "sleep", Description: "Creates marker, then waits until cancelled (or, when deaf, for an hour)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			if err := os.WriteFile(in.Marker, nil, 0o600); err != nil {
				return nil, nil, err
			}
			if in.Deaf {
				time.Sleep(time.Hour)
			} else {
				<-ctx.Done()
			}
			return text("slept"), nil, nil
		})
	srv.AddTool(&mcp.Tool{Name: "structured", Description: "Returns only structured content.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]int{"answer": 42}}, nil
		})
	return srv
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
