package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/sqlite"
)

// askResults reads the data dir's one session and returns the content of
// each ask tool call's TOOL_CALL_RESULT.
func askResults(t *testing.T, data string) []string {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(data, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	sessions, err := st.Sessions(ctx)
	if err != nil || len(sessions) != 1 {
		t.Fatalf("Sessions() = %v, %v; want one", sessions, err)
	}
	frames, err := st.Read(ctx, sessions[0].ID, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]string{}
	var out []string
	for _, f := range frames {
		ev, err := protocol.DecodeEvent(f.Data)
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *protocol.ToolCallStart:
			calls[e.ToolCallID] = e.ToolCallName
		case *protocol.ToolCallResult:
			if calls[e.ToolCallID] == "ask" {
				out = append(out, e.Content.String())
			}
		}
	}
	return out
}

// TestBusAsk has the model ask the person with the ask tool, which it
// finds with tools.search: a choice and a text question become
// input.needed with their inputKind, the answers reach the model as the
// tool's results, and with stdin closed the question is refused, never
// guessed.
func TestBusAsk(t *testing.T) {
	search := m{"tool_calls": []m{{"name": "tools.search", "args": m{"query": "ask the person a question"}}}}
	choice := m{"tool_calls": []m{{"name": "ask", "args": m{"question": "Which colour?", "choices": []string{"red", "blue"}, "default": "red"}}}}
	text := m{"tool_calls": []m{{"name": "ask", "args": m{"question": "Your name?"}}}}
	done := m{"text": []string{"thanks"}}
	tests := []struct {
		name    string
		turns   []map[string]any
		answers []string // input.given lines, in order; "" closes stdin
		wantIn  []string // inputKind of each input.needed
		want    []string // the ask results, in order
	}{
		{"a choice and a text", []map[string]any{search, choice, text, done},
			[]string{`{"kind":"input.given","correlationId":"%s","value":"blue"}`, `{"kind":"input.given","value":"Ada"}`},
			[]string{"choice", "text"}, []string{`{"answer":"blue"}`, `{"answer":"Ada"}`}},
		{"a choice not offered is not taken", []map[string]any{search, choice, done},
			[]string{`{"kind":"input.given","value":"green"}`, ""},
			[]string{"choice"}, []string{"not asked or did not answer"}},
		{"stdin closed", []map[string]any{search, text, done}, []string{""},
			[]string{"text"}, []string{"not asked or did not answer"}},
	}
	for _, mode := range busModes {
		for _, tt := range tests {
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				model := scriptSpec(t, dir, tt.turns...)
				r := startBusIn(t, mode, dir, "--events", "jsonl", "--model", model, "-p", "ask me")
				for i, kind := range tt.wantIn {
					need := r.until("input.needed")
					if need["inputKind"] != kind || need["correlationId"] == nil {
						t.Errorf("input.needed %d = %v, want inputKind %s with a correlationId", i, need, kind)
					}
					if kind == "choice" {
						if cs, _ := need["choices"].([]any); len(cs) != 2 || cs[1] != "blue" || need["defaultValue"] != "red" || need["prompt"] != "Which colour?" {
							t.Errorf("input.needed = %v, want the choices red, blue and the default red", need)
						}
					}
					for _, a := range tt.answers[i:] {
						if a == "" {
							_ = r.stdin.Close()
							break
						}
						a = strings.Replace(a, "%s", need["correlationId"].(string), 1)
						r.send(a)
						break
					}
				}
				if len(tt.answers) > len(tt.wantIn) && tt.answers[len(tt.wantIn)] == "" {
					_ = r.stdin.Close()
				}
				_ = r.stdin.Close()
				code, lines := r.finish()
				if code != 0 {
					t.Fatalf("exit %d, want 0; stdout:\n%s\nstderr:\n%s", code, strings.Join(lines, "\n"), r.stderrText())
				}
				checkEnvelope(t, lines)
				got := askResults(t, r.data)
				if len(got) != len(tt.want) {
					t.Fatalf("ask results = %q, want %d", got, len(tt.want))
				}
				for i, w := range tt.want {
					if !strings.Contains(got[i], w) {
						t.Errorf("ask result %d = %s, want it to contain %s", i, got[i], w)
					}
				}
				var rets []bool
				for _, ret := range events(t, lines, "tool.returned") {
					if ret["toolName"] == "ask" {
						rets = append(rets, ret["success"] == true)
					}
				}
				for i, ok := range rets {
					if want := !strings.Contains(tt.want[i], "not asked"); ok != want {
						t.Errorf("tool.returned ask %d success = %v, want %v", i, ok, want)
					}
				}
			})
		}
	}
}

// TestRunAskNobody runs ask without --events: nobody can answer, so the
// question is refused and the model is told not to guess.
func TestRunAskNobody(t *testing.T) {
	dir := t.TempDir()
	model := scriptSpec(t, dir,
		m{"tool_calls": []m{{"name": "tools.search", "args": m{"query": "ask"}}}},
		m{"tool_calls": []m{{"name": "ask", "args": m{"question": "Deploy?", "choices": []string{"yes", "no"}}}}},
		m{"text": []string{"stopped"}})
	r := startBus(t, dir, "--model", model, "-p", "ask me")
	_ = r.stdin.Close()
	for range r.lines {
	}
	<-r.exited
	if r.code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", r.code, r.stderrText())
	}
	got := askResults(t, filepath.Join(dir, ".data"))
	if len(got) != 1 || !strings.Contains(got[0], "no client that can answer is attached") || !strings.Contains(got[0], "Do not guess") {
		t.Errorf("ask results = %q, want one refusal saying nobody can answer", got)
	}
	var v any
	if json.Unmarshal([]byte(got[0]), &v) == nil {
		t.Errorf("ask result %s is JSON, want the refusal sentence", got[0])
	}
}
