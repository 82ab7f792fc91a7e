package ui

import (
	"errors"
	"fmt"
	"strings"
)

// ErrDenied marks a placement a permission rule refuses.
var ErrDenied = errors.New("ui: placement denied by a permission rule")

// Rules are one owner's permission rules, as in [permissions."<owner>"]:
// each is a rule such as "ui(pane.right)", or "ui(*)" for every placement.
type Rules struct {
	Allow []string `toml:"allow" json:"allow,omitempty"`
	Ask   []string `toml:"ask" json:"ask,omitempty"`
	Deny  []string `toml:"deny" json:"deny,omitempty"`
}

// Permissions maps an owner (ext:<id>, agent, config, or * for every
// owner) to its rules. The zero value allows everything.
type Permissions map[string]Rules

// ParseUIRule returns the placement a ui(…) rule names ("*" for all), and
// whether rule is a ui rule at all.
func ParseUIRule(rule string) (string, bool, error) {
	inner, ok := strings.CutPrefix(rule, "ui(")
	if !ok {
		return "", false, nil
	}
	inner, ok = strings.CutSuffix(inner, ")")
	if !ok {
		return "", true, fmt.Errorf("rule %q is not closed: write ui(<placement>), such as ui(pane.right) or ui(*)", rule)
	}
	if inner == "*" {
		return inner, true, nil
	}
	if _, err := ParsePlacement(inner); err != nil {
		return "", true, fmt.Errorf("rule %q: %w", rule, err)
	}
	return inner, true, nil
}

// Validate checks every ui(…) rule.
func (p Permissions) Validate() error {
	for owner, r := range p {
		for _, list := range [][]string{r.Allow, r.Ask, r.Deny} {
			for _, rule := range list {
				if _, _, err := ParseUIRule(rule); err != nil {
					return fmt.Errorf("permissions.%q: %w", owner, err)
				}
			}
		}
	}
	return nil
}

// CheckPlacement decides whether owner may place in placement. Deny wins
// over ask, ask over allow, an owner's own table over "*"; with no rule the
// placement is allowed. An ask rule refuses too: nobody is asked about a
// placement, so the rule must say allow or deny.
func (p Permissions) CheckPlacement(owner Owner, placement Placement) error {
	for _, key := range []string{string(owner), "*"} {
		r, ok := p[key]
		if !ok {
			continue
		}
		if rule, ok := match(r.Deny, placement); ok {
			return &refusal{fmt.Sprintf("%s may not place in %s: the rule deny = [%q] in [permissions.%q] forbids it; place it elsewhere, or remove the rule", owner, placement, rule, key), ErrDenied}
		}
		if rule, ok := match(r.Ask, placement); ok {
			return &refusal{fmt.Sprintf("%s may not place in %s: the rule ask = [%q] in [permissions.%q] cannot be asked about a placement; change it to allow or deny", owner, placement, rule, key), ErrDenied}
		}
		if _, ok := match(r.Allow, placement); ok {
			return nil
		}
	}
	return nil
}

func match(rules []string, placement Placement) (string, bool) {
	for _, rule := range rules {
		if target, ok, err := ParseUIRule(rule); ok && err == nil && (target == "*" || target == string(placement)) {
			return rule, true
		}
	}
	return "", false
}
