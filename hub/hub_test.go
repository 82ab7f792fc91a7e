package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/hub"
)

// seat records what the hub delivers to a client.
type seat struct {
	mu   sync.Mutex
	msgs []hub.Message
	got  chan hub.Message
}

func newSeat(t *testing.T, h *hub.Hub, addr string) *seat {
	t.Helper()
	s := &seat{got: make(chan hub.Message, 16)}
	detach, err := h.Attach(addr, func(m hub.Message) {
		s.mu.Lock()
		s.msgs = append(s.msgs, m)
		s.mu.Unlock()
		s.got <- m
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(detach)
	return s
}

func (s *seat) all() []hub.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hub.Message(nil), s.msgs...)
}

func TestParseAddress(t *testing.T) {
	tests := []struct{ in, want, wantErr string }{
		{"agent://billing/writer", "agent://billing/writer", ""},
		{"crew://billing", "crew://billing", ""},
		{"client://studio", "client://studio", ""},
		{"client:studio", "client://studio", ""},
		{"ext://git", "ext://git", ""},
		{"agent://billing", "", "needs a crew and an agent"},
		{"mail://x", "", "unknown scheme"},
		{"studio", "", "no scheme"},
		{"client://", "", "needs a name"},
		{"crew://\x1b]0;x\a", "", "needs a crew name"},
		{"agent://c/a\u202eb", "", "needs a crew and an agent"},
		{"client://stu dio", "", "needs a name"},
		{"client://stüdio", "client://stüdio", ""},
	}
	for _, tt := range tests {
		a, err := hub.ParseAddress(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseAddress(%q) = %v, want an error naming %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || a.String() != tt.want {
			t.Errorf("ParseAddress(%q) = %q, %v; want %q", tt.in, a, err, tt.want)
		}
	}
}

func TestLinksACL(t *testing.T) {
	h := hub.New()
	if err := h.AddCrew("open", []string{"a", "b"}, nil); err != nil {
		t.Fatal(err)
	}
	links := []hub.Link{{To: "client:studio", Direction: hub.Bidirectional, AllowedTopics: []string{"run.progress"}}}
	if err := h.AddCrew("billing", []string{"writer", "reviewer"}, links); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, from, to, topic string
		wantMissing           string // "" means allowed
	}{
		{"no declared link: default lets it through", "agent://open/a", "client://studio", "anything", ""},
		{"inside one crew", "agent://billing/writer", "agent://billing/reviewer", "secrets", ""},
		{"declared link and topic", "agent://billing/writer", "client://studio", "run.progress", ""},
		{"declared link, direct post", "agent://billing/writer", "client://studio", "", ""},
		{"declared link, topic not allowed", "agent://billing/writer", "client://studio", "secrets",
			`{to = "client://studio", direction = "outbound", allowed_topics = ["secrets"]}`},
		{"no link to that peer", "agent://billing/writer", "agent://open/a", "",
			`{to = "agent://open/a", direction = "outbound"}`},
		{"into a crew that declares links", "agent://open/a", "agent://billing/writer", "",
			`{to = "agent://open/a", direction = "inbound"}`},
		{"the client into the crew", "client://studio", "agent://billing/writer", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := h.Check(tt.from, tt.to, tt.topic)
			if tt.wantMissing == "" {
				if err != nil {
					t.Errorf("Check() = %v, want nil", err)
				}
				return
			}
			var re *hub.RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("Check() = %v, want a *RefusedError", err)
			}
			if re.Missing != tt.wantMissing || !strings.Contains(err.Error(), tt.wantMissing) {
				t.Errorf("Check() = %v (missing %s), want it to name %s", err, re.Missing, tt.wantMissing)
			}
		})
	}
}

