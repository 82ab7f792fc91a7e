package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/ui"
)

// Names of the CUSTOM events of the consent gate.
const (
	ConsentRequestedEvent = "orrery.consent.requested"
	ConsentResolvedEvent  = "orrery.consent.resolved"
)

// DefaultConsentTimeout is how long a consent request waits for an answer
// when Config.ConsentTimeout is 0. No answer is a deny.
const DefaultConsentTimeout = 5 * time.Minute

// The options of a consent request.
const (
	ConsentAllowOnce    = "allow_once"
	ConsentAllowSession = "allow_session"
	ConsentDeny         = "deny"
)

// The outcomes of a consent request, in orrery.consent.resolved.
const (
	ConsentAllowed   = "allowed"
	ConsentDenied    = "denied"
	ConsentCancelled = "cancelled"
	ConsentTimedOut  = "timeout"
)

// consentID is the host's placement id for the question it asks.
const consentID = "consent"

// ConsentOption is one answer a consent request offers.
type ConsentOption struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// ConsentRequested is the value of orrery.consent.requested.
type ConsentRequested struct {
	Request    string          `json:"request"`
	ToolCallID string          `json:"toolCallId"`
	Tool       string          `json:"tool"`
	Subject    string          `json:"subject,omitempty"`
	Args       json.RawMessage `json:"args"`
	// Rule is why the call is asked about; for a shell line it names the
	// part asked about, such as `the part "id" matches no allow rule`.
	Rule string `json:"rule"`
	// Part is, for a shell line, the part of it that is asked about: a
	// command ("touch pwned"), a redirection, or the whole line when it
	// cannot be read.
	Part    string          `json:"part,omitempty"`
	Options []ConsentOption `json:"options"`
	// Node is the placed question, placed:host:consent.
	Node string `json:"node"`
	// Source is the asker's own request when an external agent asked
	// with its own options (an ACP RequestPermissionRequest).
	Source json.RawMessage `json:"source,omitempty"`
}

// ConsentResolved is the value of orrery.consent.resolved.
type ConsentResolved struct {
	Request string `json:"request"`
	// Outcome is allowed, denied, cancelled or timeout.
	Outcome string `json:"outcome"`
	// Option is the answer chosen, when a person answered.
	Option string `json:"option,omitempty"`
	// Client names the client that answered, when it named itself.
	Client string `json:"client,omitempty"`
}

// Caller is who sends a request: the client's name and what it draws, as it
// declared them in hello or in the query of GET /events or POST /control.
type Caller struct {
	Client string
	Draws  []string
}

// DrawsConsent reports whether the caller declared that it draws consent.
func (c Caller) DrawsConsent() bool { return slices.Contains(c.Draws, protocol.DrawConsent) }

// pendingConsent is a consent request waiting for its answer.
type pendingConsent struct {
	id      string
	tool    string
	options []ConsentOption
	answer  chan agent.Verdict // buffered: resolve sends exactly once
	// allows, for a question with the asker's own options (Ask), says
	// which options let the call run; nil for the gate's own options.
	allows map[string]bool
	// chosen is the option answered, set before answer is sent.
	chosen string
}

// gate is the kernel's consent gate for one run.
type gate struct {
	s *Session
	r *run
}

var (
	_ agent.Gate            = (*gate)(nil)
	_ agent.PermissionAsker = (*gate)(nil)
)

// Check decides a call by the rules; an ask waits for a person's answer,
// the timeout, or the run's end.
func (g *gate) Check(ctx context.Context, call agent.GateCall) (agent.Verdict, error) {
	var v agent.Verdict
	var p *pendingConsent
	var err error
	if derr := g.s.do(ctx, func() { v, p, err = g.s.decideConsent(g.r, call) }); derr != nil {
		return agent.Verdict{}, derr
	}
	if err != nil || p == nil {
		return v, err
	}
	return g.wait(ctx, p)
}

