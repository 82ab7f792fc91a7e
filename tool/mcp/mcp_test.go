package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/getorrery/orrery/internal/logbuf"
	"github.com/getorrery/orrery/tool"
	orrerymcp "github.com/getorrery/orrery/tool/mcp"
)

// testLogger returns a logger whose output the test prints when it fails.
func testLogger(t *testing.T) (*slog.Logger, *logbuf.Buffer) {
	t.Helper()
	var buf logbuf.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

// stdioConfig is a config that starts this test binary as a server of kind.
// (A binary built with -race sleeps a second before it exits unless
// GORACE says not to.)
func stdioConfig(kind string) orrerymcp.ServerConfig {
	return orrerymcp.ServerConfig{Command: os.Args[0], Env: map[string]string{serverEnv: kind, "GORACE": "atexit_sleep_ms=0"}}
}

// connect starts the test tools server as name and closes it when the
// test ends.
func connect(t *testing.T, name string, cfg orrerymcp.ServerConfig) *orrerymcp.Server {
	t.Helper()
	logger, _ := testLogger(t)
	srv, err := orrerymcp.Connect(context.Background(), name, cfg, logger)
	if err != nil {
		t.Fatalf("Connect(%s) = %v", name, err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return srv
}

// toolsByName indexes tools by their Orrery name.
func toolsByName(t *testing.T, tools []tool.Tool) map[string]tool.Tool {
	t.Helper()
	m := map[string]tool.Tool{}
	for _, tl := range tools {
		m[tl.Spec().Name] = tl
	}
	return m
}

// call calls the tool named name among tools with args.
func call(t *testing.T, tools map[string]tool.Tool, name, args string) tool.Result {
	t.Helper()
	tl, ok := tools[name]
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	res, err := tl.Call(context.Background(), tool.Call{ID: "c1", Args: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s.Call(%s) = %v", name, args, err)
	}
	return res
}

func TestListFollowsPagesAndNamesTools(t *testing.T) {
	srv := connect(t, "test", stdioConfig(kindTools))
	var got []string
	for _, tl := range srv.Tools() {
		got = append(got, tl.Spec().Name)
	}
	var want []string
	for _, n := range testToolNames {
		want = append(want, "mcp.test."+n)
	}
	// The server lists two a page: all nine mean every page was read.
	if !slices.Equal(got, want) {
		t.Fatalf("Tools() names = %v, want %v", got, want)
	}
	if srv.Name() != "test" {
		t.Errorf("Name() = %q, want test", srv.Name())
	}

	tools := toolsByName(t, srv.Tools())
	add := tools["mcp.test.add"].Spec()
	if add.Description != "Adds a and b." {
		t.Errorf("add Description = %q, want the server's", add.Description)
	}
	// The server marks add read-only; Orrery does not believe it.
	if add.ReadOnly {
		t.Errorf("add ReadOnly = true, want false for every MCP tool")
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(add.Parameters, &schema); err != nil {
		t.Fatalf("add Parameters = %s: %v", add.Parameters, err)
	}
	if schema.Type != "object" || schema.Properties["a"] == nil || schema.Properties["b"] == nil {
		t.Errorf("add Parameters = %s, want an object schema with a and b", add.Parameters)
	}
	if got := string(tools["mcp.test.pid"].Spec().Parameters); got != `{"type":"object"}` {
		t.Errorf("pid Parameters = %s, want {\"type\":\"object\"}", got)
	}
}

func TestCall(t *testing.T) {
	tools := toolsByName(t, connect(t, "test", stdioConfig(kindTools)).Tools())
	tests := []struct {
		tool, args string
		want       string
		wantErr    bool
	}{
		{"add", `{"a": 2, "b": 3.5}`, "5.5", false},
		{"add", ` {"a": -1, "b": 1} `, "0", false},
		{"args", `{"nested": {"x": [1, "two", null]}}`, `{"nested":{"x":[1,"two",null]}}`, false},
		// A model sends nothing for a tool without parameters.
		{"args", ``, `{}`, false},
		{"fail", `{}`, "fail was asked to fail", true},
		{"media", `{}`, strings.Join([]string{
			"here is everything",
			"[image: image/png, 1234 bytes]",
			"[audio: audio/wav, 99 bytes]",
			"[resource link: file:///tmp/report.pdf, application/pdf, 2048 bytes]",
			"[resource: mem://note, text/plain, 5 bytes]",
			"and that is all",
		}, "\n"), false},
		{"structured", `{}`, `{"answer":42}`, false},
		// The server validates add's arguments against its schema.
		{"add", `{"a": "two"}`, "", true},
		// Arguments that are not one object never reach the server.
		{"add", `[1, 2]`, "takes its arguments as one JSON object", true},
		{"add", `"a=1"`, "takes its arguments as one JSON object", true},
		{"add", `null`, "takes its arguments as one JSON object", true},
		{"add", `{"a": 1`, "takes its arguments as one JSON object", true},
		{"add", `{"a": 1} {"b": 2}`, "takes its arguments as one JSON object", true},
	}
	for _, tt := range tests {
		res := call(t, tools, "mcp.test."+tt.tool, tt.args)
		if res.Error != tt.wantErr {
			t.Errorf("%s.Call(%s) Error = %v, want %v (text %q)", tt.tool, tt.args, res.Error, tt.wantErr, res.Text)
		}
		if tt.wantErr && tt.want == "" {
			if res.Text == "" {
				t.Errorf("%s.Call(%s) Text = \"\", want an explanation", tt.tool, tt.args)
			}
			continue
		}
		if tt.wantErr {
			if !strings.Contains(res.Text, tt.want) {
				t.Errorf("%s.Call(%s) Text = %q, want it to contain %q", tt.tool, tt.args, res.Text, tt.want)
			}
			continue
		}
		if res.Text != tt.want {
			t.Errorf("%s.Call(%s) Text = %q, want %q", tt.tool, tt.args, res.Text, tt.want)
		}
	}
}

func TestConcurrentCalls(t *testing.T) {
	tools := toolsByName(t, connect(t, "test", stdioConfig(kindTools)).Tools())
	add := tools["mcp.test.add"]
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			args := `{"a":` + strconv.Itoa(i) + `,"b":1000}`
			res, err := add.Call(context.Background(), tool.Call{Args: json.RawMessage(args)})
			if want := strconv.Itoa(i + 1000); err != nil || res.Text != want {
				t.Errorf("add.Call(%s) = %+v, %v, want %s", args, res, err, want)
			}
		})
	}
	wg.Wait()
}

func TestEnvAndCwd(t *testing.T) {
	dir := t.TempDir()
	// Orrery's own secrets stay out of a server's environment.
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	cfg := stdioConfig(kindTools)
	cfg.Env["ORRERY_TEST_VALUE"] = "from config"
	cfg.Cwd = dir
	tools := toolsByName(t, connect(t, "test", cfg).Tools())
	res := call(t, tools, "mcp.test.env", `{}`)
	wantDir, _ := filepath.EvalSymlinks(dir)
	if want := "from config\n" + wantDir + "\n"; res.Text != want {
		t.Errorf("env.Call() = %q, want %q", res.Text, want)
	}
}

func TestCancelReturnsWhileServerIsBusy(t *testing.T) {
	tools := toolsByName(t, connect(t, "test", stdioConfig(kindTools)).Tools())
	marker := filepath.Join(t.TempDir(), "started")
	args, _ := json.Marshal(map[string]any{"marker": marker, "deaf": true})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		res, err := tools["mcp.test.sleep"].Call(ctx, tool.Call{Args: args})
		if err == nil {
			t.Errorf("sleep.Call() = %+v, want the context's error", res)
		}
		done <- err
	}()
	// Cancel only once the server is inside the call: the tool sleeps for
	// an hour and ignores cancellation, so Call returns only if it stops
	// waiting for the server.
	waitForFile(t, marker, done)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep.Call() after cancel = %v, want context.Canceled", err)
	}

	// The session goes on: the busy handler does not block other calls.
	if res := call(t, tools, "mcp.test.add", `{"a":1,"b":2}`); res.Text != "3" {
		t.Errorf("add.Call() after a cancelled call = %+v, want 3", res)
	}
}

