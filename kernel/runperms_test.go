package kernel_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/kernel"
)

// TestRunPermissions: a run's own rules (SendInput.Permissions) join the
// config's for that run only: its deny beats the config's allow, its allow
// and yes settle what would be asked, and the next run without them is
// judged by the config alone.
func TestRunPermissions(t *testing.T) {
	allowTouch := func(c *kernel.Config) { c.Consent = consent.Rules{Allow: []string{"touch"}} }
	denyTouch := func(c *kernel.Config) { c.Consent = consent.Rules{Deny: []string{"touch"}} }
	none := func(*kernel.Config) {}
	tests := []struct {
		name       string
		cfg        func(*kernel.Config)
		perms      kernel.RunPermissions
		wantStatus string
		wantRule   string
		// wantNext is the rule of the next run, sent without permissions.
		wantNext string
	}{
		{"the run's deny beats the config's allow", allowTouch, kernel.RunPermissions{Deny: []string{"touch(src/**)"}}, "denied", `deny = ["touch(src/**)"]`, `allow = ["touch"]`},
		{"the run's allow settles an ask", none, kernel.RunPermissions{Allow: []string{"touch(src/*.go)"}}, "ok", `allow = ["touch(src/*.go)"]`, "no client that draws consent"},
		{"the run's allow does not beat the config's deny", denyTouch, kernel.RunPermissions{Allow: []string{"touch"}}, "denied", `deny = ["touch"]`, `deny = ["touch"]`},
		{"yes", none, kernel.RunPermissions{Yes: true}, "ok", "--yes", "no client that draws consent"},
		{"yes does not beat the run's deny", none, kernel.RunPermissions{Yes: true, Deny: []string{"touch"}}, "denied", `deny = ["touch"]`, "no client that draws consent"},
	}
	run(t, func(t *testing.T, mode storeMode) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var calls atomic.Int32
				_, s := consentEnv(t, mode, &calls, tt.cfg)
				perms := tt.perms
				evs, _ := send(t, s, kernel.SendInput{Text: "touch it", Permissions: &perms})
				if o := toolOutcome(t, evs); o["status"] != tt.wantStatus || !strings.Contains(o["rule"], tt.wantRule) {
					t.Errorf("outcome = %v, want status %s and a rule naming %q", o, tt.wantStatus, tt.wantRule)
				}
				// The next run has none of them.
				evs, _ = send(t, s, kernel.SendInput{Text: "touch it again"})
				if o := toolOutcome(t, evs); !strings.Contains(o["rule"], tt.wantNext) {
					t.Errorf("the next run's outcome = %v, want the config's rule alone, %q", o, tt.wantNext)
				}
			})
		}
	})
}

func TestRunPermissionsRefused(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		var calls atomic.Int32
		_, s := consentEnv(t, mode, &calls)
		ctx := context.Background()
		_, err := s.Send(ctx, kernel.SendInput{Text: "hi", Permissions: &kernel.RunPermissions{Deny: []string{"shell(git"}}})
		var re *kernel.RequestError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "permissions.deny") {
			t.Errorf("Send() with a bad rule = %v, want a *RequestError naming permissions.deny", err)
		}
	})
}
