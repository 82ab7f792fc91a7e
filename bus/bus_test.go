package bus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/bus"
	"github.com/getorrery/orrery/kernel"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 42e6, time.FixedZone("CEST", 2*3600))

func TestEncode(t *testing.T) {
	tests := []struct {
		name string
		ev   bus.Event
		want string
	}{
		{"envelope only", bus.Event{Kind: "run.started"},
			`{"v":2,"seq":1,"ts":"2026-05-01T10:00:00.042Z","kind":"run.started"}`},
		{"identity in order, payload flat after it",
			bus.Event{Kind: "task.started", AgentID: "writer", CrewID: "c", CausationID: "x", CorrelationID: "c-1"}.With("taskId", "t1").With("agentRole", "Writer"),
			`{"v":2,"seq":1,"ts":"2026-05-01T10:00:00.042Z","kind":"task.started","crewId":"c","agentId":"writer","correlationId":"c-1","causationId":"x","taskId":"t1","agentRole":"Writer"}`},
		{"reserved payload names are dropped",
			bus.Event{Kind: "input.needed", Payload: []bus.Field{{"kind", "confirm"}, {"seq", 9}, {"v", 1}, {"ts", "x"}, {"crewId", "evil"}, {"agentId", "evil"}, {"correlationId", "evil"}, {"causationId", "evil"}, {"inputKind", "confirm"}}},
			`{"v":2,"seq":1,"ts":"2026-05-01T10:00:00.042Z","kind":"input.needed","inputKind":"confirm"}`},
		{"absent values are omitted, never null",
			bus.Event{Kind: "x", Payload: []bus.Field{{"a", nil}, {"b", json.RawMessage("null")}, {"c", 0}, {"d", false}}}.With("e", "").With("f", json.RawMessage(nil)),
			`{"v":2,"seq":1,"ts":"2026-05-01T10:00:00.042Z","kind":"x","c":0,"d":false}`},
		{"hub.message keeps its payload as is, reserved names inside it included",
			bus.Event{Kind: "hub.message"}.With("payload", json.RawMessage(`{"kind":"mine","seq":3}`)),
			`{"v":2,"seq":1,"ts":"2026-05-01T10:00:00.042Z","kind":"hub.message","payload":{"kind":"mine","seq":3}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := bus.Encode(1, t0, tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Encode() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestWriterNumbersFromOne(t *testing.T) {
	var out bytes.Buffer
	w := bus.NewWriter(&out)
	w.Now = func() time.Time { return t0 }
	for _, k := range []string{"run.started", "task.started", "run.finished"} {
		if _, err := w.Write(bus.Event{Kind: k}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Write(bus.Event{}); err == nil {
		t.Error("Write(no kind) = nil, want an error")
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("wrote %d lines, want 3:\n%s", len(lines), out.String())
	}
	for i, l := range lines {
		var env struct {
			Seq uint64 `json:"seq"`
			TS  string `json:"ts"`
		}
		if err := json.Unmarshal([]byte(l), &env); err != nil {
			t.Fatal(err)
		}
		if env.Seq != uint64(i+1) {
			t.Errorf("line %d seq = %d, want %d", i+1, env.Seq, i+1)
		}
		if _, err := time.Parse(time.RFC3339Nano, env.TS); err != nil || !strings.HasSuffix(env.TS, "Z") {
			t.Errorf("line %d ts = %q, want ISO-8601 UTC", i+1, env.TS)
		}
	}
	if w.Seq() != 3 {
		t.Errorf("Seq() = %d, want 3", w.Seq())
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		line    string
		want    string // kind, when it parses
		wantErr string
	}{
		{`{"kind":"input.given","correlationId":"c-1","value":"yes"}`, "input.given", ""},
		{`{"kind":"input.given","value":true}`, "input.given", ""},
		{`{"kind":"post","to":"agent://c/a","payload":{"x":1}}`, "post", ""},
		{`{"kind":"send","to":"client://x","payload":1,"timeoutMs":100}`, "send", ""},
		{`{"kind":"publish","topic":"t","payload":1,"retainAs":"last"}`, "publish", ""},
		{`{"kind":"reply","correlationId":"c-1","payload":1}`, "reply", ""},
		{`{"kind":"subscribe","topic":"t"}`, "subscribe", ""},
		{`{"kind":"unsubscribe","topic":"t"}`, "unsubscribe", ""},
		{`not json`, "", "not a JSON object"},
		{`[1,2]`, "", "not a JSON object"},
		{`{"kind":`, "", "not a JSON object"},
		{`{}`, "", "no kind"},
		{`{"kind":"launch"}`, "", `unknown verb "launch"`},
		{`{"kind":"input.given"}`, "", "needs a value"},
		{`{"kind":"post","payload":1}`, "", "post needs to"},
		{`{"kind":"reply","payload":1}`, "", "correlationId"},
		{`{"kind":"subscribe"}`, "", "needs a topic"},
		{`{"kind":"send","to":"client://x","timeoutMs":-1}`, "", "timeoutMs"},
		{`{"kind":"send","to":5}`, "", "wrong type"},
	}
	for _, tt := range tests {
		in, err := bus.Parse([]byte(tt.line))
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("Parse(%s) = %v, want it to parse", tt.line, err)
		case tt.wantErr == "" && in.Kind != tt.want:
			t.Errorf("Parse(%s).Kind = %q, want %q", tt.line, in.Kind, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("Parse(%s) = %v, want an error naming %q", tt.line, err, tt.wantErr)
		}
	}
}

func TestReadLinesIsTolerant(t *testing.T) {
	input := "garbage\n\n{\"kind\":\"nope\"}\n{\"kind\":\"subscribe\",\"topic\":\"a\"}\r\n" +
		strings.Repeat("x", bus.MaxLine+10) + "\n{\"kind\":\"unsubscribe\",\"topic\":\"a\"}"
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var got []string
	err := bus.ReadLines(context.Background(), strings.NewReader(input), log, func(in bus.Inbound) { got = append(got, in.Kind+":"+in.Topic) })
	if err != nil {
		t.Fatalf("ReadLines() = %v, want nil at EOF", err)
	}
	if want := "subscribe:a,unsubscribe:a"; strings.Join(got, ",") != want {
		t.Errorf("handled %v, want %s", got, want)
	}
	for _, want := range []string{"line=1", "line=3", "unknown verb", "longer than the limit"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs = %q, want them to name %q", logs.String(), want)
		}
	}
}

func TestReadLinesStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := bus.ReadLines(ctx, strings.NewReader("{}\n"), slog.Default(), func(bus.Inbound) {})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ReadLines(cancelled) = %v, want context.Canceled", err)
	}
}

func TestArgsSummary(t *testing.T) {
	tests := map[string]string{
		`{"path":"a","content":"secret"}`: "content,path",
		`{}`:                              "",
		`[1]`:                             "",
		``:                                "",
		`{"command":"rm -rf /"}`:          "command",
	}
	for in, want := range tests {
		if got := bus.ArgsSummary(in); got != want {
			t.Errorf("ArgsSummary(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"kind":"input.given","correlationId":"c-1","value":"yes"}`,
		`{"kind":"send","to":"agent://c/a","payload":{"q":1},"timeoutMs":5}`,
		`{"kind":"publish","topic":"t","payload":null,"retainAs":"x"}`,
		`{"kind":"reply"}`, `not json`, `{"kind":1}`, `{"kind":"post","to":"x","payload":[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		in, err := bus.Parse(line)
		if err != nil {
			if err.Error() == "" {
				t.Errorf("Parse(%q) error is empty", line)
			}
			return
		}
		found := false
		for _, v := range bus.Verbs {
			found = found || v == in.Kind
		}
		if !found {
			t.Errorf("Parse(%q) accepted unknown verb %q", line, in.Kind)
		}
		// What parses survives a round trip.
		data, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		again, err := bus.Parse(data)
		if err != nil || again.Kind != in.Kind || again.To != in.To || again.Topic != in.Topic || again.CorrelationID != in.CorrelationID {
			t.Errorf("Parse(Marshal(%+v)) = %+v, %v; want the same", in, again, err)
		}
	})
}

// TestBridgeEndsOnUnloggedRunError feeds the bridge the end of a run whose
// store failed, as the kernel delivers it: seq 0, outside the log. The bus
// run ends with it, as with a logged RUN_ERROR.
func TestBridgeEndsOnUnloggedRunError(t *testing.T) {
	var out bytes.Buffer
	w := bus.NewWriter(&out)
	br, err := bus.NewBridge(context.Background(), w, nil, nil, bus.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	br.Follow("run-1")
	frames := []kernel.Frame{
		{Seq: 7, Type: "TEXT_MESSAGE_CONTENT", Run: "run-1", Data: []byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi","metadata":{"orrery":{"seq":7}}}`)},
		{Type: "TEXT_MESSAGE_END", Run: "run-1", Data: []byte(`{"type":"TEXT_MESSAGE_END","messageId":"m","metadata":{"orrery":{"seq":0}}}`)},
		{Type: "RUN_ERROR", Run: "run-1", Data: []byte(`{"type":"RUN_ERROR","code":"store_failed","message":"this run's output could not be saved: free disk space, then send the prompt again","metadata":{"orrery":{"seq":0}}}`)},
	}
	for i, f := range frames {
		done, code := br.Frame(f)
		if last := i == len(frames)-1; done != last || last && code != 3 {
			t.Errorf("Frame(%s) = %v, %d; want done only at the RUN_ERROR, with exit code 3", f.Type, done, code)
		}
	}
	if got := out.String(); !strings.Contains(got, `"kind":"error","code":"crew_failed","message":"this run's output could not be saved`) || !strings.Contains(got, `"kind":"run.finished","success":false,"exitCode":3`) {
		t.Errorf("bus output:\n%s\nwant an error naming the store failure, then run.finished with exit code 3", got)
	}
}
