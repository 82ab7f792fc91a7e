package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cli runs the orrery CLI in-process and returns its exit code and output.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
	code := run(context.Background(), e, args)
	return code, out.String(), errb.String()
}

func TestNodeTokens(t *testing.T) {
	data := t.TempDir()
	if code, _, stderr := cli(t, "node", "--data", data, "--listen", "127.0.0.1:0"); code != exitError || !strings.Contains(stderr, "orrery node token create") {
		t.Fatalf("node with no token: exit %d, stderr %q; want exit 1 naming orrery node token create", code, stderr)
	}
	code, stdout, _ := cli(t, "node", "token", "create", "--name", "laptop", "--json", "--data", data)
	var created struct{ Token, ID, Name string }
	if code != exitOK || json.Unmarshal([]byte(stdout), &created) != nil || !strings.HasPrefix(created.Token, "orr_") || created.Name != "laptop" {
		t.Fatalf("token create --json: exit %d, %q", code, stdout)
	}
	if code, _, stderr := cli(t, "node", "token", "create", "--name", "laptop", "--data", data); code != exitError || !strings.Contains(stderr, "exists") {
		t.Errorf("duplicate name: exit %d, %q; want exit 1 saying it exists", code, stderr)
	}
	code, stdout, _ = cli(t, "node", "token", "list", "--json", "--data", data)
	if code != exitOK || !strings.Contains(stdout, created.ID) || strings.Contains(stdout, created.Token) {
		t.Errorf("token list --json: exit %d, %q; want the id and never the secret", code, stdout)
	}
	tests := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{[]string{"node", "token"}, exitUsage, "needs a subcommand"},
		{[]string{"node", "token", "rotate"}, exitUsage, "unknown token subcommand"},
		{[]string{"node", "token", "revoke", "--data", data}, exitUsage, "needs the token's id or name"},
		{[]string{"node", "token", "revoke", "nope", "--data", data}, exitError, "no such token"},
		{[]string{"node", "token", "revoke", "laptop", "--data", data}, exitOK, "revoked"},
		{[]string{"node", "token", "revoke", created.ID, "--data", data}, exitError, "no such token"},
	}
	for _, tt := range tests {
		code, _, stderr := cli(t, tt.args...)
		if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
			t.Errorf("orrery %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tt.args, " "), code, stderr, tt.wantCode, tt.wantErr)
		}
	}
}

// TestRunHeadlessPlacement: orrery run prints no placement, and with --json
// the placement arrives as an orrery.placed frame.
func TestRunHeadlessPlacement(t *testing.T) {
	data := t.TempDir()
	code, stdout, stderr := cli(t, "run", "-p", "show me a table", "--data", data)
	if code != exitOK || strings.Contains(stdout, "orrery.placed") || strings.Contains(stdout, `"kind"`) {
		t.Errorf("run: exit %d, stdout %q, stderr %q; want the answer's text and no placement", code, stdout, stderr)
	}
	code, stdout, _ = cli(t, "run", "--json", "-p", "show me a table", "--data", data)
	var placed []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var f map[string]any
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("run --json printed %q: %v", line, err)
		}
		if f["type"] == "CUSTOM" && f["name"] == "orrery.placed" {
			placed = append(placed, f["value"].(map[string]any))
		}
	}
	if code != exitOK || len(placed) != 1 {
		t.Fatalf("run --json: exit %d, %d orrery.placed frames, want 1", code, len(placed))
	}
	for _, key := range []string{"id", "placement", "owner", "surface", "text"} {
		if _, ok := placed[0][key]; !ok {
			t.Errorf("orrery.placed value %v lacks %s", placed[0], key)
		}
	}
}

