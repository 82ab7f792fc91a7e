package kernel_test

// A checkpoint must hold every field a load rebuilds, so these tests
// compare the whole reduced state through the hooks of export_test.go.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/provider/offline"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
)

// fixtureFrames reads a fixture's logged frames (seq > 0), numbered 1, 2, 3
// … in order (a coalesced or snapshot fixture is as a client received it),
// each in the run it belongs to as the kernel logs it.
func fixtureFrames(t *testing.T, path string) []store.Frame {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []store.Frame
	open := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		ev, err := protocol.DecodeEvent(line)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if ev.Header().Seq() == 0 {
			continue
		}
		fr := store.Frame{Seq: uint64(len(out) + 1), Type: string(ev.EventType()), Data: bytes.Clone(line)}
		switch e := ev.(type) {
		case *protocol.RunStarted:
			open = e.RunID
		case *protocol.RunFinished:
			fr.Run, open = open, ""
		case *protocol.RunError:
			fr.Run, open = open, ""
		}
		if open != "" {
			fr.Run = open
		}
		out = append(out, fr)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// synthetic frames cover what the recorded fixtures do not: extension
// state keys set and removed, hidden and plain host messages, a sub-agent's
// attributed frames, tool-call arguments, a state delta that does not
// apply, and a run left open with a text, a call and a step open.
func syntheticFrames() []store.Frame {
	lines := []struct{ run, json string }{
		{"", `{"type":"CUSTOM","name":"orrery.state.changed","value":{"key":"ext:ci/failed","owner":"ext:ci","value":3}}`},
		{"", `{"type":"CUSTOM","name":"orrery.state.changed","value":{"key":"ext:ci/gone","owner":"ext:ci","value":{"a":[1,2]}}}`},
		{"", `{"type":"CUSTOM","name":"orrery.host.message","value":{"id":"host_1","from":"ui","text":"clicked","hidden":true}}`},
		{"", `{"type":"CUSTOM","name":"orrery.host.message","value":{"id":"host_2","from":"ext:ci","text":"[ext:ci] build red"}}`},
		{"", `{"type":"CUSTOM","name":"orrery.user.message","value":{"id":"u1","role":"user","content":"fix it","runId":"r1"}}`},
		{"r1", `{"type":"RUN_STARTED","threadId":"s","runId":"r1","input":{"threadId":"s","runId":"r1","messages":[{"id":"u1","role":"user","content":"fix it"},{"id":"c0","role":"user","content":[{"type":"text","text":"ctx"}]}],"tools":[],"context":[]}}`},
		{"r1", `{"type":"STATE_SNAPSHOT","snapshot":{"ui":{"nodes":{},"components":{}},"surfaces":{}}}`},
		{"r1", `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/surfaces/x","value":{"kind":{"t":"text","value":"hi"}}}]}`},
		{"r1", `{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/nope/deeper","value":1}]}`},
		{"r1", `{"type":"STEP_STARTED","stepName":"plan"}`},
		{"r1", `{"type":"TOOL_CALL_START","toolCallId":"call_1","toolCallName":"echo","parentMessageId":"m1"}`},
		{"r1", `{"type":"TOOL_CALL_ARGS","toolCallId":"call_1","delta":"{\"text\":"}`},
		{"r1", `{"type":"TOOL_CALL_ARGS","toolCallId":"call_1","delta":"\"hi\"}"}`},
		{"r1", `{"type":"TOOL_CALL_END","toolCallId":"call_1"}`},
		{"r1", `{"type":"TOOL_CALL_RESULT","messageId":"tr1","toolCallId":"call_1","content":"hi"}`},
		{"r1", `{"type":"SUBAGENT_STARTED","subagentRunId":"sub1","name":"helper"}`},
		{"r1", `{"type":"TEXT_MESSAGE_START","messageId":"sm1","role":"assistant","subagentRunId":"sub1"}`},
		{"r1", `{"type":"TEXT_MESSAGE_CONTENT","messageId":"sm1","delta":"inner","subagentRunId":"sub1"}`},
		{"r1", `{"type":"REASONING_START","messageId":"rs1"}`},
		{"r1", `{"type":"REASONING_MESSAGE_START","messageId":"rm1","role":"reasoning"}`},
		{"r1", `{"type":"REASONING_MESSAGE_CONTENT","messageId":"rm1","delta":"think"}`},
		{"r1", `{"type":"REASONING_MESSAGE_END","messageId":"rm1"}`},
		{"r1", `{"type":"REASONING_END","messageId":"rs1"}`},
		{"r1", `{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`},
		{"r1", `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Done"}`},
		{"r1", `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":", mostly."}`},
		{"", `{"type":"CUSTOM","name":"orrery.state.changed","value":{"key":"ext:ci/gone","owner":"ext:ci","value":null}}`},
		{"r1", `{"type":"TOOL_CALL_START","toolCallId":"call_2","toolCallName":"shell","parentMessageId":"m1"}`},
		{"r1", `{"type":"TOOL_CALL_ARGS","toolCallId":"call_2","delta":"{\"cmd\":\"ls"}`},
	}
	out := make([]store.Frame, len(lines))
	for i, l := range lines {
		ev, err := protocol.DecodeEvent([]byte(l.json))
		if err != nil {
			panic(fmt.Sprintf("synthetic frame %d: %v", i, err))
		}
		ev.Header().Orrery().Seq = uint64(i + 1)
		data, err := json.Marshal(ev)
		if err != nil {
			panic(err)
		}
		out[i] = store.Frame{Seq: uint64(i + 1), Type: string(ev.EventType()), Run: l.run, Data: data}
	}
	return out
}

func testKernel(st store.Log) *kernel.Kernel {
	return kernel.New(kernel.Config{
		Store:        st,
		Models:       func(string) (agent.Provider, error) { return offline.New(), nil },
		DefaultModel: "offline",
		Logger:       slog.New(slog.DiscardHandler),
	})
}

func reduced(t *testing.T, s kernel.TestSession) string {
	t.Helper()
	r, err := s.Reduced()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkpointer returns mode's store opened in a fresh directory, skipping
// the test when it keeps no checkpoints.
func checkpointer(t *testing.T, mode storeMode) store.Log {
	t.Helper()
	st, err := mode.open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, ok := st.(store.Checkpointer); !ok {
		t.Skipf("store %s keeps no checkpoints", mode.name)
	}
	return st
}

// loggedStore returns a store of mode holding session "s" with frames (and a
// cost), and its record.
func loggedStore(t *testing.T, mode storeMode, frames []store.Frame) (store.Log, store.Session) {
	t.Helper()
	ctx := context.Background()
	st := checkpointer(t, mode)
	if err := st.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, store.Batch{Session: "s", Frames: frames, CostDelta: 1234}); err != nil {
		t.Fatal(err)
	}
	info, err := st.Session(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	return st, info
}

// TestCheckpointEqualsRebuild: for every fixture, and for a checkpoint
// taken after each of its frames, a session loaded from that checkpoint
// and the frames after it holds exactly what one rebuilt from seq 0 holds.
func TestCheckpointEqualsRebuild(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "protocol", "fixtures", "*.jsonl"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("fixtures = %v, %v; want the ten recorded ones", paths, err)
	}
	cases := map[string][]store.Frame{"synthetic": syntheticFrames()}
	for _, p := range paths {
		cases[strings.TrimSuffix(filepath.Base(p), ".jsonl")] = fixtureFrames(t, p)
	}
	run(t, func(t *testing.T, mode storeMode) {
		for name, frames := range cases {
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				st, info := loggedStore(t, mode, frames)
				k := testKernel(st)
				full := kernel.NewTestSession(k, info)
				if n, err := full.Load(ctx); err != nil || n != len(frames) {
					t.Fatalf("rebuild read %d frames, %v; want %d", n, err, len(frames))
				}
				want := reduced(t, full)
				for cut := range len(frames) + 1 {
					// What a live session held after frame cut, checkpointed.
					at := kernel.NewTestSession(k, info)
					if err := at.Replay(frames[:cut]...); err != nil {
						t.Fatal(err)
					}
					at.Checkpoint()
					got := kernel.NewTestSession(k, info)
					n, err := got.Load(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if n != len(frames)-cut {
						t.Fatalf("cut %d: load read %d frames after the checkpoint, want %d (the checkpoint was not used)", cut, n, len(frames)-cut)
					}
					if r := reduced(t, got); r != want {
						t.Fatalf("cut %d: loaded from the checkpoint:\n%s\nrebuilt from seq 0:\n%s", cut, r, want)
					}
				}
			})
		}
	})
}

