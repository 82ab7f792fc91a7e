package offline_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/provider/offline"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/ui"
)

func tools(names ...string) []tool.Spec {
	out := make([]tool.Spec, len(names))
	for i, n := range names {
		out[i] = tool.Spec{Name: n}
	}
	return out
}

func user(text string) protocol.Message {
	return protocol.Message{ID: "u1", Role: protocol.RoleUser, Content: protocol.TextContent(text)}
}

// calls streams one answer and returns its tool calls as name → args.
func calls(t *testing.T, req agent.Request) map[string]string {
	t.Helper()
	out := map[string]string{}
	var last string
	_, err := offline.New().Stream(context.Background(), req, func(d agent.Delta) error {
		switch d.Kind {
		case agent.DeltaToolCall:
			last = d.ToolName
			out[last] = ""
		case agent.DeltaToolArgs:
			out[last] += d.Text
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPlansWork(t *testing.T) {
	coding := tools("shell", "read_file", "write_file", "edit_file", "tools.search")
	tests := []struct {
		prompt   string
		tool     string
		wantArgs map[string]string
	}{
		{"run `go version`", "shell", map[string]string{"command": "go version"}},
		{"run a command", "shell", nil},
		{"write a file notes.md", "write_file", map[string]string{"path": "notes.md"}},
		{"edit notes.md replace Hello with Goodbye", "edit_file", map[string]string{"path": "notes.md", "old_string": "Hello", "new_string": "Goodbye"}},
		{`edit a.txt replace "two words" with "three more words"`, "edit_file", map[string]string{"old_string": "two words", "new_string": "three more words"}},
		{"show me a chart of apples pears", "tools.search", nil},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			got := calls(t, agent.Request{Messages: []protocol.Message{user(tt.prompt)}, Tools: coding})
			args, ok := got[tt.tool]
			if !ok || len(got) != 1 {
				t.Fatalf("calls = %v, want one call of %s", got, tt.tool)
			}
			var m map[string]string
			if err := json.Unmarshal([]byte(args), &m); err != nil {
				t.Fatalf("args %s: %v", args, err)
			}
			for k, v := range tt.wantArgs {
				if m[k] != v {
					t.Errorf("%s = %q, want %q (args %s)", k, m[k], v, args)
				}
			}
		})
	}
}

func TestChartAfterSearch(t *testing.T) {
	msgs := []protocol.Message{
		user("show me a chart of apples pears figs"),
		{ID: "a1", Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: "c1", Type: "function", Function: protocol.FunctionCall{Name: "tools.search", Arguments: "{}"}}}},
		{ID: "t1", Role: protocol.RoleTool, ToolCallID: "c1", Content: protocol.TextContent(`{"tools":[]}`)},
	}
	got := calls(t, agent.Request{Messages: msgs, Tools: tools("tools.search", "ui.show")})
	var in struct {
		Placement string          `json:"placement"`
		Surface   json.RawMessage `json:"surface"`
	}
	if err := json.Unmarshal([]byte(got["ui.show"]), &in); err != nil {
		t.Fatalf("ui.show args %q: %v", got["ui.show"], err)
	}
	if err := ui.Validate(in.Surface); err != nil {
		t.Fatalf("the chart fails its schema: %v", err)
	}
	text, err := ui.Text(in.Surface)
	if err != nil {
		t.Fatal(err)
	}
	if in.Placement != "pane.right" || !strings.Contains(string(in.Surface), `"t":"chart"`) || !strings.Contains(text, "apples") {
		t.Errorf("ui.show %s (text %q), want a chart of the words in pane.right", got["ui.show"], text)
	}
}

// TestReportSaysWhatFailed: the answer after a tool call says Done only
// when the call succeeded; a denied, failed or stopped call is reported
// as not done, with what it returned.
func TestReportSaysWhatFailed(t *testing.T) {
	tests := []struct {
		name, metadata, want string
	}{
		{"no outcome", ``, `Done: shell returned "hi".`},
		{"ok", `{"orrery":{"outcome":{"status":"ok"}}}`, `Done: shell returned "hi".`},
		{"denied", `{"orrery":{"outcome":{"status":"denied"}}}`, `Not done: shell was denied: "hi".`},
		{"error", `{"orrery":{"outcome":{"status":"error"}}}`, `Not done: shell failed: "hi".`},
		{"cancelled", `{"orrery":{"outcome":{"status":"cancelled"}}}`, `Not done: shell did not finish (cancelled): "hi".`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := []protocol.Message{
				user("run `echo hi`"),
				{ID: "a1", Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: "c1", Type: "function", Function: protocol.FunctionCall{Name: "shell", Arguments: `{"command":"echo hi"}`}}}},
				{ID: "t1", Role: protocol.RoleTool, ToolCallID: "c1", Content: protocol.TextContent("hi"), Metadata: json.RawMessage(tt.metadata)},
			}
			var text strings.Builder
			_, err := offline.New().Stream(context.Background(), agent.Request{Messages: msgs, Tools: tools("shell")}, func(d agent.Delta) error {
				if d.Kind == agent.DeltaText {
					text.WriteString(d.Text)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if text.String() != tt.want {
				t.Errorf("answer = %q, want %q", text.String(), tt.want)
			}
		})
	}
}
