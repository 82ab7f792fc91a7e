package interop_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAGUIClient0059 runs a client tool's round trip with @ag-ui/client
// 0.0.59, the version CopilotKit 1.x pins, which sends no protocolVersion
// and whose schema refuses RUN_FINISHED outcomes 1.0 added: the run that
// ends waiting for the client's tool finishes cleanly for it, the pending
// call riding in metadata.orrery.pendingToolCallIds, and the tool's answer
// in the next run gets the model's reply.
func TestAGUIClient0059(t *testing.T) {
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	requireNode(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@ag-ui", "client-0059", "package.json")); err != nil {
		t.Fatalf("@ag-ui/client 0.0.59 is missing (%v): run npm ci in interop/", err)
	}
	data := t.TempDir()
	url, _ := serveKernel(t, data, scriptModel(t, data,
		map[string]any{"tool_calls": []map[string]any{{"name": "confirm", "args": map[string]any{"question": "ok?"}}}},
		map[string]any{"text": []string{"thanks for ", "confirming"}}))
	out := nodeScript(t, "agui0.mjs", "--url", url)
	var res struct {
		Pending []string
		Outcome map[string]any
		CallID  string
		Answer  string
		Types   [][]string
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("agui0.mjs printed %q: %v", out, err)
	}
	if len(res.Pending) != 1 || res.Pending[0] != res.CallID {
		t.Errorf("metadata.orrery.pendingToolCallIds = %v, want [%s]", res.Pending, res.CallID)
	}
	if len(res.Outcome) != 1 || res.Outcome["type"] != "success" {
		t.Errorf("the first run's outcome = %v, want {type: success} alone", res.Outcome)
	}
	if res.Answer != "thanks for confirming" {
		t.Errorf("the reply after the tool's answer = %q", res.Answer)
	}
	if len(res.Types) != 2 || !slices.Contains(res.Types[1], "RUN_FINISHED") {
		t.Errorf("runs saw %v, want two that finish", res.Types)
	}
}
