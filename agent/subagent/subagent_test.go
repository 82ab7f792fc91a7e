package subagent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/agent/subagent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// TestTaskToolFrames runs the task tool in a real kernel on a real SQLite
// file: the sub-agent's frames sit between SUBAGENT_STARTED and
// SUBAGENT_FINISHED with its subagentRunId, and its messages stay out of the
// session's conversation.
func TestTaskToolFrames(t *testing.T) {
	dir := t.TempDir()
	turns := []map[string]any{
		{"tool_calls": []map[string]any{{"name": "task", "args": map[string]string{"description": "say the secret", "role": "helper"}}}},
		{"text": []string{"sub answer"}},
		{"text": []string{"main answer"}},
	}
	data, _ := json.Marshal(map[string]any{"turns": turns})
	path := filepath.Join(dir, "script.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := kernel.New(kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "script:" + path,
		Tools: tool.NewSet(tool.Echo{}, subagent.TaskTool{}), DebugActor: true})
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	ctx := context.Background()
	sess, err := k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sess.Send(ctx, kernel.SendInput{Text: "delegate", Subscribe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Sub.Close()
	var evs []protocol.Event
	deadline := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case <-res.Sub.Ready():
		case <-deadline:
			t.Fatalf("no terminal event; got %d events", len(evs))
		}
		for _, f := range res.Sub.Take(nil) {
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
			done = done || protocol.EventType(f.Type).Terminal()
		}
	}
	var subID string
	var inside, started, finished bool
	for _, ev := range evs {
		switch e := ev.(type) {
		case *protocol.SubagentStarted:
			subID, started, inside = e.SubagentRunID, true, true
			if e.Name != "helper" || e.ParentToolCallID == "" {
				t.Errorf("SUBAGENT_STARTED = %+v, want name helper and the task call as parent", e)
			}
		case *protocol.SubagentFinished:
			inside, finished = false, e.SubagentRunID == subID
			if string(e.Result) != `"sub answer"` {
				t.Errorf("SUBAGENT_FINISHED result = %s, want the sub-agent's answer", e.Result)
			}
		case *protocol.TextMessageContent:
			if got := subagent.Attribution(e); (got != "") != inside || (inside && got != subID) {
				t.Errorf("TEXT_MESSAGE_CONTENT %q has subagentRunId %q inside=%v, want %q only inside", e.Delta, got, inside, subID)
			}
		case *protocol.RunFinished:
			if e.Outcome == nil || e.Outcome.Type != protocol.OutcomeSuccess {
				t.Errorf("RUN_FINISHED outcome = %+v, want success", e.Outcome)
			}
		}
	}
	if !started || !finished {
		t.Fatalf("SUBAGENT_STARTED %v, SUBAGENT_FINISHED %v; want both", started, finished)
	}
	// The session's conversation has the delegation and its result, not
	// the sub-agent's own messages.
	snap, err := sess.SubscribeWith(ctx, kernel.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	<-snap.Ready()
	seen := false
	for _, f := range snap.Take(nil) {
		if f.Type != string(protocol.TypeMessagesSnapshot) {
			continue
		}
		seen = true
		var ms protocol.MessagesSnapshot
		if err := json.Unmarshal(f.Data, &ms); err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, m := range ms.Messages {
			texts = append(texts, m.Role+":"+m.Content.String())
		}
		got := strings.Join(texts, "|")
		if want := "user:delegate|assistant:|tool:sub answer|assistant:main answer"; got != want {
			t.Errorf("conversation = %s, want %s", got, want)
		}
	}
	if !seen {
		t.Error("the snapshot subscription sent no MESSAGES_SNAPSHOT")
	}
}

