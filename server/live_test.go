package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/getorrery/orrery/agent/provider/script"
)

// liveEvent is one event of GET /api/live.
type liveEvent struct {
	Type     string    `json:"type"`
	Seq      uint64    `json:"seq"`
	Session  summary   `json:"session"`
	Sessions []summary `json:"sessions"`
}

func (s *sse) nextLive() liveEvent {
	s.t.Helper()
	for {
		ev, err := s.next()
		if err != nil {
			s.t.Fatal(err)
		}
		if ev.comment != "" {
			continue
		}
		if ev.hasID {
			s.t.Errorf("live event %s has an id line: the channel resumes by snapshot, not by id", ev.data)
		}
		var le liveEvent
		if err := json.Unmarshal(ev.data, &le); err != nil {
			s.t.Fatalf("live event %s: %v", ev.data, err)
		}
		return le
	}
}

// TestLive: GET /api/live starts with the session list, then carries
// created, running, title, cost and ended as they happen; a reconnect
// starts again from the list as it now stands.
func TestLive(t *testing.T) {
	h := newHarness(t)
	old := h.newSession(t, "")
	live := h.openPath(t, "/api/live")
	first := live.nextLive()
	if first.Type != "snapshot" || len(first.Sessions) != 1 || first.Sessions[0].ID != old {
		t.Fatalf("first event = %+v, want a snapshot listing %s", first, old)
	}
	model := writeScript(t, script.Turn{Text: []string{"hi"}, Usage: &script.Usage{InputTokens: 1000, OutputTokens: 1000}})
	sess := h.newSession(t, model)
	h.control(t, map[string]any{"t": "run.send", "id": "1", "session": sess, "input": map[string]any{"text": "Plan   the trip"}}, nil)

	var kinds []string
	var last liveEvent
	var prev uint64
	for len(kinds) == 0 || kinds[len(kinds)-1] != "ended" {
		ev := live.nextLive()
		if ev.Session.ID != sess {
			t.Fatalf("change %+v is for %s, want %s", ev, ev.Session.ID, sess)
		}
		if ev.Seq <= prev {
			t.Errorf("change seq %d after %d, want increasing", ev.Seq, prev)
		}
		prev = ev.Seq
		kinds = append(kinds, ev.Type)
		switch ev.Type {
		case "running":
			if !ev.Session.Running {
				t.Errorf("running change has running=false: %+v", ev.Session)
			}
		case "title":
			if ev.Session.Title != "Plan the trip" {
				t.Errorf("title change = %q, want %q", ev.Session.Title, "Plan the trip")
			}
		}
		last = ev
	}
	want := []string{"created", "running", "title", "ended"}
	if last.Session.MicroUSD != 0 {
		want = []string{"created", "running", "title", "cost", "ended"}
	}
	if len(kinds) != len(want) {
		t.Fatalf("changes = %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("changes = %v, want %v", kinds, want)
		}
	}
	if last.Session.Running {
		t.Errorf("ended change has running=true")
	}
	live.close()

	// A reconnect restores the projection first.
	again := h.openPath(t, "/api/live")
	snap := again.nextLive()
	if snap.Type != "snapshot" || len(snap.Sessions) != 2 {
		t.Fatalf("after reconnect: %+v, want a snapshot of 2 sessions", snap)
	}
	for _, s := range snap.Sessions {
		if s.ID == sess && (s.Title != "Plan the trip" || s.Running || s.MicroUSD != last.Session.MicroUSD) {
			t.Errorf("snapshot entry %+v, want the title, idle, micro_usd %d", s, last.Session.MicroUSD)
		}
	}
}

// openPath opens a GET SSE stream at path (with its query).
func (h *harness) openPath(t *testing.T, path string) *sse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url+path, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s = %d %s, want 200 text/event-stream", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sse{t: t, resp: resp, br: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s
}
