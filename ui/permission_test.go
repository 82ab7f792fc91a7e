package ui_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/getorrery/orrery/ui"
)

func TestCheckPlacement(t *testing.T) {
	p := ui.Permissions{
		"ext:ci":    {Deny: []string{"ui(pane.right)"}, Ask: []string{"ui(band)"}, Allow: []string{"ui(*)"}},
		"agent":     {Allow: []string{"ui(footer)"}},
		"*":         {Deny: []string{"ui(footer)"}},
		"ext:quiet": {Deny: []string{"ui(*)"}},
	}
	ci, _ := ui.ExtOwner("ci")
	quiet, _ := ui.ExtOwner("quiet")
	other, _ := ui.ExtOwner("other")
	tests := []struct {
		owner     ui.Owner
		placement ui.Placement
		want      string // "" means allowed
	}{
		{ci, ui.PaneRight, `deny = ["ui(pane.right)"] in [permissions."ext:ci"]`},
		{ci, ui.Band, `ask = ["ui(band)"]`},
		{ci, ui.Footer, ""}, // its own allow ui(*) wins over "*"
		{ui.OwnerAgent, ui.Footer, ""},
		{ui.OwnerAgent, ui.Band, ""},
		{other, ui.Footer, `[permissions."*"]`},
		{quiet, ui.Band, `deny = ["ui(*)"]`},
	}
	for _, tt := range tests {
		err := p.CheckPlacement(tt.owner, tt.placement)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckPlacement(%s, %s) = %v, want allowed", tt.owner, tt.placement, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ui.ErrDenied)):
			t.Errorf("CheckPlacement(%s, %s) = %v, want ErrDenied naming %s", tt.owner, tt.placement, err, tt.want)
		}
	}
	if err := (ui.Permissions{"x": {Deny: []string{"ui(sidebar)"}}}).Validate(); err == nil || !strings.Contains(err.Error(), "sidebar") {
		t.Errorf("Validate(ui(sidebar)) = %v, want an error naming it", err)
	}
	if err := (ui.Permissions{"x": {Deny: []string{"ui(band"}}}).Validate(); err == nil {
		t.Errorf("Validate(ui(band) = nil, want an error")
	}
	if err := (ui.Permissions{"x": {Allow: []string{"shell(git *)", "ui(*)"}}}).Validate(); err != nil {
		t.Errorf("Validate(other rules) = %v, want them left to their own checks", err)
	}
}