// TestCheckpointIgnored: a checkpoint that is corrupt, truncated, of
// another format version, of another log (its head frame differs), of
// another session, or stored under another head is ignored, and the load
// rebuilds from seq 0. (One ahead of the log the store itself refuses:
// the storetest suite.)
func TestCheckpointIgnored(t *testing.T) {
	frames := syntheticFrames()
	type encoded struct {
		data []byte
		head uint64
	}
	for _, tc := range []struct {
		name  string
		spoil func(enc func(id string, head []byte) encoded) store.Checkpoint
	}{
		{"corrupt", func(enc func(string, []byte) encoded) store.Checkpoint {
			e := enc("", nil)
			e.data[len(e.data)/2] ^= 0x20
			return store.Checkpoint{Head: e.head, Data: e.data}
		}},
		{"truncated", func(enc func(string, []byte) encoded) store.Checkpoint {
			e := enc("", nil)
			return store.Checkpoint{Head: e.head, Data: e.data[:len(e.data)-3]}
		}},
		{"version", func(enc func(string, []byte) encoded) store.Checkpoint {
			e := enc("", nil)
			e.data[4] = kernel.CheckpointVersion + 1
			return store.Checkpoint{Head: e.head, Data: e.data}
		}},
		{"other log", func(enc func(string, []byte) encoded) store.Checkpoint {
			e := enc("", []byte(`{"type":"CUSTOM","name":"another log"}`))
			return store.Checkpoint{Head: e.head, Data: e.data}
		}},
		{"other session", func(enc func(string, []byte) encoded) store.Checkpoint {
			e := enc("t", nil)
			return store.Checkpoint{Head: e.head, Data: e.data}
		}},
		{"row head", func(enc func(string, []byte) encoded) store.Checkpoint {
			e := enc("", nil)
			return store.Checkpoint{Head: e.head - 1, Data: e.data}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run(t, func(t *testing.T, mode storeMode) {
				ctx := context.Background()
				st, info := loggedStore(t, mode, frames)
				k := testKernel(st)
				full := kernel.NewTestSession(k, info)
				if _, err := full.Load(ctx); err != nil {
					t.Fatal(err)
				}
				want := reduced(t, full)
				// A checkpoint of a shorter log, spoiled, stands in the store.
				at := kernel.NewTestSession(k, info)
				if err := at.Replay(frames[:10]...); err != nil {
					t.Fatal(err)
				}
				c := tc.spoil(func(id string, head []byte) encoded {
					data, h, err := at.EncodeCheckpoint(id, head)
					if err != nil {
						t.Fatal(err)
					}
					return encoded{data, h}
				})
				if err := st.(store.Checkpointer).SaveCheckpoint(ctx, "s", c); err != nil {
					t.Fatal(err)
				}
				got := kernel.NewTestSession(k, info)
				n, err := got.Load(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if n != len(frames) {
					t.Errorf("load read %d frames, want all %d (the checkpoint should be ignored)", n, len(frames))
				}
				if r := reduced(t, got); r != want {
					t.Errorf("loaded:\n%s\nwant (rebuilt):\n%s", r, want)
				}
			})
		})
	}
}
