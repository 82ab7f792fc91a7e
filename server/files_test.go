package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkspaceFilesRequest sends workspace.files in both forms over POST
// /control, WebSocket and the pipe: a prefix lists paths that start with
// it, a query matches fuzzily and says which characters it matched.
func TestWorkspaceFilesRequest(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"server/conn.go", "server/control.go", "client/connect.go", "conf.md", ".git/conn"} {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := newTxRig(t, txRigOptions{logs: true, workspace: dir})
	var created struct{ Session string }
	if err := json.Unmarshal(r.control(t, `{"t":"session.new","id":"n"}`), &created); err != nil || created.Session == "" {
		t.Fatalf("session.new: %v", err)
	}
	req := func(id, fields string) string {
		return `{"t":"workspace.files","id":"` + id + `","session":"` + created.Session + `",` + fields + `}`
	}
	tests := []struct {
		name, fields string
		want         string // the reply's value
	}{
		{"prefix", `"prefix":"server/co"`, `{"files":["server/conn.go","server/control.go"]}`},
		{"query", `"query":"conn"`, `{"files":["server/conn.go","client/connect.go"],"matches":[[7,8,9,10],[7,8,9,10]]}`},
		{"query across the path", `"query":"svconn","limit":1`, `{"files":["server/conn.go"],"matches":[[0,3,7,8,9,10]]}`},
		{"query limited", `"query":"co","limit":1`, `{"files":["conf.md"],"matches":[[0,1]],"truncated":true}`},
		{"query matching nothing", `"query":"zz"`, `{"files":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.TrimSpace(string(r.control(t, req("q", tt.fields)))); got != tt.want {
				t.Errorf("POST /control workspace.files {%s} = %s, want %s", tt.fields, got, tt.want)
			}
			for _, kind := range []string{"ws", "pipe"} {
				p := r.dial(t, kind, "")
				p.send(t, req("q", tt.fields))
				m := p.replyTo(t, "q")
				got, _ := json.Marshal(m["value"])
				if m["ok"] != true || string(got) != tt.want {
					t.Errorf("%s: workspace.files {%s} = %v, want ok and %s", kind, tt.fields, m, tt.want)
				}
			}
		})
	}

	for _, bad := range []struct{ fields, want string }{
		{`"prefix":"server/","query":"conn"`, "a prefix or a query, not both"},
		{`"query":"` + strings.Repeat("a", 129) + `"`, "more than 128"},
		{`"query":"conn","limit":1001`, "limit must be between 1 and 1000"},
	} {
		status, _, body := r.post(t, r.local, http.MethodPost, "/control", nil, req("q", bad.fields))
		var v struct{ Error string }
		json.Unmarshal(body, &v)
		if status != http.StatusBadRequest || !strings.Contains(v.Error, bad.want) || !txSentence(v.Error) {
			t.Errorf("POST /control workspace.files {%.40s} = %d %s, want 400 and a sentence containing %q", bad.fields, status, body, bad.want)
		}
	}
}
