// Package hubtool gives agents the hub: tools to post, send and wait for a
// reply, publish, subscribe, read their mailbox and reply. They are meant
// to be searchable (found with tools.search), not in every request. Each
// call acts as the agent whose loop runs it (subagent.Self), or as
// Tools.Self when the loop names none.
package hubtool

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/subagent"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/tool"
)

// DefaultSelf is the address of a run's own agent when it is in no crew.
const DefaultSelf = "agent://run/main"

// New returns the hub tools on h. self is the sender's address for loops
// that name none; empty means DefaultSelf.
func New(h *hub.Hub, self string) []tool.Tool {
	if self == "" {
		self = DefaultSelf
	}
	return NewFor(h, func(context.Context) string { return self })
}

// NewFor returns the hub tools on h for a kernel that serves many
// sessions on one hub: a call whose loop names no agent (subagent.Self)
// acts as self(ctx), such as SessionSelf.
func NewFor(h *hub.Hub, self func(ctx context.Context) string) []tool.Tool {
	b := base{h: h, self: self}
	return []tool.Tool{post{b}, send{b}, publish{b}, subscribe{b}, inbox{b}, reply{b}}
}

// MainAgent is the name of a session's own agent on the hub.
const MainAgent = "main"

// SessionSelf is the address of the agent of the session a call runs in,
// agent://{session}/main (agent.SessionFrom), so that the sessions of one
// served kernel each have their own; outside a session it is DefaultSelf.
func SessionSelf(ctx context.Context) string {
	if id := agent.SessionFrom(ctx); id != "" {
		return hub.Agent(id, MainAgent)
	}
	return DefaultSelf
}

// aclGoverned marks the hub tools read-only for the consent gate: whom an
// agent may reach is the links ACL's decision, not a consent prompt's.
const aclGoverned = true

type base struct {
	h    *hub.Hub
	self func(ctx context.Context) string
}

func (b base) from(ctx context.Context) string {
	addr := subagent.Self(ctx)
	if addr == "" {
		addr = b.self(ctx)
	}
	_ = b.h.AddAgent(addr)
	return addr
}

func params(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
}

const (
	toProp      = `"to":{"type":"string","description":"a hub address: agent://CREW/AGENT, crew://CREW, client://NAME (the person's program, usually client://studio) or ext://ID"}`
	payloadProp = `"payload":{"description":"any JSON value"}`
	topicProp   = `"topic":{"type":"string"}`
)

func bad(format string, args ...any) (tool.Result, error) {
	return tool.Result{Text: fmt.Sprintf(format, args...), Error: true}, nil
}

func decode(c tool.Call, v any) error { return json.Unmarshal(c.Args, v) }

func ok(v any) (tool.Result, error) {
	data, _ := json.Marshal(v)
	return tool.Result{Text: string(data)}, nil
}

type post struct{ base }

func (post) Spec() tool.Spec {
	return tool.Spec{ReadOnly: aclGoverned, Name: "hub.post", Description: "Posts a message to a hub mailbox (another agent, the crew, the person's program) without waiting for an answer.",
		Parameters: params(toProp+","+payloadProp, "to", "payload")}
}

