package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/metrics"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/tool"
)

// env is a kernel on a real store (one of storeModes) in a directory.
type env struct {
	t     *testing.T
	dir   string
	store store.Log
	k     *kernel.Kernel
}

type option func(*kernel.Config)

func (m storeMode) newEnv(t *testing.T, model string, opts ...option) *env {
	t.Helper()
	return m.openEnv(t, t.TempDir(), model, opts...)
}

func (m storeMode) openEnv(t *testing.T, dir, model string, opts ...option) *env {
	t.Helper()
	st, err := m.open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := kernel.Config{
		Store: st, Models: models.Resolve, DefaultModel: model,
		Tools: tool.Builtins(), DebugActor: true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	k := kernel.New(cfg)
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, store: st, k: k}
	t.Cleanup(e.close)
	return e
}

// session creates a session with the kernel's defaults.
func (e *env) session(t *testing.T) *kernel.Session {
	t.Helper()
	s, err := e.k.CreateSession(context.Background(), kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.k.Close(ctx); err != nil {
		e.t.Errorf("Close() = %v", err)
	}
	e.store.Close()
}

// script writes a script model file and returns its model spec.
func script(t *testing.T, turns ...map[string]any) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"turns": turns})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return "script:" + path
}

// collect reads sub until the terminal event of runID and returns the
// decoded events.
func collect(t *testing.T, sub *kernel.Subscription, runID string) []protocol.Event {
	t.Helper()
	var out []protocol.Event
	timeout := time.After(20 * time.Second)
	for {
		select {
		case <-sub.Ready():
		case <-sub.Done():
		case <-timeout:
			t.Fatalf("no terminal event for run %s; got %d events", runID, len(out))
		}
		for _, f := range sub.Take(nil) {
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Header().Seq() != f.Seq {
				t.Fatalf("frame seq %d carries metadata.orrery.seq %d", f.Seq, ev.Header().Seq())
			}
			out = append(out, ev)
			if f.Run == runID && protocol.EventType(f.Type).Terminal() {
				return out
			}
		}
		if err := sub.Err(); err != nil {
			t.Fatalf("subscription ended: %v", err)
		}
	}
}

func types(evs []protocol.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = string(ev.EventType())
		if c, ok := ev.(*protocol.Custom); ok {
			out[i] += ":" + c.Name
		}
	}
	return out
}

func text(evs []protocol.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if c, ok := ev.(*protocol.TextMessageContent); ok {
			b.WriteString(c.Delta)
		}
	}
	return b.String()
}

func send(t *testing.T, s *kernel.Session, in kernel.SendInput) ([]protocol.Event, kernel.SendResult) {
	t.Helper()
	head := s.Head()
	sub, err := s.Subscribe(context.Background(), &head)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	res, err := s.Send(context.Background(), in)
	if err != nil {
		t.Fatalf("Send() = %v", err)
	}
	return collect(t, sub, res.RunID), res
}

func TestRunShape(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		tests := []struct {
			name      string
			turns     []map[string]any
			wantTypes []string
			wantText  string
		}{
			{
				name:  "text",
				turns: []map[string]any{{"text": []string{"Hel", "lo"}, "usage": map[string]int{"inputTokens": 10, "outputTokens": 2}}},
				wantTypes: []string{"CUSTOM:orrery.user.message", "RUN_STARTED", "STATE_SNAPSHOT",
					"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"},
				wantText: "Hello",
			},
			{
				name: "tool then text",
				turns: []map[string]any{
					{"tool_calls": []map[string]any{{"name": "echo", "args": map[string]string{"text": "ping"}}}},
					{"text": []string{"pong"}},
				},
				wantTypes: []string{"CUSTOM:orrery.user.message", "RUN_STARTED", "STATE_SNAPSHOT",
					"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "STATE_DELTA",
					"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"},
				wantText: "pong",
			},
			{
				name:  "provider error after text",
				turns: []map[string]any{{"text": []string{"par"}, "error": "boom"}},
				wantTypes: []string{"CUSTOM:orrery.user.message", "RUN_STARTED", "STATE_SNAPSHOT",
					"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_ERROR"},
				wantText: "par",
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				e := mode.newEnv(t, script(t, tt.turns...))
				s, err := e.k.CreateSession(context.Background(), kernel.SessionOptions{})
				if err != nil {
					t.Fatal(err)
				}
				evs, _ := send(t, s, kernel.SendInput{Text: "hi"})
				if got := strings.Join(types(evs), " "); got != strings.Join(tt.wantTypes, " ") {
					t.Errorf("event types = %s, want %s", got, strings.Join(tt.wantTypes, " "))
				}
				if got := text(evs); got != tt.wantText {
					t.Errorf("text = %q, want %q", got, tt.wantText)
				}
				for i, ev := range evs {
					if want := uint64(i + 1); ev.Header().Seq() != want {
						t.Errorf("event %d seq = %d, want %d", i, ev.Header().Seq(), want)
					}
				}
			})
		}
	})
}

