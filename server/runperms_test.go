package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestRunPermissionsRights: a run.send's permissions.deny only narrows
// what the run may do, so any client may send it; permissions.allow and
// yes widen it, so only a connection that may answer consent may: a page
// from another origin (listed, without a token) is refused, a program on
// this machine is not.
func TestRunPermissionsRights(t *testing.T) {
	const app = "http://app.example:3000"
	r := newTxRig(t, txRigOptions{logs: true, allowedOrigins: []string{app}})
	fromPage := http.Header{"Origin": {app}, "Content-Type": {"application/json"}}
	fromProgram := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct {
		name  string
		hdr   http.Header
		perms string
		ok    bool
	}{
		{"a page's deny", fromPage, `{"deny":["shell"]}`, true},
		{"a page's allow", fromPage, `{"allow":["shell"]}`, false},
		{"a page's yes", fromPage, `{"yes":true}`, false},
		{"a program's allow and yes", fromProgram, `{"allow":["shell"],"yes":true}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var created struct{ Session string }
			if err := json.Unmarshal(r.control(t, `{"t":"session.new","id":"n"}`), &created); err != nil || created.Session == "" {
				t.Fatalf("session.new: %v", err)
			}
			body := `{"t":"run.send","id":"s","session":"` + created.Session + `","input":{"text":"hello"},"permissions":` + tc.perms + `}`
			status, _, reply := bReq{method: "POST", path: "/control", hdr: tc.hdr, body: body}.do(t, r.local)
			switch {
			case tc.ok && (status != http.StatusOK || !strings.Contains(string(reply), `"runId"`)):
				t.Errorf("run.send with permissions %s = %d %s, want 200 and a run", tc.perms, status, reply)
			case !tc.ok && (status == http.StatusOK || !strings.Contains(errorOf(reply), "may not answer consent")):
				t.Errorf("run.send with permissions %s = %d %s, want a refusal saying this connection may not answer consent", tc.perms, status, reply)
			}
		})
	}
}
