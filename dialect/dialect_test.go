package dialect_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/getorrery/orrery/dialect"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// fixtureFrames reads a conformance fixture as the kernel logged it.
func fixtureFrames(t *testing.T, path string) []kernel.Frame {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var frames []kernel.Frame
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := bytes.Clone(sc.Bytes())
		ev, err := protocol.DecodeEvent(line)
		if err != nil {
			t.Fatalf("%s: DecodeEvent() = %v", path, err)
		}
		frames = append(frames, kernel.Frame{Seq: ev.Header().Seq(), Type: string(ev.EventType()), Data: line})
	}
	return frames
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    dialect.Mode
		wantErr string
	}{
		{"", dialect.AGUISpec, ""},
		{"agui_spec", dialect.AGUISpec, ""},
		{"agui", dialect.AGUI, ""},
		{"openai", dialect.OpenAI, ""},
		{"dual", dialect.Dual, ""},
		{"AGUI", "", `unknown stream_mode "AGUI": use one of agui_spec, agui, openai, dual`},
		{"sse", "", `use one of agui_spec, agui, openai, dual`},
	} {
		got, err := dialect.ParseMode(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseMode(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseMode(%q) = %q, %v, want %q, nil", tc.in, got, err, tc.want)
		}
	}
	if enc := dialect.Encoder(dialect.AGUISpec, dialect.Options{}); enc != nil {
		t.Errorf("Encoder(agui_spec) = %v, want nil (frames go out as logged)", enc)
	}
}

// TestGolden encodes every conformance fixture in the legacy, dual and
// openai modes and compares the result with testdata/golden (go test
// ./dialect -update rewrites them). Each line is "<seq> <type> <json>",
// where the type is "+" for a frame that continues the next one's seq.
func TestGolden(t *testing.T) {
	fixtures, err := filepath.Glob("../protocol/fixtures/*.jsonl")
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, mode := range []dialect.Mode{dialect.AGUI, dialect.Dual, dialect.OpenAI} {
		enc := dialect.Encoder(mode, dialect.Options{Model: "offline"})
		for _, path := range fixtures {
			name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
			t.Run(string(mode)+"/"+name, func(t *testing.T) {
				var out bytes.Buffer
				for _, f := range fixtureFrames(t, path) {
					for _, e := range enc.Encode(nil, f) {
						typ := e.Type
						if typ == "" {
							typ = "+"
						}
						out.WriteString(strings.Join([]string{uitoa(e.Seq), typ, string(e.Data)}, " "))
						out.WriteByte('\n')
					}
				}
				golden := filepath.Join("testdata", "golden", name+"."+string(mode)+".txt")
				if *update {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("read golden: %v (run go test ./dialect -update)", err)
				}
				if !bytes.Equal(out.Bytes(), want) {
					t.Errorf("%s mode of %s differs from %s:\n got: %s\nwant: %s", mode, name, golden, firstLineDiff(out.Bytes(), want), firstLineDiff(want, out.Bytes()))
				}
			})
		}
	}
}

func uitoa(n uint64) string { return strconv.FormatUint(n, 10) }

func firstLineDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range al {
		if i >= len(bl) || al[i] != bl[i] {
			return al[i]
		}
	}
	return "(a prefix)"
}

// TestEverySeq checks, for every mode and fixture frame, that the frame's
// seq is in the mode's documented field, that one frame becomes at least
// one, and that only the last of a group marks its seq.
func TestEverySeq(t *testing.T) {
	fixtures, _ := filepath.Glob("../protocol/fixtures/*.jsonl")
	for _, mode := range []dialect.Mode{dialect.AGUI, dialect.Dual, dialect.OpenAI} {
		enc := dialect.Encoder(mode, dialect.Options{})
		for _, path := range fixtures {
			for _, f := range fixtureFrames(t, path) {
				out := enc.Encode(nil, f)
				if len(out) == 0 {
					t.Fatalf("%s: Encode(seq %d %s) gave no frame", mode, f.Seq, f.Type)
				}
				for i, e := range out {
					if e.Seq != f.Seq {
						t.Errorf("%s: Encode(seq %d)[%d].Seq = %d", mode, f.Seq, i, e.Seq)
					}
					if last := i == len(out)-1; last != (e.Type != "") {
						t.Errorf("%s: Encode(seq %d)[%d].Type = %q, want a type only on the last frame", mode, f.Seq, i, e.Type)
					}
					if got := seqField(t, e.Data); got != f.Seq {
						t.Errorf("%s: seq field of %s = %d, want %d", mode, e.Data, got, f.Seq)
					}
				}
			}
		}
	}
}