func TestUsageAndCost(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		model := script(t, map[string]any{"text": []string{"x"}, "usage": map[string]int{"inputTokens": 2_000_000, "outputTokens": 1_000_000}})
		e := mode.newEnv(t, model, func(c *kernel.Config) {
			c.Prices = agent.PriceTable{"script:*": {Input: 3_000_000, Output: 15_000_000}}
		})
		s, err := e.k.CreateSession(context.Background(), kernel.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := send(t, s, kernel.SendInput{Text: "hi"})
		fin, ok := evs[len(evs)-1].(*protocol.RunFinished)
		if !ok {
			t.Fatalf("last event = %s, want RUN_FINISHED", evs[len(evs)-1].EventType())
		}
		var res protocol.RunResult
		if err := json.Unmarshal(fin.Result, &res); err != nil {
			t.Fatal(err)
		}
		// 2M input × $3/M + 1M output × $15/M = $21 = 21,000,000 micro-USD.
		if res.MicroUSD != 21_000_000 || res.InputTokens != 2_000_000 || res.OutputTokens != 1_000_000 {
			t.Errorf("RUN_FINISHED.result = %+v, want micro_usd 21000000, inputTokens 2000000, outputTokens 1000000", res)
		}
		if len(fin.Usage) != 1 || fin.Usage[0].TotalTokens != 3_000_000 || fin.Usage[0].Provider != "script" {
			t.Errorf("RUN_FINISHED.usage = %+v, want one entry, provider script, totalTokens 3000000", fin.Usage)
		}
		list, err := e.k.Sessions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].MicroUSD != 21_000_000 {
			t.Errorf("Sessions() = %+v, want one session costing 21000000", list)
		}
	})
}

