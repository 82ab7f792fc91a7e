//go:build unix

package tool_test

import (
	"context"
	"strings"
	"testing"

	"github.com/getorrery/orrery/tool"
)

func TestMatchEnv(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"GITHUB_TOKEN", "GITHUB_TOKEN", true},
		{"github_token", "GITHUB_TOKEN", true},
		{"GITHUB_TOKEN", "GITHUB_TOKENS", false},
		{"AWS_*", "AWS_SECRET_ACCESS_KEY", true},
		{"AWS_*", "AWS_", true},
		{"AWS_*", "XAWS_KEY", false},
		{"*_SECRET", "STRIPE_SECRET", true},
		{"*_SECRET", "STRIPE_SECRET_X", false},
		{"*KEY*", "MY_KEY_FILE", true},
		{"A*B*C", "AXXBYYBC", true},
		{"A*B*C", "AXXBYYBD", false},
		{"*", "ANYTHING", true},
		{"**_KEY", "X_KEY", true},
		{"", "PATH", false},
	}
	for _, tt := range tests {
		if got := tool.MatchEnv(tt.pattern, tt.name); got != tt.want {
			t.Errorf("MatchEnv(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestCheckEnvPattern(t *testing.T) {
	for _, p := range []string{"GITHUB_TOKEN", "AWS_*", "*_SECRET", "x9"} {
		if err := tool.CheckEnvPattern(p); err != nil {
			t.Errorf("CheckEnvPattern(%q) = %v, want nil", p, err)
		}
	}
	for p, want := range map[string]string{"": "empty", "AWS-*": `"-"`, "A B": `" "`, "*": "PATH", "PA*": "PATH", "*OME": "HOME"} {
		if err := tool.CheckEnvPattern(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckEnvPattern(%q) = %v, want an error naming %s", p, err, want)
		}
	}
}

// TestShellHidesEnv runs env with secrets in Orrery's environment: the
// variables HideEnv names and those holding URLs with credentials are not
// passed; PATH, HOME and the rest are, even when a pattern would match
// them.
func TestShellHidesEnv(t *testing.T) {
	ws, _ := newWorkspace(t, map[string]string{})
	vars := map[string]string{
		"OPENAI_API_KEY":        "sk-canary-openai",
		"MY_CANARY":             "canary-key-env",
		"AWS_SECRET_ACCESS_KEY": "canary-aws",
		"lower_token":           "canary-lower",
		"DATABASE_URL":          "postgres://app:canary-db-password@db/app",
		"PROXY_URL":             "https://proxy.example/?api_key=canary-query",
		"PLAIN_URL":             "https://api.example.com/v1",
		"VISIBLE":               "visible-value",
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	sh := tool.Shell{HideEnv: []string{"OPENAI_API_KEY", "MY_CANARY", "AWS_*", "LOWER_TOKEN", "HOM*"}}
	res, err := sh.Call(context.Background(), tool.Call{Args: shellArgs("env; echo \"[$OPENAI_API_KEY][$MY_CANARY]\""), Workspace: ws})
	if err != nil || res.Error {
		t.Fatalf("Call() = %+v, %v", res, err)
	}
	for _, v := range []string{"sk-canary-openai", "canary-key-env", "canary-aws", "canary-lower", "canary-db-password", "canary-query"} {
		if strings.Contains(res.Text, v) {
			t.Errorf("Call() output holds %q, a hidden value:\n%s", v, res.Text)
		}
	}
	for _, line := range []string{"PATH=", "HOME=", "VISIBLE=visible-value", "PLAIN_URL=https://api.example.com/v1", "PAGER=cat", "[][]"} {
		if !strings.Contains(res.Text, line) {
			t.Errorf("Call() output lacks %q:\n%s", line, res.Text)
		}
	}
	// The zero Shell still hides URLs with credentials.
	res, err = tool.Shell{}.Call(context.Background(), tool.Call{Args: shellArgs("env"), Workspace: ws})
	if err != nil || strings.Contains(res.Text, "canary-db-password") || !strings.Contains(res.Text, "sk-canary-openai") {
		t.Errorf("Shell{}.Call(env) = %q, %v; want the credentials URL hidden and the rest passed", res.Text, err)
	}
}