// runScript starts a kernel on a real SQLite file whose default model
// plays turns, with tools, and returns a session.
func runScript(t *testing.T, turns []map[string]any, tools ...tool.Tool) *kernel.Session {
	t.Helper()
	dir := t.TempDir()
	data, _ := json.Marshal(map[string]any{"turns": turns})
	path := filepath.Join(dir, "script.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
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

// TestCancelClosesSubagentOpenMessages cancels a run while a delegated
// sub-agent has a text message open: the closer of that message carries
// the sub-agent's subagentRunId, and the sub-agent ends with
// SUBAGENT_ERROR before RUN_FINISHED cancelled.
func TestCancelClosesSubagentOpenMessages(t *testing.T) {
	ended := make(chan string, 1)
	sess := runScript(t, []map[string]any{
		{"tool_calls": []map[string]any{{"name": "task", "args": map[string]string{"description": "think forever", "role": "thinker"}}}},
		{"text": []string{"half a thought"}, "hang": true},
	}, subagent.TaskTool{OnEnd: func(addr string) { ended <- addr }})
	ctx := context.Background()
	res, err := sess.Send(ctx, kernel.SendInput{Text: "delegate", Subscribe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Sub.Close()
	var evs []protocol.Event
	cancelled := false
	deadline := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case <-res.Sub.Ready():
		case <-deadline:
			t.Fatalf("no terminal event; got %d events", len(evs))
		}
		for _, f := range res.Sub.Take(nil) {
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
			done = done || protocol.EventType(f.Type).Terminal()
			if c, ok := ev.(*protocol.TextMessageContent); ok && c.SubagentRunID != "" && !cancelled {
				cancelled = true
				if err := sess.Cancel(ctx, res.RunID); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var subID, openMsg string
	var closer *protocol.TextMessageEnd
	var subErr *protocol.SubagentError
	for _, ev := range evs {
		switch e := ev.(type) {
		case *protocol.SubagentStarted:
			subID = e.SubagentRunID
		case *protocol.TextMessageStart:
			if e.SubagentRunID != "" {
				openMsg = e.MessageID
			}
		case *protocol.TextMessageEnd:
			if e.MessageID == openMsg {
				closer = e
			}
		case *protocol.SubagentError:
			subErr = e
		case *protocol.RunFinished:
			if e.Outcome == nil || e.Outcome.Type != protocol.OutcomeCancelled {
				t.Errorf("RUN_FINISHED outcome = %+v, want cancelled", e.Outcome)
			}
		}
	}
	if subID == "" || openMsg == "" {
		t.Fatalf("sub-agent %q opened message %q; want both", subID, openMsg)
	}
	if closer == nil {
		t.Fatalf("TEXT_MESSAGE_END for %s never came", openMsg)
	}
	if closer.SubagentRunID != subID {
		t.Errorf("closer TEXT_MESSAGE_END subagentRunId = %q, want %q", closer.SubagentRunID, subID)
	}
	if subErr == nil || subErr.SubagentRunID != subID || subErr.Code != "cancelled" {
		t.Errorf("SUBAGENT_ERROR = %+v, want the sub-agent's, cancelled", subErr)
	}
	// A cancel ends the run at once; the sub-agent's loop unwinds after,
	// and OnEnd comes then.
	select {
	case addr := <-ended:
		if addr != "agent://run/thinker" {
			t.Errorf("OnEnd(%q), want agent://run/thinker", addr)
		}
	case <-t.Context().Done():
		t.Error("OnEnd was never called for the cancelled sub-agent")
	}
}

// TestTaskToolAddresses checks where delegated sub-agents sit on the hub:
// in their caller's crew, named for their role (spaces and slashes become
// dashes), and nested ones in the crew of the sub-agent that delegated.
func TestTaskToolAddresses(t *testing.T) {
	var mu sync.Mutex
	var addrs, lifecycle []string
	tt := subagent.TaskTool{
		OnStart: func(addr string) {
			mu.Lock()
			addrs = append(addrs, addr)
			lifecycle = append(lifecycle, "start "+addr)
			mu.Unlock()
		},
		OnEnd: func(addr string) { mu.Lock(); lifecycle = append(lifecycle, "end "+addr); mu.Unlock() },
		Self:  func(ctx context.Context) string { return "agent://" + agent.SessionFrom(ctx) + "/main" },
	}
	task := func(role string) map[string]any {
		return map[string]any{"tool_calls": []map[string]any{{"name": "task", "args": map[string]string{"description": "work", "role": role}}}}
	}
	sess := runScript(t, []map[string]any{
		task("code reviewer"),
		{"text": []string{"reviewed"}},
		task("a/b"),
		task("nested"), // the a/b sub-agent delegates in turn
		{"text": []string{"nested done"}},
		{"text": []string{"a/b done"}},
		{"text": []string{"all done"}},
	}, tt)
	ctx := context.Background()
	res, err := sess.Send(ctx, kernel.SendInput{Text: "delegate", Subscribe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Sub.Close()
	deadline := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case <-res.Sub.Ready():
		case <-deadline:
			t.Fatal("no terminal event")
		}
		for _, f := range res.Sub.Take(nil) {
			done = done || protocol.EventType(f.Type).Terminal()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	s := sess.ID()
	want := []string{"agent://" + s + "/code-reviewer", "agent://" + s + "/a-b", "agent://" + s + "/nested"}
	if strings.Join(addrs, " ") != strings.Join(want, " ") {
		t.Errorf("sub-agent addresses = %v, want %v", addrs, want)
	}
	// Each sub-agent ends after it starts, a nested one inside its
	// caller's span.
	wantLife := []string{"start " + want[0], "end " + want[0], "start " + want[1], "start " + want[2], "end " + want[2], "end " + want[1]}
	if strings.Join(lifecycle, ", ") != strings.Join(wantLife, ", ") {
		t.Errorf("OnStart/OnEnd calls = %v, want %v", lifecycle, wantLife)
	}
}
