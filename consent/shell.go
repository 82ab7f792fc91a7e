package consent

import (
	"fmt"
	"slices"
	"strings"
)

// compiled is a rule with its pattern.
type compiled struct {
	rule string
	p    *pattern
}

// toolRules are the rules of each list whose tool pattern matches one tool.
type toolRules struct {
	deny, allow, ask []compiled
}

func (r Rules) forTool(tool string) toolRules {
	pick := func(rules []string) []compiled {
		var out []compiled
		for _, rule := range rules {
			p, err := parse(rule)
			if err == nil && p != nil && glob(p.tool, tool, false) {
				out = append(out, compiled{rule, p})
			}
		}
		return out
	}
	return toolRules{deny: pick(r.Deny), allow: pick(r.Allow), ask: pick(r.Ask)}
}

// written is rules of list as they are written in [permissions].
func written(list string, rules ...string) string {
	q := make([]string, len(rules))
	for i, rule := range rules {
		q[i] = fmt.Sprintf("%q", rule)
	}
	return fmt.Sprintf("%s = [%s]", list, strings.Join(q, ", "))
}

// decideShell decides a shell line part by part: the first part denied
// denies it (a command found in a line that does not parse before the line
// itself), else the first part asked about asks, else it is allowed.
func (r Rules) decideShell(c Call) Verdict {
	rs := r.forTool(c.Tool)
	for _, d := range rs.deny {
		if d.p.anySubject() {
			return Verdict{Decision: Deny, Rule: written("deny", d.rule)} // every call of the tool
		}
	}
	var asked, denied *Verdict
	var allowedBy, unmatched []string // unmatched: the parts no rule allows, each once
	readOnly := false
	for _, p := range readLine(c.Subject, c.Workspace) {
		v, rule := rs.judge(p, c.ReadOnly)
		if v.Decision == Ask && v.Rule == DefaultAsk && !p.denyOnly && !slices.Contains(unmatched, p.named()) {
			unmatched = append(unmatched, p.named())
		}
		switch {
		case v.Decision == Deny && !p.whole:
			return v
		case v.Decision == Deny:
			if denied == nil {
				denied = &v
			}
		case p.denyOnly:
		case v.Decision == Ask:
			if asked == nil {
				asked = &v
			}
		case rule != "":
			if !slices.Contains(allowedBy, rule) {
				allowedBy = append(allowedBy, rule)
			}
		default:
			readOnly = true
		}
	}
	switch {
	case denied != nil:
		return *denied
	case asked != nil:
		if asked.Rule == DefaultAsk && len(unmatched) > 1 {
			// Name every part asked about, not the first alone: the one
			// that matters may come last ("make; rm -rf ./x").
			asked.Why = unmatchedWhy(unmatched)
		}
		return *asked
	case len(allowedBy) == 0 && !readOnly:
		return Verdict{Decision: Allow, Rule: DefaultNoCommand}
	case len(allowedBy) == 0:
		return Verdict{Decision: Allow, Rule: DefaultReadOnly}
	}
	v := Verdict{Decision: Allow, Rule: written("allow", allowedBy...)}
	if readOnly {
		v.Rule += "; " + DefaultReadOnly
	}
	return v
}

// unmatchedWhy says that several parts, each as named (part.named), match
// no allow rule, naming at most 8.
func unmatchedWhy(parts []string) string {
	const most = 8
	if len(parts) > most {
		return fmt.Sprintf("the parts %s and %d more match no allow rule", strings.Join(parts[:most], ", "), len(parts)-most)
	}
	return fmt.Sprintf("the parts %s and %s match no allow rule", strings.Join(parts[:len(parts)-1], ", "), parts[len(parts)-1])
}

// named is the part as a reason names it: quoted, with its note.
func (p part) named() string {
	if p.note != "" {
		return fmt.Sprintf("%q (%s)", p.text, p.note)
	}
	return fmt.Sprintf("%q", p.text)
}

// judge decides one part: deny rules first (on the part and its other
// forms; decideShell has applied those without a subject), then allow, then ask, then the default. A part that
// cannot be read is allowed only by a rule without a subject. For an allow
// by a rule it also returns the rule as written in the list.
func (rs toolRules) judge(p part, readOnly bool) (Verdict, string) {
	forms := append(slices.Clone(p.also), p.form)
	for _, d := range rs.deny {
		for _, f := range forms {
			if !globMeets(d.p.subject, f.shape) {
				continue
			}
			why := fmt.Sprintf("%s on the part %q", written("deny", d.rule), f.text)
			if !glob(d.p.subject, f.text, false) {
				why = fmt.Sprintf("%s could match the part %q, depending on what its expansions hold", written("deny", d.rule), f.text)
			}
			return Verdict{Decision: Deny, Rule: written("deny", d.rule), Part: f.text, Why: why}, ""
		}
	}
	if p.unread != "" {
		for _, a := range rs.allow {
			if a.p.anySubject() {
				return Verdict{Decision: Allow, Rule: written("allow", a.rule)}, a.rule
			}
		}
		return Verdict{Decision: Ask, Rule: p.rule, Part: p.text, Why: p.unread}, ""
	}
	for _, a := range rs.allow {
		if a.p.anySubject() || glob(a.p.subject, p.text, false) {
			return Verdict{Decision: Allow, Rule: written("allow", a.rule)}, a.rule
		}
	}
	for _, a := range rs.ask {
		if a.p.anySubject() || glob(a.p.subject, p.text, false) {
			return Verdict{Decision: Ask, Rule: written("ask", a.rule), Part: p.text,
				Why: fmt.Sprintf("the rule %s matches the part %q", written("ask", a.rule), p.text)}, ""
		}
	}
	if readOnly {
		return Verdict{Decision: Allow, Rule: DefaultReadOnly}, ""
	}
	return Verdict{Decision: Ask, Rule: DefaultAsk, Part: p.text, Why: "the part " + p.named() + " matches no allow rule"}, ""
}

// allowsLine reports whether p, as an allow rule, allows every part of the
// shell line of c.
func (p *pattern) allowsLine(c Call) bool {
	if !glob(p.tool, c.Tool, false) {
		return false
	}
	if p.anySubject() {
		return true
	}
	for _, pt := range readLine(c.Subject, c.Workspace) {
		if pt.denyOnly {
			continue
		}
		if pt.unread != "" || !glob(p.subject, pt.text, false) {
			return false
		}
	}
	return true
}
