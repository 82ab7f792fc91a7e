package client

import (
	"context"
	"encoding/json"
	"time"

	"github.com/getorrery/orrery/protocol"
)

// hubFrame hands a frame outside every session to Options.OnHubMessage
// when it is an orrery.hub.message; other such frames are ignored.
func (c *Client) hubFrame(m []byte) {
	if c.opts.OnHubMessage == nil {
		return
	}
	var ev struct {
		Type  string          `json:"type"`
		Name  string          `json:"name"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(m, &ev) != nil || ev.Type != string(protocol.TypeCustom) || ev.Name != protocol.HubMessageEvent {
		return
	}
	var hm protocol.HubMessage
	if err := json.Unmarshal(ev.Value, &hm); err != nil {
		c.log.Warn("skipping a hub message that does not decode", "err", err)
		return
	}
	c.opts.OnHubMessage(hm)
}

// HubPost writes payload to the hub mailbox at to, from this client's
// seat client://Options.Client.
func (c *Client) HubPost(ctx context.Context, to string, payload json.RawMessage) error {
	return c.doInto(ctx, &protocol.HubPost{Envelope: protocol.Envelope{T: "hub.post"}, To: to, Payload: payload}, nil)
}

// HubSend sends payload to the hub address to and returns the answer;
// no answer within timeout (0 means the server's 30 seconds) is a
// refusal. correlationID names the exchange ("" lets the hub pick one).
func (c *Client) HubSend(ctx context.Context, to string, payload json.RawMessage, timeout time.Duration, correlationID string) (protocol.HubSendReply, error) {
	var out protocol.HubSendReply
	err := c.doInto(ctx, &protocol.HubSend{Envelope: protocol.Envelope{T: "hub.send"}, To: to, Payload: payload,
		TimeoutMS: timeout.Milliseconds(), CorrelationID: correlationID}, &out)
	return out, err
}

// HubPublish relays payload on topic; retainAs, when set, keeps it for
// later subscribers.
func (c *Client) HubPublish(ctx context.Context, topic string, payload json.RawMessage, retainAs string) (protocol.HubPublishReply, error) {
	var out protocol.HubPublishReply
	err := c.doInto(ctx, &protocol.HubPublish{Envelope: protocol.Envelope{T: "hub.publish"}, Topic: topic, Payload: payload, RetainAs: retainAs}, &out)
	return out, err
}

// HubReply answers a hub message with ExpectsReply, by its correlation id.
func (c *Client) HubReply(ctx context.Context, correlationID string, payload json.RawMessage) error {
	return c.doInto(ctx, &protocol.HubReply{Envelope: protocol.Envelope{T: "hub.reply"}, CorrelationID: correlationID, Payload: payload}, nil)
}

// HubSubscribe relays topic to this client's seat, which a WebSocket or
// pipe client holds while connected; the messages go to
// Options.OnHubMessage. After a reconnect, subscribe again.
func (c *Client) HubSubscribe(ctx context.Context, topic string) error {
	return c.doInto(ctx, &protocol.HubSubscribe{Envelope: protocol.Envelope{T: "hub.subscribe"}, Topic: topic}, nil)
}

// HubUnsubscribe stops relaying topic to this client's seat.
func (c *Client) HubUnsubscribe(ctx context.Context, topic string) error {
	return c.doInto(ctx, &protocol.HubUnsubscribe{Envelope: protocol.Envelope{T: "hub.unsubscribe"}, Topic: topic}, nil)
}

// RefuseInput refuses an agent's question without an answer (it resolves
// as unanswered); the client must draw consent.
func (c *Client) RefuseInput(ctx context.Context, session, request string) error {
	return c.doInto(ctx, &protocol.InputRefuse{Envelope: protocol.Envelope{T: "input.refuse"}, Session: session, Request: request}, nil)
}

// AnswerConsent answers a consent request (the request of an
// orrery.consent.requested event) with one of its options; the client
// must draw consent.
func (c *Client) AnswerConsent(ctx context.Context, session, request, option string) error {
	return c.doInto(ctx, &protocol.ConsentAnswer{Envelope: protocol.Envelope{T: "consent.answer"}, Session: session, Request: request, Option: option}, nil)
}

// AnswerInput answers an agent's question (the request of an
// orrery.input.requested event) with value; the client must draw consent.
func (c *Client) AnswerInput(ctx context.Context, session, request, value string) error {
	return c.doInto(ctx, &protocol.InputAnswer{Envelope: protocol.Envelope{T: "input.answer"}, Session: session, Request: request, Value: value}, nil)
}
