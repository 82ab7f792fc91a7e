package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/metrics"
)

// testAgent returns the command line of the ACP test agent, skipping when
// node or its packages are missing (unless ORRERY_REQUIRE_NODE is set).
func testAgent(t *testing.T) (string, string) {
	t.Helper()
	script, _ := filepath.Abs("../../agent/acp/testdata/agent/agent.mjs")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(filepath.Dir(script), "node_modules/@agentclientprotocol/sdk/package.json"))
	}
	if err != nil {
		if os.Getenv("ORRERY_REQUIRE_NODE") != "" {
			t.Fatalf("node and the ACP test agent are required: %v; run npm ci --prefix agent/acp/testdata/agent", err)
		}
		t.Skipf("node or the ACP test agent is missing (%v): run npm ci --prefix agent/acp/testdata/agent", err)
	}
	return node, script
}

func TestRunWithAgent(t *testing.T) {
	node, script := testAgent(t)
	// The test agent again, at a path with a space and a quote in it.
	spaced := filepath.Join(t.TempDir(), "my agent's dir")
	if err := os.Symlink(filepath.Dir(script), spaced); err != nil {
		t.Fatal(err)
	}
	spacedScript := filepath.Join(spaced, filepath.Base(script))
	tests := []struct {
		name     string
		config   string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"acp:COMMAND", "", []string{"--agent", "acp:" + node + " " + script}, 0, "Hello, world.", ""},
		{"a configured agent", "[agents.test]\ncommand = " + quote(node) + "\nargs = [" + quote(script) + "]\n", []string{"--agent", "test"}, 0, "Hello, world.", ""},
		{"an agent that is not configured", "", []string{"--agent", "nope"}, exitUsage, "", "names no [agents.nope]"},
		{"both --model and --agent", "", []string{"--agent", "acp:x", "--model", "offline"}, exitUsage, "", "give one"},
		{"auth required", "", []string{"--agent", "acp:" + node + " " + script + " --auth"}, exitRunFailed, "", "log in"},
		{"acp:COMMAND with a quoted path", "", []string{"--agent", "acp:" + node + ` "` + strings.ReplaceAll(spacedScript, `"`, `\"`) + `"`}, 0, "Hello, world.", ""},
		{"acp:COMMAND with an escaped path", "", []string{"--agent", "acp:" + node + " " + strings.NewReplacer(" ", `\ `, "'", `\'`).Replace(spacedScript) + " --auth"}, exitRunFailed, "", "log in"},
		{"acp:COMMAND that is missing", "", []string{"--agent", `acp:'/nonexistent/my agent' --acp`}, exitRunFailed, "", "install it, or fix the command in the acp: spec"},
		{"a configured agent that is missing", "[agents.gone]\ncommand = \"/nonexistent/gone\"\n", []string{"--agent", "gone"}, exitRunFailed, "", "fix the command in [agents.gone]"},
		{"acp:COMMAND with an unterminated quote", "", []string{"--agent", "acp:" + node + " '/opt/my agent --acp"}, exitUsage, "", "unterminated ' quote: close it"},
		{"acp:COMMAND ending in a backslash", "", []string{"--agent", "acp:" + node + ` \`}, exitUsage, "", "ends with a backslash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			cfg := filepath.Join(dir, "orrery.toml")
			if err := os.WriteFile(cfg, []byte(tt.config), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr strings.Builder
			e := &env{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
			args := append([]string{"run", "--data", filepath.Join(dir, ".data"), "--config", cfg}, tt.args...)
			code := run(context.Background(), e, append(args, "-p", "text please"))
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantOut) {
				t.Errorf("stdout = %q, want %q", stdout.String(), tt.wantOut)
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.wantErr)
			}
		})
	}
}

func quote(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}

// TestACPCommand drives orrery acp over its stdin and stdout: initialize,
// session/new and a prompt answered by the offline model.
func TestACPCommand(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile(filepath.Join(dir, "none.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr strings.Builder
	e := &env{stdout: outW, stderr: &stderr, stdin: inR, getenv: func(string) string { return "" }}
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), e, []string{"acp", "--data", filepath.Join(dir, ".data"), "--config", filepath.Join(dir, "none.toml"), "--model", "offline"})
		outW.Close()
	}()
	lines := bufio.NewReader(outR)
	read := func() map[string]any {
		t.Helper()
		type result struct {
			m   map[string]any
			err error
		}
		ch := make(chan result, 1)
		go func() {
			line, err := lines.ReadBytes('\n')
			var m map[string]any
			if err == nil {
				err = json.Unmarshal(line, &m)
			}
			ch <- result{m, err}
		}()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatalf("read: %v; stderr %s", r.err, stderr.String())
			}
			return r.m
		case <-time.After(20 * time.Second):
			t.Fatalf("no message from orrery acp; stderr %s", stderr.String())
			return nil
		}
	}
	write := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"jsonrpc":"2.0","id":"a","method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	if m := read(); m["id"] != "a" || m["error"] == nil {
		t.Errorf("session/new before initialize = %v, want an error for id \"a\"", m)
	}
	write(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	if m := read(); m["result"].(map[string]any)["protocolVersion"] != float64(1) {
		t.Fatalf("initialize = %v", m)
	}
	write(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":` + quote(dir) + `,"mcpServers":[]}}`)
	sid := read()["result"].(map[string]any)["sessionId"].(string)
	write(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"hello"}]}}`)
	var text strings.Builder
	for {
		m := read()
		if m["id"] == float64(2) {
			if m["result"].(map[string]any)["stopReason"] != "end_turn" {
				t.Errorf("prompt result = %v", m)
			}
			break
		}
		if u, ok := m["params"].(map[string]any)["update"].(map[string]any); ok && u["sessionUpdate"] == "agent_message_chunk" {
			text.WriteString(u["content"].(map[string]any)["text"].(string))
		}
	}
	if text.Len() == 0 {
		t.Errorf("no agent_message_chunk before the prompt's result")
	}
	inW.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("orrery acp exit %d; stderr %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("orrery acp did not exit when its stdin closed")
	}
}

// TestAgentMetricsLabels: the agents' process metrics are labelled by the
// configured agent's name, and every agent a command line named shares the
// one label "acp:", so a request cannot grow the label's values.
func TestAgentMetricsLabels(t *testing.T) {
	cfg := config.Config{Agents: map[string]config.AgentDef{"gemini": {Command: "gemini", Args: []string{"--acp"}}}}
	a := newACPAgents(cfg, slog.New(slog.DiscardHandler), func(string) (agent.Provider, error) { return nil, nil })
	for _, spec := range []string{"agent:gemini", "acp:one --acp", "acp:two"} {
		if _, err := a.resolve(spec); err != nil {
			t.Fatal(err)
		}
	}
	met := metrics.New()
	a.watch(met)
	rec := httptest.NewRecorder()
	met.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var lines []string
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, "orrery_agent_") {
			lines = append(lines, l)
		}
	}
	want := []string{
		`orrery_agent_process_crashes_total{agent="acp:"} 0`, `orrery_agent_process_crashes_total{agent="gemini"} 0`,
		`orrery_agent_process_starts_total{agent="acp:"} 0`, `orrery_agent_process_starts_total{agent="gemini"} 0`,
		`orrery_agent_processes{agent="acp:"} 0`, `orrery_agent_processes{agent="gemini"} 0`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("the agents' metrics are\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
