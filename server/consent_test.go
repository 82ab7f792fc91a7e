package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/tool"
)

// consentRig is a rig whose kernel has the coding tools in a fresh
// workspace, so the offline model's "write a file" is asked about.
func consentRig(t *testing.T) (*txRig, string) {
	t.Helper()
	dir := t.TempDir()
	return newTxRig(t, txRigOptions{logs: true, tools: tool.NewSet(tool.Coding(tool.Shell{})...), workspace: dir}), dir
}

// untilCustom reads a connection's messages until a CUSTOM event named
// name, and returns its value.
func (p *txPeer) untilCustom(tb testing.TB, name string) map[string]any {
	tb.Helper()
	for {
		m, raw, err := p.next(10 * time.Second)
		if err != nil {
			tb.Fatalf("%s: waiting for %s: %v", p.kind, name, err)
		}
		if m["t"] == "reply" {
			p.skipped = append(p.skipped, fmt.Sprint(m["reqId"]))
		}
		if m["type"] == "CUSTOM" && m["name"] == name {
			v, ok := m["value"].(map[string]any)
			if !ok {
				tb.Fatalf("%s value is not an object: %s", name, raw)
			}
			return v
		}
	}
}

// sawReply reports whether untilCustom passed over the reply to id.
func (p *txPeer) sawReply(id string) bool { return slices.Contains(p.skipped, id) }