func TestPublishRespectsLinksAndRetains(t *testing.T) {
	h := hub.New()
	links := []hub.Link{{To: "client://studio", AllowedTopics: []string{"run.progress"}}}
	if err := h.AddCrew("billing", []string{"writer"}, links); err != nil {
		t.Fatal(err)
	}
	studio := newSeat(t, h, "client://studio")
	for _, topic := range []string{"run.progress", "secrets"} {
		if err := h.Subscribe("client://studio", topic); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := h.Publish("agent://billing/writer", "run.progress", json.RawMessage(`{"pct":50}`), "")
	if err != nil || rep.Delivered != 1 || len(rep.Refused) != 0 {
		t.Errorf("Publish(run.progress) = %+v, %v; want delivered 1", rep, err)
	}
	rep, err = h.Publish("agent://billing/writer", "secrets", json.RawMessage(`1`), "")
	if err != nil || rep.Delivered != 0 || len(rep.Refused) != 1 || !strings.Contains(rep.Refused[0].Error(), `allowed_topics = ["secrets"]`) {
		t.Errorf("Publish(secrets) = %+v, %v; want refused naming the link", rep, err)
	}
	got := studio.all()
	if len(got) != 1 || got[0].Topic != "run.progress" || got[0].From != "agent://billing/writer" || string(got[0].Payload) != `{"pct":50}` {
		t.Errorf("studio got %+v, want the one run.progress message", got)
	}

	// A retained value reaches a later subscriber.
	if _, err := h.Publish("client://studio", "run.progress", json.RawMessage(`"green"`), "last"); err != nil {
		t.Fatal(err)
	}
	if err := h.Subscribe("agent://billing/writer", "run.progress"); err != nil {
		t.Fatal(err)
	}
	box, err := h.Take("agent://billing/writer")
	if err != nil || len(box) != 1 || string(box[0].Payload) != `"green"` || box[0].From != "client://studio" {
		t.Errorf("Take() = %+v, %v; want the retained value", box, err)
	}
}

func TestSendAndReply(t *testing.T) {
	h := hub.New()
	if err := h.AddCrew("c", []string{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	studio := newSeat(t, h, "client://studio")
	go func() {
		m := <-studio.got
		if !m.ExpectsReply || m.From != "agent://c/a" || m.CorrelationID == "" {
			t.Errorf("relayed %+v, want expectsReply, from and a correlationId", m)
		}
		if err := h.Reply(m.CorrelationID, json.RawMessage(`{"ok":true}`)); err != nil {
			t.Error(err)
		}
	}()
	m, err := h.Send(context.Background(), "agent://c/a", "client://studio", json.RawMessage(`{"q":"go?"}`), time.Minute, "")
	if err != nil || string(m.Payload) != `{"ok":true}` || m.From != "" {
		t.Errorf("Send() = %+v, %v; want the reply, without from", m, err)
	}
	if err := h.Reply(m.CorrelationID, nil); !errors.Is(err, hub.ErrUnknownCorrelation) {
		t.Errorf("second Reply() = %v, want ErrUnknownCorrelation", err)
	}

	// Silence is a refusal.
	_, err = h.Send(context.Background(), "agent://c/a", "client://studio", json.RawMessage(`1`), time.Millisecond, "c-quiet")
	if !errors.Is(err, hub.ErrTimeout) {
		t.Errorf("Send(no reply) = %v, want ErrTimeout", err)
	}
	<-studio.got
	if err := h.Reply("c-quiet", nil); !errors.Is(err, hub.ErrUnknownCorrelation) {
		t.Errorf("late Reply() = %v, want ErrUnknownCorrelation", err)
	}

	// The client sends to an agent, which reads its mailbox and replies.
	done := make(chan hub.Message)
	go func() {
		m, err := h.Send(context.Background(), "client://studio", "agent://c/a", json.RawMessage(`"ping"`), time.Minute, "c-ping")
		if err != nil {
			t.Error(err)
		}
		done <- m
	}()
	var box []hub.Message
	for len(box) == 0 {
		box, _ = h.Take("agent://c/a")
		time.Sleep(time.Millisecond)
	}
	if !box[0].ExpectsReply || box[0].CorrelationID != "c-ping" {
		t.Fatalf("mailbox = %+v, want the send", box)
	}
	if err := h.Reply("c-ping", json.RawMessage(`"pong"`)); err != nil {
		t.Fatal(err)
	}
	if m := <-done; string(m.Payload) != `"pong"` || m.CorrelationID != "c-ping" {
		t.Errorf("client got %+v, want pong under c-ping", m)
	}
}

func TestPostToNobody(t *testing.T) {
	h := hub.New()
	if err := h.Post("client://studio", "agent://x/y", nil); !errors.Is(err, hub.ErrUnknownAddress) {
		t.Errorf("Post(nobody) = %v, want ErrUnknownAddress", err)
	}
	if err := h.Post("client://studio", "bogus", nil); err == nil {
		t.Error("Post(bad address) = nil, want an error")
	}
	if _, err := h.Attach("agent://c/a", func(hub.Message) {}); err == nil {
		t.Error("Attach(agent) = nil, want only client and ext seats")
	}
}
