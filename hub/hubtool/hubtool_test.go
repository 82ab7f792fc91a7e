package hubtool_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/subagent"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/hub/hubtool"
	"github.com/getorrery/orrery/tool"
)

// tools returns the hub tools on h by name.
func tools(t *testing.T, h *hub.Hub, self string) map[string]tool.Tool {
	t.Helper()
	out := map[string]tool.Tool{}
	for _, tl := range hubtool.New(h, self) {
		out[tl.Spec().Name] = tl
	}
	return out
}

func call(t *testing.T, ctx context.Context, tl tool.Tool, args string) tool.Result {
	t.Helper()
	res, err := tl.Call(ctx, tool.Call{ID: "call_1", Args: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s(%s) error = %v, want a result", tl.Spec().Name, args, err)
	}
	return res
}

func TestSpecs(t *testing.T) {
	ts := hubtool.New(hub.New(), "")
	var names []string
	for _, tl := range ts {
		s := tl.Spec()
		names = append(names, s.Name)
		if !s.ReadOnly {
			t.Errorf("%s is not read-only: the links ACL governs the hub, not a consent prompt", s.Name)
		}
		var schema map[string]any
		if err := json.Unmarshal(s.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s parameters = %s, %v; want an object schema", s.Name, s.Parameters, err)
		}
		if s.Description == "" {
			t.Errorf("%s has no description", s.Name)
		}
	}
	if got := strings.Join(names, " "); got != "hub.post hub.send hub.publish hub.subscribe hub.inbox hub.reply" {
		t.Errorf("tools = %s", got)
	}
}

func TestPostInboxAndSelf(t *testing.T) {
	h := hub.New()
	ts := tools(t, h, "agent://c/boss")
	worker := subagent.WithSelf(context.Background(), "agent://c/worker")
	tests := []struct {
		name     string
		ctx      context.Context
		tool     string
		args     string
		wantErr  bool
		wantText string
	}{
		{"the worker's mailbox is made on first use", worker, "hub.inbox", `{}`, false, `{"messages":[]}`},
		{"the loop's own self posts", context.Background(), "hub.post", `{"to":"agent://c/worker","payload":{"do":"it"}}`, false, `"posted":true`},
		{"the worker reads it", worker, "hub.inbox", `{}`, false, `"from":"agent://c/boss","to":"agent://c/worker","payload":{"do":"it"}`},
		{"and its mailbox is empty after", worker, "hub.inbox", `{}`, false, `{"messages":[]}`},
		{"nobody at the address", worker, "hub.post", `{"to":"agent://x/y","payload":1}`, true, "nobody is at that address"},
		{"a bad address", worker, "hub.post", `{"to":"boss","payload":1}`, true, "use agent://CREW/AGENT"},
		{"arguments that do not decode", worker, "hub.post", `{"to":5}`, true, `hub.post needs {"to", "payload"}`},
		{"a reply to nothing", worker, "hub.reply", `{"correlationId":"c-none","payload":1}`, true, "no send is waiting"},
		{"subscribe needs a topic", worker, "hub.subscribe", `{"topic":""}`, true, "subscribe needs a topic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, tt.ctx, ts[tt.tool], tt.args)
			if res.Error != tt.wantErr || !strings.Contains(res.Text, tt.wantText) {
				t.Errorf("%s(%s) = %q (error %v), want error %v and %q", tt.tool, tt.args, res.Text, res.Error, tt.wantErr, tt.wantText)
			}
		})
	}
}

