package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/getorrery/orrery/dialect/a2ui"
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
	in := Intent{Session: s.id, Owner: owner, ID: id, Action: action, Value: value}
	if inst == nil {
		// A surface shown as an a2ui form takes the actions its buttons
		// declare; no other surface takes any.
		declared, err := s.formActions(nodeID)
		if err != nil {
			return routeDone, Intent{}, err
		}
		if !slices.Contains(declared, action) {
			return routeDone, Intent{}, &RequestError{Msg: fmt.Sprintf("%s declares no action %q: send one its buttons declare (%s)", nodeID, action, strings.Join(declared, ", "))}
		}
	} else {
		if action == component.ActionOpen {
			var href string
			if json.Unmarshal(value, &href) == nil && inst.data.Bound().Shows(href) {
				return routeDone, in, s.openLink(ctx, inst, href)
			}
		}
		if err := inst.structure.CheckAction(action); err != nil {
			return routeDone, in, refuse(err)
		}
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

// formActions returns the actions the surface placed as nodeID declares:
// the events of its buttons when it was shown as an a2ui form. A plain
// surface, or nothing placed, is refused naming the fix. Runs on the actor.
func (s *Session) formActions(nodeID string) ([]string, error) {
	prev, err := s.state.node(nodeID)
	if err != nil {
		return nil, err
	}
	if prev == nil {
		return nil, &RequestError{Msg: fmt.Sprintf("nothing is placed as %s: send ui.intent for a node listed in the state's /ui/nodes", nodeID)}
	}
	var n node
	if err := json.Unmarshal(prev, &n); err != nil {
		return nil, fmt.Errorf("read node %s: %w", nodeID, err)
	}
	var declared []string
	if len(n.A2UI) > 0 {
		var msgs []a2ui.Message
		if err := json.Unmarshal(n.A2UI, &msgs); err != nil {
			return nil, fmt.Errorf("read a2ui form of %s: %w", nodeID, err)
		}
		declared = a2ui.DeclaredActions(msgs)
	}
	if len(declared) == 0 {
		return nil, &RequestError{Msg: fmt.Sprintf("%s shows a surface, not a component: only a component's declared actions (or those of a surface shown as an a2ui form with buttons) are sent with ui.intent", nodeID)}
	}
	return declared, nil
}

// Actions returns the actions the node placed as nodeID
// (placed:<owner>:<id>) declares, sorted, each once: those of a
// component's structure (a link declares open), or the events of the
// buttons of a surface shown as an a2ui form. A node that declares none,
// or nothing placed there, is refused naming the fix.
func (s *Session) Actions(ctx context.Context, nodeID string) ([]string, error) {
	var out []string
	var err error
	if derr := s.do(ctx, func() { out, err = s.actions(nodeID) }); derr != nil {
		return nil, derr
	}
	return out, err
}

func (s *Session) actions(nodeID string) ([]string, error) {
	s.assertActor()
	if _, _, err := ui.ParseNodeID(nodeID); err != nil {
		return nil, refuse(err)
	}
	inst, err := s.instance(nodeID)
	if err != nil {
		return nil, err
	}
	if inst == nil {
		return s.formActions(nodeID)
	}
	var names []string
	for _, a := range inst.structure.Actions() {
		if !slices.Contains(names, a.Action) {
			names = append(names, a.Action)
		}
	}
	slices.Sort(names)
	return names, nil
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