func TestBusyAndSteer(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		model := script(t,
			map[string]any{"text": []string{"a", "b", "c", "d", "e", "f"}, "delay_ms": 40},
			map[string]any{"text": []string{"steered"}},
		)
		e := mode.newEnv(t, model)
		ctx := context.Background()
		s := e.session(t)
		sub, err := s.Subscribe(ctx, new(uint64))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		res, err := s.Send(ctx, kernel.SendInput{Text: "start"})
		if err != nil {
			t.Fatal(err)
		}
		// Wait until the first model step streams, so the steer lands after
		// the loop read the conversation.
		var early []protocol.Event
		for len(early) == 0 || early[len(early)-1].EventType() != protocol.TypeTextMessageContent {
			<-sub.Ready()
			for _, f := range sub.Take(nil) {
				ev, err := protocol.DecodeEvent(f.Data)
				if err != nil {
					t.Fatal(err)
				}
				early = append(early, ev)
			}
		}
		_, err = s.Send(ctx, kernel.SendInput{Text: "more"})
		var busy *kernel.BusyError
		if !errors.As(err, &busy) || !strings.Contains(err.Error(), "steer") {
			t.Fatalf("Send() while busy = %v, want a *BusyError naming steer", err)
		}
		steer, err := s.Send(ctx, kernel.SendInput{Text: "use vitest", Steer: true})
		if err != nil {
			t.Fatal(err)
		}
		if steer.RunID != res.RunID || steer.Target != protocol.TargetSteer {
			t.Errorf("steer = %+v, want run %s target steer", steer, res.RunID)
		}
		evs := append(early, collect(t, sub, res.RunID)...)
		if got, want := text(evs), "abcdefsteered"; got != want {
			t.Errorf("run text = %q, want %q (the steer must cause one more model step)", got, want)
		}
		var sawSteer bool
		for _, ev := range evs {
			if c, ok := ev.(*protocol.Custom); ok && c.Name == kernel.UserMessageEvent {
				var um kernel.UserMessage
				json.Unmarshal(c.Value, &um)
				if um.Steer && um.Content.String() == "use vitest" && um.RunID == res.RunID {
					sawSteer = true
				}
			}
		}
		if !sawSteer {
			t.Errorf("no orrery.user.message with steer:true for the steer in %v", types(evs))
		}
		if _, ok := evs[len(evs)-1].(*protocol.RunFinished); !ok {
			t.Errorf("last event = %s, want RUN_FINISHED", evs[len(evs)-1].EventType())
		}
	})
}

func TestCancel(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		tests := []struct {
			name  string
			turns []map[string]any
			tools *tool.Set
		}{
			{name: "mid text", turns: []map[string]any{{"reasoning": "hmm", "text": []string{"a", "b", "c", "d", "e", "f", "g", "h"}, "delay_ms": 30}}},
			{name: "mid tool", turns: []map[string]any{{"tool_calls": []map[string]any{{"name": "wait"}}}}, tools: tool.NewSet(waitTool{})},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				e := mode.newEnv(t, script(t, tt.turns...), func(c *kernel.Config) {
					if tt.tools != nil {
						c.Tools = tt.tools
					}
				})
				ctx := context.Background()
				s := e.session(t)
				sub, err := s.Subscribe(ctx, new(uint64))
				if err != nil {
					t.Fatal(err)
				}
				defer sub.Close()
				res, err := s.Send(ctx, kernel.SendInput{Text: "go"})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond)
				if err := s.Cancel(ctx, "not-this-run"); err == nil {
					t.Errorf("Cancel(wrong run) = nil, want a refusal")
				}
				if err := s.Cancel(ctx, res.RunID); err != nil {
					t.Fatalf("Cancel() = %v", err)
				}
				evs := collect(t, sub, res.RunID)
				fin, ok := evs[len(evs)-1].(*protocol.RunFinished)
				if !ok || fin.Outcome == nil || fin.Outcome.Type != protocol.OutcomeCancelled {
					t.Fatalf("terminal = %#v, want RUN_FINISHED outcome cancelled", evs[len(evs)-1])
				}
				assertClosed(t, evs)
				// Every call the run started has a result saying it was
				// stopped: no client shows it running, and the next model
				// call reads a result for it.
				results := map[string]string{}
				for _, ev := range evs {
					if r, ok := ev.(*protocol.ToolCallResult); ok {
						var o struct{ Status string }
						_ = json.Unmarshal(r.Orrery().Outcome, &o)
						results[r.ToolCallID] = o.Status
					}
				}
				for _, ev := range evs {
					if c, ok := ev.(*protocol.ToolCallStart); ok && results[c.ToolCallID] != "cancelled" {
						t.Errorf("call %s of the cancelled run has result status %q, want cancelled", c.ToolCallID, results[c.ToolCallID])
					}
				}
				if err := s.Cancel(ctx, ""); err == nil {
					t.Errorf("Cancel() on an idle session = nil, want a refusal")
				}
				// Nothing of the run may follow its terminal event, even from a
				// loop that was still winding down.
				time.Sleep(200 * time.Millisecond)
				if extra := sub.Take(nil); len(extra) > 0 {
					t.Errorf("%d frames after the cancelled run's terminal event, first %s", len(extra), extra[0].Data)
				}
			})
		}
	})
}

