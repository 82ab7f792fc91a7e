package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// wsPeer is a WebSocket client of orrery serve, read object by object.
type wsPeer struct {
	t       *testing.T
	c       *websocket.Conn
	pending [][]byte
	seen    []string // the last messages read, named in a failed read
}

func dialWS(t *testing.T, url string) *wsPeer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/ws", nil)
	if err != nil {
		t.Fatalf("dial /ws: %v", err)
	}
	c.SetReadLimit(4 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsPeer{t: t, c: c}
}

func (p *wsPeer) send(v any) {
	p.t.Helper()
	data, _ := json.Marshal(v)
	if err := p.c.Write(context.Background(), websocket.MessageText, data); err != nil {
		p.t.Fatalf("send %s: %v", data, err)
	}
}

// next returns the next object the server sent.
func (p *wsPeer) next() (map[string]any, []byte) {
	p.t.Helper()
	for len(p.pending) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		_, data, err := p.c.Read(ctx)
		cancel()
		if err != nil {
			p.t.Fatalf("read /ws: %v; the last messages read:\n%s", err, strings.Join(p.seen, "\n"))
		}
		p.pending = bytes.Split(data, []byte("\n"))
	}
	raw := p.pending[0]
	p.pending = p.pending[1:]
	if p.seen = append(p.seen, string(raw)); len(p.seen) > 40 {
		p.seen = p.seen[1:]
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		p.t.Fatalf("message %s: %v", raw, err)
	}
	return m, raw
}

// until returns the first message stop accepts; the replies and frames
// before it are passed to seen.
func (p *wsPeer) until(stop func(m map[string]any) bool, seen func(m map[string]any, raw []byte)) map[string]any {
	p.t.Helper()
	for {
		m, raw := p.next()
		if seen != nil {
			seen(m, raw)
		}
		if stop(m) {
			return m
		}
	}
}

func custom(name string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["type"] == "CUSTOM" && m["name"] == name }
}

func replyTo(id string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["t"] == "reply" && m["reqId"] == id }
}

