package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/acp"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// oriAgentDir holds the ACP test agent (agent/acp/testdata/agent).
const oriAgentDir = "../agent/acp/testdata/agent"

// oriHarness is a kernel on a real SQLite file behind a real listener,
// whose model "acp:test" is the ACP test agent.
type oriHarness struct {
	url string
	k   *kernel.Kernel
}

func newOriHarness(t *testing.T, needNode bool) *oriHarness {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(oriAgentDir, "node_modules/@agentclientprotocol/sdk/package.json"))
	}
	if needNode && err != nil {
		if os.Getenv("ORRERY_REQUIRE_NODE") != "" {
			t.Fatalf("node and the ACP test agent are required: %v; run npm ci --prefix agent/acp/testdata/agent", err)
		}
		t.Skipf("node or the ACP test agent is missing (%v): run npm ci --prefix agent/acp/testdata/agent", err)
	}
	script, _ := filepath.Abs(filepath.Join(oriAgentDir, "agent.mjs"))
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	h := &oriHarness{}
	a, err := acp.New(acp.Config{Name: "test", Command: node, Args: []string{script},
		CancelTimeout: time.Second, StopTimeout: time.Second,
		Outside: func(ctx context.Context, session string, evs ...protocol.Event) error {
			s, err := h.k.Session(ctx, session)
			if err != nil {
				return err
			}
			return s.Append(ctx, evs...)
		}})
	if err != nil {
		t.Fatal(err)
	}
	cwd, _ := os.Getwd()
	h.k = kernel.New(kernel.Config{
		Store: st, DefaultModel: "offline", DebugActor: true, Tools: tool.Builtins(),
		Workspace: tool.Workspace{Root: cwd}, ConsentTimeout: 20 * time.Second,
		Models: func(spec string) (agent.Provider, error) {
			if spec == "acp:test" {
				return a, nil
			}
			return models.Resolve(spec)
		},
	})
	if err := h.k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The test agent is named as a kernel started with --agent acp:test
	// would define it.
	srv := server.New(server.Config{Kernel: h.k, CheckSpec: models.RequestPolicy{Defined: []string{"acp:test"}}.Check})
	ts := httptest.NewServer(srv)
	h.url = ts.URL
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		ts.Close()
		_ = h.k.Close(ctx)
		_ = a.Close(ctx)
		st.Close()
	})
	return h
}

func (h *oriHarness) session(t *testing.T, model string) string {
	t.Helper()
	s, err := h.k.CreateSession(context.Background(), kernel.SessionOptions{Model: model})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID()
}

// browser is one ori WebSocket client.
type browser struct {
	t    *testing.T
	c    *websocket.Conn
	seen []map[string]any
}

func (h *oriHarness) browser(t *testing.T, session string) *browser {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(h.url, "http") + "/acp/ws"
	if session != "" {
		url += "?session=" + session
	}
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	c.SetReadLimit(1 << 24)
	t.Cleanup(func() { c.CloseNow() })
	return &browser{t: t, c: c}
}

func (b *browser) send(msg string) {
	b.t.Helper()
	if err := b.c.Write(context.Background(), websocket.MessageText, []byte(msg)); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) next() map[string]any {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	typ, data, err := b.c.Read(ctx)
	if err != nil {
		b.t.Fatalf("read after %v: %v", msgTypes(b.seen), err)
	}
	if typ != websocket.MessageText {
		b.t.Fatalf("message type %v, want text", typ)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		b.t.Fatalf("message %s is not one JSON object: %v", data, err)
	}
	b.seen = append(b.seen, m)
	return m
}

// until reads messages up to and including the first of type typ.
func (b *browser) until(typ string) map[string]any {
	b.t.Helper()
	for {
		if m := b.next(); m["type"] == typ {
			return m
		}
	}
}

func msgTypes(ms []map[string]any) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m["type"].(string)
		if u, ok := m["update"].(map[string]any); ok {
			out[i] += ":" + u["sessionUpdate"].(string)
		}
	}
	return out
}

// agentText joins the text of agent_message_chunk updates.
func agentText(ms []map[string]any) string {
	var b strings.Builder
	for _, m := range ms {
		u, ok := m["update"].(map[string]any)
		if !ok || u["sessionUpdate"] != "agent_message_chunk" {
			continue
		}
		b.WriteString(u["content"].(map[string]any)["text"].(string))
	}
	return b.String()
}

