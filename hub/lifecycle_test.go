package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/internal/logbuf"
)

// waitFor polls cond until it holds; the test's own deadline bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if t.Context().Err() != nil {
			t.Fatalf("%s never happened", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLeaveReleasesEverything joins a sub-agent, gives it a subscription,
// unread messages and a send waiting on it, then leaves: the mailbox, the
// subscription and the waiting send are gone, the send fails as ended, the
// unread messages are logged as undelivered, and the hub's maps are back
// to what they were before the join.
func TestLeaveReleasesEverything(t *testing.T) {
	logs := &logbuf.Buffer{}
	h := hub.NewWithOptions(hub.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	newSeat(t, h, "client://studio")
	if err := h.AddCrew("billing", []string{"writer"}, nil); err != nil {
		t.Fatal(err)
	}
	before := hub.Entries(h)
	const addr = "agent://s1/helper"
	if err := h.Join(addr); err != nil {
		t.Fatal(err)
	}
	if err := h.Subscribe(addr, "news"); err != nil {
		t.Fatal(err)
	}
	if err := h.Post("client://studio", addr, json.RawMessage(`"one"`)); err != nil {
		t.Fatal(err)
	}
	if err := h.Post("agent://billing/writer", addr, json.RawMessage(`"two"`)); err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		_, err := h.Send(context.Background(), "client://studio", addr, json.RawMessage(`"three"`), time.Hour, "c-wait")
		sent <- err
	}()
	waitFor(t, "the send waiting", func() bool { return hub.Entries(h)["waiting"] == 1 })

	h.Leave(addr)

	if n := hub.Entries(h)["waiting"]; n != 0 {
		t.Fatalf("Entries()[waiting] after Leave = %d, want 0", n)
	}
	err := <-sent
	if !errors.Is(err, hub.ErrAgentEnded) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "before it replied") {
		t.Errorf("Send() waiting on the agent = %v, want ErrAgentEnded naming %s", err, addr)
	}
	if after := hub.Entries(h); fmt.Sprint(withoutEnded(after)) != fmt.Sprint(withoutEnded(before)) || after["ended"] != 1 {
		t.Errorf("Entries() after Leave = %v, want %v and one ended address", after, before)
	}
	log := logs.String()
	for _, want := range []string{"level=INFO", "undelivered", "address=" + addr, "count=3", "agent://billing/writer", "client://studio"} {
		if !strings.Contains(log, want) {
			t.Errorf("log = %q, want it to contain %q", log, want)
		}
	}
	if err := h.Reply("c-wait", nil); !errors.Is(err, hub.ErrUnknownCorrelation) {
		t.Errorf("Reply() after the agent ended = %v, want ErrUnknownCorrelation", err)
	}
	if rep, err := h.Publish("client://studio", "news", json.RawMessage(`1`), ""); err != nil || rep.Delivered != 0 || len(rep.Refused) != 0 {
		t.Errorf("Publish(news) = %+v, %v; want no subscriber left", rep, err)
	}
	if _, err := h.Take(addr); !errors.Is(err, hub.ErrAgentEnded) {
		t.Errorf("Take() = %v, want ErrAgentEnded", err)
	}
	if err := h.Subscribe(addr, "news"); !errors.Is(err, hub.ErrAgentEnded) {
		t.Errorf("Subscribe() = %v, want ErrAgentEnded", err)
	}
}

func withoutEnded(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		if k != "ended" {
			out[k] = v
		}
	}
	return out
}

