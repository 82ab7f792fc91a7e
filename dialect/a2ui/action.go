package a2ui

import (
	"encoding/json"
	"slices"
	"strings"
)

// Action is an A2UI action a renderer sends back: the v0.9 client message
// {"version": "v0.9", "action": {…}}, or the userAction an AG-UI client puts
// in RunAgentInput.forwardedProps.a2uiAction.
type Action struct {
	Name              string                     `json:"name"`
	SurfaceID         string                     `json:"surfaceId"`
	SourceComponentID string                     `json:"sourceComponentId"`
	Timestamp         string                     `json:"timestamp,omitempty"`
	Context           map[string]json.RawMessage `json:"context,omitempty"`
}

// Intent is what an action becomes: a ui.intent on the placed node that
// the surface shows, for its owner.
type Intent struct {
	Node   string
	Action string
	Value  json.RawMessage
}

// ParseAction reads a v0.9 action message, checked against the official
// client_to_server schema, or a bare userAction object.
func ParseAction(raw json.RawMessage) (Action, error) {
	var env struct {
		Version string          `json:"version"`
		Action  json.RawMessage `json:"action"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return Action{}, refuse("", "an A2UI action is a JSON object: {\"version\":\"v0.9\",\"action\":{\"name\",\"surfaceId\",\"sourceComponentId\",\"timestamp\",\"context\"}}")
	}
	body := raw
	if env.Version != "" || env.Action != nil {
		if err := CheckClientSchema(raw); err != nil {
			return Action{}, schemaRefusal("", err)
		}
		body = env.Action
	}
	var a Action
	if err := json.Unmarshal(body, &a); err != nil {
		return Action{}, refuse("/action", "the action does not fit {name, surfaceId, sourceComponentId, context}: %v", err)
	}
	if a.Name == "" || a.SurfaceID == "" {
		return Action{}, refuse("/action", "an action needs name and surfaceId: send what the surface's button carries")
	}
	return a, nil
}

// ToIntent turns an action into the intent its owner receives. surfaces
// returns, for a surface id the caller may act on, the actions its owner
// declared; a surface the caller does not own, or one that is not there,
// is refused, as is an action the surface never declared. The surface id is
// the placed node (placed:<owner>:<id>). The value is the context's
// orrery.value (a button or link Orrery projected), else every other key
// of the context but Orrery's own orrery.* ones (a form's fields as the
// renderer resolved them; a question's choices and text), else nothing.
func ToIntent(a Action, surfaces func(surfaceID string) (declared []string, ok bool)) (Intent, error) {
	declared, ok := surfaces(a.SurfaceID)
	if !ok {
		return Intent{}, refuse("/action/surfaceId", "surface %q is not one you can act on in this session: act on a surface the session shows you", a.SurfaceID)
	}
	if !slices.Contains(declared, a.Name) {
		return Intent{}, refuse("/action/name", "surface %q declares no action %q: send one of its buttons' actions", a.SurfaceID, a.Name)
	}
	in := Intent{Node: a.SurfaceID, Action: a.Name}
	if v, ok := a.Context["orrery.value"]; ok {
		in.Value = v
		return in, nil
	}
	answer := map[string]json.RawMessage{}
	for k, v := range a.Context {
		if !strings.HasPrefix(k, "orrery.") {
			answer[k] = v
		}
	}
	if len(answer) > 0 {
		in.Value, _ = json.Marshal(answer)
	}
	return in, nil
}

// DeclaredActions returns the names of the events the components of msgs
// send (each component's action.event.name), sorted, each once: the
// actions a surface shown as an a2ui form declares. It returns nil when
// there are none.
func DeclaredActions(msgs []Message) []string {
	var names []string
	for _, m := range msgs {
		if m.UpdateComponents == nil {
			continue
		}
		for _, c := range m.UpdateComponents.Components {
			act, _ := c["action"].(map[string]any)
			ev, _ := act["event"].(map[string]any)
			if name, ok := ev["name"].(string); ok && name != "" && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}
