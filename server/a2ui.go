package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/getorrery/orrery/dialect/a2ui"
	"github.com/getorrery/orrery/kernel"
)

// a2uiAction delivers an A2UI action (a v0.9 action message, or the bare
// userAction an AG-UI client forwards) on sess to the owner of its surface,
// as ui.intent does: a2ui.ParseAction reads it, a2ui.ToIntent checks that
// the surface is a node of this session that declares the action, and
// Session.Intent checks it again on the session and delivers it. Every
// refusal is a *kernel.RequestError naming the fix.
func (s *Server) a2uiAction(ctx context.Context, sess *kernel.Session, msg json.RawMessage) error {
	if len(bytes.TrimSpace(msg)) == 0 {
		return &kernel.RequestError{Msg: `a2ui.action needs message: send the renderer's action, {"version":"v0.9","action":{"name","surfaceId","sourceComponentId","timestamp","context"}}`}
	}
	act, err := a2ui.ParseAction(msg)
	if err != nil {
		return &kernel.RequestError{Msg: err.Error()}
	}
	declared, derr := sess.Actions(ctx, act.SurfaceID)
	var re *kernel.RequestError
	if derr != nil && !errors.As(derr, &re) {
		return derr
	}
	in, err := a2ui.ToIntent(act, func(string) ([]string, bool) { return declared, derr == nil })
	if err != nil {
		msg := err.Error()
		if derr != nil {
			msg += " (" + derr.Error() + ")"
		}
		return &kernel.RequestError{Msg: msg}
	}
	return sess.Intent(ctx, in.Node, in.Action, in.Value)
}

// forwardedAction returns the userAction of RunAgentInput.forwardedProps
// .a2uiAction, as A2UI renderers for AG-UI send an action with a run, or
// nil when the props carry none.
func forwardedAction(props json.RawMessage) (json.RawMessage, error) {
	if len(props) == 0 {
		return nil, nil
	}
	var p struct {
		A2UIAction json.RawMessage `json:"a2uiAction"`
	}
	if json.Unmarshal(props, &p) != nil || len(p.A2UIAction) == 0 || string(p.A2UIAction) == "null" {
		return nil, nil
	}
	var a struct {
		UserAction json.RawMessage `json:"userAction"`
	}
	if err := json.Unmarshal(p.A2UIAction, &a); err != nil || len(a.UserAction) == 0 || string(a.UserAction) == "null" {
		return nil, &kernel.RequestError{Msg: `forwardedProps.a2uiAction needs userAction: send {"a2uiAction": {"userAction": {"name", "surfaceId", "sourceComponentId", "timestamp", "context"}}}, as the A2UI renderer's action gives it`}
	}
	return a.UserAction, nil
}
