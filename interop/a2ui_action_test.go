package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/getorrery/orrery/dialect/a2ui"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui"
)

// TestAGUIClientA2UIAction: the official @ag-ui/client's HttpAgent sends
// an A2UI action as an A2UI renderer for AG-UI does, in
// forwardedProps.a2uiAction.userAction of POST /run?a2ui=1. The action
// reaches the component's owner (the agent: a hidden note logged before the
// run it asked for), the run streams with no client warning, the client
// holds the component's A2UI surface as an activity message that passes
// the official schemas, and an undeclared action is refused before any run.
func TestAGUIClientA2UIAction(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	node := requireNode(t, dir)
	url, k := startKernelWith(t)
	ctx := context.Background()
	s, err := k.CreateSession(ctx, kernel.SessionOptions{ID: "thread-a2ui"})
	if err != nil {
		t.Fatal(err)
	}
	structure := `{"type":"stack","children":[{"type":"text","value":"${/left} tasks left"},{"type":"button","label":"Done","on":{"press":"done"}}]}`
	if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "todo", Placement: "pane.left", Structure: json.RawMessage(structure), Data: json.RawMessage(`{"left":3}`)}); err != nil {
		t.Fatal(err)
	}
	action := `{"name":"done","surfaceId":"placed:agent:todo","sourceComponentId":"root-1","timestamp":"2026-05-01T10:00:00Z","context":{"orrery.event":"press"}}`
	refused := `{"name":"scroll","surfaceId":"placed:agent:todo","sourceComponentId":"root-1","timestamp":"2026-05-01T10:00:00Z","context":{}}`

	runCtx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, node, "a2ui_action.mjs", "--url", url, "--thread", s.ID(), "--action", action, "--refused", refused)
	cmd.Dir = dir
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SUPPRESS_TRANSFORMATION_WARNINGS=") })
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node a2ui_action.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	var res struct {
		OK         bool     `json:"ok"`
		Types      []string `json:"types"`
		Activities []struct {
			ID           string `json:"id"`
			ActivityType string `json:"activityType"`
			Content      struct {
				Ops json.RawMessage `json:"a2ui_operations"`
			} `json:"content"`
		} `json:"activities"`
		Refused string `json:"refused"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || !res.OK {
		t.Fatalf("a2ui_action.mjs printed %s (%v)", stdout.Bytes(), err)
	}
	if len(res.Types) == 0 || res.Types[0] != "RUN_STARTED" || res.Types[len(res.Types)-1] != "RUN_FINISHED" || !slices.Contains(res.Types, "ACTIVITY_SNAPSHOT") {
		t.Errorf("event types = %v, want a run holding an ACTIVITY_SNAPSHOT", res.Types)
	}
	if len(res.Activities) != 1 || res.Activities[0].ID != "a2ui-surface-placed:agent:todo" || res.Activities[0].ActivityType != a2ui.ActivityType {
		t.Fatalf("the client's activity messages = %+v, want the component's surface", res.Activities)
	}
	if _, err := a2ui.Validate(res.Activities[0].Content.Ops); err != nil {
		t.Errorf("the client's A2UI operations %s: Validate() = %v", res.Activities[0].Content.Ops, err)
	}
	if !strings.Contains(string(res.Activities[0].Content.Ops), `"text":"3 tasks left"`) {
		t.Errorf("the client's A2UI operations %s lack the bound text", res.Activities[0].Content.Ops)
	}
	t.Logf("the refused run failed with: %s", res.Refused)
	if !strings.Contains(res.Refused, `declares no action \"scroll\"`) && !strings.Contains(res.Refused, `declares no action "scroll"`) {
		t.Errorf("the undeclared action's run failed with %q, want the server's refusal naming it", res.Refused)
	}

	// The log: the note, then the one run; the refused action left nothing.
	frames, _, err := s.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, f := range frames {
		ev, err := protocol.DecodeEvent(f.Data)
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *protocol.Custom:
			if e.Name == kernel.HostMessageEvent {
				var m kernel.HostMessage
				json.Unmarshal(e.Value, &m)
				order = append(order, "note "+m.Text)
			}
		case *protocol.RunStarted, *protocol.RunFinished, *protocol.RunError:
			order = append(order, string(ev.EventType()))
		}
	}
	if want := []string{"note [ext:ui] todo: done", "RUN_STARTED", "RUN_FINISHED"}; !slices.Equal(order, want) {
		t.Errorf("logged %q, want %q", order, want)
	}
}
