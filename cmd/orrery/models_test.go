package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeProvider serves a recorded SSE fixture of a provider package for
// every POST, or fails every request with status.
func fakeProvider(t *testing.T, fixture string, status int) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRunWithProviders(t *testing.T) {
	tests := []struct {
		name     string
		fixture  string
		env      func(url string) map[string]string
		args     []string
		status   int
		wantCode int
		wantOut  string
		wantCost int64
	}{
		{
			name: "openai by key and model flag", fixture: "../../agent/provider/openai/testdata/text.sse",
			env: func(u string) map[string]string {
				return map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": u + "/v1"}
			},
			args: []string{"--model", "openai:gpt-4.1"}, wantOut: "Hello! The sky is blue.", wantCost: 216,
		},
		{
			name: "anthropic chosen by its key alone", fixture: "../../agent/provider/anthropic/testdata/text.sse",
			env: func(u string) map[string]string {
				return map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": u}
			},
			wantOut: "Hello, world!", wantCost: 300,
		},
		{
			name: "a rejected key says what to do", fixture: "../../agent/provider/openai/testdata/text.sse", status: http.StatusUnauthorized,
			env: func(u string) map[string]string {
				return map[string]string{"OPENAI_API_KEY": "sk-bad", "OPENAI_BASE_URL": u + "/v1"}
			},
			args: []string{"--model", "openai:gpt-4.1"}, wantCode: exitRunFailed, wantOut: "OPENAI_API_KEY",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeProvider(t, tt.fixture, tt.status)
			vars := tt.env(srv.URL)
			dir := t.TempDir()
			t.Chdir(dir)
			if err := os.WriteFile(filepath.Join(dir, "none.toml"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr strings.Builder
			e := &env{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(k string) string { return vars[k] }}
			common := []string{"--data", filepath.Join(dir, ".data"), "--config", filepath.Join(dir, "none.toml")}
			code := run(context.Background(), e, append(append([]string{"run"}, common...), append(tt.args, "-p", "hi")...))
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			if out := stdout.String() + stderr.String(); !strings.Contains(out, tt.wantOut) {
				t.Errorf("output %q, want it to contain %q", out, tt.wantOut)
			}
			if tt.wantCost == 0 {
				return
			}
			stdout.Reset()
			if code := run(context.Background(), e, append(append([]string{"sessions"}, common...), "--json")); code != 0 {
				t.Fatalf("sessions exit %d: %s", code, stderr.String())
			}
			var list struct {
				Sessions []struct {
					MicroUSD int64 `json:"micro_usd"`
				} `json:"sessions"`
			}
			if err := json.Unmarshal([]byte(stdout.String()), &list); err != nil {
				t.Fatalf("sessions --json %q: %v", stdout.String(), err)
			}
			if len(list.Sessions) != 1 || list.Sessions[0].MicroUSD != tt.wantCost {
				t.Errorf("sessions = %s, want one session costing %d micro-USD (the fixture's usage at list price)", stdout.String(), tt.wantCost)
			}
		})
	}
}

// TestRunLogLinesNameTheirRun: a line a provider logs during a run (here
// the OpenAI provider's note that the answer was cut at its length limit,
// from a recorded stream) carries the run's session and run ids, so that
// ORRERY_LOG_FORMAT=json lines can be filtered by them.
func TestRunLogLinesNameTheirRun(t *testing.T) {
	srv := fakeProvider(t, "../../agent/provider/openai/testdata/length.sse", 0)
	vars := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.URL + "/v1", "ORRERY_LOG": "debug", "ORRERY_LOG_FORMAT": "json"}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile(filepath.Join(dir, "none.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	e := &env{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(k string) string { return vars[k] }}
	run(context.Background(), e, []string{"run", "--data", filepath.Join(dir, ".data"), "--config", filepath.Join(dir, "none.toml"), "--model", "openai:gpt-4.1", "--json", "-p", "hi"})
	var threadID, runID string
	for _, l := range strings.Split(stdout.String(), "\n") {
		var ev struct{ Type, ThreadID, RunID string }
		if json.Unmarshal([]byte(l), &ev) == nil && ev.Type == "RUN_STARTED" {
			threadID, runID = ev.ThreadID, ev.RunID
		}
	}
	if runID == "" {
		t.Fatalf("no RUN_STARTED on stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	found := false
	for _, l := range strings.Split(stderr.String(), "\n") {
		var line map[string]any
		if json.Unmarshal([]byte(l), &line) != nil || line["msg"] != "answer cut at its length limit" {
			continue
		}
		found = true
		if line["session"] != threadID || line["run"] != runID {
			t.Errorf("the provider's line is %s: want session %s and run %s", l, threadID, runID)
		}
	}
	if !found {
		t.Errorf("no line says the answer was cut; stderr:\n%s", stderr.String())
	}
}