// waitTool blocks until its context ends.
type waitTool struct{}

func (waitTool) Spec() tool.Spec {
	return tool.Spec{Name: "wait", Description: "waits", ReadOnly: true}
}
func (waitTool) Call(ctx context.Context, _ tool.Call) (tool.Result, error) {
	<-ctx.Done()
	return tool.Result{}, ctx.Err()
}

// assertClosed checks that everything opened is closed before the terminal.
func assertClosed(t *testing.T, evs []protocol.Event) {
	t.Helper()
	open := map[string]bool{}
	for _, ev := range evs {
		switch e := ev.(type) {
		case *protocol.TextMessageStart:
			open["text:"+e.MessageID] = true
		case *protocol.TextMessageEnd:
			delete(open, "text:"+e.MessageID)
		case *protocol.ToolCallStart:
			open["call:"+e.ToolCallID] = true
		case *protocol.ToolCallEnd:
			delete(open, "call:"+e.ToolCallID)
		case *protocol.ReasoningMessageStart:
			open["rmsg:"+e.MessageID] = true
		case *protocol.ReasoningMessageEnd:
			delete(open, "rmsg:"+e.MessageID)
		case *protocol.ReasoningStart:
			open["rspan:"+e.MessageID] = true
		case *protocol.ReasoningEnd:
			delete(open, "rspan:"+e.MessageID)
		case *protocol.RunFinished:
			if len(open) > 0 {
				t.Errorf("RUN_FINISHED with %v still open", open)
			}
		}
	}
}

func TestClientToolPending(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		model := script(t,
			map[string]any{"tool_calls": []map[string]any{{"name": "confirm", "args": map[string]bool{"ok": true}}}},
			map[string]any{"text": []string{"confirmed"}},
		)
		e := mode.newEnv(t, model)
		ctx := context.Background()
		s, err := e.k.CreateSession(ctx, kernel.SessionOptions{ID: "thread-1"})
		if err != nil {
			t.Fatal(err)
		}
		tools := []protocol.Tool{{Name: "confirm", Description: "asks the person"}}
		user := protocol.Message{ID: "u1", Role: protocol.RoleUser, Content: protocol.TextContent("please confirm")}
		evs, _ := send(t, s, kernel.SendInput{RunID: "r1", Messages: []protocol.Message{user}, Tools: tools})
		fin, ok := evs[len(evs)-1].(*protocol.RunFinished)
		if !ok || fin.Outcome == nil || len(fin.Outcome.PendingToolCallIDs) != 1 {
			t.Fatalf("terminal = %#v, want RUN_FINISHED with one pending tool call", evs[len(evs)-1])
		}
		callID := fin.Outcome.PendingToolCallIDs[0]
		var start *protocol.ToolCallStart
		for _, ev := range evs {
			if s, ok := ev.(*protocol.ToolCallStart); ok {
				start = s
			}
			if _, ok := ev.(*protocol.ToolCallResult); ok {
				t.Errorf("the kernel answered a client tool itself")
			}
		}
		if start == nil || start.ToolCallID != callID {
			t.Fatalf("pending id %s does not match the TOOL_CALL_START %+v", callID, start)
		}
		// A stock client sends its whole history again, with the tool's result.
		history := []protocol.Message{
			user,
			{ID: start.ParentMessageID, Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: callID, Type: "function", Function: protocol.FunctionCall{Name: "confirm", Arguments: `{"ok":true}`}}}},
			{ID: "t1", Role: protocol.RoleTool, ToolCallID: callID, Content: protocol.TextContent("yes")},
		}
		evs2, _ := send(t, s, kernel.SendInput{RunID: "r2", Messages: history, Tools: tools})
		started, ok := evs2[0].(*protocol.RunStarted)
		if !ok {
			t.Fatalf("first event of the second run = %s, want RUN_STARTED (no new user message)", evs2[0].EventType())
		}
		if n := len(started.Input.Messages); n != 1 || started.Input.Messages[0].ID != "t1" {
			t.Errorf("RUN_STARTED.input.messages = %+v, want only the new tool message t1", started.Input.Messages)
		}
		if got := text(evs2); got != "confirmed" {
			t.Errorf("second run text = %q, want %q", got, "confirmed")
		}
		// The same runId again is refused.
		if _, err := s.Send(ctx, kernel.SendInput{RunID: "r2"}); err == nil {
			t.Errorf("Send(reused runId) = nil, want a refusal")
		}
	})
}

