package ask_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/ask"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

func TestBadCalls(t *testing.T) {
	tests := []struct{ name, args, want string }{
		{"no question", `{}`, `ask needs {"question": "…"}`},
		{"a blank question", `{"question":"  "}`, `ask needs {"question": "…"}`},
		{"not an object", `[1]`, `ask needs {"question": "…"}`},
		{"an empty choice", `{"question":"Which?","choices":["a",""]}`, "a choice is empty"},
		{"outside a turn", `{"question":"Which?"}`, "nobody can be asked in this run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := ask.Tool{}.Call(context.Background(), tool.Call{Args: json.RawMessage(tt.args)})
			if err != nil || !res.Error || !strings.Contains(res.Text, tt.want) {
				t.Errorf("Call(%s) = %+v, %v; want an error result containing %q", tt.args, res, err, tt.want)
			}
		})
	}
}

// TestAskInKernel runs the ask tool in a real kernel: with a client that
// draws consent the question is put as orrery.input.requested and the
// answer is the tool's result; with none it is refused at once.
func TestAskInKernel(t *testing.T) {
	dir := t.TempDir()
	call := map[string]any{"tool_calls": []map[string]any{{"name": "ask", "args": map[string]any{"question": "Which colour?", "choices": []string{"red", "blue"}}}}}
	data, _ := json.Marshal(map[string]any{"turns": []map[string]any{call, {"text": []string{"ok"}}, call, {"text": []string{"ok"}}}})
	path := filepath.Join(dir, "script.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := kernel.New(kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "script:" + path, Tools: tool.NewSet(ask.Tool{}), DebugActor: true})
	ctx := context.Background()
	if err := k.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	sess, err := k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	person := kernel.Caller{Client: "test", Draws: []string{"thread", "tools", "consent"}}
	head := sess.Head()
	sub, err := sess.SubscribeWith(ctx, kernel.SubscribeOptions{Since: &head, Caller: person})
	if err != nil {
		t.Fatal(err)
	}
	result := func(answer func(req kernel.InputRequested)) string {
		t.Helper()
		if _, err := sess.Send(ctx, kernel.SendInput{Text: "ask"}); err != nil {
			t.Fatal(err)
		}
		var content string
		deadline := time.After(20 * time.Second)
		for {
			select {
			case <-sub.Ready():
			case <-deadline:
				t.Fatal("no terminal event")
			}
			for _, f := range sub.Take(nil) {
				ev, err := protocol.DecodeEvent(f.Data)
				if err != nil {
					t.Fatal(err)
				}
				switch e := ev.(type) {
				case *protocol.Custom:
					if e.Name == kernel.InputRequestedEvent {
						var req kernel.InputRequested
						if err := json.Unmarshal(e.Value, &req); err != nil {
							t.Fatal(err)
						}
						answer(req)
					}
				case *protocol.ToolCallResult:
					content = e.Content.String()
				}
				if protocol.EventType(f.Type).Terminal() {
					return content
				}
			}
		}
	}
	got := result(func(req kernel.InputRequested) {
		if req.InputKind != "choice" || req.Prompt != "Which colour?" || strings.Join(req.Choices, ",") != "red,blue" {
			t.Errorf("orrery.input.requested = %+v, want the choice", req)
		}
		if err := sess.AnswerInput(ctx, person, req.Request, "blue"); err != nil {
			t.Error(err)
		}
	})
	if got != `{"answer":"blue"}` {
		t.Errorf("the ask result = %s, want the answer blue", got)
	}

	sub.Close()
	head = sess.Head()
	watcher, err := sess.SubscribeWith(ctx, kernel.SubscribeOptions{Since: &head})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	sub = watcher
	got = result(func(req kernel.InputRequested) { t.Errorf("asked %+v with nobody who draws consent attached", req) })
	if !strings.Contains(got, "no client that can answer is attached") || !strings.Contains(got, "Do not guess") {
		t.Errorf("the ask result with nobody to answer = %s, want a refusal", got)
	}
}