// testServeAgentTools drives orrery serve's agent through a WebSocket
// client that draws consent: the model finds ask and the hub tools with
// tools.search, asks a choice the client answers with input.answer, sends
// to the client's hub seat and gets its hub.reply, and delegates with the
// task tool. A run with no client that can answer has its question
// refused.
func testServeAgentTools(t *testing.T, bin string) {
	env := environ(t)
	dir := t.TempDir()
	type m = map[string]any
	model := writeScript(t, filepath.Join(dir, "model.json"),
		m{"tool_calls": []m{{"name": "tools.search", "args": m{"query": "ask hub send"}}}},
		m{"tool_calls": []m{{"name": "ask", "args": m{"question": "Which colour?", "choices": []string{"red", "blue"}}}}},
		m{"tool_calls": []m{{"name": "hub.send", "args": m{"to": "client://studio", "payload": m{"q": "ship?"}, "timeoutMs": 60000}}}},
		m{"tool_calls": []m{{"name": "task", "args": m{"description": "Say done.", "role": "helper"}}}},
		m{"text": []string{"sub done"}},
		m{"text": []string{"all done"}},
		// The second session: nobody draws consent.
		m{"tool_calls": []m{{"name": "tools.search", "args": m{"query": "ask"}}}},
		m{"tool_calls": []m{{"name": "ask", "args": m{"question": "Deploy?"}}}},
		m{"text": []string{"did not ask"}},
	)
	s := serve(t, bin, env, "--data", filepath.Join(dir, "data"), "--model", model)
	p := dialWS(t, s.url)
	p.send(m{"t": "hello", "id": "h", "client": "studio", "draws": []string{"thread", "tools", "consent"}})
	if r := p.until(replyTo("h"), nil); r["ok"] != true {
		t.Fatalf("hello = %v", r)
	}
	p.send(m{"t": "session.new", "id": "n"})
	r := p.until(replyTo("n"), nil)
	session, _ := r["value"].(map[string]any)["session"].(string)
	if session == "" {
		t.Fatalf("session.new = %v", r)
	}
	p.send(m{"t": "session.attach", "id": "a", "session": session})
	p.until(replyTo("a"), nil)
	p.send(m{"t": "run.send", "id": "r", "session": session, "input": m{"text": "go"}})

	calls := map[string]string{}   // toolCallId → tool
	results := map[string]string{} // tool → its result's content
	var subagents []string
	// The hub's message to the client may come before the reply to the
	// answer that let the run go on, so it is kept wherever it is read.
	var hm map[string]any
	note := func(m map[string]any, raw []byte) {
		seenFn(calls, results, m)
		if m["type"] == "SUBAGENT_STARTED" {
			subagents = append(subagents, m["name"].(string))
		}
		if custom("orrery.hub.message")(m) {
			hm = m
		}
	}
	q := p.until(custom("orrery.input.requested"), note)["value"].(map[string]any)
	if q["inputKind"] != "choice" || q["prompt"] != "Which colour?" {
		t.Errorf("orrery.input.requested = %v, want the choice", q)
	}
	p.send(m{"t": "input.answer", "id": "i1", "session": session, "request": q["request"], "value": "green"})
	if r := p.until(replyTo("i1"), note); r["ok"] != false || !strings.Contains(r["error"].(string), "one of red, blue") {
		t.Errorf("input.answer green = %v, want a refusal listing the choices", r)
	}
	p.send(m{"t": "input.answer", "id": "i2", "session": session, "request": q["request"], "value": "blue"})
	if r := p.until(replyTo("i2"), note); r["ok"] != true {
		t.Errorf("input.answer blue = %v, want ok", r)
	}
	if hm == nil {
		p.until(custom("orrery.hub.message"), note)
	}
	v := hm["value"].(map[string]any)
	if v["to"] != "client://studio" || v["from"] != "agent://"+session+"/main" || v["expectsReply"] != true {
		t.Errorf("orrery.hub.message = %v, want a send from agent://%s/main", v, session)
	}
	if meta := hm["metadata"].(map[string]any)["orrery"].(map[string]any); meta["seq"] != 0.0 || meta["session"] != nil {
		t.Errorf("orrery.hub.message metadata = %v, want seq 0 and no session", meta)
	}
	p.send(m{"t": "hub.reply", "id": "hr", "correlationId": v["correlationId"], "payload": "go ahead"})
	p.until(func(m map[string]any) bool { return m["type"] == "RUN_FINISHED" || m["type"] == "RUN_ERROR" }, note)
	if got := results["ask"]; got != `{"answer":"blue"}` {
		t.Errorf("ask result = %s, want the answer blue", got)
	}
	if got := results["hub.send"]; !strings.Contains(got, `"reply":"go ahead"`) {
		t.Errorf("hub.send result = %s, want the client's reply", got)
	}
	if got := results["task"]; got != "sub done" || len(subagents) != 1 || subagents[0] != "helper" {
		t.Errorf("task result = %q, sub-agents %v; want the helper's answer", got, subagents)
	}

	// No client that draws consent is attached: the question is refused.
	var created struct{ Session string }
	s.control(map[string]any{"t": "session.new", "id": "n2"}, &created)
	s.control(map[string]any{"t": "run.send", "id": "r2", "session": created.Session, "input": map[string]any{"text": "go"}}, nil)
	calls = map[string]string{}
	results = map[string]string{}
	s.events(created.Session, 0, func(f seen) bool {
		var m map[string]any
		_ = json.Unmarshal(f.data, &m)
		seenFn(calls, results, m)
		return f.typ != "RUN_FINISHED" && f.typ != "RUN_ERROR"
	})
	if got := results["ask"]; !strings.Contains(got, "no client that can answer is attached") {
		t.Errorf("ask with nobody to answer = %q, want the refusal", got)
	}
}

func seenFn(calls, results map[string]string, m map[string]any) {
	switch m["type"] {
	case "TOOL_CALL_START":
		calls[m["toolCallId"].(string)] = m["toolCallName"].(string)
	case "TOOL_CALL_RESULT":
		results[calls[m["toolCallId"].(string)]] = m["content"].(string)
	}
}