func TestServerKilledMidSession(t *testing.T) {
	srv := connect(t, "test", stdioConfig(kindTools))
	tools := toolsByName(t, srv.Tools())
	pid, err := strconv.Atoi(call(t, tools, "mcp.test.pid", `{}`).Text)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	for range 2 { // the call that finds it dead, and one after
		res := call(t, tools, "mcp.test.add", `{"a":1,"b":2}`)
		assertDead(t, res, "test")
	}
}

func TestServerCrashesInCall(t *testing.T) {
	tools := toolsByName(t, connect(t, "test", stdioConfig(kindTools)).Tools())
	res := call(t, tools, "mcp.test.crash", `{}`)
	assertDead(t, res, "test")
	if !strings.Contains(res.Text, "crashing as asked") {
		t.Errorf("crash.Call() = %q, want the server's last words on stderr", res.Text)
	}
	assertDead(t, call(t, tools, "mcp.test.add", `{"a":1,"b":2}`), "test")
}

// assertDead checks that res tells the model the server name is not
// running and what to check.
func assertDead(t *testing.T, res tool.Result, name string) {
	t.Helper()
	for _, want := range []string{`MCP server "` + name + `" is not running`, "next session", "[mcp.servers." + name + "]"} {
		if !res.Error || !strings.Contains(res.Text, want) {
			t.Errorf("Call() on a dead server = %+v, want an error containing %q", res, want)
		}
	}
}

