package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/getorrery/orrery/store/sqlite"
)

// runWithConfig runs orrery run in dir (the workspace and current
// directory) with the config file text and a data dir dir/.data, reading
// no environment of its own, and returns the exit code, stdout and stderr.
func runWithConfig(t *testing.T, dir, config string, args ...string) (int, string, string) {
	t.Helper()
	path := filepath.Join(dir, "orrery.toml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	e := &env{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
	args = append([]string{"run", "--data", filepath.Join(dir, ".data"), "--config", path}, args...)
	code := run(context.Background(), e, args)
	return code, stdout.String(), stderr.String()
}

// dataDirBytes returns every byte of every file in the data dir (the
// database, any -wal and -shm, logs), for grepping.
func dataDirBytes(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		all = append(all, b...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// TestShellKeepsSecretsOutOfTheLog is the canary test: with a provider's
// key, an alias's key_env, a shell.hide_env variable and a URL with
// credentials in Orrery's environment, a scripted model runs env and
// echoes the keys through the real shell tool. No canary value reaches the
// output or any byte of the data dir; a plain variable does, so the
// command did run and its output was logged.
func TestShellKeepsSecretsOutOfTheLog(t *testing.T) {
	canaries := map[string]string{
		"OPENAI_API_KEY":    "sk-canary-openai-5b1e",
		"ANTHROPIC_API_KEY": "sk-ant-canary-77c0",
		"MY_CANARY":         "canary-key-env-0d4f",
		"HIDDEN_EXTRA":      "canary-hidden-extra-a9e2",
		"CANARY_DB_URL":     "postgres://app:canary-url-password-3c8d@db.internal/app",
	}
	for k, v := range canaries {
		t.Setenv(k, v)
	}
	t.Setenv("VISIBLE_CANARY", "visible-value-6f2a")
	dir := t.TempDir()
	t.Chdir(dir)
	command := `env; echo "keys:[$OPENAI_API_KEY][$ANTHROPIC_API_KEY][$MY_CANARY][$HIDDEN_EXTRA]"`
	script, _ := json.Marshal(map[string]any{"turns": []any{
		map[string]any{"tool_calls": []any{map[string]any{"name": "shell", "args": map[string]string{"command": command}}}},
		map[string]any{"text": []string{"done"}},
	}})
	scriptPath := filepath.Join(dir, "script.json")
	if err := os.WriteFile(scriptPath, script, 0o600); err != nil {
		t.Fatal(err)
	}
	config := `
[models.canary]
provider = "openai"
model = "m"
key_env = "MY_CANARY"

[shell]
hide_env = ["HIDDEN_*"]
`
	code, stdout, stderr := runWithConfig(t, dir, config, "--model", "script:"+scriptPath, "--yes", "-p", "show me the environment")
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	logged := dataDirBytes(t, filepath.Join(dir, ".data"))
	for name, v := range canaries {
		if strings.Contains(stdout+stderr, v) {
			t.Errorf("the output holds %s's value %q", name, v)
		}
		if bytes.Contains(logged, []byte(v)) {
			t.Errorf("the data dir holds %s's value %q", name, v)
		}
	}
	for _, want := range []string{"VISIBLE_CANARY=visible-value-6f2a", "keys:[][][][]", "PATH="} {
		if !bytes.Contains(logged, []byte(want)) {
			t.Errorf("the data dir lacks %q: the shell did not run, or its output was not logged", want)
		}
	}
}

// TestRunErrorMasksBaseURL: a [models.<alias>] base_url carrying a user,
// a password and an api_key query parameter is never shown whole, whether
// the server refuses the call or nothing listens there: neither the
// RUN_ERROR frame in the SQLite log, nor any byte of the data dir, nor the
// output holds the password or the key, and an error that names the server
// names it masked.
func TestRunErrorMasksBaseURL(t *testing.T) {
	const password, queryKey = "pw-canary-e41b", "qk-canary-28fa"
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
	}))
	defer refusing.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	for _, tt := range []struct {
		name, provider, host string
		named                bool // the message names the server
	}{
		{"openai refused", "openai", refusing.URL, true},
		{"openai unreachable", "openai", closed, true},
		{"anthropic refused", "anthropic", refusing.URL, false},
		{"anthropic unreachable", "anthropic", closed, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			hostport := strings.TrimPrefix(tt.host, "http://")
			config := fmt.Sprintf("[models.proxy]\nprovider = %q\nmodel = \"m\"\nbase_url = \"http://alice:%s@%s/v1?api_key=%s\"\n", tt.provider, password, hostport, queryKey)
			code, stdout, stderr := runWithConfig(t, dir, config, "--model", "proxy", "-p", "hi")
			if code != exitRunFailed {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitRunFailed, stdout, stderr)
			}
			if out := stdout + stderr; strings.Contains(out, password) || strings.Contains(out, queryKey) {
				t.Errorf("the output names the base URL's credentials:\n%s", out)
			}
			data := filepath.Join(dir, ".data")
			if logged := dataDirBytes(t, data); bytes.Contains(logged, []byte(password)) || bytes.Contains(logged, []byte(queryKey)) {
				t.Error("the data dir holds the base URL's credentials")
			}
			msg := runErrorMessage(t, filepath.Join(data, "orrery.db"))
			if strings.Contains(msg, password) || strings.Contains(msg, queryKey) || (tt.named && !strings.Contains(msg, "http://***@"+hostport)) {
				t.Errorf("RUN_ERROR message = %q, want it to name http://***@%s, without the credentials", msg, hostport)
			}
		})
	}
}

// runErrorMessage returns the message of the one RUN_ERROR in the log at
// path.
func runErrorMessage(t *testing.T, path string) string {
	t.Helper()
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	sessions, err := st.Sessions(ctx)
	if err != nil || len(sessions) != 1 {
		t.Fatalf("Sessions() = %v, %v, want one", sessions, err)
	}
	frames, err := st.Read(ctx, sessions[0].ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, f := range frames {
		if f.Type == "RUN_ERROR" {
			var ev struct{ Message string }
			if err := json.Unmarshal(f.Data, &ev); err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, ev.Message)
		}
	}
	if len(msgs) != 1 {
		t.Fatalf("the log has %d RUN_ERROR frames (%q), want one", len(msgs), msgs)
	}
	return msgs[0]
}

// TestWarnOpenModes: a data dir, database or tokens.json that other users
// may read is named in a warning with its mode and the chmod that fixes
// it; a private one is not.
func TestWarnOpenModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no Unix modes")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if code, stdout, stderr := runWithConfig(t, dir, "", "-p", "hi"); code != 0 || strings.Contains(stderr, "chmod") {
		t.Fatalf("a fresh data dir: exit %d, stderr %q; want 0 and no warning\n%s", code, stderr, stdout)
	}
	data := filepath.Join(dir, ".data")
	tokens := filepath.Join(data, "tokens.json")
	if err := os.WriteFile(tokens, []byte("[]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]fs.FileMode{data: 0o755, filepath.Join(data, "orrery.db"): 0o644, tokens: 0o640} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr := runWithConfig(t, dir, "", "-p", "hi")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"mode=0755 fix=\"chmod 700 " + data + "\"",
		"mode=0644 fix=\"chmod 600 " + filepath.Join(data, "orrery.db") + "\"",
		"mode=0640 fix=\"chmod 600 " + tokens + "\"",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr = %q, want a warning with %s", stderr, want)
		}
	}
}