func TestOriReplayAfterReconnect(t *testing.T) {
	h := newOriHarness(t, true)
	id := h.session(t, "acp:test")
	b := h.browser(t, id)
	if hello := b.next(); hello["type"] != "hello" || hello["sessionId"] != id || hello["turnActive"] != false {
		t.Fatalf("first message = %v, want hello {sessionId %s, turnActive false}", hello, id)
	}
	b.send(`{"type":"prompt","text":"text please"}`)
	b.until("turn_ended")
	live := b.seen[1:]
	if got := agentText(live); got != "Hello, world." {
		t.Errorf("live text = %q", got)
	}
	wantTypes := []string{"user_message", "turn_started", "session_update:available_commands_update", "session_update:agent_thought_chunk",
		"session_update:agent_message_chunk", "session_update:agent_message_chunk", "session_update:plan", "session_update:usage_update", "turn_ended"}
	if got := strings.Join(msgTypes(live), " "); got != strings.Join(wantTypes, " ") {
		t.Errorf("live messages = %s\nwant %s", got, strings.Join(wantTypes, " "))
	}
	// Updates are relayed verbatim: the raw ACP update, as the agent sent it.
	for _, m := range live {
		if u, ok := m["update"].(map[string]any); ok && u["sessionUpdate"] == "agent_message_chunk" && u["messageId"] != "msg_1" {
			t.Errorf("relayed update %v lost the agent's messageId", u)
		}
	}
	b.c.Close(websocket.StatusNormalClosure, "")

	// A second browser (or the same one reconnecting) gets hello, then the
	// same history, message for message.
	b2 := h.browser(t, id)
	if hello := b2.next(); hello["type"] != "hello" || hello["turnActive"] != false {
		t.Fatalf("hello after reconnect = %v", hello)
	}
	for range live {
		b2.next()
	}
	got, _ := json.Marshal(b2.seen[1:])
	want, _ := json.Marshal(live)
	if string(got) != string(want) {
		t.Errorf("replay after reconnect differs from what was live:\n got %s\nwant %s", got, want)
	}
}

func TestOriTwoBrowsersPermission(t *testing.T) {
	h := newOriHarness(t, true)
	id := h.session(t, "acp:test")
	b1, b2 := h.browser(t, id), h.browser(t, id)
	b1.next()
	b2.next()
	b1.send(`{"type":"prompt","text":"tool"}`)
	r1, r2 := b1.until("permission_request"), b2.until("permission_request")
	if r1["requestId"] != r2["requestId"] {
		t.Fatalf("browsers got different requests: %v and %v", r1["requestId"], r2["requestId"])
	}
	req := r1["request"].(map[string]any)
	if req["toolCall"].(map[string]any)["toolCallId"] != "call_1" || len(req["options"].([]any)) != 3 {
		t.Errorf("permission_request.request = %v, want the agent's raw request", req)
	}
	reqID := r1["requestId"].(string)
	b1.send(`{"type":"permission_response","requestId":"` + reqID + `","optionId":"nope"}`)
	if m := b1.until("error"); !strings.Contains(m["message"].(string), "not offered") {
		t.Errorf("unknown option: error = %v", m["message"])
	}
	b1.send(`{"type":"permission_response","requestId":"` + reqID + `","optionId":"yes"}`)
	if m := b2.until("permission_resolved"); m["requestId"] != reqID {
		t.Errorf("second browser permission_resolved = %v", m)
	}
	b2.send(`{"type":"permission_response","requestId":"` + reqID + `","optionId":"no"}`)
	if m := b2.until("error"); !strings.Contains(m["message"].(string), "no consent request") {
		t.Errorf("late answer: error = %v, want it refused", m["message"])
	}
	b1.until("turn_ended")
	if got := agentText(b1.seen); got != "chose yes" {
		t.Errorf("text = %q, want the first answer to win", got)
	}
	// A browser that connects now finds no pending request, and the
	// resolution in the history.
	b3 := h.browser(t, id)
	b3.until("turn_ended")
	for _, m := range b3.seen {
		if m["type"] == "permission_request" {
			t.Errorf("a resolved request was replayed as pending: %v", m)
		}
	}
	if got := msgTypes(b3.seen); !strings.Contains(strings.Join(got, " "), "permission_resolved") {
		t.Errorf("history %v lacks permission_resolved", got)
	}
}

func TestOriPendingPermissionOnConnect(t *testing.T) {
	h := newOriHarness(t, true)
	id := h.session(t, "acp:test")
	b1 := h.browser(t, id)
	b1.next()
	b1.send(`{"type":"prompt","text":"wait"}`)
	r := b1.until("permission_request")
	b2 := h.browser(t, id)
	if hello := b2.next(); hello["turnActive"] != true {
		t.Errorf("hello during a turn = %v, want turnActive true", hello)
	}
	if m := b2.until("permission_request"); m["requestId"] != r["requestId"] {
		t.Errorf("pending request on connect = %v, want %v", m["requestId"], r["requestId"])
	}
	b2.send(`{"type":"permission_response","requestId":"` + r["requestId"].(string) + `","cancelled":true}`)
	b1.until("turn_ended")
	if got := agentText(b1.seen); got != "chose no" {
		t.Errorf("dismissed request: text = %q, want the reject option chosen", got)
	}
}