// TestEndedAndUnknown checks what a post meets after joins and leaves:
// an ended address is refused as ended, naming it, for as long as the hub
// remembers it; a never-known or forgotten one as unknown; addresses that
// stay (crew agents, AddAgent) and ones where another agent still runs
// keep their mailbox.
func TestEndedAndUnknown(t *testing.T) {
	const a, b, c = "agent://s/a", "agent://s/b", "agent://s/c"
	tests := []struct {
		name     string
		remember int
		steps    func(h *hub.Hub)
		to       string
		want     error // nil: delivered
	}{
		{"never known", 0, func(h *hub.Hub) {}, a, hub.ErrUnknownAddress},
		{"joined", 0, func(h *hub.Hub) { _ = h.Join(a) }, a, nil},
		{"ended", 0, func(h *hub.Hub) { _ = h.Join(a); h.Leave(a) }, a, hub.ErrAgentEnded},
		{"ended, short form of the address", 0, func(h *hub.Hub) { _ = h.Join(a); h.Leave("agent:s/a") }, a, hub.ErrAgentEnded},
		{"joined again after it ended", 0, func(h *hub.Hub) { _ = h.Join(a); h.Leave(a); _ = h.Join(a) }, a, nil},
		{"two agents at one address, one ended", 0, func(h *hub.Hub) { _ = h.Join(a); _ = h.Join(a); h.Leave(a) }, a, nil},
		{"two agents at one address, both ended", 0, func(h *hub.Hub) { _ = h.Join(a); _ = h.Join(a); h.Leave(a); h.Leave(a) }, a, hub.ErrAgentEnded},
		{"leave without join", 0, func(h *hub.Hub) { h.Leave(a) }, a, hub.ErrUnknownAddress},
		{"forgotten past the memory", 2, func(h *hub.Hub) {
			for _, x := range []string{a, b, c} {
				_ = h.Join(x)
				h.Leave(x)
			}
		}, a, hub.ErrUnknownAddress},
		{"still remembered within the memory", 2, func(h *hub.Hub) {
			for _, x := range []string{a, b, c} {
				_ = h.Join(x)
				h.Leave(x)
			}
		}, b, hub.ErrAgentEnded},
		{"ended again is remembered anew", 2, func(h *hub.Hub) {
			for _, x := range []string{a, b, a, c} {
				_ = h.Join(x)
				h.Leave(x)
			}
		}, a, hub.ErrAgentEnded},
		{"ended again, the older one forgotten", 2, func(h *hub.Hub) {
			for _, x := range []string{a, b, a, c} {
				_ = h.Join(x)
				h.Leave(x)
			}
		}, b, hub.ErrUnknownAddress},
		{"no memory", -1, func(h *hub.Hub) { _ = h.Join(a); h.Leave(a) }, a, hub.ErrUnknownAddress},
		{"a crew's agent stays", 0, func(h *hub.Hub) { _ = h.AddCrew("s", []string{"a"}, nil); _ = h.Join(a); h.Leave(a) }, a, nil},
		{"a removed crew's agent ends", 0, func(h *hub.Hub) { _ = h.AddCrew("s", []string{"a"}, nil); h.RemoveCrew("s") }, a, hub.ErrAgentEnded},
		{"a removed crew's running agent ends at its leave", 0, func(h *hub.Hub) {
			_ = h.AddCrew("s", []string{"a"}, nil)
			_ = h.Join(a)
			h.RemoveCrew("s")
			h.Leave(a)
		}, a, hub.ErrAgentEnded},
		{"a removed crew's running agent keeps its mailbox until it leaves", 0, func(h *hub.Hub) {
			_ = h.AddCrew("s", []string{"a"}, nil)
			_ = h.Join(a)
			h.RemoveCrew("s")
		}, a, nil},
		{"a crew added again after its removal", 0, func(h *hub.Hub) {
			_ = h.AddCrew("s", []string{"a"}, nil)
			h.RemoveCrew("s")
			if err := h.AddCrew("s", []string{"a"}, nil); err != nil {
				panic(err)
			}
		}, a, nil},
		{"an added agent stays", 0, func(h *hub.Hub) { _ = h.AddAgent(a); _ = h.Join(a); h.Leave(a) }, a, nil},
		{"a joined agent using its own address does not pin it", 0, func(h *hub.Hub) { _ = h.Join(a); _ = h.AddAgent(a); h.Leave(a) }, a, hub.ErrAgentEnded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hub.NewWithOptions(hub.Options{RememberEnded: tt.remember})
			tt.steps(h)
			err := h.Post("client://studio", tt.to, json.RawMessage(`"hi"`))
			if tt.want == nil {
				if err != nil {
					t.Errorf("Post(%s) = %v, want delivered", tt.to, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Post(%s) = %v, want %v", tt.to, err, tt.want)
			}
			if tt.want == hub.ErrAgentEnded && (errors.Is(err, hub.ErrUnknownAddress) || !strings.Contains(err.Error(), tt.to) || !strings.Contains(err.Error(), "ended")) {
				t.Errorf("Post(%s) = %v, want the ended wording naming the address, not unknown", tt.to, err)
			}
			if tt.want == hub.ErrUnknownAddress && strings.Contains(err.Error(), "ended") {
				t.Errorf("Post(%s) = %v, want the unknown wording", tt.to, err)
			}
		})
	}
}

func TestJoinNeedsAnAgentAddress(t *testing.T) {
	h := hub.New()
	for _, addr := range []string{"client://studio", "crew://c", "bogus"} {
		if err := h.Join(addr); err == nil {
			t.Errorf("Join(%q) = nil, want an error", addr)
		}
	}
}

// TestHubDoesNotGrow runs many short-lived agents, each with a
// subscription, unread messages and a send that never got its reply:
// afterwards the hub holds what it held before, plus at most the
// remembered ended addresses.
func TestHubDoesNotGrow(t *testing.T) {
	const remember, agents = 64, 500
	h := hub.NewWithOptions(hub.Options{RememberEnded: remember, Logger: slog.New(slog.DiscardHandler)})
	newSeat(t, h, "client://studio")
	if err := h.AddCrew("crew", []string{"lead"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Subscribe("client://studio", "news"); err != nil {
		t.Fatal(err)
	}
	before := hub.Entries(h)
	for i := range agents {
		addr := fmt.Sprintf("agent://crew/helper-%d", i)
		if err := h.Join(addr); err != nil {
			t.Fatal(err)
		}
		for _, topic := range []string{"news", fmt.Sprintf("own-%d", i)} {
			if err := h.Subscribe(addr, topic); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.Post("agent://crew/lead", addr, json.RawMessage(`"unread"`)); err != nil {
			t.Fatal(err)
		}
		sent := make(chan error, 1)
		go func() {
			_, err := h.Send(context.Background(), "agent://crew/lead", addr, nil, time.Hour, "")
			sent <- err
		}()
		waitFor(t, "the send waiting", func() bool { return hub.Entries(h)["waiting"] == 1 })
		h.Leave(addr)
		if n := hub.Entries(h)["waiting"]; n != 0 {
			t.Fatalf("Entries()[waiting] after agent %d left = %d, want 0", i, n)
		}
		if err := <-sent; !errors.Is(err, hub.ErrAgentEnded) {
			t.Fatalf("Send() to agent %d = %v, want ErrAgentEnded", i, err)
		}
	}
	after := hub.Entries(h)
	if fmt.Sprint(withoutEnded(after)) != fmt.Sprint(withoutEnded(before)) {
		t.Errorf("Entries() after %d agents = %v, want %v", agents, after, before)
	}
	if after["ended"] != remember {
		t.Errorf("Entries()[ended] = %d, want the memory's size %d", after["ended"], remember)
	}
}

// TestMailboxLimit fills mailboxes to their bound: a post past it is
// refused with the not-reading wording, a crew's fan-out is refused whole,
// a publish counts it refused, and reading the box makes room.
func TestMailboxLimit(t *testing.T) {
	fill := func(t *testing.T, h *hub.Hub, addr string, n int) {
		t.Helper()
		for i := range n {
			if err := h.Post("client://studio", addr, json.RawMessage(`0`)); err != nil {
				t.Fatalf("Post() %d of %d = %v, want it delivered", i+1, n, err)
			}
		}
	}
	tests := []struct {
		name  string
		limit int
		fill  int // messages that fit
	}{
		{"configured", 3, 3},
		{"default", 0, hub.DefaultMailboxLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hub.NewWithOptions(hub.Options{MailboxLimit: tt.limit})
			if err := h.AddCrew("c", []string{"a", "b"}, nil); err != nil {
				t.Fatal(err)
			}
			fill(t, h, "agent://c/a", tt.fill)
			err := h.Post("client://studio", "agent://c/a", json.RawMessage(`1`))
			if !errors.Is(err, hub.ErrMailboxFull) || !strings.Contains(err.Error(), "agent://c/a") || !strings.Contains(err.Error(), "not reading its mailbox") {
				t.Errorf("Post(full) = %v, want ErrMailboxFull naming agent://c/a", err)
			}
			if _, err := h.Send(context.Background(), "client://studio", "agent://c/a", nil, time.Hour, "c-full"); !errors.Is(err, hub.ErrMailboxFull) {
				t.Errorf("Send(full) = %v, want ErrMailboxFull at once", err)
			}
			if err := h.Post("client://studio", "crew://c", json.RawMessage(`2`)); !errors.Is(err, hub.ErrMailboxFull) {
				t.Errorf("Post(crew with a full box) = %v, want ErrMailboxFull", err)
			}
			if box, _ := h.Take("agent://c/b"); len(box) != 0 {
				t.Errorf("b's mailbox = %d messages, want none: the fan-out is refused whole", len(box))
			}
			if err := h.Subscribe("agent://c/a", "news"); err != nil {
				t.Fatal(err)
			}
			rep, err := h.Publish("client://studio", "news", json.RawMessage(`3`), "")
			if err != nil || rep.Delivered != 0 || len(rep.Refused) != 1 || !errors.Is(rep.Refused[0], hub.ErrMailboxFull) {
				t.Errorf("Publish() = %+v, %v; want the full box refused", rep, err)
			}
			if box, err := h.Take("agent://c/a"); err != nil || len(box) != tt.fill {
				t.Errorf("Take() = %d messages, %v; want %d", len(box), err, tt.fill)
			}
			if err := h.Post("client://studio", "agent://c/a", json.RawMessage(`4`)); err != nil {
				t.Errorf("Post(after reading) = %v, want room again", err)
			}
		})
	}
	t.Run("no limit", func(t *testing.T) {
		h := hub.NewWithOptions(hub.Options{MailboxLimit: -1})
		if err := h.AddAgent("agent://c/a"); err != nil {
			t.Fatal(err)
		}
		fill(t, h, "agent://c/a", hub.DefaultMailboxLimit+1)
	})
}