// wait waits for p's answer, its timeout (a deny) or ctx's end (the run
// ended, or the asker withdrew the question), whichever is first.
func (g *gate) wait(ctx context.Context, p *pendingConsent) (agent.Verdict, error) {
	timeout := g.s.k.cfg.ConsentTimeout
	if timeout <= 0 {
		timeout = DefaultConsentTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-p.answer:
		return v, nil
	case <-timer.C:
		_ = g.s.do(context.WithoutCancel(ctx), func() { g.s.resolveConsent(p, ConsentTimedOut, "", Caller{}) })
		return <-p.answer, nil
	case <-ctx.Done():
		// The run ended: endRun resolved the request as cancelled, or the
		// session is closing, or the asker withdrew its question.
		_ = g.s.do(context.WithoutCancel(ctx), func() { g.s.resolveConsent(p, ConsentCancelled, "", Caller{}) })
		return agent.Verdict{}, ctx.Err()
	}
}

// Ask decides a question with the asker's own options by the rules; an ask
// places it with those options and waits like Check. The answer names the
// option a person chose.
func (g *gate) AskPermission(ctx context.Context, q agent.Permission) (agent.PermissionAnswer, error) {
	if len(q.Options) == 0 {
		return agent.PermissionAnswer{}, errors.New("consent question has no options: offer at least one")
	}
	var a agent.PermissionAnswer
	var p *pendingConsent
	var err error
	if derr := g.s.do(ctx, func() { a, p, err = g.s.decideAsk(g.r, q) }); derr != nil {
		return agent.PermissionAnswer{}, derr
	}
	if err != nil || p == nil {
		return a, err
	}
	v, err := g.wait(ctx, p)
	if err != nil {
		return agent.PermissionAnswer{}, err
	}
	return agent.PermissionAnswer{Option: p.chosen, Allow: v.Allow, Rule: v.Rule}, nil
}

// decideAsk applies the rules to a question with its own options; for an
// ask it places the question. Runs on the actor.
func (s *Session) decideAsk(r *run, q agent.Permission) (agent.PermissionAnswer, *pendingConsent, error) {
	s.assertActor()
	if s.run != r {
		return agent.PermissionAnswer{}, nil, agent.ErrStopped
	}
	j := s.judge(r, consent.Call{Tool: q.Tool, Subject: q.Subject, PathSubject: q.PathSubject,
		ShellSubject: q.ShellSubject, Workspace: r.workspace, ReadOnly: q.ReadOnly}, false)
	switch j.decision {
	case consent.Allow:
		return agent.PermissionAnswer{Allow: true, Rule: j.rule}, nil, nil
	case consent.Deny:
		return agent.PermissionAnswer{Rule: j.rule}, nil, nil
	}
	p := &pendingConsent{id: newID("consent"), tool: q.Tool, answer: make(chan agent.Verdict, 1), allows: make(map[string]bool)}
	for _, o := range q.Options {
		p.options = append(p.options, ConsentOption{ID: o.ID, Label: o.Label})
		p.allows[o.ID] = o.Allow
	}
	title := q.Title
	if title == "" {
		title = describeCall(q.Tool, q.Subject)
	}
	args := q.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if err := s.placeConsent(p, consentQuestion{
		prompt: j.prompt(title), rule: j.rule,
		req: ConsentRequested{ToolCallID: q.ToolCallID, Tool: q.Tool, Subject: q.Subject, Args: args, Rule: j.rule, Part: j.part, Source: q.Raw},
	}); err != nil {
		return agent.PermissionAnswer{}, nil, err
	}
	return agent.PermissionAnswer{}, p, nil
}

// judgement is what the gate makes of a call before anyone is asked.
type judgement struct {
	decision consent.Decision
	// rule names what decided; asked is the rule that would ask, when the
	// decision is a deny because nobody can be asked. For a shell line
	// denied or asked about they name the part that decided (see
	// consent.Verdict.Reason).
	rule, asked string
	// part is the part of a shell line that decided, when one did.
	part string
	// nobody marks a deny because no client that draws consent is attached.
	nobody bool
}

