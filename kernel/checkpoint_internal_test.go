package kernel

// White-box: a checkpoint must hold every field load rebuilds, so these
// tests compare the whole reduced state, which no API shows at once.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/provider/offline"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
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

func testKernel(t *testing.T, st store.Log) *Kernel {
	t.Helper()
	return New(Config{
		Store:        st,
		Models:       func(string) (agent.Provider, error) { return offline.New(), nil },
		DefaultModel: "offline",
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// reduced is everything a load rebuilds, as comparable bytes: the encoded
// checkpoint (state document, messages with the hidden ones, run ids, the
// open run and what it left open, extension state, head and its frame's
// fingerprint), the seq-0 snapshots a subscriber starts with, the hub's
// head and document, and the store's cost.
func reduced(t *testing.T, s *Session) string {
	t.Helper()
	enc, err := s.takeCheckpoint().encode()
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := s.snapshotFrames()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("checkpoint %x\nstate %s\nmessages %s\nhub %d %s\nopenRun %q orphan %+v\ncost %d",
		enc, snaps[0].Data, snaps[1].Data, s.hub.published, s.hub.state, s.info.OpenRun, s.orphan, s.info.MicroUSD)
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
	for name, frames := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "orrery.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
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
			k := testKernel(t, st)
			full := newSession(k, info)
			if err := full.load(ctx); err != nil {
				t.Fatal(err)
			}
			if full.head != uint64(len(frames)) {
				t.Fatalf("rebuilt head = %d, want %d", full.head, len(frames))
			}
			want := reduced(t, full)
			for cut := range len(frames) + 1 {
				// What a live session held after frame cut, checkpointed.
				at := newSession(k, info)
				for _, f := range frames[:cut] {
					ev, err := protocol.DecodeEvent(f.Data)
					if err != nil {
						t.Fatal(err)
					}
					at.replay(f, ev)
				}
				at.writeCheckpoint(at.takeCheckpoint())
				got := newSession(k, info)
				if err := got.load(ctx); err != nil {
					t.Fatal(err)
				}
				if got.ckptFrames != len(frames)-cut {
					t.Fatalf("cut %d: load read %d frames after the checkpoint, want %d (the checkpoint was not used)", cut, got.ckptFrames, len(frames)-cut)
				}
				if r := reduced(t, got); r != want {
					t.Fatalf("cut %d: loaded from the checkpoint:\n%s\nrebuilt from seq 0:\n%s", cut, r, want)
				}
			}
		})
	}
}

// TestCheckpointIgnored: a checkpoint that is corrupt, of another format
// version, ahead of the log, of another log (its head frame differs) or
// of another session is ignored, and the load rebuilds from seq 0.
func TestCheckpointIgnored(t *testing.T) {
	ctx := context.Background()
	frames := syntheticFrames()
	good := func(s *Session) []byte {
		data, err := s.takeCheckpoint().encode()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	for _, tc := range []struct {
		name  string
		spoil func(s *Session) store.Checkpoint
	}{
		{"corrupt", func(s *Session) store.Checkpoint {
			d := good(s)
			d[len(d)/2] ^= 0x20
			return store.Checkpoint{Head: s.head, Data: d}
		}},
		{"truncated", func(s *Session) store.Checkpoint {
			d := good(s)
			return store.Checkpoint{Head: s.head, Data: d[:len(d)-3]}
		}},
		{"version", func(s *Session) store.Checkpoint {
			d := good(s)
			d[4] = checkpointVersion + 1
			return store.Checkpoint{Head: s.head, Data: d}
		}},
		{"other log", func(s *Session) store.Checkpoint {
			s.lastData = []byte(`{"type":"CUSTOM","name":"another log"}`)
			return store.Checkpoint{Head: s.head, Data: good(s)}
		}},
		{"other session", func(s *Session) store.Checkpoint {
			s.id = "t"
			return store.Checkpoint{Head: s.head, Data: good(s)}
		}},
		{"row head", func(s *Session) store.Checkpoint {
			return store.Checkpoint{Head: s.head - 1, Data: good(s)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "orrery.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
				t.Fatal(err)
			}
			if err := st.Append(ctx, store.Batch{Session: "s", Frames: frames}); err != nil {
				t.Fatal(err)
			}
			info, _ := st.Session(ctx, "s")
			k := testKernel(t, st)
			full := newSession(k, info)
			if err := full.load(ctx); err != nil {
				t.Fatal(err)
			}
			want := reduced(t, full)
			// A checkpoint of a shorter log, spoiled, stands in the store.
			at := newSession(k, info)
			for _, f := range frames[:10] {
				ev, _ := protocol.DecodeEvent(f.Data)
				at.replay(f, ev)
			}
			if err := st.SaveCheckpoint(ctx, "s", tc.spoil(at)); err != nil {
				t.Fatal(err)
			}
			got := newSession(k, info)
			if err := got.load(ctx); err != nil {
				t.Fatal(err)
			}
			if got.ckptFrames != len(frames) {
				t.Errorf("load read %d frames, want all %d (the checkpoint should be ignored)", got.ckptFrames, len(frames))
			}
			if r := reduced(t, got); r != want {
				t.Errorf("loaded:\n%s\nwant (rebuilt):\n%s", r, want)
			}
		})
	}
}
