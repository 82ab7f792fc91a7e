package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/hub"
)

// hubRig is a rig whose server has an event hub with crew c (agent a, no
// links) and crew locked (agent w, linked only to client://other).
func hubRig(t *testing.T) (*txRig, *hub.Hub) {
	t.Helper()
	h := hub.New()
	if err := h.AddCrew("c", []string{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.AddCrew("locked", []string{"w"}, []hub.Link{{To: "client://other"}}); err != nil {
		t.Fatal(err)
	}
	return newTxRig(t, txRigOptions{logs: true, hub: h}), h
}

// hello opens a connection of kind as client name.
func (r *txRig) hello(t *testing.T, kind, name string) *txPeer {
	t.Helper()
	p := r.dial(t, kind, "")
	hello := `{"t":"hello","id":"h"}`
	if name != "" {
		hello = `{"t":"hello","id":"h","client":"` + name + `"}`
	}
	p.send(t, hello)
	if m := p.reply(t); m["ok"] != true {
		t.Fatalf("hello = %v", m)
	}
	return p
}

// hubMessage reads the next message, which must be an orrery.hub.message
// frame of seq 0 and no session, and returns its value.
func (p *txPeer) hubMessage(t *testing.T) map[string]any {
	t.Helper()
	m, raw, err := p.next(10 * time.Second)
	if err != nil {
		t.Fatalf("%s: waiting for a hub message: %v", p.kind, err)
	}
	meta, _ := m["metadata"].(map[string]any)
	orr, _ := meta["orrery"].(map[string]any)
	if m["type"] != "CUSTOM" || m["name"] != "orrery.hub.message" || orr == nil || orr["seq"] != 0.0 || orr["session"] != nil {
		t.Fatalf("%s: got %s, want a CUSTOM orrery.hub.message with seq 0 and no session", p.kind, raw)
	}
	return m["value"].(map[string]any)
}

func TestHubOverConnections(t *testing.T) {
	for _, kind := range []string{"ws", "pipe"} {
		t.Run(kind, func(t *testing.T) {
			r, h := hubRig(t)
			studio := r.hello(t, kind, "studio")

			// An agent posts to the client's seat.
			if err := h.Post("agent://c/a", "client://studio", json.RawMessage(`{"pct":10}`)); err != nil {
				t.Fatalf("Post(client://studio) = %v, want the seat held", err)
			}
			if v := studio.hubMessage(t); v["to"] != "client://studio" || v["from"] != "agent://c/a" || v["payload"].(map[string]any)["pct"] != 10.0 || v["expectsReply"] != nil {
				t.Errorf("posted message = %v, want to, from and the payload as is", v)
			}

			// An agent sends and waits; the client replies with hub.reply.
			answered := make(chan hub.Message, 1)
			go func() {
				m, err := h.Send(context.Background(), "agent://c/a", "client://studio", json.RawMessage(`"ship it?"`), time.Minute, "")
				if err != nil {
					t.Error(err)
				}
				answered <- m
			}()
			v := studio.hubMessage(t)
			corr, _ := v["correlationId"].(string)
			if v["expectsReply"] != true || corr == "" || v["payload"] != "ship it?" {
				t.Fatalf("sent message = %v, want expectsReply and a correlationId", v)
			}
			studio.send(t, `{"t":"hub.reply","id":"r1","correlationId":"`+corr+`","payload":{"ok":true}}`)
			if m := studio.replyTo(t, "r1"); m["ok"] != true {
				t.Errorf("hub.reply = %v, want ok", m)
			}
			if m := <-answered; string(m.Payload) != `{"ok":true}` {
				t.Errorf("the agent's Send() got %s, want the client's reply", m.Payload)
			}
			studio.send(t, `{"t":"hub.reply","id":"r2","correlationId":"`+corr+`","payload":1}`)
			if m := studio.replyTo(t, "r2"); m["ok"] != false || !strings.Contains(m["error"].(string), "no send is waiting") {
				t.Errorf("a second hub.reply = %v, want a refusal", m)
			}

			// The client posts to the agent's mailbox, from its seat.
			studio.send(t, `{"t":"hub.post","id":"p1","to":"agent://c/a","payload":"hi"}`)
			if m := studio.replyTo(t, "p1"); m["ok"] != true {
				t.Fatalf("hub.post = %v", m)
			}
			if box, _ := h.Take("agent://c/a"); len(box) != 1 || box[0].From != "client://studio" || string(box[0].Payload) != `"hi"` {
				t.Errorf("mailbox = %+v, want the client's post", box)
			}

			// The client sends and the connection goes on serving while the
			// send waits; the answer is the send's reply value.
			studio.send(t, `{"t":"hub.send","id":"s1","to":"agent://c/a","payload":"ping","timeoutMs":60000,"correlationId":"c-ping"}`)
			var box []hub.Message
			for len(box) == 0 {
				box, _ = h.Take("agent://c/a")
				time.Sleep(time.Millisecond)
			}
			if !box[0].ExpectsReply || box[0].CorrelationID != "c-ping" || box[0].From != "client://studio" {
				t.Fatalf("mailbox = %+v, want the client's send", box)
			}
			studio.send(t, `{"t":"session.list","id":"l1"}`)
			if m := studio.replyTo(t, "l1"); m["ok"] != true {
				t.Fatalf("session.list while a send waits = %v", m)
			}
			if err := h.Reply("c-ping", json.RawMessage(`"pong"`)); err != nil {
				t.Fatal(err)
			}
			m := studio.replyTo(t, "s1")
			if val, _ := m["value"].(map[string]any); m["ok"] != true || val["payload"] != "pong" || val["correlationId"] != "c-ping" {
				t.Errorf("hub.send = %v, want the agent's pong under c-ping", m)
			}

			// Silence past the timeout is a refusal.
			studio.send(t, `{"t":"hub.send","id":"s2","to":"agent://c/a","payload":"anyone?","timeoutMs":1}`)
			if m := studio.replyTo(t, "s2"); m["ok"] != false || !strings.Contains(m["error"].(string), "no reply came in time") {
				t.Errorf("an unanswered hub.send = %v, want a refusal", m)
			}

			// Topics: a retained value arrives on subscribe, later publishes
			// while subscribed, nothing after unsubscribe.
			if _, err := h.Publish("agent://c/a", "run.progress", json.RawMessage(`"old"`), "last"); err != nil {
				t.Fatal(err)
			}
			studio.send(t, `{"t":"hub.subscribe","id":"sub","topic":"run.progress"}`)
			retained := studio.hubMessage(t)
			if m := studio.replyTo(t, "sub"); m["ok"] != true {
				t.Fatalf("hub.subscribe = %v", m)
			}
			if retained["topic"] != "run.progress" || retained["payload"] != "old" {
				t.Errorf("on subscribe got %v, want the retained value", retained)
			}
			if rep, _ := h.Publish("agent://c/a", "run.progress", json.RawMessage(`"new"`), ""); rep.Delivered != 1 {
				t.Errorf("Publish() delivered %d, want 1", rep.Delivered)
			}
			if v := studio.hubMessage(t); v["payload"] != "new" || v["from"] != "agent://c/a" {
				t.Errorf("published message = %v", v)
			}
			studio.send(t, `{"t":"hub.unsubscribe","id":"u","topic":"run.progress"}`)
			studio.replyTo(t, "u")
			if rep, _ := h.Publish("agent://c/a", "run.progress", json.RawMessage(`"gone"`), ""); rep.Delivered != 0 {
				t.Errorf("Publish() after unsubscribe delivered %d, want 0", rep.Delivered)
			}

			// The client publishes; the links ACL still governs it.
			if err := h.Subscribe("agent://c/a", "news"); err != nil {
				t.Fatal(err)
			}
			studio.send(t, `{"t":"hub.publish","id":"pub","topic":"news","payload":1}`)
			if m := studio.replyTo(t, "pub"); m["ok"] != true || m["value"].(map[string]any)["delivered"] != 1.0 {
				t.Errorf("hub.publish = %v, want delivered 1", m)
			}
			studio.send(t, `{"t":"hub.post","id":"p2","to":"agent://locked/w","payload":1}`)
			if m := studio.replyTo(t, "p2"); m["ok"] != false || !strings.Contains(m["error"].(string), `add {to = "client://studio", direction = "inbound"}`) {
				t.Errorf("a post the links refuse = %v, want the refusal naming the missing link", m)
			}

			// A client that named no name has no seat to act from.
			anon := r.hello(t, kind, "")
			anon.send(t, `{"t":"hub.post","id":"p3","to":"agent://c/a","payload":1}`)
			if m := anon.replyTo(t, "p3"); m["ok"] != false || !strings.Contains(m["error"].(string), "hello.client") {
				t.Errorf("hub.post without a client name = %v, want a refusal naming hello.client", m)
			}
		})
	}
}

// TestHubSeatShared checks that every connection naming a client shares
// its seat, and that the seat goes with the last of them.
func TestHubSeatShared(t *testing.T) {
	r, h := hubRig(t)
	one := r.hello(t, "ws", "studio")
	two := r.hello(t, "pipe", "studio")
	if err := h.Post("agent://c/a", "client://studio", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*txPeer{one, two} {
		if v := p.hubMessage(t); v["payload"] != 1.0 {
			t.Errorf("%s got %v, want the post", p.kind, v)
		}
	}
	one.ws.Close(1000, "")
	waitFor(t, "the seat held by the pipe alone", func() bool {
		err := h.Post("agent://c/a", "client://studio", json.RawMessage(`2`))
		return err == nil
	})
	if v := two.hubMessage(t); v["payload"] != 2.0 {
		t.Errorf("pipe got %v, want the second post", v)
	}
	two.nc.Close()
	waitFor(t, "the seat left", func() bool {
		return errors.Is(h.Post("agent://c/a", "client://studio", nil), hub.ErrUnknownAddress)
	})
}

func TestHubOverControl(t *testing.T) {
	r, h := hubRig(t)
	control := func(query, body string) (int, map[string]any) {
		t.Helper()
		status, _, data := r.post(t, r.local, http.MethodPost, "/control"+query, nil, body)
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("POST /control%s %s = %d %s: %v", query, body, status, data, err)
		}
		return status, m
	}
	if status, m := control("?client=cli", `{"t":"hub.post","id":"1","to":"agent://c/a","payload":{"n":1}}`); status != 200 {
		t.Fatalf("hub.post = %d %v", status, m)
	}
	if box, _ := h.Take("agent://c/a"); len(box) != 1 || box[0].From != "client://cli" {
		t.Errorf("mailbox = %+v, want the post from client://cli", box)
	}

	// hub.send's reply is the answer.
	go func() {
		for {
			box, _ := h.Take("agent://c/a")
			if len(box) > 0 {
				_ = h.Reply(box[0].CorrelationID, json.RawMessage(`{"yes":true}`))
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	status, m := control("?client=cli", `{"t":"hub.send","id":"2","to":"agent://c/a","payload":"ok?","timeoutMs":60000}`)
	if p, _ := m["payload"].(map[string]any); status != 200 || p["yes"] != true || m["correlationId"] == "" {
		t.Errorf("hub.send = %d %v, want the agent's answer", status, m)
	}

	tests := []struct {
		name, query, body string
		want              string
	}{
		{"no client name", "", `{"t":"hub.post","id":"3","to":"agent://c/a","payload":1}`, "?client=NAME"},
		{"subscribe without a seat", "?client=cli", `{"t":"hub.subscribe","id":"4","topic":"x"}`, "open a WebSocket or pipe whose hello names client cli"},
		{"nobody at the address", "?client=cli", `{"t":"hub.post","id":"5","to":"agent://nope/x","payload":1}`, "nobody is at that address"},
		{"a bad address", "?client=cli", `{"t":"hub.post","id":"6","to":"nope","payload":1}`, "use agent://CREW/AGENT"},
		{"a reply to nothing", "?client=cli", `{"t":"hub.reply","id":"7","correlationId":"c-x","payload":1}`, "no send is waiting"},
		{"silence", "?client=cli", `{"t":"hub.send","id":"8","to":"agent://c/a","payload":1,"timeoutMs":1}`, "send again with a longer timeoutMs"},
		{"a negative timeout", "?client=cli", `{"t":"hub.send","id":"9","to":"agent://c/a","payload":1,"timeoutMs":-1}`, "timeoutMs must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, m := control(tt.query, tt.body)
			if msg, _ := m["error"].(string); status != http.StatusBadRequest || !strings.Contains(msg, tt.want) {
				t.Errorf("POST /control%s %s = %d %v, want 400 naming %q", tt.query, tt.body, status, m, tt.want)
			}
		})
	}
	_, _ = h.Take("agent://c/a")

	// With the seat held by a connection, /control may subscribe it.
	studio := r.hello(t, "ws", "studio")
	if status, m := control("?client=studio", `{"t":"hub.subscribe","id":"10","topic":"t"}`); status != 200 {
		t.Fatalf("hub.subscribe with a seat = %d %v", status, m)
	}
	status, m = control("?client=cli", `{"t":"hub.publish","id":"11","topic":"t","payload":"x"}`)
	if status != 200 || m["delivered"] != 1.0 {
		t.Errorf("hub.publish = %d %v, want delivered 1", status, m)
	}
	if v := studio.hubMessage(t); v["from"] != "client://cli" || v["topic"] != "t" {
		t.Errorf("studio got %v, want cli's publish", v)
	}
}

func TestHubNone(t *testing.T) {
	r := newTxRig(t, txRigOptions{})
	status, _, body := r.post(t, r.local, http.MethodPost, "/control?client=cli", nil, `{"t":"hub.post","id":"1","to":"agent://c/a","payload":1}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "no event hub") {
		t.Errorf("hub.post without a hub = %d %s, want 400 saying there is no hub", status, body)
	}
}