func TestSendAndReply(t *testing.T) {
	h := hub.New()
	ts := tools(t, h, "")
	asker := subagent.WithSelf(context.Background(), "agent://c/asker")
	answerer := subagent.WithSelf(context.Background(), "agent://c/answerer")
	call(t, answerer, ts["hub.inbox"], `{}`) // its mailbox exists
	got := make(chan tool.Result, 1)
	go func() {
		res, err := ts["hub.send"].Call(asker, tool.Call{Args: json.RawMessage(`{"to":"agent://c/answerer","payload":"2+2?","timeoutMs":60000}`)})
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	var msgs []hub.Message
	for len(msgs) == 0 {
		var box struct{ Messages []hub.Message }
		if err := json.Unmarshal([]byte(call(t, answerer, ts["hub.inbox"], `{}`).Text), &box); err != nil {
			t.Fatal(err)
		}
		msgs = box.Messages
		time.Sleep(time.Millisecond)
	}
	m := msgs[0]
	if !m.ExpectsReply || m.From != "agent://c/asker" || string(m.Payload) != `"2+2?"` {
		t.Fatalf("answerer's mailbox = %+v, want the send", msgs)
	}
	if res := call(t, answerer, ts["hub.reply"], `{"correlationId":"`+m.CorrelationID+`","payload":4}`); res.Error {
		t.Fatalf("hub.reply = %s", res.Text)
	}
	if res := <-got; res.Error || !strings.Contains(res.Text, `"reply":4`) {
		t.Errorf("hub.send = %q, want the reply 4", res.Text)
	}
	res := call(t, asker, ts["hub.send"], `{"to":"agent://c/answerer","payload":"anyone?","timeoutMs":1}`)
	if !res.Error || !strings.Contains(res.Text, "no reply came in time") || !strings.Contains(res.Text, "do without the answer") {
		t.Errorf("an unanswered hub.send = %q, want a refusal saying what to do", res.Text)
	}
}

func TestPublishSubscribe(t *testing.T) {
	h := hub.New()
	if err := h.AddCrew("locked", []string{"w"}, []hub.Link{{To: "agent://open/a", AllowedTopics: []string{"ok"}}}); err != nil {
		t.Fatal(err)
	}
	ts := tools(t, h, "")
	writer := subagent.WithSelf(context.Background(), "agent://locked/w")
	reader := subagent.WithSelf(context.Background(), "agent://open/a")
	if res := call(t, writer, ts["hub.publish"], `{"topic":"ok","payload":"kept","retainAs":"last"}`); res.Error || !strings.Contains(res.Text, `"delivered":0`) {
		t.Errorf("publish with no subscriber = %q, want delivered 0 and no error", res.Text)
	}
	for _, topic := range []string{"ok", "secret"} {
		if res := call(t, reader, ts["hub.subscribe"], `{"topic":"`+topic+`"}`); res.Error {
			t.Fatalf("subscribe %s = %s", topic, res.Text)
		}
	}
	res := call(t, writer, ts["hub.publish"], `{"topic":"secret","payload":1}`)
	if !res.Error || !strings.Contains(res.Text, `allowed_topics = [\"secret\"]`) {
		t.Errorf("a publish the links refuse = %q, want an error naming the missing link", res.Text)
	}
	if res := call(t, writer, ts["hub.publish"], `{"topic":"ok","payload":"fresh"}`); res.Error || !strings.Contains(res.Text, `"delivered":1`) {
		t.Errorf("publish = %q, want delivered 1", res.Text)
	}
	var box struct{ Messages []hub.Message }
	if err := json.Unmarshal([]byte(call(t, reader, ts["hub.inbox"], `{}`).Text), &box); err != nil {
		t.Fatal(err)
	}
	var payloads []string
	for _, m := range box.Messages {
		payloads = append(payloads, m.Topic+"="+string(m.Payload))
	}
	if got := strings.Join(payloads, " "); got != `ok="kept" ok="fresh"` {
		t.Errorf("reader's inbox = %s, want the retained value then the fresh one, and nothing on secret", got)
	}
}

// TestSessionSelf checks that on one hub, the agents of two sessions are
// two addresses with two mailboxes.
func TestSessionSelf(t *testing.T) {
	if got := hubtool.SessionSelf(context.Background()); got != hubtool.DefaultSelf {
		t.Errorf("SessionSelf(no session) = %s, want %s", got, hubtool.DefaultSelf)
	}
	h := hub.New()
	ts := map[string]tool.Tool{}
	for _, tl := range hubtool.NewFor(h, hubtool.SessionSelf) {
		ts[tl.Spec().Name] = tl
	}
	one := agent.WithSession(context.Background(), "ses_one")
	two := agent.WithSession(context.Background(), "ses_two")
	if got := hubtool.SessionSelf(one); got != "agent://ses_one/main" {
		t.Errorf("SessionSelf(ses_one) = %s, want agent://ses_one/main", got)
	}
	call(t, two, ts["hub.inbox"], `{}`)
	if res := call(t, one, ts["hub.post"], `{"to":"agent://ses_two/main","payload":"hello two"}`); res.Error {
		t.Fatalf("post = %s", res.Text)
	}
	if got := call(t, one, ts["hub.inbox"], `{}`).Text; got != `{"messages":[]}` {
		t.Errorf("session one's inbox = %s, want empty", got)
	}
	if got := call(t, two, ts["hub.inbox"], `{}`).Text; !strings.Contains(got, `"from":"agent://ses_one/main"`) {
		t.Errorf("session two's inbox = %s, want the post from session one", got)
	}
	// A sub-agent in a session keeps its own address.
	sub := subagent.WithSelf(one, "agent://ses_one/helper")
	if res := call(t, sub, ts["hub.post"], `{"to":"agent://ses_two/main","payload":1}`); res.Error {
		t.Fatal(res.Text)
	}
	if got := call(t, two, ts["hub.inbox"], `{}`).Text; !strings.Contains(got, `"from":"agent://ses_one/helper"`) {
		t.Errorf("session two's inbox = %s, want the post from the helper", got)
	}
}
