package acp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/acp"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// TestServeToSDKClient drives Orrery as an ACP agent with the official
// SDK's client side: a turn whose write_file call asks for consent, which
// becomes session/request_permission; then session/load from the log.
func TestServeToSDKClient(t *testing.T) {
	node := requireNode(t)
	dir := t.TempDir()
	scriptPath := filepath.Join(dir, "script.json")
	script := `{"turns":[
		{"reasoning":"I will write the file.","tool_calls":[{"name":"write_file","args":{"path":"out.txt","content":"hello\n"}}],"usage":{"inputTokens":10,"outputTokens":5}},
		{"text":["done"]}]}`
	if err := os.WriteFile(scriptPath, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := kernel.New(kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "script:" + scriptPath,
		Tools: tool.NewSet(tool.Coding(tool.Shell{})...), DebugActor: true, Workspace: tool.Workspace{Root: dir}, ConsentTimeout: 20 * time.Second})
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = k.Close(ctx)
	}()

	clientScript, _ := filepath.Abs("testdata/agent/client.mjs")
	report := filepath.Join(dir, "report.json")
	cmd := exec.Command(node, clientScript, dir, report)
	cmd.Stderr = os.Stderr
	toClient, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	fromClient, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- acp.Serve(ctx, fromClient, toClient, acp.ServeConfig{Kernel: k}) }()
	// Serve reads the editor's stdout to its end before Wait closes that
	// pipe (Wait must come after the reads, or a read sees a closed file).
	if err := <-served; err != nil {
		t.Errorf("Serve() = %v, want nil when the editor leaves", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the SDK client failed: %v", err)
	}

	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Init struct {
			ProtocolVersion int `json:"protocolVersion"`
			AgentInfo       struct{ Name string }
		} `json:"init"`
		StopReason string           `json:"stopReason"`
		Turn       []map[string]any `json:"turn"`
		Loaded     []map[string]any `json:"loaded"`
		Asked      []struct {
			ToolCall map[string]any `json:"toolCall"`
			Options  []struct {
				OptionID, Kind string
			} `json:"options"`
		} `json:"asked"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Init.ProtocolVersion != 1 || r.Init.AgentInfo.Name != "orrery" {
		t.Errorf("initialize = %+v", r.Init)
	}
	if r.StopReason != "end_turn" {
		t.Errorf("stopReason = %q, want end_turn", r.StopReason)
	}
	if len(r.Asked) != 1 || r.Asked[0].ToolCall["kind"] != "edit" || len(r.Asked[0].Options) != 3 || r.Asked[0].Options[0].Kind != "allow_once" {
		t.Errorf("request_permission = %+v, want one edit call with Orrery's three options", r.Asked)
	}
	got, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	if err != nil || string(got) != "hello\n" {
		t.Errorf("out.txt = %q, %v: the allowed call did not run", got, err)
	}
	kinds := updateKinds(r.Turn)
	for _, want := range []string{"agent_thought_chunk", "tool_call", "tool_call_update", "agent_message_chunk", "usage_update"} {
		if !strings.Contains(kinds, want) {
			t.Errorf("turn updates %s lack %s", kinds, want)
		}
	}
	var completed bool
	for _, u := range r.Turn {
		if u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed" {
			completed = true
		}
	}
	if !completed {
		t.Errorf("no completed tool_call_update in %s", kinds)
	}
	if t.Failed() {
		t.Logf("report: %s", data)
	}
	lk := updateKinds(r.Loaded)
	if !strings.HasPrefix(lk, "user_message_chunk") || !strings.Contains(lk, "agent_message_chunk") {
		t.Errorf("session/load replayed %s, want the prompt and the answer", lk)
	}
}

func updateKinds(us []map[string]any) string {
	var out []string
	for _, u := range us {
		out = append(out, u["sessionUpdate"].(string))
	}
	return strings.Join(out, " ")
}
