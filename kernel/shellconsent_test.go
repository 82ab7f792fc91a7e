package kernel_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// shellEnv is a kernel with the built-in shell tool, working in a fresh git
// repository under allow = ["shell(git status*)"], whose model runs line
// once.
func shellEnv(t *testing.T, mode storeMode, line string) (*kernel.Session, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	turns := []map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "args": map[string]string{"command": line}}}},
		{"text": []string{"done"}},
	}
	e := mode.newEnv(t, script(t, turns...), func(c *kernel.Config) {
		c.Tools = tool.NewSet(tool.Shell{})
		c.Workspace = tool.Workspace{Root: dir}
		c.Consent = consent.Rules{Allow: []string{"shell(git status*)"}}
	})
	return e.session(t), dir
}

func TestShellLinePartsAsked(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		const line = "git status; touch pwned"
		notRun := func(t *testing.T, dir string) {
			t.Helper()
			if _, err := os.Stat(filepath.Join(dir, "pwned")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("stat pwned = %v, want it missing: the line ran without asking", err)
			}
		}

		t.Run("asked", func(t *testing.T) {
			s, dir := shellEnv(t, mode, line)
			w := watch(t, s, consentClient)
			if _, err := s.Send(context.Background(), kernel.SendInput{Text: "check"}); err != nil {
				t.Fatal(err)
			}
			req := requested(t, w)
			if req.Tool != "shell" || req.Subject != line || req.Part != "touch pwned" || req.Rule != `the part "touch pwned" matches no allow rule` {
				t.Errorf("requested = tool %q, subject %q, part %q, rule %q; want shell asked about the part touch pwned", req.Tool, req.Subject, req.Part, req.Rule)
			}
			// The question a person reads names the part too.
			w.until(func(ev protocol.Event) bool {
				d, ok := ev.(*protocol.StateDelta)
				return ok && len(d.Delta) > 0 && d.Delta[0].Path == "/ui/nodes/placed:host:consent" &&
					strings.Contains(string(d.Delta[0].Value), `Asked because the part \"touch pwned\" matches no allow rule`)
			})
			notRun(t, dir)
			if err := s.AnswerConsent(context.Background(), consentClient, req.Request, kernel.ConsentDeny); err != nil {
				t.Fatal(err)
			}
			w.until(terminal)
			if o := toolOutcome(t, w.evs); o["status"] != "denied" {
				t.Errorf("outcome = %v, want denied by the person", o)
			}
			notRun(t, dir)
		})

		t.Run("nobody to ask", func(t *testing.T) {
			s, dir := shellEnv(t, mode, line)
			evs, _ := send(t, s, kernel.SendInput{Text: "check"})
			o := toolOutcome(t, evs)
			if o["status"] != "denied" || !strings.Contains(o["rule"], `the part "touch pwned" matches no allow rule`) ||
				!strings.Contains(o["content"], `the part "touch pwned"`) {
				t.Errorf("outcome = %v, want denied, naming the part touch pwned to the model and in the rule", o)
			}
			notRun(t, dir)
		})
	})
}

func TestShellLinePartsAllowed(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		s, _ := shellEnv(t, mode, "git status && git status --short")
		evs, _ := send(t, s, kernel.SendInput{Text: "check"})
		for _, ev := range evs {
			if custom(kernel.ConsentRequestedEvent)(ev) {
				t.Fatal("asked about a line whose every part is allowed")
			}
		}
		o := toolOutcome(t, evs)
		if o["status"] != "ok" || o["rule"] != `allow = ["shell(git status*)"]` || !strings.Contains(o["content"], "exit status 0") {
			t.Errorf("outcome = %v, want the line run, allowed by shell(git status*)", o)
		}
	})
}
