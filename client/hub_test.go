package client_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/protocol"
)

// TestHub has a client take its seat on the kernel's hub: an agent's
// post and send reach OnHubMessage, the client replies, sends and
// subscribes. Over HTTP there is no seat to receive on.
func TestHub(t *testing.T) {
	h := newHarness(t)
	if err := h.hub.AddCrew("c", []string{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, transport := range []string{client.TransportWS, client.TransportPipe} {
		t.Run(transport, func(t *testing.T) {
			ctx := timeout(t)
			got := make(chan protocol.HubMessage, 8)
			c := h.dial(transport, client.Options{Client: "studio-" + transport, OnHubMessage: func(m protocol.HubMessage) { got <- m }})
			seat := "client://studio-" + transport
			if err := h.hub.Post("agent://c/a", seat, json.RawMessage(`"hi"`)); err != nil {
				t.Fatalf("Post(%s) = %v, want the seat held since Dial", seat, err)
			}
			if m := <-got; m.To != seat || m.From != "agent://c/a" || string(m.Payload) != `"hi"` {
				t.Errorf("OnHubMessage got %+v, want the post", m)
			}

			answered := make(chan string, 1)
			go func() {
				m, err := h.hub.Send(ctx, "agent://c/a", seat, json.RawMessage(`"ok?"`), time.Minute, "")
				if err != nil {
					t.Error(err)
				}
				answered <- string(m.Payload)
			}()
			m := <-got
			if !m.ExpectsReply || m.CorrelationID == "" {
				t.Fatalf("OnHubMessage got %+v, want a send", m)
			}
			if err := c.HubReply(ctx, m.CorrelationID, json.RawMessage(`"yes"`)); err != nil {
				t.Fatal(err)
			}
			if a := <-answered; a != `"yes"` {
				t.Errorf("the agent's Send got %s, want yes", a)
			}

			go func() {
				for {
					box, _ := h.hub.Take("agent://c/a")
					if len(box) > 0 {
						_ = h.hub.Reply(box[0].CorrelationID, json.RawMessage(`"pong"`))
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
			rep, err := c.HubSend(ctx, "agent://c/a", json.RawMessage(`"ping"`), time.Minute, "")
			if err != nil || string(rep.Payload) != `"pong"` {
				t.Errorf("HubSend() = %+v, %v; want pong", rep, err)
			}

			if err := c.HubSubscribe(ctx, "news"); err != nil {
				t.Fatal(err)
			}
			if pub, err := c.HubPublish(ctx, "news", json.RawMessage(`1`), ""); err != nil || pub.Delivered != 0 {
				t.Errorf("HubPublish() = %+v, %v; want delivered 0 (a publisher does not hear itself)", pub, err)
			}
			if _, err := h.hub.Publish("agent://c/a", "news", json.RawMessage(`2`), ""); err != nil {
				t.Fatal(err)
			}
			if m := <-got; m.Topic != "news" || string(m.Payload) != "2" {
				t.Errorf("OnHubMessage got %+v, want the news", m)
			}
			if err := c.HubUnsubscribe(ctx, "news"); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("http", func(t *testing.T) {
		ctx := timeout(t)
		c := h.dial(client.TransportHTTP, client.Options{Client: "cli"})
		if err := c.HubPost(ctx, "agent://c/a", json.RawMessage(`3`)); err != nil {
			t.Fatalf("HubPost() = %v", err)
		}
		if box, _ := h.hub.Take("agent://c/a"); len(box) != 1 || box[0].From != "client://cli" {
			t.Errorf("mailbox = %+v, want the post from client://cli", box)
		}
		err := c.HubSubscribe(ctx, "news")
		var re *client.RequestError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "open a WebSocket or pipe") {
			t.Errorf("HubSubscribe() over HTTP = %v, want a refusal saying how to hold the seat", err)
		}
	})
}
