package client_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/protocol"
)

// apply folds events given as JSON into a new State.
func apply(t testing.TB, events ...string) *client.State {
	t.Helper()
	st := client.NewState()
	for _, e := range events {
		if err := st.Apply(client.Frame{Data: json.RawMessage(e)}); err != nil {
			t.Fatalf("Apply(%s) = %v", e, err)
		}
	}
	return st
}

func messagesJSON(t testing.TB, st *client.State) string {
	t.Helper()
	data, err := json.Marshal(st.Messages())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestStateEvents(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		want   string
	}{
		{
			name: "chunks open and continue messages",
			events: []string{
				`{"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"Hel"}`,
				`{"type":"TEXT_MESSAGE_CHUNK","delta":"lo"}`,
				`{"type":"TOOL_CALL_CHUNK","toolCallId":"c1","toolCallName":"f","parentMessageId":"m1","delta":"{\"a\""}`,
				`{"type":"TOOL_CALL_CHUNK","delta":":1}"}`,
				`{"type":"REASONING_MESSAGE_CHUNK","messageId":"r1","delta":"hm"}`,
			},
			want: `[{"id":"m1","role":"assistant","content":"Hello","toolCalls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"id":"r1","role":"reasoning","content":"hm"}]`,
		},
		{
			name: "a snapshot replaces the messages, later events extend it",
			events: []string{
				`{"type":"TEXT_MESSAGE_START","messageId":"old","role":"assistant"}`,
				`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u","role":"user","content":"hi"},{"id":"a","role":"assistant","content":"Hel"}]}`,
				`{"type":"TEXT_MESSAGE_CONTENT","messageId":"a","delta":"lo"}`,
			},
			want: `[{"id":"u","role":"user","content":"hi"},{"id":"a","role":"assistant","content":"Hello"}]`,
		},
		{
			name: "known ids are not added twice; unknown custom events are ignored",
			events: []string{
				`{"type":"CUSTOM","name":"orrery.user.message","value":{"id":"u1","role":"user","content":"hi","runId":"r"}}`,
				`{"type":"RUN_STARTED","threadId":"s","runId":"r","input":{"threadId":"s","runId":"r","messages":[{"id":"u1","role":"user","content":"hi again"},{"id":"t1","role":"tool","toolCallId":"c","content":"ok"}],"tools":[],"context":[]}}`,
				`{"type":"CUSTOM","name":"someone.else","value":{"id":"x","role":"user","content":"no"}}`,
				`{"type":"TOOL_CALL_RESULT","messageId":"t1","toolCallId":"c","content":"again"}`,
			},
			want: `[{"id":"u1","role":"user","content":"hi"},{"id":"t1","role":"tool","content":"ok","toolCallId":"c"}]`,
		},
		{
			name: "activity messages",
			events: []string{
				`{"type":"ACTIVITY_SNAPSHOT","messageId":"a1","activityType":"plan","content":{"steps":["x"]}}`,
				`{"type":"ACTIVITY_DELTA","messageId":"a1","activityType":"plan","patch":[{"op":"add","path":"/steps/-","value":"y"}]}`,
			},
			want: `[{"id":"a1","role":"activity","content":{"steps":["x","y"]},"activityType":"plan"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := messagesJSON(t, apply(t, tt.events...)); !jsonEqual([]byte(got), []byte(tt.want)) {
				t.Errorf("Messages() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestStateSharedDocument(t *testing.T) {
	st := apply(t,
		`{"type":"STATE_SNAPSHOT","metadata":{"orrery":{"seq":4}},"snapshot":{"surfaces":{},"list":[1]}}`,
		`{"type":"STATE_DELTA","metadata":{"orrery":{"seq":5}},"delta":[{"op":"add","path":"/surfaces/s1","value":{"kind":{"t":"text","chunks":["a"]}}},{"op":"add","path":"/list/-","value":2}]}`,
	)
	want := `{"surfaces":{"s1":{"kind":{"t":"text","chunks":["a"]}}},"list":[1,2]}`
	if !jsonEqual(st.Shared(), []byte(want)) || st.Seq() != 5 {
		t.Fatalf("Shared() = %s, Seq() = %d, want %s and 5", st.Shared(), st.Seq(), want)
	}
	// All or none: the second op fails, so the first is not applied either.
	bad := `{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/list/0","value":9},{"op":"remove","path":"/list/-1"}]}`
	if err := st.Apply(client.Frame{Seq: 6, Data: json.RawMessage(bad)}); err == nil {
		t.Error("Apply(a delta with a negative index) = nil, want an error")
	}
	if !jsonEqual(st.Shared(), []byte(want)) || st.Seq() != 5 {
		t.Errorf("after a refused delta: Shared() = %s, Seq() = %d, want the last good %s at 5", st.Shared(), st.Seq(), want)
	}
	if client.NewState().Shared() != nil {
		t.Error("Shared() of a new State is not nil")
	}
	if err := st.Apply(client.Frame{Data: json.RawMessage(`{"type":"NOT_AN_EVENT"}`)}); err != nil {
		t.Errorf("Apply(unknown type) = %v, want it skipped", err)
	}
}

// TestMessagesAreCopies checks that later frames do not change a result
// already returned.
func TestMessagesAreCopies(t *testing.T) {
	st := apply(t,
		`{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"m"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}`,
	)
	before := st.Messages()
	apply := func(e string) {
		if err := st.Apply(client.Frame{Data: json.RawMessage(e)}); err != nil {
			t.Fatal(err)
		}
	}
	apply(`{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}"}`)
	apply(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"b"}`)
	if before[0].Content.String() != "a" || before[0].ToolCalls[0].Function.Arguments != "" {
		t.Errorf("an earlier Messages() result changed: %+v", before[0])
	}
	if after := st.Messages(); after[0].Content.String() != "ab" || after[0].ToolCalls[0].Function.Arguments != "{}" {
		t.Errorf("Messages() = %+v, want content ab and arguments {}", after[0])
	}
}

// BenchmarkStateApplyText measures folding a streamed text delta, the
// most frequent frame.
func BenchmarkStateApplyText(b *testing.B) {
	st := apply(b, `{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`)
	ev := &protocol.TextMessageContent{MessageID: "m", Delta: "word "}
	ev.Type = protocol.TypeTextMessageContent
	b.ReportAllocs()
	for b.Loop() {
		if err := st.ApplyEvent(ev); err != nil {
			b.Fatal(err)
		}
	}
	if got := st.Messages()[0].Content.String(); !strings.HasPrefix(got, "word word") {
		b.Fatalf("content = %q", fmt.Sprint(got[:min(20, len(got))]))
	}
}
