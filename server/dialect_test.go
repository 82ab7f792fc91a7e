package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/getorrery/orrery/agent/provider/script"
	"github.com/getorrery/orrery/dialect"
	"github.com/getorrery/orrery/dialect/a2ui"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/ui"
)

// modeEvent is one SSE event of some stream mode, with the seq read from
// the mode's documented field.
type modeEvent struct {
	hasID bool
	id    string
	data  []byte
	seq   uint64
	typ   string // the AG-UI type the event stands for
}

// modeSeq reads an event's seq and AG-UI type where docs/dialects.md puts
// them: metadata.orrery (agui_spec), top level (agui), orrery (openai).
func modeSeq(t *testing.T, data []byte) (uint64, string) {
	t.Helper()
	var v struct {
		Type     string `json:"type"`
		Object   string `json:"object"`
		Seq      uint64 `json:"seq"`
		Metadata struct {
			Orrery struct {
				Seq uint64 `json:"seq"`
			} `json:"orrery"`
		} `json:"metadata"`
		Orrery struct {
			Seq  uint64 `json:"seq"`
			Type string `json:"type"`
		} `json:"orrery"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("event %s is not JSON: %v", data, err)
	}
	switch {
	case v.Object == "chat.completion.chunk":
		return v.Orrery.Seq, v.Orrery.Type
	case strings.HasPrefix(v.Type, "agui."):
		return v.Seq, strings.ToUpper(strings.TrimPrefix(v.Type, "agui."))
	}
	return v.Metadata.Orrery.Seq, v.Type
}

// nextMode reads the next event of a stream in any mode, checking that an
// id line, when there is one, names the event's seq.
func (s *sse) nextMode() (modeEvent, error) {
	for {
		ev, err := s.next()
		if err != nil {
			return modeEvent{}, err
		}
		if ev.comment != "" {
			continue
		}
		seq, typ := modeSeq(s.t, ev.data)
		if ev.hasID && ev.id != strconv.FormatUint(seq, 10) {
			return modeEvent{}, fmt.Errorf("event %s has id line %q, want its seq %d", ev.data, ev.id, seq)
		}
		if seq == 0 && ev.hasID {
			return modeEvent{}, fmt.Errorf("seq-0 event %s has an id line", ev.data)
		}
		return modeEvent{hasID: ev.hasID, id: ev.id, data: ev.data, seq: seq, typ: typ}, nil
	}
}

var allModes = []dialect.Mode{dialect.AGUISpec, dialect.AGUI, dialect.OpenAI, dialect.Dual}

// TestStreamModeResume, in every mode: a client reads part of a live run,
// drops, and resumes with Last-Event-ID. What it got across both
// connections is, byte for byte, what a client that reads the finished
// session from since=0 gets: no gap, no duplicate, and the bytes encoded
// live (shared by the hub) are those encoded on replay.
func TestStreamModeResume(t *testing.T) {
	h := newHarness(t)
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			sess := h.newSession(t, writeScript(t,
				script.Turn{ToolCalls: []script.ToolCall{{Name: "echo", Args: json.RawMessage(`{"text":"ping"}`)}}},
				script.Turn{Text: chunks(120), DelayMS: 2},
			))
			q := "session=" + sess + "&stream_mode=" + string(mode)
			first := h.openEvents(t, q+"&since=0", nil)
			h.control(t, map[string]any{"t": "run.send", "id": "1", "session": sess, "input": map[string]any{"text": "go"}}, nil)
			var got [][]byte
			lastID := ""
			for {
				ev, err := first.nextMode()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.data)
				if ev.hasID {
					lastID = ev.id
					if ev.seq >= 30 {
						break
					}
				}
			}
			first.close()
			// The events after the last id line are not yet "received":
			// a resuming client drops them and gets them again.
			for len(got) > 0 {
				seq, _ := modeSeq(t, got[len(got)-1])
				if strconv.FormatUint(seq, 10) == lastID {
					break
				}
				got = got[:len(got)-1]
			}
			second := h.openEvents(t, q, http.Header{"Last-Event-Id": {lastID}})
			for {
				ev, err := second.nextMode()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.data)
				if ev.hasID && (ev.typ == "RUN_FINISHED" || ev.typ == "RUN_ERROR") {
					break
				}
			}
			second.close()

			whole := h.openEvents(t, q+"&since=0", nil)
			var want [][]byte
			var prev uint64
			for {
				ev, err := whole.nextMode()
				if err != nil {
					t.Fatal(err)
				}
				if ev.seq < prev || ev.seq > prev+1 {
					t.Fatalf("replay: seq %d after %d, want no gap", ev.seq, prev)
				}
				prev = ev.seq
				want = append(want, ev.data)
				if ev.hasID && (ev.typ == "RUN_FINISHED" || ev.typ == "RUN_ERROR") {
					break
				}
			}
			if len(got) != len(want) {
				t.Fatalf("resumed stream has %d events, want %d as on replay", len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("event %d = %s, want %s", i, got[i], want[i])
				}
			}
		})
	}
}

// TestStreamModeOpenAISDK reads stream_mode=openai with the official
// openai-go SSE decoder, from GET /events and from POST /run, and
// accumulates each completion with the SDK's accumulator.
func TestStreamModeOpenAISDK(t *testing.T) {
	h := newHarness(t)
	sess := h.newSession(t, writeScript(t, script.Turn{Text: []string{"Hel", "lo ", "there"}, Usage: &script.Usage{InputTokens: 11, OutputTokens: 3}}))
	h.control(t, map[string]any{"t": "run.send", "id": "1", "session": sess, "input": map[string]any{"text": "hi"}}, nil)
	waitFor(t, "the run to end", func() bool {
		fs := h.read(t, sess, 0).Frames
		return len(fs) > 0 && decodeFrame(t, fs[len(fs)-1]).terminal()
	})

	check := func(t *testing.T, resp *http.Response) {
		stream := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(resp), nil)
		defer stream.Close()
		accs := map[string]*openai.ChatCompletionAccumulator{}
		var usage openai.CompletionUsage
		for stream.Next() {
			c := stream.Current()
			if c.Usage.TotalTokens > 0 {
				usage = c.Usage
				break // the run's last chunk
			}
			if len(c.Choices) == 0 {
				if c.JSON.ExtraFields["orrery"].Raw() == "" {
					t.Errorf("chunk %s has no choices and no orrery extension", c.RawJSON())
				}
				continue
			}
			if accs[c.ID] == nil {
				accs[c.ID] = &openai.ChatCompletionAccumulator{}
			}
			if !accs[c.ID].AddChunk(c) {
				t.Fatalf("AddChunk(%s) = false", c.RawJSON())
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream.Err() = %v", err)
		}
		var texts []string
		for _, acc := range accs {
			texts = append(texts, acc.Choices[0].Message.Content)
		}
		if len(texts) != 1 || texts[0] != "Hello there" {
			t.Errorf("completions = %q, want one with %q", texts, "Hello there")
		}
		if usage.PromptTokens != 11 || usage.CompletionTokens != 3 || usage.TotalTokens != 14 {
			t.Errorf("usage = %+v, want 11 in, 3 out, 14 total", usage)
		}
	}
	t.Run("events", func(t *testing.T) {
		s := h.openEvents(t, "session="+sess+"&since=0&stream_mode=openai", nil)
		check(t, s.resp)
	})
	t.Run("run", func(t *testing.T) {
		sess := h.newSession(t, writeScript(t, script.Turn{Text: []string{"Hel", "lo ", "there"}, Usage: &script.Usage{InputTokens: 11, OutputTokens: 3}}))
		ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/run?stream_mode=openai", strings.NewReader(runInput(sess, "r1", "u1", "hi")))
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /run?stream_mode=openai = %d", resp.StatusCode)
		}
		check(t, resp)
	})
}

// TestStreamModeRefused: an unknown stream_mode is refused on every face,
// with the valid modes listed.
func TestStreamModeRefused(t *testing.T) {
	h := newHarness(t)
	sess := h.newSession(t, "")
	const want = "use one of agui_spec, agui, openai, dual"
	status, _, body := h.send(t, http.MethodGet, "/events?session="+sess+"&stream_mode=ndjson", nil, "")
	if status != http.StatusBadRequest || !strings.Contains(string(body), want) {
		t.Errorf("GET /events?stream_mode=ndjson = %d %s, want 400 naming %q", status, body, want)
	}
	status, _, body = h.send(t, http.MethodPost, "/run?stream_mode=AGUI", nil, runInput(sess, "r1", "u1", "hi"))
	if status != http.StatusBadRequest || !strings.Contains(string(body), want) {
		t.Errorf("POST /run?stream_mode=AGUI = %d %s, want 400 naming %q", status, body, want)
	}
	if got := h.read(t, sess, 0).Head; got != 0 {
		t.Errorf("head after refused requests = %d, want 0 (nothing logged)", got)
	}

	r := newTxRig(t, txRigOptions{})
	for _, kind := range []string{"ws", "pipe"} {
		p := r.dial(t, kind, "")
		s := r.newIdleSession(t)
		p.send(t, fmt.Sprintf(`{"t":"session.attach","id":"a","session":%q,"stream_mode":"xml"}`, s))
		rep := p.reply(t)
		if rep["ok"] != false || !strings.Contains(fmt.Sprint(rep["error"]), want) {
			t.Errorf("%s: session.attach stream_mode xml = %v, want a refusal naming %q", kind, rep, want)
		}
		p.send(t, fmt.Sprintf(`{"t":"session.attach","id":"b","session":%q,"since":0,"stream_mode":"agui"}`, s))
		if rep := p.reply(t); rep["ok"] != true {
			t.Errorf("%s: session.attach stream_mode agui = %v, want ok", kind, rep)
		}
	}
}

// TestAttachLegacyTagged: over a WebSocket, frames in the legacy mode carry
// the session under orrery.session and the seq at top level.
func TestAttachLegacyTagged(t *testing.T) {
	r := newTxRig(t, txRigOptions{})
	s := r.newIdleSession(t)
	p := r.dial(t, "ws", "")
	p.send(t, fmt.Sprintf(`{"t":"session.attach","id":"a","session":%q,"since":0,"stream_mode":"agui"}`, s))
	if rep := p.reply(t); rep["ok"] != true {
		t.Fatalf("session.attach = %v", rep)
	}
	r.control(t, fmt.Sprintf(`{"t":"run.send","id":"1","session":%q,"input":{"text":"hi"}}`, s))
	want := uint64(1)
	for {
		m, raw, err := p.next(streamTimeout)
		if err != nil {
			t.Fatal(err)
		}
		typ, _ := m["type"].(string)
		if !strings.HasPrefix(typ, "agui.") {
			t.Fatalf("frame %s, want a legacy agui.* event", raw)
		}
		if seq, _ := m["seq"].(float64); uint64(seq) != want {
			t.Fatalf("frame %s has seq %v, want %d", raw, m["seq"], want)
		}
		if o, _ := m["orrery"].(map[string]any); o["session"] != s {
			t.Fatalf("frame %s: orrery.session = %v, want %s", raw, o["session"], s)
		}
		want++
		if typ == "agui.run_finished" {
			break
		}
	}
}

// TestReplaySnapshot: with snapshot=1, a replay from since starts with a
// seq-0 STATE_SNAPSHOT of the state at since; the replayed deltas apply to
// it and end at the session's state.
func TestReplaySnapshot(t *testing.T) {
	h := newHarness(t)
	sess := h.newSession(t, writeScript(t,
		script.Turn{ToolCalls: []script.ToolCall{{Name: "echo", Args: json.RawMessage(`{"text":"one"}`)}}},
		script.Turn{ToolCalls: []script.ToolCall{{Name: "echo", Args: json.RawMessage(`{"text":"two"}`)}}},
		script.Turn{Text: []string{"done"}},
	))
	h.control(t, map[string]any{"t": "run.send", "id": "1", "session": sess, "input": map[string]any{"text": "go"}}, nil)
	var all readReply
	waitFor(t, "the run to end", func() bool {
		all = h.read(t, sess, 0)
		return len(all.Frames) > 0 && decodeFrame(t, all.Frames[len(all.Frames)-1]).terminal()
	})
	// since = the first STATE_DELTA: its surface is in the snapshot.
	var since uint64
	for i, f := range all.Frames {
		if decodeFrame(t, f).Type == "STATE_DELTA" {
			since = uint64(i + 1)
			break
		}
	}
	if since == 0 {
		t.Fatal("no STATE_DELTA logged")
	}
	s := h.openEvents(t, fmt.Sprintf("session=%s&since=%d&snapshot=1", sess, since), nil)
	first, f := s.must()
	if f.Type != "STATE_SNAPSHOT" {
		t.Fatalf("first frame = %s, want STATE_SNAPSHOT", f.Type)
	}
	if seq, _ := f.seq(); seq != 0 {
		t.Fatalf("snapshot seq = %d, want 0", seq)
	}
	var snap struct {
		Snapshot json.RawMessage `json:"snapshot"`
	}
	if err := json.Unmarshal(first.data, &snap); err != nil {
		t.Fatal(err)
	}
	// The state at since, rebuilt from the log with a stock patch library.
	doc := []byte(`{}`)
	for _, raw := range all.Frames[:since] {
		doc = applyFrame(t, doc, raw)
	}
	if !jsonpatch.Equal(snap.Snapshot, doc) {
		t.Fatalf("snapshot at %d = %s, want %s", since, snap.Snapshot, doc)
	}
	if !strings.Contains(string(snap.Snapshot), `"one"`) {
		t.Errorf("snapshot %s lacks the first tool's surface", snap.Snapshot)
	}
	state := snap.Snapshot
	for {
		ev, f := s.must()
		state = applyFrame(t, state, ev.data)
		if f.terminal() {
			break
		}
	}
	final := []byte(`{}`)
	for _, raw := range all.Frames {
		final = applyFrame(t, final, raw)
	}
	if !jsonpatch.Equal(state, final) {
		t.Errorf("state after the replay = %s, want %s", state, final)
	}
}

// applyFrame applies a STATE_SNAPSHOT or STATE_DELTA frame to doc with a
// stock JSON Patch library; other frames leave it as is.
func applyFrame(t *testing.T, doc, raw []byte) []byte {
	t.Helper()
	var f struct {
		Type     string          `json:"type"`
		Snapshot json.RawMessage `json:"snapshot"`
		Delta    json.RawMessage `json:"delta"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	switch f.Type {
	case "STATE_SNAPSHOT":
		return f.Snapshot
	case "STATE_DELTA":
		p, err := jsonpatch.DecodePatch(f.Delta)
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.Apply(doc)
		if err != nil {
			t.Fatalf("apply %s: %v", f.Delta, err)
		}
		return out
	}
	return doc
}

// TestA2UIFace: with a2ui=1, each placement of a surface is preceded by an
// ACTIVITY_SNAPSHOT a2ui-surface whose operations pass the strict A2UI
// check (the official v0.9 schemas), and each removal by a deleteSurface.
func TestA2UIFace(t *testing.T) {
	r := newTxRig(t, txRigOptions{})
	ctx := context.Background()
	sess, err := r.k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"agui_spec", "agui"} {
		t.Run(mode, func(t *testing.T) {
			reqCtx, cancel := context.WithTimeout(ctx, streamTimeout)
			defer cancel()
			req, _ := http.NewRequestWithContext(reqCtx, http.MethodGet, r.local.URL+"/events?since=0&a2ui=1&session="+sess.ID()+"&stream_mode="+mode, nil)
			resp, err := r.local.Client().Do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /events?a2ui=1 = %v %v", resp, err)
			}
			s := &sse{t: t, resp: resp, br: bufio.NewReader(resp.Body), cancel: cancel}
			defer s.close()
			id := "board-" + mode
			surface := `{"kind":{"t":"stack","children":[{"kind":{"t":"text","value":"deploy"}},{"kind":{"t":"progress","value":3,"max":5,"label":"tests"}}]}}`
			if err := sess.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: id, Placement: "pane.right", Title: "Board", Surface: json.RawMessage(surface)}); err != nil {
				t.Fatal(err)
			}
			if err := sess.Hide(ctx, ui.OwnerAgent, id); err != nil {
				t.Fatal(err)
			}
			var ops [][]json.RawMessage
			for len(ops) < 2 {
				ev, err := s.nextMode()
				if err != nil {
					t.Fatal(err)
				}
				if ev.typ != "ACTIVITY_SNAPSHOT" {
					continue
				}
				if ev.hasID {
					t.Errorf("activity %s has an id line; it continues the placement's seq", ev.data)
				}
				next, err := s.nextMode()
				if err != nil {
					t.Fatal(err)
				}
				if next.seq != ev.seq || !next.hasID || next.typ != "CUSTOM" {
					t.Errorf("activity of seq %d is followed by %s of seq %d, want the placement event of the same seq", ev.seq, next.data, next.seq)
				}
				var act struct {
					MessageID    string `json:"messageId"`
					ActivityType string `json:"activityType"`
					Content      struct {
						Ops []json.RawMessage `json:"a2ui_operations"`
					} `json:"content"`
				}
				if err := json.Unmarshal(ev.data, &act); err != nil {
					t.Fatal(err)
				}
				if act.ActivityType != "a2ui-surface" {
					t.Errorf("activity = %s", ev.data)
				}
				if act.MessageID != "a2ui-surface-placed:agent:"+id {
					continue // an earlier subtest's surface, replayed from since=0
				}
				list, _ := json.Marshal(act.Content.Ops)
				if _, err := a2ui.Validate(list); err != nil {
					t.Errorf("a2ui_operations %s: Validate() = %v", list, err)
				}
				ops = append(ops, act.Content.Ops)
			}
			if len(ops[0]) != 3 || !strings.Contains(string(ops[0][1]), `"text":"tests [████████████░░░░░░░░] 3/5 (60%)"`) {
				t.Errorf("placement operations = %s", ops[0])
			}
			if len(ops[1]) != 1 || !strings.Contains(string(ops[1][0]), `"deleteSurface":{"surfaceId":"placed:agent:`+id+`"}`) {
				t.Errorf("removal operations = %s, want one deleteSurface", ops[1])
			}
		})
	}
}
