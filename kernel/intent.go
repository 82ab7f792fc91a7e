package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// FromUI is the From of the host message an action on the agent's
// component becomes.
const FromUI = "ui"

// intentRoute is where a checked intent goes.
type intentRoute int

const (
	routeDone   intentRoute = iota // handled on the actor (a note, a link)
	routeOwner                     // to the running extension
	routeAction                    // a declared action of a runtime-"none" extension
)

// Intent takes a person's committed action on the placed component node
// (placed:<owner>:<id>): a press, a submit, a choice or an open that the
// component's structure declares. Anything else is refused, naming the fix.
//
//   - An open whose value is an href the component's bound tree shows is a
//     link, the host's whoever showed the component: an http(s) URL or an
//     existing path inside the workspace (no symlink out) is handed to
//     Config.Opener, and a notice names the target; with no Opener the
//     notice alone names it. Any other href is refused with the fix.
//   - On the agent's component the action becomes a hidden host message,
//     "[ext:ui] <id>: <action> <value>", that the model reads on its next
//     turn; it starts no turn.
//   - On an extension's component it goes to Config.Intents: to the
//     running extension, or, for an extension with runtime "none", to its
//     declared action. An extension not running is refused with the fix.
func (s *Session) Intent(ctx context.Context, nodeID, action string, value json.RawMessage) error {
	var route intentRoute
	var in Intent
	var err error
	if derr := s.do(ctx, func() { route, in, err = s.routeIntent(ctx, nodeID, action, value) }); derr != nil {
		return derr
	}
	if err != nil || route == routeDone {
		return err
	}
	h := s.k.cfg.Intents
	if h == nil {
		return notRunning(in)
	}
	if route == routeAction {
		if err := h.RunAction(ctx, in); err != nil {
			return fmt.Errorf("run action %s of %s: %w", in.Action, in.Owner, err)
		}
		return nil
	}
	if err := h.Intent(ctx, in); err != nil {
		if errors.Is(err, ErrOwnerNotRunning) {
			return notRunning(in)
		}
		return fmt.Errorf("send %s to %s: %w", in.Action, in.Owner, err)
	}
	return nil
}

func notRunning(in Intent) error {
	ext, _ := in.Owner.Ext()
	return &RequestError{Msg: fmt.Sprintf("extension %s is not running, so %q on %s went nowhere: restart it with /ext restart %s (or orrery ext restart %s), and set resident = true in its orrery.toml for components people act on", ext, in.Action, in.ID, ext, ext)}
}

// routeIntent checks an intent on the actor and handles what the host
// handles itself. Runs on the actor.
func (s *Session) routeIntent(ctx context.Context, nodeID, action string, value json.RawMessage) (intentRoute, Intent, error) {
	s.assertActor()
	owner, id, err := ui.ParseNodeID(nodeID)
	if err != nil {
		return routeDone, Intent{}, refuse(err)
	}
	if action == "" {
		return routeDone, Intent{}, &RequestError{Msg: "action is missing: send the action the component's structure declares in on, such as \"retry\""}
	}
	if len(value) > 0 && !json.Valid(value) {
		return routeDone, Intent{}, &RequestError{Msg: "value is not JSON: send the action's value as a JSON value, or omit it"}
	}
	inst, err := s.instance(nodeID)
	if err != nil {
		return routeDone, Intent{}, err
	}
	if inst == nil {
		prev, err := s.state.node(nodeID)
		if err != nil {
			return routeDone, Intent{}, err
		}
		if prev != nil {
			return routeDone, Intent{}, &RequestError{Msg: fmt.Sprintf("%s shows a surface, not a component: only a component's declared actions are sent with ui.intent", nodeID)}
		}
		return routeDone, Intent{}, &RequestError{Msg: fmt.Sprintf("nothing is placed as %s: send ui.intent for a node listed in the state's /ui/nodes", nodeID)}
	}
	in := Intent{Session: s.id, Owner: owner, ID: id, Action: action, Value: value}
	if action == component.ActionOpen {
		var href string
		if json.Unmarshal(value, &href) == nil && inst.data.Bound().Shows(href) {
			return routeDone, in, s.openLink(ctx, inst, href)
		}
	}
	if err := inst.structure.CheckAction(action); err != nil {
		return routeDone, in, refuse(err)
	}
	if owner == ui.OwnerAgent {
		_, err := s.hostMessage(FromUI, noteText(id, action, value), true)
		return routeDone, in, err
	}
	ext, isExt := owner.Ext()
	if !isExt {
		return routeDone, in, &RequestError{Msg: fmt.Sprintf("%s's components take no actions: only the agent's and extensions' do", owner)}
	}
	reg := s.k.components.extension(owner)
	if reg != nil && reg.runtime == RuntimeNone {
		if !slices.Contains(reg.actions, action) {
			return routeDone, in, &RequestError{Msg: fmt.Sprintf("extension %s runs no process and declares no action %q: declare it as [provides.actions.%s] in its orrery.toml", ext, action, action)}
		}
		return routeAction, in, nil
	}
	return routeOwner, in, nil
}

// noteText is the host message an action on the agent's component
// becomes: [ext:ui] <id>: <action> <value>.
func noteText(id, action string, value json.RawMessage) string {
	text := "[ext:ui] " + id + ": " + action
	if len(value) > 0 {
		var v any
		if json.Unmarshal(value, &v) == nil {
			if compact, err := json.Marshal(v); err == nil {
				value = compact
			}
		}
		text += " " + string(value)
	}
	return text
}

// openLink opens href, which inst's bound tree shows, on the host's own
// screen, or names it in a notice when the host has no screen. Runs on the
// actor.
func (s *Session) openLink(ctx context.Context, inst *instance, href string) error {
	link, err := component.CheckHref(href)
	if err != nil {
		return refuse(err)
	}
	target := link.URL
	if !link.IsURL() {
		ws := s.workspace()
		abs, err := ws.Resolve(link.Path)
		if err != nil {
			return &RequestError{Msg: fmt.Sprintf("the link %q is refused: %v", href, err)}
		}
		if _, err := os.Stat(abs); err != nil {
			return &RequestError{Msg: fmt.Sprintf("the link %q is refused: %s does not exist in the workspace; link a file that exists, or create it first", href, link.Path)}
		}
		target = abs
	}
	var ext string
	if id, ok := inst.owner.Ext(); ok {
		ext = id
	}
	if s.k.cfg.Opener == nil {
		return s.notice(NoticeInfo, ext, fmt.Sprintf("link: %s (this client is not on the host's screen, so nothing was opened there; open it yourself)", linkTarget(link, target)))
	}
	if err := s.k.cfg.Opener.Open(ctx, target); err != nil {
		return &RequestError{Msg: err.Error()}
	}
	return s.notice(NoticeInfo, ext, "opened "+linkTarget(link, target))
}

// linkTarget names what a link opens: the URL, or the path relative to the
// workspace.
func linkTarget(link component.Link, target string) string {
	if link.IsURL() {
		return target
	}
	return strings.TrimPrefix(link.Path, "./")
}