// prompt is the question a person reads about the call described as title:
// for a shell line, it says which part is asked about.
func (j judgement) prompt(title string) string {
	if j.part == "" {
		return "Allow " + title + "?"
	}
	return "Allow " + title + "? Asked because " + j.rule + "."
}

// RunPermissions are consent rules for one run, on top of Config.Consent:
// the client that starts a run adds them (orrery run's --allow, --deny and
// --yes). The run's deny rules join the config's, and so do its allow
// rules, so a deny of either beats an allow of either; Yes allows every
// call the rules would ask about, as Config.AutoApprove does for every
// run. The zero value adds nothing.
type RunPermissions struct {
	Allow, Deny []string
	Yes         bool
}

// Validate checks every rule, naming the first bad one and the fix.
func (p RunPermissions) Validate() error {
	return consent.Rules{Allow: p.Allow, Deny: p.Deny}.Validate()
}

// rules returns the consent rules of a run with permissions p.
func (s *Session) rules(p *RunPermissions) consent.Rules {
	rules := s.k.cfg.Consent
	if p == nil || len(p.Allow)+len(p.Deny) == 0 {
		return rules
	}
	return consent.Rules{
		Allow: append(slices.Clip(rules.Allow), p.Allow...),
		Ask:   rules.Ask,
		Deny:  append(slices.Clip(rules.Deny), p.Deny...),
	}
}

// judge applies, in order, the [permissions] rules with the run's own
// (RunPermissions), the session's grants (for the built-in gate's own
// questions), --yes, and whether any client can be asked at all; an ask
// that gets past them all is for a person. Runs on the actor.
func (s *Session) judge(r *run, c consent.Call, useGrants bool) judgement {
	v := s.rules(r.perms).Decide(c)
	if v.Decision != consent.Ask {
		return judgement{decision: v.Decision, rule: v.Reason(), part: v.Part}
	}
	if who, ok := s.grants[c.Tool]; ok && useGrants {
		return judgement{decision: consent.Allow, rule: "allowed for this session by " + who}
	}
	if s.k.cfg.AutoApprove || r.perms != nil && r.perms.Yes {
		return judgement{decision: consent.Allow, rule: "--yes: every call that would be asked about is allowed"}
	}
	if !s.anyConsenter() {
		return judgement{decision: consent.Deny, rule: v.Reason() + "; no client that draws consent is attached, so the answer is deny", asked: v.Reason(), part: v.Part, nobody: true}
	}
	return judgement{decision: consent.Ask, rule: v.Reason(), part: v.Part}
}

// subject returns what rules match for a call: a file tool's path resolved
// in the workspace and shown relative to its root (so no spelling of a
// path dodges a rule), or a Subjecter's subject. The error is a path the
// workspace refuses.
func subject(t tool.Tool, ws tool.Workspace, args json.RawMessage) (string, error) {
	if wsj, ok := t.(tool.WorkspaceSubjecter); ok {
		return wsj.SubjectIn(ws, args)
	}
	sj, ok := t.(tool.Subjecter)
	if !ok {
		return "", nil
	}
	sub, err := sj.Subject(args)
	if err != nil {
		return "", nil // the tool refuses its own bad arguments
	}
	return sub, nil
}