func TestSnapshotSubscription(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, "offline")
		ctx := context.Background()
		s := e.session(t)
		send(t, s, kernel.SendInput{Text: "echo one"})
		sub, err := s.Subscribe(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		<-sub.Ready()
		frames := sub.Take(nil)
		if len(frames) != 2 || frames[0].Type != "STATE_SNAPSHOT" || frames[1].Type != "MESSAGES_SNAPSHOT" || frames[0].Seq != 0 || frames[1].Seq != 0 {
			t.Fatalf("first frames = %v, want STATE_SNAPSHOT and MESSAGES_SNAPSHOT with seq 0", frames)
		}
		ev, err := protocol.DecodeEvent(frames[1].Data)
		if err != nil {
			t.Fatal(err)
		}
		msgs := ev.(*protocol.MessagesSnapshot).Messages
		// user, reasoning, assistant+call, tool, reasoning, assistant answer
		roles := make([]string, len(msgs))
		for i, m := range msgs {
			roles[i] = m.Role
		}
		if got, want := strings.Join(roles, ","), "user,reasoning,assistant,tool,reasoning,assistant"; got != want {
			t.Errorf("MESSAGES_SNAPSHOT roles = %s, want %s", got, want)
		}
		if msgs[3].Content.String() != "one" {
			t.Errorf("tool message = %q, want %q", msgs[3].Content.String(), "one")
		}
		// Live frames follow the snapshot with the next seq.
		head := s.Head()
		if _, err := s.Send(ctx, kernel.SendInput{Text: "hi"}); err != nil {
			t.Fatal(err)
		}
		<-sub.Ready()
		live := sub.Take(nil)
		if len(live) == 0 || live[0].Seq != head+1 {
			t.Fatalf("first live frame seq = %v, want %d", live, head+1)
		}
	})
}

func TestReloadKeepsConversation(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		dir := t.TempDir()
		e := mode.openEnv(t, dir, "offline")
		ctx := context.Background()
		s, err := e.k.CreateSession(ctx, kernel.SessionOptions{ID: "keep"})
		if err != nil {
			t.Fatal(err)
		}
		send(t, s, kernel.SendInput{Text: "echo first"})
		send(t, s, kernel.SendInput{Text: "what time is it"})
		before := snapshotMessages(t, s)
		head := s.Head()
		e.close()

		e2 := mode.openEnv(t, dir, "offline")
		s2, err := e2.k.Session(ctx, "keep")
		if err != nil {
			t.Fatal(err)
		}
		if s2.Head() != head {
			t.Errorf("Head() after reload = %d, want %d", s2.Head(), head)
		}
		if after := snapshotMessages(t, s2); after != before {
			t.Errorf("MESSAGES_SNAPSHOT after reload =\n%s\nwant\n%s", after, before)
		}
		evs, _ := send(t, s2, kernel.SendInput{Text: "hello"})
		if evs[0].Header().Seq() != head+1 {
			t.Errorf("first seq after reload = %d, want %d", evs[0].Header().Seq(), head+1)
		}
	})
}

