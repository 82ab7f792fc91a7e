package ui_test

import (
	"errors"
	"testing"

	"github.com/getorrery/orrery/ui"
)

func TestParsePlacement(t *testing.T) {
	for _, p := range ui.Placements() {
		if got, err := ui.ParsePlacement(string(p)); got != p || err != nil {
			t.Errorf("ParsePlacement(%q) = %q, %v, want %q, nil", p, got, err, p)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"pane.center", `placement "pane.center" is unknown; use band, pane.left, pane.right, footer, inline or hidden`},
		{"", `placement "" is unknown; use band, pane.left, pane.right, footer, inline or hidden`},
		{"consent", `placement "consent": consent is the host's own, not a placement; use band, pane.left, pane.right, footer, inline or hidden`},
	} {
		_, err := ui.ParsePlacement(tc.in)
		if err == nil || err.Error() != tc.want || !errors.Is(err, ui.ErrUnknownPlacement) {
			t.Errorf("ParsePlacement(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestCheckDefaultPlacement(t *testing.T) {
	for _, p := range ui.DefaultPlacements() {
		if err := ui.CheckDefaultPlacement(string(p)); err != nil {
			t.Errorf("CheckDefaultPlacement(%q) = %v, want nil", p, err)
		}
	}
	for _, tc := range []struct {
		in, want string
		is       error
	}{
		{"inline", `manifest placement "inline": inline cannot be a default placement, since a default is drawn before anything runs; declare band, pane.left, pane.right or footer, and show inline surfaces with ui.show when they happen`, ui.ErrDefaultPlacement},
		{"hidden", `manifest placement "hidden": hidden cannot be a default placement, since a default is drawn at once; declare band, pane.left, pane.right or footer, or leave the surface out of [[provides.placements]] and show it with ui.show`, ui.ErrDefaultPlacement},
		{"sidebar", `placement "sidebar" is unknown; use band, pane.left, pane.right, footer, inline or hidden`, ui.ErrUnknownPlacement},
	} {
		err := ui.CheckDefaultPlacement(tc.in)
		if err == nil || err.Error() != tc.want || !errors.Is(err, tc.is) {
			t.Errorf("CheckDefaultPlacement(%q) = %v,\nwant %q", tc.in, err, tc.want)
		}
	}
}

func TestCheckID(t *testing.T) {
	for _, id := range []string{"build-times", "ci", "todo", "a", "A.b_c-9", "inputs", "trusted"} {
		if err := ui.CheckID(ui.OwnerAgent, id); err != nil {
			t.Errorf("CheckID(agent, %q) = %v, want nil", id, err)
		}
	}
	for _, tc := range []struct {
		owner ui.Owner
		id    string
		want  string
		is    error
	}{
		{"ext:ci", "consent", `ext:ci cannot place under "consent": input, consent and trust are the host's own ids, and nobody else may place under them; choose another id`, ui.ErrHostID},
		{ui.OwnerAgent, "input", `agent cannot place under "input": input, consent and trust are the host's own ids, and nobody else may place under them; choose another id`, ui.ErrHostID},
		{ui.OwnerConfig, "Trust", `config cannot place under "Trust": input, consent and trust are the host's own ids, and nobody else may place under them; choose another id`, ui.ErrHostID},
		{ui.OwnerAgent, "", `placement id "" is not valid; an id is 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit`, ui.ErrBadID},
		{ui.OwnerAgent, "a:b", `placement id "a:b" is not valid; an id is 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit`, ui.ErrBadID},
		{ui.OwnerAgent, "a/b", `placement id "a/b" is not valid; an id is 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit`, ui.ErrBadID},
		{ui.OwnerAgent, "-x", `placement id "-x" is not valid; an id is 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit`, ui.ErrBadID},
	} {
		err := ui.CheckID(tc.owner, tc.id)
		if err == nil || err.Error() != tc.want || !errors.Is(err, tc.is) {
			t.Errorf("CheckID(%s, %q) = %v,\nwant %q", tc.owner, tc.id, err, tc.want)
		}
	}
	if got := ui.HostIDs(); len(got) != 3 || got[0] != "input" || got[1] != "consent" || got[2] != "trust" {
		t.Errorf("HostIDs() = %v, want [input consent trust]", got)
	}
}

func TestParseOwner(t *testing.T) {
	for _, s := range []string{"agent", "config", "ext:build-times", "ext:com.example.ci"} {
		if got, err := ui.ParseOwner(s); string(got) != s || err != nil {
			t.Errorf("ParseOwner(%q) = %q, %v, want %q, nil", s, got, err, s)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"ext:", `owner "ext:": the extension id after "ext:" must be 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit`},
		{"ext:a:b", `owner "ext:a:b": the extension id after "ext:" must be 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit`},
		{"host", `owner "host" is not valid; an owner is ext:<id>, agent or config`},
		{"Agent", `owner "Agent" is not valid; an owner is ext:<id>, agent or config`},
		{"", `owner "" is not valid; an owner is ext:<id>, agent or config`},
	} {
		_, err := ui.ParseOwner(tc.in)
		if err == nil || err.Error() != tc.want || !errors.Is(err, ui.ErrBadOwner) {
			t.Errorf("ParseOwner(%q) = %v,\nwant %q", tc.in, err, tc.want)
		}
	}
	o, err := ui.ExtOwner("ci")
	if o != "ext:ci" || err != nil {
		t.Errorf(`ExtOwner("ci") = %q, %v, want "ext:ci", nil`, o, err)
	}
	if id, ok := o.Ext(); id != "ci" || !ok {
		t.Errorf(`Owner("ext:ci").Ext() = %q, %v, want "ci", true`, id, ok)
	}
	if _, ok := ui.OwnerAgent.Ext(); ok {
		t.Errorf(`OwnerAgent.Ext() ok = true, want false`)
	}
	if _, err := ui.ExtOwner("bad id"); !errors.Is(err, ui.ErrBadOwner) {
		t.Errorf(`ExtOwner("bad id") = %v, want ErrBadOwner`, err)
	}
}

func TestCheckOwner(t *testing.T) {
	if err := ui.CheckOwner("ext:a", "ext:a", "ci"); err != nil {
		t.Errorf("CheckOwner(ext:a, ext:a) = %v, want nil", err)
	}
	for _, tc := range []struct {
		actor, owner ui.Owner
		want         string
	}{
		{"ext:b", "ext:a", `ext:b cannot change "ci": ext:a placed it, and an owner changes only what it placed; choose an id of your own`},
		{ui.OwnerAgent, "ext:a", `agent cannot change "ci": ext:a placed it, and an owner changes only what it placed; choose an id of your own`},
		{ui.OwnerConfig, ui.OwnerAgent, `config cannot change "ci": agent placed it, and an owner changes only what it placed; choose an id of your own`},
	} {
		err := ui.CheckOwner(tc.actor, tc.owner, "ci")
		if err == nil || err.Error() != tc.want || !errors.Is(err, ui.ErrForeignOwner) {
			t.Errorf("CheckOwner(%s, %s) = %v,\nwant %q", tc.actor, tc.owner, err, tc.want)
		}
	}
}

func TestCheckLayout(t *testing.T) {
	for _, tc := range []struct{ actor, owner ui.Owner }{
		{"ext:a", "ext:a"}, {ui.OwnerConfig, "ext:a"}, {ui.OwnerConfig, ui.OwnerAgent}, {ui.OwnerAgent, ui.OwnerAgent},
	} {
		if err := ui.CheckLayout(tc.actor, tc.owner, "ci"); err != nil {
			t.Errorf("CheckLayout(%s, %s) = %v, want nil", tc.actor, tc.owner, err)
		}
	}
	err := ui.CheckLayout("ext:b", "ext:a", "ci")
	want := `ext:b cannot move or hide "ci": ext:a placed it; only its owner or the person (with /ui or config) changes where it goes`
	if err == nil || err.Error() != want || !errors.Is(err, ui.ErrForeignOwner) {
		t.Errorf("CheckLayout(ext:b, ext:a) = %v,\nwant %q", err, want)
	}
}

func TestNodeID(t *testing.T) {
	for _, tc := range []struct {
		owner ui.Owner
		id    string
		node  string
	}{
		{"ext:ci", "build-times", "placed:ext:ci:build-times"},
		{ui.OwnerAgent, "todo", "placed:agent:todo"},
		{ui.OwnerConfig, "notes", "placed:config:notes"},
	} {
		if got := ui.NodeID(tc.owner, tc.id); got != tc.node {
			t.Errorf("NodeID(%s, %s) = %q, want %q", tc.owner, tc.id, got, tc.node)
		}
		if got := ui.NodePath(tc.owner, tc.id); got != "/ui/nodes/"+tc.node {
			t.Errorf("NodePath(%s, %s) = %q, want %q", tc.owner, tc.id, got, "/ui/nodes/"+tc.node)
		}
		o, id, err := ui.ParseNodeID(tc.node)
		if o != tc.owner || id != tc.id || err != nil {
			t.Errorf("ParseNodeID(%q) = %q, %q, %v, want %q, %q, nil", tc.node, o, id, err, tc.owner, tc.id)
		}
	}
	for _, bad := range []string{"", "placed:", "placed:agent", "placed:agent:", "placed:ext:ci", "placed:host:x", "node:agent:x", "placed:agent:a:b", "placed:ext::x"} {
		_, _, err := ui.ParseNodeID(bad)
		want := `node "` + bad + `" is not a placed node; a node id is placed:<owner>:<id>, such as placed:ext:ci:build-times or placed:agent:todo`
		if err == nil || err.Error() != want || !errors.Is(err, ui.ErrBadNodeID) {
			t.Errorf("ParseNodeID(%q) = %v,\nwant %q", bad, err, want)
		}
	}
}