// decideConsent applies the rules to a call. For an ask it places the
// question and returns the pending request. Runs on the actor.
func (s *Session) decideConsent(r *run, call agent.GateCall) (agent.Verdict, *pendingConsent, error) {
	s.assertActor()
	if s.run != r {
		return agent.Verdict{}, nil, agent.ErrStopped
	}
	spec := call.Tool.Spec()
	sub, err := subject(call.Tool, r.workspace, call.Args)
	if err != nil {
		return agent.Verdict{Rule: "the workspace refuses the path", Message: err.Error()}, nil, nil
	}
	v := s.judge(r, consent.Call{Tool: spec.Name, Subject: sub, PathSubject: spec.PathSubject,
		ShellSubject: spec.ShellSubject, Workspace: r.workspace, ReadOnly: spec.ReadOnly}, true)
	switch {
	case v.decision == consent.Allow:
		return agent.Verdict{Allow: true, Rule: v.rule}, nil, nil
	case v.nobody:
		return agent.Verdict{Rule: v.rule,
			Message: fmt.Sprintf("%s needs a person's consent (%s), and no client that can ask one is attached, so it was denied; do without it, or tell the person to allow it in [permissions] (or run with --allow or --yes)", describeCall(spec.Name, sub), v.asked)}, nil, nil
	case v.decision == consent.Deny && v.part != "":
		return agent.Verdict{Rule: v.rule, Message: fmt.Sprintf("%s was denied in [permissions]: %s; do something else, or ask the person to change the rule", describeCall(spec.Name, sub), v.rule)}, nil, nil
	case v.decision == consent.Deny:
		return agent.Verdict{Rule: v.rule, Message: fmt.Sprintf("%s was denied by the rule %s in [permissions]; do something else, or ask the person to change the rule", describeCall(spec.Name, sub), v.rule)}, nil, nil
	}
	p := &pendingConsent{
		id:   newID("consent"),
		tool: spec.Name,
		options: []ConsentOption{
			{ID: ConsentAllowOnce, Label: "Allow once"},
			{ID: ConsentAllowSession, Label: "Allow " + spec.Name + " for this session"},
			{ID: ConsentDeny, Label: "Deny"},
		},
		answer: make(chan agent.Verdict, 1),
	}
	if err := s.placeConsent(p, consentQuestion{
		prompt: v.prompt(describeCall(spec.Name, sub)), rule: v.rule,
		req: ConsentRequested{ToolCallID: call.ID, Tool: spec.Name, Subject: sub, Args: call.Args, Rule: v.rule, Part: v.part},
	}); err != nil {
		return agent.Verdict{}, nil, err
	}
	return agent.Verdict{}, p, nil
}

// consentQuestion is what placeConsent asks: the prompt, the rule that
// asks, and the request's fields other than its id, options and node.
type consentQuestion struct {
	prompt, rule string
	req          ConsentRequested
}

// placeConsent places p's question for clients that draw consent, tells
// them with orrery.consent.requested and records p as pending. Runs on the
// actor.
func (s *Session) placeConsent(p *pendingConsent, q consentQuestion) error {
	choices := make([]map[string]string, len(p.options))
	for i, o := range p.options {
		choices[i] = map[string]string{"label": o.Label, "value": o.ID}
	}
	because := "of " + q.rule
	if q.req.Part != "" {
		because = q.rule // a sentence naming the part
	}
	surface, err := json.Marshal(map[string]any{"kind": map[string]any{
		"t":       "question",
		"prompt":  q.prompt,
		"detail":  "Asked because " + because + ". Arguments: " + string(q.req.Args),
		"choices": choices,
	}})
	if err != nil {
		return fmt.Errorf("encode consent question: %w", err)
	}
	text, err := ui.Text(surface)
	if err != nil {
		return fmt.Errorf("consent question: %w", err)
	}
	if err := s.place(ui.OwnerHost, consentID, ui.Inline, "Consent", surface, nil, text, nil, false); err != nil {
		return err
	}
	q.req.Request = p.id
	q.req.Options = p.options
	q.req.Node = ui.NodeID(ui.OwnerHost, consentID)
	req, err := json.Marshal(q.req)
	if err != nil {
		return fmt.Errorf("encode consent request: %w", err)
	}
	if err := s.emit(s.runID(), &protocol.Custom{Name: ConsentRequestedEvent, Value: req}); err != nil {
		return err
	}
	if s.consents == nil {
		s.consents = make(map[string]*pendingConsent)
	}
	s.consents[p.id] = p
	return nil
}

func describeCall(name, subject string) string {
	if subject == "" {
		return name
	}
	return fmt.Sprintf("%s(%s)", name, subject)
}

