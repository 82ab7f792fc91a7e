package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpServerEnv makes the test binary an MCP server on stdio instead of
// running the tests: the real process an [mcp.servers] entry starts.
const mcpServerEnv = "ORRERY_TEST_MCP_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(mcpServerEnv) == "1" {
		serveMCP()
		return
	}
	if os.Getenv(orreryMainEnv) == "1" {
		runMain() // bus_test.go: the test binary is orrery
		return
	}
	os.Exit(m.Run())
}

func serveMCP() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "1"}, nil)
	type addIn struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "Adds two numbers a and b."},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			sum := strconv.FormatFloat(in.A+in.B, 'f', -1, 64)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: sum}}}, nil, nil
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func TestRunCallsAnMCPTool(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStatus string
		wantText   string
	}{
		{"allowed by a rule", []string{"--allow", "mcp.calc.*"}, "ok", "5"},
		{"asked with nobody to ask", nil, "denied", "no client that can ask"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			cfg := fmt.Sprintf("[mcp.servers.calc]\ncommand = %q\nenv = { %s = \"1\", GORACE = \"atexit_sleep_ms=0\" }\n", os.Args[0], mcpServerEnv)
			if err := os.WriteFile(filepath.Join(dir, "none.toml"), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			script, _ := json.Marshal(map[string]any{"turns": []map[string]any{
				{"tool_calls": []map[string]any{{"name": "tools.search", "args": map[string]string{"query": "add numbers"}}}},
				{"tool_calls": []map[string]any{{"name": "mcp.calc.add", "args": map[string]int{"a": 2, "b": 3}}}},
				{"text": []string{"done"}},
			}})
			scriptPath := filepath.Join(dir, "script.json")
			if err := os.WriteFile(scriptPath, script, 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr strings.Builder
			e := &env{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
			args := append([]string{"run", "--data", filepath.Join(dir, ".data"), "--config", filepath.Join(dir, "none.toml"),
				"--model", "script:" + scriptPath, "--json", "-p", "add 2 and 3"}, tt.args...)
			if code := run(context.Background(), e, args); code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			var found bool
			var callID string
			for _, line := range strings.Split(stdout.String(), "\n") {
				var ev struct {
					Type     string `json:"type"`
					Name     string `json:"toolCallName"`
					CallID   string `json:"toolCallId"`
					Content  string `json:"content"`
					Metadata struct {
						Orrery struct {
							Outcome struct{ Status, Rule string }
						}
					}
				}
				if json.Unmarshal([]byte(line), &ev) != nil {
					continue
				}
				if ev.Type == "TOOL_CALL_START" && ev.Name == "mcp.calc.add" {
					callID = ev.CallID
				}
				if ev.Type != "TOOL_CALL_RESULT" || ev.CallID != callID {
					continue
				}
				found = true
				if ev.Metadata.Orrery.Outcome.Status != tt.wantStatus || !strings.Contains(ev.Content, tt.wantText) {
					t.Errorf("mcp.calc.add result %q, outcome %+v; want %s with %q", ev.Content, ev.Metadata.Orrery.Outcome, tt.wantStatus, tt.wantText)
				}
			}
			if !found {
				t.Errorf("no result of mcp.calc.add in\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
		})
	}
}