func (t post) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		To      string          `json:"to"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := decode(c, &a); err != nil {
		return bad("hub.post needs {\"to\", \"payload\"}: %v", err)
	}
	if err := t.h.Post(t.from(ctx), a.To, a.Payload); err != nil {
		return bad("hub.post: %v", err)
	}
	return ok(map[string]any{"posted": true, "to": a.To})
}

type send struct{ base }

func (send) Spec() tool.Spec {
	return tool.Spec{ReadOnly: aclGoverned, Name: "hub.send", Description: "Sends a request to a hub address and waits for its reply (up to timeoutMs). No reply in time is a refusal.",
		Parameters: params(toProp+","+payloadProp+`,"timeoutMs":{"type":"integer","minimum":1}`, "to", "payload")}
}

func (t send) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		To        string          `json:"to"`
		Payload   json.RawMessage `json:"payload"`
		TimeoutMS int64           `json:"timeoutMs"`
	}
	if err := decode(c, &a); err != nil {
		return bad("hub.send needs {\"to\", \"payload\"}: %v", err)
	}
	m, err := t.h.Send(ctx, t.from(ctx), a.To, a.Payload, time.Duration(a.TimeoutMS)*time.Millisecond, "")
	if err != nil {
		if ctx.Err() != nil {
			return tool.Result{}, ctx.Err()
		}
		return bad("hub.send: %v; do without the answer or ask differently", err)
	}
	return ok(map[string]any{"reply": m.Payload, "correlationId": m.CorrelationID})
}

type publish struct{ base }

func (publish) Spec() tool.Spec {
	return tool.Spec{ReadOnly: aclGoverned, Name: "hub.publish", Description: "Publishes a payload on a hub topic to its subscribers; retainAs keeps it for later subscribers.",
		Parameters: params(topicProp+","+payloadProp+`,"retainAs":{"type":"string"}`, "topic", "payload")}
}

func (t publish) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		Topic    string          `json:"topic"`
		Payload  json.RawMessage `json:"payload"`
		RetainAs string          `json:"retainAs"`
	}
	if err := decode(c, &a); err != nil {
		return bad("hub.publish needs {\"topic\", \"payload\"}: %v", err)
	}
	rep, err := t.h.Publish(t.from(ctx), a.Topic, a.Payload, a.RetainAs)
	if err != nil {
		return bad("hub.publish: %v", err)
	}
	out := map[string]any{"delivered": rep.Delivered}
	if len(rep.Refused) > 0 {
		why := make([]string, len(rep.Refused))
		for i, e := range rep.Refused {
			why[i] = e.Error()
		}
		out["refused"] = why
		data, _ := json.Marshal(out)
		return tool.Result{Text: string(data), Error: rep.Delivered == 0}, nil
	}
	return ok(out)
}

type subscribe struct{ base }

func (subscribe) Spec() tool.Spec {
	return tool.Spec{ReadOnly: aclGoverned, Name: "hub.subscribe", Description: "Subscribes your mailbox to a hub topic; read what arrives with hub.inbox.",
		Parameters: params(topicProp, "topic")}
}

func (t subscribe) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		Topic string `json:"topic"`
	}
	if err := decode(c, &a); err != nil {
		return bad("hub.subscribe needs {\"topic\"}: %v", err)
	}
	if err := t.h.Subscribe(t.from(ctx), a.Topic); err != nil {
		return bad("hub.subscribe: %v", err)
	}
	return ok(map[string]any{"subscribed": a.Topic})
}

type inbox struct{ base }

func (inbox) Spec() tool.Spec {
	return tool.Spec{ReadOnly: aclGoverned, Name: "hub.inbox", Description: "Reads and empties your hub mailbox: posts, requests (answer those with expectsReply using hub.reply) and topic messages.",
		Parameters: params("")}
}

func (t inbox) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	msgs, err := t.h.Take(t.from(ctx))
	if err != nil {
		return bad("hub.inbox: %v", err)
	}
	if msgs == nil {
		msgs = []hub.Message{}
	}
	return ok(map[string]any{"messages": msgs})
}

type reply struct{ base }

func (reply) Spec() tool.Spec {
	return tool.Spec{ReadOnly: aclGoverned, Name: "hub.reply", Description: "Replies to a request from your mailbox (one with expectsReply), by its correlationId.",
		Parameters: params(`"correlationId":{"type":"string"},`+payloadProp, "correlationId", "payload")}
}

func (t reply) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		CorrelationID string          `json:"correlationId"`
		Payload       json.RawMessage `json:"payload"`
	}
	if err := decode(c, &a); err != nil {
		return bad("hub.reply needs {\"correlationId\", \"payload\"}: %v", err)
	}
	if err := t.h.Reply(a.CorrelationID, a.Payload); err != nil {
		return bad("hub.reply: %v", err)
	}
	return ok(map[string]any{"replied": a.CorrelationID})
}