func TestOriTurnAlreadyRunning(t *testing.T) {
	h := newOriHarness(t, true)
	id := h.session(t, "acp:test")
	b := h.browser(t, id)
	b.next()
	b.send(`{"type":"prompt","text":"slow"}`)
	b.until("session_update")
	b.send(`{"type":"prompt","text":"text"}`)
	if m := b.until("error"); m["message"] != "a turn is already running" {
		t.Errorf("second prompt: error = %v", m["message"])
	}
	b.send(`{"type":"cancel"}`)
	if m := b.until("turn_ended"); m["stopReason"] != "cancelled" {
		t.Errorf("turn_ended after cancel = %v, want stopReason cancelled", m)
	}
	// The session goes on.
	b.send(`{"type":"prompt","text":"text"}`)
	b.until("turn_ended")
	if got := agentText(b.seen); !strings.HasSuffix(got, "Hello, world.") {
		t.Errorf("text after cancel = %q", got)
	}
}

func TestOriBadInput(t *testing.T) {
	h := newOriHarness(t, false)
	id := h.session(t, "")
	tests := []struct {
		session, msg, want string
	}{
		{id, `{"type":`, "malformed message: "},
		{id, `[1,2]`, "malformed message: "},
		{id, `{"text":"hi"}`, "malformed message: type is missing"},
		{id, `{"type":"dance"}`, `unknown message type "dance"`},
		{id, `{"type":"permission_response","requestId":"nope","optionId":"yes"}`, "permission_response refused: no consent request"},
		{id, `{"type":"permission_response","requestId":"nope","cancelled":true}`, `no permission request "nope" is pending`},
		{id, `{"type":"permission_response"}`, "malformed message: permission_response needs requestId"},
		{id, `{"type":"prompt"}`, "malformed message: prompt needs text"},
		{id, `{"type":"cancel"}`, "cancel failed: "},
		{"", `{"type":"prompt","text":"hi"}`, "no agent session"},
		{"", `{"type":"cancel"}`, "no agent session"},
	}
	for _, tt := range tests {
		b := h.browser(t, tt.session)
		if hello := b.next(); hello["sessionId"] != tt.session {
			t.Errorf("hello = %v, want sessionId %q", hello, tt.session)
		}
		b.send(tt.msg)
		m := b.until("error")
		if msg, _ := m["message"].(string); !strings.HasPrefix(msg, tt.want) {
			t.Errorf("%s: error %q, want it to start %q", tt.msg, msg, tt.want)
		}
		// The connection goes on after a bad message.
		b.send(`{"type":"dance"}`)
		b.until("error")
	}
}

func TestOriBuiltInAgent(t *testing.T) {
	h := newOriHarness(t, false)
	id := h.session(t, "")
	b := h.browser(t, id)
	b.next()
	b.send(`{"type":"prompt","text":"hello there","attachments":[{"path":"notes.txt","name":"notes"}]}`)
	um := b.until("user_message")
	if um["text"] != "hello there" {
		t.Errorf("user_message = %v", um)
	}
	atts, _ := json.Marshal(um["attachments"])
	if string(atts) != `[{"name":"notes","path":"notes.txt"}]` {
		t.Errorf("user_message attachments = %s, want them verbatim", atts)
	}
	end := b.until("turn_ended")
	if end["stopReason"] != "end_turn" {
		t.Errorf("turn_ended = %v", end)
	}
	if agentText(b.seen) == "" {
		t.Errorf("the built-in agent's text was not projected into agent_message_chunk: %v", msgTypes(b.seen))
	}
}

// TestSessionNewAgent: session.new {agent} makes a session that the ACP
// agent runs; naming a model too is refused.
func TestSessionNewAgent(t *testing.T) {
	h := newOriHarness(t, true)
	post := func(body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(h.url+"/control", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	if code, v := post(`{"t":"session.new","id":"1","agent":"acp:test","model":"offline"}`); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(v["error"]), "name one") {
		t.Errorf("session.new {agent, model} = %d %v, want 400 naming one", code, v)
	}
	code, v := post(`{"t":"session.new","id":"2","agent":"acp:test"}`)
	if code != http.StatusOK {
		t.Fatalf("session.new {agent} = %d %v", code, v)
	}
	b := h.browser(t, v["session"].(string))
	b.next()
	b.send(`{"type":"prompt","text":"text"}`)
	b.until("turn_ended")
	if got := agentText(b.seen); got != "Hello, world." {
		t.Errorf("text = %q, want the ACP agent's", got)
	}
}