func TestCloseEndsProcess(t *testing.T) {
	logger, _ := testLogger(t)
	srv, err := orrerymcp.Connect(context.Background(), "test", stdioConfig(kindTools), logger)
	if err != nil {
		t.Fatal(err)
	}
	tools := toolsByName(t, srv.Tools())
	pid, err := strconv.Atoi(call(t, tools, "mcp.test.pid", `{}`).Text)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) after Close = %v, want ESRCH: the process outlived Close", pid, err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
	res := call(t, tools, "mcp.test.add", `{"a":1,"b":2}`)
	if !res.Error || !strings.Contains(res.Text, "is not running") {
		t.Errorf("Call() after Close = %+v, want a not-running error", res)
	}
}

func TestCloseWhileCallBlocked(t *testing.T) {
	logger, _ := testLogger(t)
	srv, err := orrerymcp.Connect(context.Background(), "test", stdioConfig(kindTools), logger)
	if err != nil {
		t.Fatal(err)
	}
	tools := toolsByName(t, srv.Tools())
	pid, err := strconv.Atoi(call(t, tools, "mcp.test.pid", `{}`).Text)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "started")
	args, _ := json.Marshal(map[string]any{"marker": marker, "deaf": true})
	done := make(chan tool.Result, 1)
	go func() {
		res, err := tools["mcp.test.sleep"].Call(context.Background(), tool.Call{Args: args})
		if err != nil {
			t.Errorf("sleep.Call() = %v, want a Result", err)
		}
		done <- res
	}()
	waitForFile(t, marker, nil)
	// The server is stuck in a call it will not leave: Close must still
	// end it, and the call must end with it.
	if err := srv.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if res := <-done; !res.Error || !strings.Contains(res.Text, "is not running") {
		t.Errorf("sleep.Call() across Close = %+v, want a not-running error", res)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) after Close = %v, want ESRCH", pid, err)
	}
}

func TestConnectFailures(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-server")
	tests := []struct {
		name string
		cfg  orrerymcp.ServerConfig
		want []string
	}{
		{"broken", stdioConfig(kindBroken), []string{`start MCP server "broken"`, "BROKEN_TOKEN is not set", "[mcp.servers.broken]"}},
		{"missing", orrerymcp.ServerConfig{Command: missing}, []string{`start MCP server "missing"`, "[mcp.servers.missing]"}},
		{"nopath", orrerymcp.ServerConfig{Command: "orrery-no-such-mcp-server"}, []string{"was not found", "full path", "[mcp.servers.nopath]"}},
		{"badcwd", orrerymcp.ServerConfig{Command: os.Args[0], Cwd: missing}, []string{"cwd", "[mcp.servers.badcwd]"}},
		{"both", orrerymcp.ServerConfig{Command: "x", URL: "http://127.0.0.1:1/mcp"}, []string{"[mcp.servers.both]", "not both"}},
		{"bad name", stdioConfig(kindTools), []string{"only letters, digits", "rename"}},
		{"mcp.x", stdioConfig(kindTools), []string{"only letters, digits", "rename"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := testLogger(t)
			srv, err := orrerymcp.Connect(context.Background(), tt.name, tt.cfg, logger)
			if err == nil {
				srv.Close()
				t.Fatalf("Connect(%s) = nil error, want one", tt.name)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Connect(%s) = %q, want it to contain %q", tt.name, err, w)
				}
			}
		})
	}
}

func TestConnectCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	logger, _ := testLogger(t)
	srv, err := orrerymcp.Connect(ctx, "test", stdioConfig(kindTools), logger)
	if err == nil {
		srv.Close()
		t.Fatal("Connect(cancelled ctx) = nil error, want context.Canceled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Connect(cancelled ctx) = %v, want context.Canceled", err)
	}
}

func TestConnectAll(t *testing.T) {
	logger, logs := testLogger(t)
	set, err := orrerymcp.ConnectAll(context.Background(), map[string]orrerymcp.ServerConfig{
		"one":      stdioConfig(kindTools),
		"two":      stdioConfig(kindTools),
		"broken":   stdioConfig(kindBroken),
		"bad.name": stdioConfig(kindTools),
	}, logger)
	t.Cleanup(func() {
		if err := set.Close(); err != nil {
			t.Errorf("Set.Close() = %v", err)
		}
	})
	if err == nil {
		t.Fatal("ConnectAll() error = nil, want the failures of broken and bad.name")
	}
	for _, w := range []string{`"broken"`, "BROKEN_TOKEN", `"bad.name"`, "rename"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("ConnectAll() error = %q, want it to contain %q", err, w)
		}
	}
	for _, w := range []string{"mcp_server=broken", "mcp_server=bad.name"} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("logs lack %q:\n%s", w, logs.String())
		}
	}
	var servers []string
	for _, s := range set.Servers() {
		servers = append(servers, s.Name())
	}
	if !slices.Equal(servers, []string{"one", "two"}) {
		t.Errorf("Servers() = %v, want [one two]", servers)
	}
	tools := set.Tools()
	if len(tools) != 2*len(testToolNames) {
		t.Errorf("len(Tools()) = %d, want %d", len(tools), 2*len(testToolNames))
	}
	// The names are unique: a tool.Set panics on a duplicate.
	ts := tool.NewSet(tools...)
	for _, name := range []string{"mcp.one.add", "mcp.two.add"} {
		tl, ok := ts.Lookup(name)
		if !ok {
			t.Fatalf("Lookup(%s) = false", name)
		}
		res, err := tl.Call(context.Background(), tool.Call{Args: json.RawMessage(`{"a":20,"b":22}`)})
		if err != nil || res.Text != "42" {
			t.Errorf("%s.Call() = %+v, %v, want 42", name, res, err)
		}
	}
}

func TestNilSet(t *testing.T) {
	var s *orrerymcp.Set
	if s.Tools() != nil || s.Servers() != nil || s.Close() != nil {
		t.Errorf("a nil Set is not empty")
	}
	set, err := orrerymcp.ConnectAll(context.Background(), nil, nil)
	if err != nil || len(set.Tools()) != 0 {
		t.Errorf("ConnectAll(nil) = %v, %v, want an empty Set", set, err)
	}
}

// waitForFile waits until path exists: a tool in the server creates it to
// say the call has started. A value on done means the call ended first.
func waitForFile(t *testing.T, path string, done <-chan error) {
	t.Helper()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the call ended with %v before it started", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestSessionOutlivesConnectContext(t *testing.T) {
	ts, _ := startHTTP(t, "s3cret")
	configs := map[string]orrerymcp.ServerConfig{
		"stdio": stdioConfig(kindTools),
		"http":  {URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}},
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			logger, _ := testLogger(t)
			ctx, cancel := context.WithCancel(context.Background())
			srv, err := orrerymcp.Connect(ctx, name, cfg, logger)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			res := call(t, toolsByName(t, srv.Tools()), "mcp."+name+".add", `{"a":1,"b":2}`)
			if res.Text != "3" {
				t.Errorf("add.Call() after Connect's ctx ended = %+v, want 3", res)
			}
		})
	}
}