func snapshotMessages(t *testing.T, s *kernel.Session) string {
	t.Helper()
	sub, err := s.Subscribe(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	<-sub.Ready()
	frames := sub.Take(nil)
	if len(frames) < 2 {
		t.Fatalf("got %d snapshot frames, want 2", len(frames))
	}
	return string(frames[1].Data)
}

func TestInterruptedRunIsClosedOnOpen(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		dir := t.TempDir()
		st, err := mode.open(dir)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := st.CreateSession(ctx, store.Session{ID: "s1"}); err != nil {
			t.Fatal(err)
		}
		// What a process that died mid-run leaves: a run started, text open.
		frames := []store.Frame{
			{Seq: 1, Type: "RUN_STARTED", Run: "r1", Data: []byte(`{"type":"RUN_STARTED","metadata":{"orrery":{"seq":1}},"threadId":"s1","runId":"r1"}`)},
			{Seq: 2, Type: "TEXT_MESSAGE_START", Run: "r1", Data: []byte(`{"type":"TEXT_MESSAGE_START","metadata":{"orrery":{"seq":2}},"messageId":"m1"}`)},
			{Seq: 3, Type: "TEXT_MESSAGE_CONTENT", Run: "r1", Data: []byte(`{"type":"TEXT_MESSAGE_CONTENT","metadata":{"orrery":{"seq":3}},"messageId":"m1","delta":"par"}`)},
		}
		if err := st.Append(ctx, store.Batch{Session: "s1", Frames: frames}); err != nil {
			t.Fatal(err)
		}
		st.Close()

		for round := 0; round < 2; round++ {
			e := mode.openEnv(t, dir, "offline")
			got, err := e.store.Read(ctx, "s1", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 5 {
				t.Fatalf("round %d: log has %d frames, want 5 (three, the open message closed, one RUN_ERROR)", round, len(got))
			}
			if end, err := protocol.DecodeEvent(got[3].Data); err != nil || end.EventType() != protocol.TypeTextMessageEnd || end.(*protocol.TextMessageEnd).MessageID != "m1" {
				t.Errorf("round %d: frame 4 = %s, want TEXT_MESSAGE_END m1", round, got[3].Data)
			}
			ev, err := protocol.DecodeEvent(got[4].Data)
			if err != nil {
				t.Fatal(err)
			}
			re, ok := ev.(*protocol.RunError)
			if !ok || re.Code != "interrupted" || got[4].Seq != 5 || got[4].Run != "r1" {
				t.Fatalf("round %d: last frame = %s, want RUN_ERROR interrupted with seq 5 of run r1", round, got[4].Data)
			}
			info, err := e.store.Session(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			if info.OpenRun != "" {
				t.Errorf("round %d: OpenRun = %q after recovery, want none", round, info.OpenRun)
			}
			e.close()
		}
	})
}

func TestSlowSubscriberIsDropped(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		// The frames keep coming for longer than kernel.SlowAfter, so the
		// subscriber's oldest queued frame has waited past it while it is over
		// its bound when the next commit arrives.
		chunks := make([]string, 0, 16)
		for i := range cap(chunks) {
			chunks = append(chunks, fmt.Sprint(i))
		}
		met := metrics.New()
		e := mode.newEnv(t, script(t, map[string]any{"text": chunks, "delay_ms": int(2 * kernel.SlowAfter / time.Millisecond / 10)}),
			func(c *kernel.Config) { c.QueueFrames = 4; c.Observer = met })
		ctx := context.Background()
		s := e.session(t)
		slow, err := s.Subscribe(ctx, new(uint64))
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Close()
		res, err := s.Send(ctx, kernel.SendInput{Text: "go", Subscribe: true})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-slow.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("a subscriber that never reads was not dropped")
		}
		if !errors.Is(slow.Err(), kernel.ErrSlow) {
			t.Errorf("Err() = %v, want ErrSlow", slow.Err())
		}
		// The metrics count the drop, and the resume the subscription began with.
		rec := httptest.NewRecorder()
		met.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		for _, want := range []string{"\norrery_subscribers_dropped_slow_total ", "\norrery_resumes_total 1\n"} {
			if !strings.Contains(rec.Body.String(), want) || strings.Contains(rec.Body.String(), "\norrery_subscribers_dropped_slow_total 0\n") {
				t.Errorf("the metrics lack %q (or count no drop)", strings.TrimSpace(want))
			}
		}
		// The run itself is unaffected: it finishes in the log. (res.Sub is
		// dropped too, so wait on the actor instead.)
		res.Sub.Close()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if f, _, _ := s.Read(ctx, 0, 0); len(f) > 0 && protocol.EventType(f[len(f)-1].Type).Terminal() {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		frames, _, err := s.Read(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		last := frames[len(frames)-1]
		if last.Type != "RUN_FINISHED" || last.Run != res.RunID {
			t.Errorf("last logged frame = %s, want the run's RUN_FINISHED", last.Data)
		}
	})
}

