package config

import (
	"fmt"
	"sort"

	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/ui"
)

// Permissions is the [permissions] table. Its own allow, ask and deny lists
// gate tool calls ("shell(git status*)", "write_file(src/**)",
// "mcp.github.*"); a ui(…) rule in them applies to every owner's
// placements. A sub-table [permissions."<owner>"] holds placement rules for
// one owner (ext:<id>, agent, config, or * for all).
type Permissions struct {
	consent.Rules
	// Owners are the [permissions."<owner>"] tables.
	Owners ui.Permissions
}

// UnmarshalTOML reads the table: the lists allow, ask and deny, and one
// sub-table per owner.
func (p *Permissions) UnmarshalTOML(v any) error {
	table, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("permissions must be a table, such as [permissions] allow = [\"read_file\"]")
	}
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch val := table[k]; k {
		case "allow", "ask", "deny":
			list, err := stringList(val)
			if err != nil {
				return fmt.Errorf("permissions.%s: %w", k, err)
			}
			switch k {
			case "allow":
				p.Allow = list
			case "ask":
				p.Ask = list
			default:
				p.Deny = list
			}
		default:
			sub, ok := val.(map[string]any)
			if !ok {
				return fmt.Errorf("permissions.%s: a key of [permissions] is allow, ask or deny, or an owner's table such as [permissions.\"ext:ci\"]", k)
			}
			var r ui.Rules
			for name, lv := range sub {
				list, err := stringList(lv)
				if err != nil {
					return fmt.Errorf("permissions.%q.%s: %w", k, name, err)
				}
				switch name {
				case "allow":
					r.Allow = list
				case "ask":
					r.Ask = list
				case "deny":
					r.Deny = list
				default:
					return fmt.Errorf("permissions.%q.%s: an owner's table holds allow, ask and deny only", k, name)
				}
			}
			if p.Owners == nil {
				p.Owners = ui.Permissions{}
			}
			p.Owners[k] = r
		}
	}
	return nil
}

func stringList(v any) ([]string, error) {
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("must be a list of strings, such as [\"read_file\", \"shell(git status*)\"]")
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, fmt.Errorf("must be a list of strings; %v is not a string", it)
		}
		out = append(out, s)
	}
	return out, nil
}

// Validate checks every rule, tool and placement rules alike.
func (p Permissions) Validate() error {
	if err := p.Rules.Validate(); err != nil {
		return err
	}
	return p.UI().Validate()
}

// UI returns the placement rules: the owners' tables, with the ui(…) rules
// of the top-level lists added to "*".
func (p Permissions) UI() ui.Permissions {
	out := make(ui.Permissions, len(p.Owners)+1)
	for k, v := range p.Owners {
		out[k] = v
	}
	var top ui.Rules
	for _, pair := range []struct {
		from []string
		to   *[]string
	}{{p.Allow, &top.Allow}, {p.Ask, &top.Ask}, {p.Deny, &top.Deny}} {
		for _, rule := range pair.from {
			if _, isUI, _ := ui.ParseUIRule(rule); isUI {
				*pair.to = append(*pair.to, rule)
			}
		}
	}
	if len(top.Allow)+len(top.Ask)+len(top.Deny) > 0 {
		all := out["*"]
		all.Allow = append(append([]string(nil), all.Allow...), top.Allow...)
		all.Ask = append(append([]string(nil), all.Ask...), top.Ask...)
		all.Deny = append(append([]string(nil), all.Deny...), top.Deny...)
		out["*"] = all
	}
	return out
}
