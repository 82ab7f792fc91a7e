package protocol

import "encoding/json"

// Requests a client sends to the kernel's event hub. Each acts from the
// client's own seat, client://NAME, NAME being the client it declared
// (hello.client, or ?client=NAME on POST /control). What the hub delivers
// to the seat reaches every WebSocket or pipe connection whose hello named
// that client as a HubMessageEvent frame.

// HubPost writes Payload to one hub mailbox (an agent, a crew's agents, a
// client seat or an extension) without waiting for an answer.
type HubPost struct {
	Envelope
	To      string          `json:"to"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// HubSend delivers Payload to one hub address with expectsReply set and
// waits for its reply, up to TimeoutMS (default 30,000). The reply value
// is a HubSendReply; silence past the timeout is a refusal.
type HubSend struct {
	Envelope
	To            string          `json:"to"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	TimeoutMS     int64           `json:"timeoutMs,omitempty"`
	CorrelationID string          `json:"correlationId,omitempty"`
}

// HubSendReply is the value of a HubSend reply: the answer's payload.
type HubSendReply struct {
	CorrelationID string          `json:"correlationId"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

// HubPublish relays Payload to the subscribers of Topic that the links
// ACL lets it reach; RetainAs also keeps it, under that name, for those
// who subscribe later.
type HubPublish struct {
	Envelope
	Topic    string          `json:"topic"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	RetainAs string          `json:"retainAs,omitempty"`
}

// HubPublishReply is the value of a HubPublish reply: how many
// subscribers got it, and why the links ACL kept it from the others.
type HubPublishReply struct {
	Delivered int      `json:"delivered"`
	Refused   []string `json:"refused,omitempty"`
}

// HubReply answers a send that reached the client's seat (a
// HubMessageEvent with expectsReply), by its correlationId.
type HubReply struct {
	Envelope
	CorrelationID string          `json:"correlationId"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

// HubSubscribe opens a relay of Topic to the client's seat; the values
// retained on the topic arrive at once. The seat must be held: a
// WebSocket or pipe connection whose hello named the client.
type HubSubscribe struct {
	Envelope
	Topic string `json:"topic"`
}

// HubUnsubscribe closes the seat's relay of Topic.
type HubUnsubscribe struct {
	Envelope
	Topic string `json:"topic"`
}

// HubMessageEvent is the name of the CUSTOM event that carries what the
// hub delivers to a client's seat. It is sent with seq 0 and no session:
// it belongs to no session's log and is not replayed.
const HubMessageEvent = "orrery.hub.message"

// HubMessage is the value of a HubMessageEvent.
type HubMessage struct {
	// To is the seat it was delivered to, client://NAME.
	To string `json:"to"`
	// From is the sender's address; absent on the answer to a send.
	From string `json:"from,omitempty"`
	// Topic is set on a topic relay.
	Topic   string          `json:"topic,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// CorrelationID pairs a send with its reply.
	CorrelationID string `json:"correlationId,omitempty"`
	// ExpectsReply marks a send: answer it with hub.reply before the
	// sender's timeout, or it counts as a refusal.
	ExpectsReply bool `json:"expectsReply,omitempty"`
}

// InputAnswer answers a question put to the person (the request of an
// orrery.input.requested event) with Value: for a confirm, yes (or y,
// true, ok, allow, approve) accepts and anything else declines; for a
// choice, one of its choices. Only a client that draws consent may send
// it; the first answer wins.
type InputAnswer struct {
	Envelope
	Session string `json:"session"`
	Request string `json:"request"`
	Value   string `json:"value"`
}

// InputRefuse refuses an agent's question without an answer (the request
// of an orrery.input.requested event), as a program does that can no
// longer answer: the question resolves as unanswered. Like InputAnswer, it
// needs a client that draws consent.
type InputRefuse struct {
	Envelope
	Session string `json:"session"`
	Request string `json:"request"`
}

func init() {
	for kind, mk := range map[string]func() Request{
		"hub.post":        func() Request { return new(HubPost) },
		"hub.send":        func() Request { return new(HubSend) },
		"hub.publish":     func() Request { return new(HubPublish) },
		"hub.reply":       func() Request { return new(HubReply) },
		"hub.subscribe":   func() Request { return new(HubSubscribe) },
		"hub.unsubscribe": func() Request { return new(HubUnsubscribe) },
		"input.answer":    func() Request { return new(InputAnswer) },
		"input.refuse":    func() Request { return new(InputRefuse) },
	} {
		requestKinds[kind] = mk
	}
}
