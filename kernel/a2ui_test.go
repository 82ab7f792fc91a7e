package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui"
)

const a2uiForm = `[{"version":"v0.9","createSurface":{"surfaceId":"mine","catalogId":"https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}},
{"version":"v0.9","updateComponents":{"surfaceId":"mine","components":[
  {"id":"root","component":"Column","children":["t","go"]},
  {"id":"t","component":"Text","text":{"path":"/status"}},
  {"id":"go","component":"Button","child":"go-t","action":{"event":{"name":"retry"}}},
  {"id":"go-t","component":"Text","text":"Retry"}]}},
{"version":"v0.9","updateDataModel":{"surfaceId":"mine","value":{"status":"build failed"}}}]`

// TestShowA2UI: ui.show's a2ui form places the surface lifted from it (the
// same for every client) and announces the messages, their surfaceId set to
// the placed node; a bad form changes nothing and names the path.
func TestShowA2UI(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, "offline")
		s := e.session(t)
		ctx := context.Background()
		if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "ci", Placement: "pane.right", A2UI: json.RawMessage(a2uiForm)}); err != nil {
			t.Fatalf("Show(a2ui) = %v", err)
		}
		waitHead(t, s, 3)
		var placed kernel.Placed
		for _, ev := range logged(t, s, 0) {
			if c, ok := ev.(*protocol.Custom); ok && c.Name == kernel.PlacedEvent {
				if err := json.Unmarshal(c.Value, &placed); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !strings.Contains(placed.Text, "build failed") || !strings.Contains(placed.Text, "[ Retry ]") {
			t.Errorf("text form = %q, want the bound status and the button", placed.Text)
		}
		if err := ui.Validate(placed.Surface); err != nil {
			t.Errorf("placed surface %s: %v", placed.Surface, err)
		}
		if strings.Contains(string(placed.A2UI), `"mine"`) || !strings.Contains(string(placed.A2UI), `"surfaceId":"placed:agent:ci"`) {
			t.Errorf("placed a2ui = %s, want every surfaceId set to placed:agent:ci", placed.A2UI)
		}
		if !strings.Contains(string(stateOf(t, s)), "build failed") {
			t.Errorf("state %s lacks the lifted surface", stateOf(t, s))
		}

		head := s.Head()
		for _, tc := range []struct {
			in   kernel.ShowInput
			want string
		}{
			{kernel.ShowInput{ID: "x", Placement: "band", A2UI: json.RawMessage(strings.Replace(a2uiForm, `"Column"`, `"Iframe"`, 1))}, `/1/updateComponents/components/0/component: unknown component "Iframe"`},
			{kernel.ShowInput{ID: "x", Placement: "band", A2UI: json.RawMessage(a2uiForm), Surface: json.RawMessage(`{"kind":{"t":"text","value":"x"}}`)}, "not beside one"},
			{kernel.ShowInput{ID: "x", Placement: "band"}, "or an a2ui form"},
		} {
			err := s.Show(ctx, ui.OwnerAgent, tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Show() = %v, want a refusal naming %q", err, tc.want)
			}
		}
		if s.Head() != head {
			t.Errorf("head moved from %d to %d after refusals", head, s.Head())
		}
	})
}