func TestConsentOverConnections(t *testing.T) {
	for _, kind := range []string{"ws", "pipe"} {
		t.Run(kind, func(t *testing.T) {
			r, dir := consentRig(t)
			session := r.newIdleSession(t)
			asker := r.dial(t, kind, "")
			asker.send(t, `{"t":"hello","id":"h","client":"web","draws":["thread","tools","consent"]}`)
			if m := asker.reply(t); m["ok"] != true {
				t.Fatalf("hello = %v", m)
			}
			watcher := r.dial(t, kind, "")
			watcher.send(t, `{"t":"hello","id":"h","client":"cli","draws":["thread","tools"]}`)
			watcher.reply(t)
			for _, p := range []*txPeer{asker, watcher} {
				p.send(t, `{"t":"session.attach","id":"a","session":"`+session+`"}`)
				if m := p.replyTo(t, "a"); m["ok"] != true {
					t.Fatalf("attach = %v", m)
				}
			}
			asker.send(t, `{"t":"run.send","id":"r","session":"`+session+`","input":{"text":"write a file notes.md"}}`)
			// The run's frames may come before run.send's reply.
			req := asker.untilCustom(t, "orrery.consent.requested")
			if !asker.sawReply("r") {
				asker.replyTo(t, "r")
			}
			if req["tool"] != "write_file" || req["subject"] != "notes.md" {
				t.Fatalf("requested = %v, want write_file(notes.md)", req)
			}
			id := req["request"].(string)

			// The watcher sees the request too, but may not answer it.
			watcher.untilCustom(t, "orrery.consent.requested")
			watcher.send(t, `{"t":"consent.answer","id":"c1","session":"`+session+`","request":"`+id+`","option":"allow_once"}`)
			if m := watcher.replyTo(t, "c1"); m["ok"] != false || !strings.Contains(m["error"].(string), "does not draw consent") {
				t.Errorf("a watcher's answer = %v, want a refusal naming draws", m)
			}
			asker.send(t, `{"t":"consent.answer","id":"c2","session":"`+session+`","request":"`+id+`","option":"sometimes"}`)
			if m := asker.replyTo(t, "c2"); m["ok"] != false || !strings.Contains(m["error"].(string), "allow_once, allow_session, deny") {
				t.Errorf("an unoffered option = %v, want a refusal listing the options", m)
			}
			asker.send(t, `{"t":"consent.answer","id":"c3","session":"`+session+`","request":"`+id+`","option":"allow_once"}`)
			// The reply and the resolution may come in either order.
			var replied, resolved bool
			for !replied || !resolved {
				m, raw, err := asker.next(10 * time.Second)
				if err != nil {
					t.Fatalf("waiting for the answer's reply and resolution: %v", err)
				}
				switch {
				case m["t"] == "reply":
					if m["reqId"] != "c3" || m["ok"] != true {
						t.Fatalf("answer reply = %s", raw)
					}
					replied = true
				case m["name"] == "orrery.consent.resolved":
					if v := m["value"].(map[string]any); v["outcome"] != "allowed" || v["client"] != "web" {
						t.Errorf("resolved = %s, want allowed by web", raw)
					}
					resolved = true
				}
			}
			// Every client hears how it was resolved.
			if res := watcher.untilCustom(t, "orrery.consent.resolved"); res["outcome"] != "allowed" || res["client"] != "web" {
				t.Errorf("watcher: resolved = %v, want allowed by web", res)
			}
			waitFile(t, filepath.Join(dir, "notes.md"))
		})
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was never written", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConsentOverHTTP(t *testing.T) {
	r, dir := consentRig(t)
	session := r.newIdleSession(t)
	resp, err := http.Get(r.local.URL + "/events?session=" + session + "&client=web&draws=thread,tools,consent")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewScanner(resp.Body)
	events.Buffer(nil, 1<<20)
	r.control(t, `{"t":"run.send","id":"r","session":"`+session+`","input":{"text":"write a file notes.md"}}`)
	var request string
	for request == "" && events.Scan() {
		line, ok := strings.CutPrefix(events.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Value struct {
				Request string `json:"request"`
			} `json:"value"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Name == "orrery.consent.requested" {
			request = ev.Value.Request
		}
	}
	if request == "" {
		t.Fatalf("no orrery.consent.requested on /events: %v", events.Err())
	}
	answer := `{"t":"consent.answer","id":"c","session":"` + session + `","request":"` + request + `","option":"allow_session"}`
	// Without declaring consent on /control, the answer is refused.
	status, _, body := r.post(t, r.local, http.MethodPost, "/control", nil, answer)
	if status == http.StatusOK || !strings.Contains(string(body), "does not draw consent") {
		t.Errorf("undeclared answer = %d %s, want a refusal naming draws", status, body)
	}
	status, _, body = r.post(t, r.local, http.MethodPost, "/control?client=web&draws=thread,tools,consent", nil, answer)
	if status != http.StatusOK {
		t.Fatalf("answer = %d %s, want 200", status, body)
	}
	waitFile(t, filepath.Join(dir, "notes.md"))
}

// TestInputRefuseRights: input.refuse, like input.answer, is for a client
// that draws consent; it names what it needs and what it cannot find.
func TestInputRefuseRights(t *testing.T) {
	for _, kind := range []string{"ws", "pipe"} {
		t.Run(kind, func(t *testing.T) {
			r, _ := consentRig(t)
			session := r.newIdleSession(t)
			watcher := r.dial(t, kind, "")
			watcher.send(t, `{"t":"hello","id":"h","client":"cli","draws":["thread","tools"]}`)
			watcher.reply(t)
			asker := r.dial(t, kind, "")
			asker.send(t, `{"t":"hello","id":"h","client":"web","draws":["thread","tools","consent"]}`)
			asker.reply(t)
			for _, tc := range []struct {
				peer *txPeer
				req  string
				want string
			}{
				{watcher, `"request":"input_1"`, "does not draw consent"},
				{asker, `"request":""`, "input.refuse needs request"},
				{asker, `"request":"input_1"`, `no question "input_1" is pending`},
			} {
				tc.peer.send(t, `{"t":"input.refuse","id":"x","session":"`+session+`",`+tc.req+`}`)
				if m := tc.peer.replyTo(t, "x"); m["ok"] != false || !strings.Contains(fmt.Sprint(m["error"]), tc.want) {
					t.Errorf("input.refuse %s = %v, want a refusal saying %q", tc.req, m, tc.want)
				}
			}
		})
	}
}