func TestConfigGetSet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orrery.toml")
	tests := []struct {
		args     []string
		wantCode int
		wantOut  string
	}{
		{[]string{"config", "set", `ui.placements."build-times".placement`, "pane.left", "--config", path}, exitOK, ""},
		{[]string{"config", "get", `ui.placements."build-times".placement`, "--config", path}, exitOK, `"pane.left"`},
		{[]string{"config", "set", "agent.max_steps", "0", "--config", path}, exitError, ""},
		{[]string{"config", "get", "agent.max_steps", "--config", path}, exitOK, "50"},
		{[]string{"config", "get", "--config", path}, exitUsage, ""},
		{[]string{"config", "frob"}, exitUsage, ""},
		{[]string{"config", "validate", "--config", path}, exitOK, "config OK: " + path},
	}
	for _, tt := range tests {
		code, stdout, stderr := cli(t, tt.args...)
		if code != tt.wantCode || !strings.Contains(stdout, tt.wantOut) {
			t.Errorf("orrery %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(tt.args, " "), code, stdout, stderr, tt.wantCode, tt.wantOut)
		}
	}
}

// TestConfigValidateResolves: config validate finds what only a command
// would otherwise find: a default model nothing knows and a store kind
// this build lacks, each named with the fix.
func TestConfigValidateResolves(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"unknown model", "[agent]\nmodel = \"nosuch:thing\"\n", `agent.model "nosuch:thing"`},
		{"unknown store", "[store]\nkind = \"postgres\"\n", `store.kind "postgres" is not a store this build has: use one of jetstream, sqlite`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "orrery.toml")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := cli(t, "config", "validate", "--config", path)
			if code != exitError || !strings.Contains(stderr, tc.want) || strings.Contains(stdout, "config OK") {
				t.Errorf("config validate = %d, stdout %q, stderr %q; want %d naming %q", code, stdout, stderr, exitError, tc.want)
			}
		})
	}
}

// TestConfigValidateWarnsOfAMissingKey: a model spec that is right but
// whose API key this shell lacks (the server's environment may have it)
// passes config validate, with a warning that says which key to set.
func TestConfigValidateWarnsOfAMissingKey(t *testing.T) {
	for _, model := range []string{"anthropic:claude-sonnet-4-5", "openai:gpt-5"} {
		path := filepath.Join(t.TempDir(), "orrery.toml")
		if err := os.WriteFile(path, []byte("[agent]\nmodel = \""+model+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := cli(t, "config", "validate", "--config", path)
		if code != exitOK || !strings.Contains(stdout, "config OK") || !strings.Contains(stderr, "warning: agent.model") || !strings.Contains(stderr, "_API_KEY") {
			t.Errorf("config validate of %s with no key = %d, stdout %q, stderr %q; want OK and a warning naming the key", model, code, stdout, stderr)
		}
	}
}

// TestLogFormat: ORRERY_LOG_FORMAT=json makes every log line a JSON
// object; text is the default; anything else logs as text and says so.
func TestLogFormat(t *testing.T) {
	for _, tc := range []struct {
		format    string
		json      bool
		complaint bool
	}{{"", false, false}, {"text", false, false}, {"json", true, false}, {"yaml", false, true}} {
		var errb bytes.Buffer
		e := &env{stderr: &errb, getenv: func(k string) string {
			if k == "ORRERY_LOG_FORMAT" {
				return tc.format
			}
			return ""
		}}
		newLogger(e, slog.LevelInfo).Info("hello", "session", "ses_1")
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		last := lines[len(lines)-1]
		var v map[string]any
		isJSON := json.Unmarshal([]byte(last), &v) == nil
		if isJSON != tc.json || (isJSON && (v["msg"] != "hello" || v["session"] != "ses_1")) {
			t.Errorf("ORRERY_LOG_FORMAT=%q logged %q; want JSON: %v, with msg and session", tc.format, last, tc.json)
		}
		if got := strings.Contains(errb.String(), "neither text nor json"); got != tc.complaint {
			t.Errorf("ORRERY_LOG_FORMAT=%q: complained %v, want %v:\n%s", tc.format, got, tc.complaint, errb.String())
		}
	}
}