func TestCancelledRunIsStillCharged(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		model := script(t, map[string]any{
			"text": []string{"a", "b", "c", "d", "e", "f", "g", "h"}, "delay_ms": 30,
			"usage": map[string]int{"inputTokens": 1_000_000, "outputTokens": 0},
		})
		e := mode.newEnv(t, model, func(c *kernel.Config) {
			c.Prices = agent.PriceTable{"script:*": {Input: 2_000_000}}
		})
		ctx := context.Background()
		s := e.session(t)
		res, err := s.Send(ctx, kernel.SendInput{Text: "go", Subscribe: true})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Sub.Close()
		time.Sleep(60 * time.Millisecond)
		if err := s.Cancel(ctx, res.RunID); err != nil {
			t.Fatal(err)
		}
		collect(t, res.Sub, res.RunID)
		// The provider reports its usage only when its call returns, after the
		// cancel: the session is charged for it all the same.
		deadline := time.Now().Add(5 * time.Second)
		for {
			list, err := e.k.Sessions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if list[0].MicroUSD == 2_000_000 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session micro_usd = %d, want 2000000 (1M input tokens at $2/M)", list[0].MicroUSD)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestSubscriptionNotify checks the hook the server's flusher relies on:
// with Notify set, every frame a run logs reaches the subscriber through
// the hook (never through Ready), queued frames at the time of the call
// notify at once, and the end notifies too.
func TestSubscriptionNotify(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		e := mode.newEnv(t, script(t, map[string]any{"text": []string{"a", "b", "c", "d"}, "delay_ms": 5}))
		ctx := context.Background()
		s := e.session(t)
		sub, err := s.Subscribe(ctx, new(uint64))
		if err != nil {
			t.Fatal(err)
		}
		// Frames are queued before the hook is set: setting it notifies.
		if _, err := s.Send(ctx, kernel.SendInput{Text: "go"}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no frame queued within 10 s of the send")
			}
			select {
			case <-sub.Ready():
			default:
				continue
			}
			break
		}
		notes := make(chan struct{}, 1024)
		sub.Notify(func() { notes <- struct{}{} })
		select { // a frame may have signalled Ready before the hook was set
		case <-sub.Ready():
		default:
		}
		var got []kernel.Frame
		terminal := false
		timeout := time.After(10 * time.Second)
		for !terminal {
			select {
			case <-notes:
			case <-timeout:
				t.Fatalf("no notification for the rest of the run; got %d frames", len(got))
			}
			for _, f := range sub.Take(nil) {
				got = append(got, f)
				terminal = terminal || protocol.EventType(f.Type).Terminal()
			}
		}
		logged, _, err := s.Read(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(logged) {
			t.Errorf("took %d frames through notifications, the log holds %d", len(got), len(logged))
		}
		for i := range min(len(got), len(logged)) {
			if got[i].Seq != logged[i].Seq {
				t.Fatalf("frame %d: seq %d, the log's is %d", i, got[i].Seq, logged[i].Seq)
			}
		}
		select {
		case <-sub.Ready():
			t.Error("Ready was signalled while a Notify hook was set")
		default:
		}
		// The end notifies.
		for len(notes) > 0 {
			<-notes
		}
		sub.Close()
		select {
		case <-notes:
		case <-time.After(10 * time.Second):
			t.Error("Close did not notify")
		}
	})
}