// resolveConsent ends a pending request: it removes the question, tells
// every client, and hands the verdict to the waiting call. A request that
// is already resolved is left alone, so the first answer wins. Runs on the
// actor.
func (s *Session) resolveConsent(p *pendingConsent, outcome, option string, by Caller) {
	s.assertActor()
	if s.consents[p.id] != p {
		return
	}
	delete(s.consents, p.id)
	who := by.Client
	if who == "" {
		who = "a client"
	}
	var v agent.Verdict
	switch outcome {
	case ConsentAllowed:
		v = agent.Verdict{Allow: true, Rule: "allowed once by " + who}
		if p.allows != nil {
			v.Rule = "allowed by " + who
		} else if option == ConsentAllowSession {
			v.Rule = "allowed for this session by " + who
			if s.grants == nil {
				s.grants = make(map[string]string)
			}
			s.grants[p.tool] = who
		}
	case ConsentDenied:
		v = agent.Verdict{Rule: "denied by " + who, Message: "the person denied this call; do not retry it: do something else or ask them what they want"}
	case ConsentTimedOut:
		v = agent.Verdict{Rule: "no answer in time, so the answer is deny", Message: "nobody answered the consent request in time, so the call was denied; do without it or ask the person"}
	default:
		v = agent.Verdict{Rule: "cancelled", Message: "the run was cancelled while this call waited for consent"}
	}
	resolved, _ := json.Marshal(ConsentResolved{Request: p.id, Outcome: outcome, Option: option, Client: by.Client})
	evs := []protocol.Event{}
	if prev, _ := s.state.node(ui.NodeID(ui.OwnerHost, consentID)); prev != nil {
		unplaced, _ := json.Marshal(Unplaced{ID: consentID, Owner: string(ui.OwnerHost)})
		evs = append(evs,
			&protocol.StateDelta{Delta: []protocol.PatchOp{{Op: "remove", Path: ui.NodePath(ui.OwnerHost, consentID)}}},
			&protocol.Custom{Name: UnplacedEvent, Value: unplaced})
	}
	evs = append(evs, &protocol.Custom{Name: ConsentResolvedEvent, Value: resolved})
	if err := s.emit(s.runID(), evs...); err != nil {
		s.k.log.Error("resolve consent", "session", s.id, "request", p.id, "err", err)
	}
	p.chosen = option
	p.answer <- v
}

// resolveAllConsent resolves every pending request with outcome. Runs on
// the actor.
func (s *Session) resolveAllConsent(outcome string) {
	for _, p := range s.consents {
		s.resolveConsent(p, outcome, "", Caller{})
	}
}

// AnswerConsent answers a pending consent request with one of its options.
// Only a caller that draws consent may answer; the first answer wins and a
// later one is refused.
func (s *Session) AnswerConsent(ctx context.Context, by Caller, request, option string) error {
	if !by.DrawsConsent() {
		return &RequestError{Msg: "this client does not draw consent, so it cannot answer a consent request: declare draws including \"consent\" (in hello, or ?draws=thread,tools,consent)"}
	}
	var err error
	if derr := s.do(ctx, func() {
		p, ok := s.consents[request]
		if !ok {
			err = &RequestError{Msg: fmt.Sprintf("no consent request %q is pending in session %s: it was answered, timed out or cancelled, or never asked", request, s.id)}
			return
		}
		var ids []string
		for _, o := range p.options {
			ids = append(ids, o.ID)
		}
		if !slices.Contains(ids, option) {
			err = &RequestError{Msg: fmt.Sprintf("option %q was not offered: answer with one of %s", option, strings.Join(ids, ", "))}
			return
		}
		outcome := ConsentAllowed
		if option == ConsentDeny && p.allows == nil || p.allows != nil && !p.allows[option] {
			outcome = ConsentDenied
		}
		s.resolveConsent(p, outcome, option, by)
	}); derr != nil {
		return derr
	}
	return err
}
