package mcp_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/tool"
	orrerymcp "github.com/getorrery/orrery/tool/mcp"
)

// everything is the reference server of the MCP project, pinned.
const everything = "@modelcontextprotocol/server-everything@2026.8.31"

func TestServerEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: it runs a Node.js server that npx may first fetch from the npm registry")
	}
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("npx is not installed (it comes with Node.js and npm); install them to run the MCP reference server")
	}
	// Fetch it (or find it in npx's cache) and see it start: with stdin
	// closed it starts and exits.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	probe := exec.CommandContext(ctx, npx, "-y", everything, "stdio")
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("%s cannot be run through npx (is the npm registry reachable?): %v: %s", everything, err, out)
	}

	logger, _ := testLogger(t)
	srv, err := orrerymcp.Connect(ctx, "everything", orrerymcp.ServerConfig{Command: npx, Args: []string{"-y", everything, "stdio"}}, logger)
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	defer func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}()
	tools := toolsByName(t, srv.Tools())
	tests := []struct {
		tool, args string
		want       []string
		wantErr    bool
	}{
		{"echo", `{"message":"hi there"}`, []string{"Echo: hi there"}, false},
		{"get-sum", `{"a":2,"b":3}`, []string{"is 5"}, false},
		// Zod refuses the arguments; the server says so as a tool error.
		{"get-sum", `{"a":"two"}`, []string{"expected number"}, true},
		{"get-tiny-image", `{}`, []string{"[image: image/png, ", " bytes]"}, false},
		{"get-resource-links", `{"count":2}`, []string{"[resource link: demo://resource/dynamic/blob/1, text/plain, size unknown]"}, false},
		{"get-resource-reference", `{"resourceType":"Blob","resourceId":2}`, []string{"[resource: demo://resource/dynamic/blob/2, "}, false},
		{"get-structured-content", `{"location":"Chicago"}`, []string{`"temperature":`}, false},
	}
	for _, tt := range tests {
		tl, ok := tools["mcp.everything."+tt.tool]
		if !ok {
			t.Errorf("%s lists no tool %s", everything, tt.tool)
			continue
		}
		if tl.Spec().ReadOnly {
			t.Errorf("%s Spec().ReadOnly = true, want false", tt.tool)
		}
		res, err := tl.Call(ctx, tool.Call{Args: json.RawMessage(tt.args)})
		if err != nil {
			t.Fatalf("%s.Call(%s) = %v", tt.tool, tt.args, err)
		}
		if res.Error != tt.wantErr {
			t.Errorf("%s.Call(%s) Error = %v, want %v (text %q)", tt.tool, tt.args, res.Error, tt.wantErr, res.Text)
		}
		for _, w := range tt.want {
			if !strings.Contains(res.Text, w) {
				t.Errorf("%s.Call(%s) = %q, want it to contain %q", tt.tool, tt.args, res.Text, w)
			}
		}
	}
}
