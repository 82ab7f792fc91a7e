package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/agent/subagent"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/hub/hubtool"
	"github.com/getorrery/orrery/internal/logbuf"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

type m = map[string]any

// delegating starts a kernel on a real SQLite file whose model plays
// turns, with the task tool wired to h as orrery wires it (Join on start,
// Leave on end) and the hub tools, and returns a session.
func delegating(t *testing.T, h *hub.Hub, turns []m, extra ...tool.Tool) *kernel.Session {
	t.Helper()
	dir := t.TempDir()
	data, _ := json.Marshal(m{"turns": turns})
	path := filepath.Join(dir, "script.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	task := subagent.TaskTool{
		OnStart: func(addr string) { _ = h.Join(addr) },
		OnEnd:   h.Leave,
		Self:    hubtool.SessionSelf,
	}
	tools := append(append([]tool.Tool{task}, extra...), hubtool.NewFor(h, hubtool.SessionSelf)...)
	k := kernel.New(kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "script:" + path,
		Tools: tool.NewSet(tools...), DebugActor: true})
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close(context.Background()) })
	sess, err := k.CreateSession(context.Background(), kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// gate is a tool that holds its caller until the test opens it or the run
// is cancelled, so a test acts while a sub-agent is surely running.
type gate struct {
	entered chan struct{}
	open    chan struct{}
}

func newGate() gate { return gate{entered: make(chan struct{}, 1), open: make(chan struct{})} }

func (gate) Spec() tool.Spec {
	return tool.Spec{Name: "gate", Description: "waits", ReadOnly: true, Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (g gate) Call(ctx context.Context, _ tool.Call) (tool.Result, error) {
	g.entered <- struct{}{}
	select {
	case <-g.open:
		return tool.Result{Text: "open"}, nil
	case <-ctx.Done():
		return tool.Result{}, ctx.Err()
	}
}

// finish waits for the run's terminal frame and returns its outcome and
// the types of the frames seen; with cancelWhen it cancels the run once
// cancelWhen holds.
func finish(t *testing.T, sess *kernel.Session, res kernel.SendResult, cancelWhen func() bool) (string, map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	defer res.Sub.Close()
	cancelled := false
	for {
		select {
		case <-res.Sub.Ready():
		case <-time.After(10 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal("no terminal frame")
		}
		if cancelWhen != nil && !cancelled && cancelWhen() {
			cancelled = true
			if err := sess.Cancel(context.Background(), res.RunID); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range res.Sub.Take(nil) {
			seen[f.Type] = true
			if !protocol.EventType(f.Type).Terminal() {
				continue
			}
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				t.Fatal(err)
			}
			if rf, ok := ev.(*protocol.RunFinished); ok && rf.Outcome != nil {
				return string(rf.Outcome.Type), seen
			}
			return f.Type, seen
		}
	}
}

// TestTaskReleasesMailbox delegates through the real task tool: the
// sub-agent subscribes to a topic and, while a send waits on it unread,
// ends with an answer, a model error or a cancel. Each time its mailbox
// and subscription are gone afterwards, the waiting send failed as ended,
// a post to it is refused as ended, and the unread send was logged.
func TestTaskReleasesMailbox(t *testing.T) {
	delegate := m{"tool_calls": []m{{"name": "task", "args": m{"description": "work", "role": "helper"}}}}
	subscribe := m{"tool_calls": []m{{"name": "hub.subscribe", "args": m{"topic": "news"}}}}
	hold := m{"tool_calls": []m{{"name": "gate", "args": m{}}}}
	tests := []struct {
		name    string
		end     []m // the helper's last turn, then the caller's
		cancel  bool
		outcome string
		subEnd  protocol.EventType // how the helper's run ends
	}{
		{"answer", []m{{"text": []string{"done"}}, {"text": []string{"thanks"}}}, false, "success", protocol.TypeSubagentFinished},
		{"model error", []m{{"error": "the model broke"}, {"text": []string{"it failed"}}}, false, "success", protocol.TypeSubagentError},
		{"cancel", nil, true, "cancelled", protocol.TypeSubagentError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &logbuf.Buffer{}
			h := hub.NewWithOptions(hub.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			newSeat(t, h, "client://studio")
			before := hub.Entries(h)
			g := newGate()
			sess := delegating(t, h, append([]m{delegate, subscribe, hold}, tt.end...), g)
			helper := hub.Agent(sess.ID(), "helper")
			res, err := sess.Send(context.Background(), kernel.SendInput{Text: "delegate", Subscribe: true})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-g.entered:
			case <-t.Context().Done():
				t.Fatal("the helper never reached the gate")
			}
			if e := hub.Entries(h); e["subs"] != 1 || e["holders"] != 1 {
				t.Fatalf("Entries() while the helper runs = %v, want its subscription and its mailbox", e)
			}
			sent := make(chan error, 1)
			go func() {
				_, err := h.Send(context.Background(), "client://studio", helper, json.RawMessage(`"status?"`), time.Hour, "")
				sent <- err
			}()
			waitFor(t, "the send waiting", func() bool { return hub.Entries(h)["waiting"] == 1 })
			var cancelWhen func() bool
			if tt.cancel {
				cancelWhen = func() bool { return true }
			} else {
				close(g.open)
			}
			got, seen := finish(t, sess, res, cancelWhen)
			if got != tt.outcome || !seen[string(tt.subEnd)] {
				t.Errorf("run outcome = %s, frames %v; want %s and %s", got, seen, tt.outcome, tt.subEnd)
			}
			// An answer or an error ends the helper before its caller
			// goes on; a cancel ends the run at once and the helper's
			// loop unwinds after, so there the send's failure is what
			// says the helper has left.
			var sendErr error
			if tt.cancel {
				sendErr = <-sent
			}
			if after := hub.Entries(h); fmt.Sprint(withoutEnded(after)) != fmt.Sprint(withoutEnded(before)) || after["ended"] != 1 {
				t.Fatalf("Entries() after the task = %v, want %v and one ended address", after, before)
			}
			if !tt.cancel {
				sendErr = <-sent
			}
			if !errors.Is(sendErr, hub.ErrAgentEnded) {
				t.Errorf("Send() to the helper = %v, want ErrAgentEnded", sendErr)
			}
			if err := h.Post("client://studio", helper, nil); !errors.Is(err, hub.ErrAgentEnded) || !strings.Contains(err.Error(), helper) {
				t.Errorf("Post(%s) = %v, want ErrAgentEnded naming it", helper, err)
			}
			if log := logs.String(); !strings.Contains(log, "undelivered") || !strings.Contains(log, "count=1") || !strings.Contains(log, "client://studio") {
				t.Errorf("log = %q, want the unread send logged as undelivered", log)
			}
		})
	}
}

// TestDelegationsDoNotGrowHub delegates many tasks through the real task
// tool, each sub-agent subscribing to a topic of its own: afterwards the
// hub holds what it held before, plus the remembered ended addresses.
func TestDelegationsDoNotGrowHub(t *testing.T) {
	const tasks = 20
	h := hub.NewWithOptions(hub.Options{Logger: slog.New(slog.DiscardHandler)})
	before := hub.Entries(h)
	var turns []m
	for i := range tasks {
		turns = append(turns,
			m{"tool_calls": []m{{"name": "task", "args": m{"description": "work", "role": fmt.Sprintf("r%d", i)}}}},
			m{"tool_calls": []m{{"name": "hub.subscribe", "args": m{"topic": fmt.Sprintf("t%d", i)}}}},
			m{"text": []string{"done"}})
	}
	sess := delegating(t, h, append(turns, m{"text": []string{"all done"}}))
	res, err := sess.Send(context.Background(), kernel.SendInput{Text: "delegate", Subscribe: true})
	if err != nil {
		t.Fatal(err)
	}
	got, seen := finish(t, sess, res, nil)
	if got != "success" || !seen[string(protocol.TypeSubagentFinished)] {
		t.Fatalf("run outcome = %s, frames %v; want success with finished sub-agents", got, seen)
	}
	after := hub.Entries(h)
	if fmt.Sprint(withoutEnded(after)) != fmt.Sprint(withoutEnded(before)) || after["ended"] != tasks {
		t.Errorf("Entries() after %d delegations = %v, want %v and %d ended addresses", tasks, after, before, tasks)
	}
}