// seqField reads the seq where docs/dialects.md says each mode has it:
// "seq" at top level (legacy) or orrery.seq (OpenAI chunks).
func seqField(t *testing.T, data []byte) uint64 {
	var v struct {
		Object string `json:"object"`
		Seq    uint64 `json:"seq"`
		Orrery struct {
			Seq uint64 `json:"seq"`
		} `json:"orrery"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("encoded frame %s is not JSON: %v", data, err)
	}
	if v.Object == "chat.completion.chunk" {
		return v.Orrery.Seq
	}
	return v.Seq
}

// TestUnknownCustomKept: a custom event nobody knows is carried for
// inspection, untouched, in every mode.
func TestUnknownCustomKept(t *testing.T) {
	data := []byte(`{"type":"CUSTOM","timestamp":5000,"metadata":{"orrery":{"seq":9},"vendor":{"x":1}},"name":"acme.launch","value":{"code":"rm -rf /"}}`)
	f := kernel.Frame{Seq: 9, Type: "CUSTOM", Data: data}
	legacy := dialect.Encoder(dialect.AGUI, dialect.Options{}).Encode(nil, f)
	want := `{"type":"agui.custom","seq":9,"name":"acme.launch","timestamp":5000,"value":{"code":"rm -rf /"},"metadata":{"vendor":{"x":1}}}`
	if len(legacy) != 1 || string(legacy[0].Data) != want {
		t.Errorf("legacy Encode() = %s, want %s", legacy[0].Data, want)
	}
	oa := dialect.Encoder(dialect.OpenAI, dialect.Options{}).Encode(nil, f)
	var chunk dialect.Chunk
	if err := json.Unmarshal(oa[0].Data, &chunk); err != nil {
		t.Fatal(err)
	}
	if len(chunk.Choices) != 0 || !bytes.Equal(chunk.Orrery.Event, data) {
		t.Errorf("openai Encode() = %s, want no choices and orrery.event = the frame", oa[0].Data)
	}
	dual := dialect.Encoder(dialect.Dual, dialect.Options{}).Encode(nil, f)
	if len(dual) != 1 || string(dual[0].Data) != want {
		t.Errorf("dual Encode() = %d frames, want only the legacy event %s", len(dual), want)
	}
	// Not JSON at all: still one frame with the seq, nothing interpreted.
	bad := dialect.Encoder(dialect.AGUI, dialect.Options{}).Encode(nil, kernel.Frame{Seq: 3, Type: "X", Data: []byte("not json")})
	if string(bad[0].Data) != `{"type":"agui.unknown","seq":3}` {
		t.Errorf("legacy Encode(not JSON) = %s", bad[0].Data)
	}
}

// TestOpenAIAccumulator feeds the openai mode of a fixture's text answer to
// the official SDK's accumulator, per completion id, and gets the text back.
func TestOpenAIAccumulator(t *testing.T) {
	enc := dialect.Encoder(dialect.OpenAI, dialect.Options{Model: "offline"})
	for _, name := range []string{"text", "server-tool", "offline"} {
		accs := map[string]*openai.ChatCompletionAccumulator{}
		var order []string
		wantText := map[string]string{}
		for _, f := range fixtureFrames(t, "../protocol/fixtures/"+name+".jsonl") {
			if ev, err := protocol.DecodeEvent(f.Data); err == nil {
				if c, ok := ev.(*protocol.TextMessageContent); ok {
					wantText["chatcmpl-"+c.MessageID] += c.Delta
				}
			}
			for _, e := range enc.Encode(nil, f) {
				var chunk openai.ChatCompletionChunk
				if err := json.Unmarshal(e.Data, &chunk); err != nil {
					t.Fatalf("%s: chunk %s: %v", name, e.Data, err)
				}
				if len(chunk.Choices) == 0 {
					continue
				}
				acc := accs[chunk.ID]
				if acc == nil {
					acc = &openai.ChatCompletionAccumulator{}
					accs[chunk.ID] = acc
					order = append(order, chunk.ID)
				}
				if !acc.AddChunk(chunk) {
					t.Fatalf("%s: AddChunk(%s) = false", name, e.Data)
				}
			}
		}
		if len(wantText) == 0 {
			t.Fatalf("%s: fixture has no text", name)
		}
		for id, want := range wantText {
			acc := accs[id]
			if acc == nil {
				t.Fatalf("%s: no completion %s among %v", name, id, order)
			}
			if got := acc.Choices[0].Message.Content; got != want {
				t.Errorf("%s: completion %s content = %q, want %q", name, id, got, want)
			}
			if got := acc.Choices[0].FinishReason; got != "stop" {
				t.Errorf("%s: completion %s finish_reason = %q, want stop", name, id, got)
			}
		}
		if name == "server-tool" {
			var calls int
			for _, acc := range accs {
				for _, tc := range acc.Choices[0].Message.ToolCalls {
					calls++
					if tc.Function.Name != "echo" || tc.Function.Arguments != `{"text":"ping"}` {
						t.Errorf("tool call = %s(%s), want echo({\"text\":\"ping\"})", tc.Function.Name, tc.Function.Arguments)
					}
				}
			}
			if calls != 1 {
				t.Errorf("server-tool: %d tool calls accumulated, want 1", calls)
			}
		}
	}
}

// TestWithA2UI: a placement becomes an activity frame (no type, the same
// seq) then the placement itself; a placement shown as an a2ui form sends
// that form; other frames pass unchanged.
func TestWithA2UI(t *testing.T) {
	enc := dialect.WithA2UI(nil)
	plain := kernel.Frame{Seq: 4, Type: "TEXT_MESSAGE_CONTENT", Data: []byte(`{"type":"TEXT_MESSAGE_CONTENT","metadata":{"orrery":{"seq":4}},"messageId":"m","delta":"x"}`)}
	if out := enc.Encode(nil, plain); len(out) != 1 || !bytes.Equal(out[0].Data, plain.Data) {
		t.Errorf("Encode(text) = %v, want it unchanged", out)
	}
	form := `[{"version":"v0.9","deleteSurface":{"surfaceId":"placed:ext:x:y"}}]`
	for _, tc := range []struct {
		name, value, want string
	}{
		{"surface", `{"id":"y","owner":"ext:x","placement":"band","title":"","surface":{"kind":{"t":"text","value":"hi"}},"text":"hi"}`, `"text":"hi"`},
		{"a2ui form", `{"id":"y","owner":"ext:x","placement":"band","title":"","surface":{"kind":{"t":"text","value":"hi"}},"text":"hi","a2ui":` + form + `}`, form},
	} {
		f := kernel.Frame{Seq: 9, Type: "CUSTOM", Data: []byte(`{"type":"CUSTOM","metadata":{"orrery":{"seq":9,"session":"s1"}},"name":"orrery.placed","value":` + tc.value + `}`)}
		out := enc.Encode(nil, f)
		if len(out) != 2 || out[0].Type != "" || out[0].Seq != 9 || out[1].Type != "CUSTOM" || !bytes.Equal(out[1].Data, f.Data) {
			t.Fatalf("%s: Encode(placed) = %d frames, want the activity (no type, seq 9) then the placement", tc.name, len(out))
		}
		s := string(out[0].Data)
		if !strings.Contains(s, `"type":"ACTIVITY_SNAPSHOT"`) || !strings.Contains(s, `"seq":9`) || !strings.Contains(s, `"session":"s1"`) || !strings.Contains(s, tc.want) {
			t.Errorf("%s: activity = %s, want seq 9, the session and %s", tc.name, s, tc.want)
		}
	}
	un := kernel.Frame{Seq: 10, Type: "CUSTOM", Data: []byte(`{"type":"CUSTOM","metadata":{"orrery":{"seq":10}},"name":"orrery.unplaced","value":{"id":"y","owner":"ext:x"}}`)}
	out := enc.Encode(nil, un)
	if len(out) != 2 || !strings.Contains(string(out[0].Data), `"deleteSurface":{"surfaceId":"placed:ext:x:y"}`) {
		t.Errorf("Encode(unplaced) = %d frames, first %s; want a deleteSurface activity first", len(out), out[0].Data)
	}
	// Through the legacy encoder the activity is a legacy event too.
	leg := dialect.WithA2UI(dialect.Encoder(dialect.AGUI, dialect.Options{})).Encode(nil, un)
	if len(leg) != 2 || !strings.Contains(string(leg[0].Data), `"type":"agui.activity_snapshot"`) || leg[0].Type != "" {
		t.Errorf("legacy+a2ui Encode(unplaced) = %v", leg)
	}
}
