package kernel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// Markers a coPlan step may hold besides real deltas.
const (
	// coGate waits until the test releases the gate.
	coGate agent.DeltaKind = 100 + iota
	// coBlock waits until the run is cancelled.
	coBlock
)

// coPlan plays a fixed list of model steps, one per Stream call, across
// runs. At a marker it tells the test (reached) and waits.
type coPlan struct {
	mu      sync.Mutex // guards next
	steps   [][]agent.Delta
	next    int
	reached chan agent.DeltaKind
	gate    chan struct{}
}

var _ agent.Provider = (*coPlan)(nil)

func (m *coPlan) Name() string  { return "plan" }
func (m *coPlan) Model() string { return "plan" }

func (m *coPlan) Stream(ctx context.Context, _ agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	m.mu.Lock()
	if m.next >= len(m.steps) {
		m.mu.Unlock()
		return agent.Usage{}, errors.New("plan has no more steps")
	}
	step := m.steps[m.next]
	m.next++
	m.mu.Unlock()
	for _, d := range step {
		switch d.Kind {
		case coGate:
			m.reached <- d.Kind
			select {
			case <-m.gate:
			case <-ctx.Done():
				return agent.Usage{}, ctx.Err()
			}
		case coBlock:
			m.reached <- d.Kind
			<-ctx.Done()
			return agent.Usage{}, ctx.Err()
		default:
			if err := emit(d); err != nil {
				return agent.Usage{}, err
			}
		}
	}
	return agent.Usage{InputTokens: 10, OutputTokens: int64(len(step))}, nil
}

func coTexts(pieces ...string) []agent.Delta {
	out := make([]agent.Delta, len(pieces))
	for i, p := range pieces {
		out[i] = agent.Delta{Kind: agent.DeltaText, Text: p}
	}
	return out
}

// call is a tool call whose argument text arrives in pieces.
func coCall(name string, args ...string) []agent.Delta {
	out := []agent.Delta{{Kind: agent.DeltaToolCall, ToolName: name}}
	for _, a := range args {
		out = append(out, agent.Delta{Kind: agent.DeltaToolArgs, Text: a})
	}
	return out
}

func coSteps(parts ...[]agent.Delta) []agent.Delta {
	var out []agent.Delta
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// coalesceSession logs several runs: reasoning, text (with characters JSON
// escapes), tool calls whose arguments stream in pieces, a text message
// reopened after a call, a steer landing between two deltas of one message,
// a run cancelled in the middle of a call's arguments, single-delta
// messages; tool results add surfaces by STATE_DELTA.
func coalesceSession(t *testing.T, mode storeMode) (*kernel.Session, []kernel.Frame) {
	t.Helper()
	m := &coPlan{
		reached: make(chan agent.DeltaKind, 1),
		gate:    make(chan struct{}),
		steps: [][]agent.Delta{
			// Run 1.
			coSteps(
				[]agent.Delta{{Kind: agent.DeltaReasoning, Text: "let me "}, {Kind: agent.DeltaReasoning, Text: "think"}, {Kind: agent.DeltaReasoning, Text: "…"}},
				coTexts("Hel", "lo <b>", " & \"quoted\"", " é\u2028", "\n"),
				coCall("echo", `{"te`, `xt":"hel`, `lo wor`, `ld"}`),
				coTexts("and ", "more", "."),
				coCall("echo", `{"text":`, `"two"}`),
			),
			coTexts("Done", " with ", "run one."),
			// Run 2: a steer arrives between two deltas of one message.
			coSteps(
				coTexts("Before ", "the ", "steer;"),
				[]agent.Delta{{Kind: coGate}},
				coTexts(" after ", "the ", "steer."),
				coCall("echo", `{"text":"st`, `eered"}`),
			),
			coTexts("Run ", "two ", "ends."),
			// Run 3: cancelled while a call's arguments stream.
			coSteps(
				coTexts("Only"),
				coCall("echo", `{"text"`, `:"never`, ` finished`),
				[]agent.Delta{{Kind: coBlock}},
			),
			// Run 4: single deltas.
			coSteps(coTexts("One."), coCall("clock", `{}`)),
			coTexts("Bye."),
		},
	}
	st, err := mode.open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(kernel.Config{
		Store: st, Models: func(string) (agent.Provider, error) { return m, nil }, DefaultModel: "plan",
		Tools: tool.Builtins(), DebugActor: true,
	})
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := k.Close(ctx); err != nil {
			t.Errorf("Close() = %v, want nil", err)
		}
		st.Close()
	})
	ctx := context.Background()
	s, err := k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := func(text string, during func(runID string)) {
		t.Helper()
		res, err := s.Send(ctx, kernel.SendInput{Text: text, Subscribe: true})
		if err != nil {
			t.Fatalf("Send(%q) = %v", text, err)
		}
		defer res.Sub.Close()
		if during != nil {
			during(res.RunID)
		}
		timeout := time.After(20 * time.Second)
		for {
			select {
			case <-res.Sub.Ready():
			case <-res.Sub.Done():
			case <-timeout:
				t.Fatalf("run %q did not end", text)
			}
			for _, f := range res.Sub.Take(nil) {
				if f.Run == res.RunID && protocol.EventType(f.Type).Terminal() {
					return
				}
			}
			if err := res.Sub.Err(); err != nil {
				t.Fatalf("run %q: subscription ended: %v", text, err)
			}
		}
	}
	wait := func(want agent.DeltaKind) {
		t.Helper()
		select {
		case got := <-m.reached:
			if got != want {
				t.Fatalf("model reached marker %d, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the model never reached its marker")
		}
	}
	run("one", nil)
	run("two", func(string) {
		wait(coGate)
		if _, err := s.Send(ctx, kernel.SendInput{Text: "steer here", Steer: true}); err != nil {
			t.Fatalf("steer: %v", err)
		}
		close(m.gate)
	})
	run("three", func(runID string) {
		wait(coBlock)
		if err := s.Cancel(ctx, runID); err != nil {
			t.Fatalf("Cancel() = %v", err)
		}
	})
	run("four", nil)

	log, head, err := s.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(log)) != head {
		t.Fatalf("Read(0) = %d frames, head %d", len(log), head)
	}
	return s, log
}

// coSubscribeAll returns every frame a subscription with opts replays, with
// their data copied. The session is idle, so that is the whole stream.
func coSubscribeAll(t *testing.T, s *kernel.Session, opts kernel.SubscribeOptions) []kernel.Frame {
	t.Helper()
	ctx := context.Background()
	sub, err := s.SubscribeWith(ctx, opts)
	if err != nil {
		t.Fatalf("SubscribeWith(%+v) = %v", opts, err)
	}
	defer sub.Close()
	var out []kernel.Frame
	err = sub.Backlog(ctx, func(f kernel.Frame) error {
		f.Data = bytes.Clone(f.Data)
		out = append(out, f)
		return nil
	})
	if err != nil {
		t.Fatalf("Backlog() = %v", err)
	}
	return sub.Take(out)
}

// coMeta is a frame's metadata.orrery and delta key.
type coMeta struct {
	seq, mergedFrom uint64
	session         string
	typ, key, delta string
	delt            bool // a TEXT_MESSAGE_CONTENT or TOOL_CALL_ARGS
}

func coMetaOf(t *testing.T, f kernel.Frame) coMeta {
	t.Helper()
	ev, err := protocol.DecodeEvent(f.Data)
	if err != nil {
		t.Fatalf("decode %s: %v", f.Data, err)
	}
	m := coMeta{seq: ev.Header().Seq(), typ: string(ev.EventType())}
	if md := ev.Header().Metadata; md != nil && md.Orrery != nil {
		m.mergedFrom, m.session = md.Orrery.MergedFrom, md.Orrery.Session
	}
	switch e := ev.(type) {
	case *protocol.TextMessageContent:
		m.key, m.delta, m.delt = m.typ+"/"+e.SubagentRunID+"/"+e.MessageID, e.Delta, true
	case *protocol.ToolCallArgs:
		m.key, m.delta, m.delt = m.typ+"/"+e.SubagentRunID+"/"+e.ToolCallID, e.Delta, true
	}
	if m.seq != f.Seq {
		t.Fatalf("frame seq %d carries metadata.orrery.seq %d: %s", f.Seq, m.seq, f.Data)
	}
	return m
}

// coFieldsBut decodes a frame to a map without the given top-level keys and
// without metadata.orrery's seq, merged_from and session.
func coFieldsBut(t *testing.T, data []byte, drop ...string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range drop {
		delete(m, k)
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		if o, ok := md["orrery"].(map[string]any); ok {
			delete(o, "seq")
			delete(o, "merged_from")
			delete(o, "session")
		}
	}
	return m
}

// coReduction is what a client rebuilds from a stream.
type coReduction struct {
	Texts     map[string]string // message id → text
	Roles     map[string]string
	Reasoning map[string]string
	Calls     map[string]string // call id → name(args) under parent
	Results   map[string]string // call id → content
	Customs   []string
	Runs      []string // RUN_* events in order
	Ends      map[string]int
	State     string
}

func coReduce(t *testing.T, frames []kernel.Frame) coReduction {
	t.Helper()
	r := coReduction{Texts: map[string]string{}, Roles: map[string]string{}, Reasoning: map[string]string{},
		Calls: map[string]string{}, Results: map[string]string{}, Ends: map[string]int{}}
	callName, callArgs, callParent := map[string]string{}, map[string]string{}, map[string]string{}
	var state []byte
	opts := jsonpatch.NewApplyOptions()
	opts.SupportNegativeIndices = false
	for _, f := range frames {
		ev, err := protocol.DecodeEvent(f.Data)
		if err != nil {
			t.Fatalf("decode %s: %v", f.Data, err)
		}
		switch e := ev.(type) {
		case *protocol.TextMessageStart:
			r.Roles[e.MessageID] = e.Role
		case *protocol.TextMessageContent:
			r.Texts[e.MessageID] += e.Delta
		case *protocol.TextMessageEnd:
			r.Ends["text:"+e.MessageID]++
		case *protocol.ReasoningMessageContent:
			r.Reasoning[e.MessageID] += e.Delta
		case *protocol.ToolCallStart:
			callName[e.ToolCallID], callParent[e.ToolCallID] = e.ToolCallName, e.ParentMessageID
		case *protocol.ToolCallArgs:
			callArgs[e.ToolCallID] += e.Delta
		case *protocol.ToolCallEnd:
			r.Ends["call:"+e.ToolCallID]++
		case *protocol.ToolCallResult:
			r.Results[e.ToolCallID] = e.Content.String()
		case *protocol.Custom:
			r.Customs = append(r.Customs, e.Name+" "+string(e.Value))
		case *protocol.RunStarted, *protocol.RunFinished, *protocol.RunError:
			r.Runs = append(r.Runs, string(ev.EventType()))
		case *protocol.StateSnapshot:
			state = e.Snapshot
		case *protocol.StateDelta:
			ops, _ := json.Marshal(e.Delta)
			patch, err := jsonpatch.DecodePatch(ops)
			if err != nil {
				t.Fatalf("seq %d: %v", f.Seq, err)
			}
			if state == nil {
				state = []byte(`{}`) // a resume after the snapshot: apply what is there
				r.Ends["delta-before-snapshot"]++
			}
			next, err := patch.ApplyWithOptions(state, opts)
			if err != nil {
				r.Ends["failed-delta"]++
				continue
			}
			state = next
		}
	}
	for id := range callName {
		r.Calls[id] = fmt.Sprintf("%s(%s) under %s", callName[id], callArgs[id], callParent[id])
	}
	for id, a := range callArgs {
		if _, ok := callName[id]; !ok {
			r.Calls[id] = "?(" + a + ")"
		}
	}
	if state != nil {
		var v any
		json.Unmarshal(state, &v)
		norm, _ := json.Marshal(v)
		r.State = string(norm)
	}
	return r
}

// coUntag removes metadata.orrery.session from a tagged frame, which must
// carry it.
func coUntag(t *testing.T, data []byte, session string) []byte {
	t.Helper()
	tag := []byte(`"metadata":{"orrery":{"session":` + strconv.Quote(session) + `,`)
	i := bytes.Index(data, tag)
	if i < 0 {
		t.Fatalf("frame lacks metadata.orrery.session %s right after metadata.orrery's opening: %s", session, data)
		return nil
	}
	return append(append(bytes.Clone(data[:i]), `"metadata":{"orrery":{`...), data[i+len(tag):]...)
}

// TestCoalesceEveryK resumes a session with several runs from every seq k
// with Coalesce: merged frames stand for maximal runs of deltas of one
// message or call and nothing else, every other frame is the logged one
// byte for byte, and the merged stream rebuilds the same messages and
// state as the frames it replaces. Tagged, every frame carries the session.
func TestCoalesceEveryK(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		s, log := coalesceSession(t, mode)
		head := uint64(len(log))
		merges, deltas := 0, 0
		for _, f := range log {
			if f.Type == string(protocol.TypeTextMessageContent) || f.Type == string(protocol.TypeToolCallArgs) {
				deltas++
			}
		}
		if deltas < 30 {
			t.Fatalf("the session logged %d delta frames, want a few dozen to merge", deltas)
		}
		for k := uint64(0); k <= head; k++ {
			since := k
			raw := coSubscribeAll(t, s, kernel.SubscribeOptions{Since: &since})
			if want := log[k:]; len(raw) != len(want) {
				t.Fatalf("k=%d: Subscribe without Coalesce replays %d frames, want the log's %d", k, len(raw), len(want))
			} else {
				for i := range raw {
					if !bytes.Equal(raw[i].Data, want[i].Data) {
						t.Fatalf("k=%d: uncoalesced frame %d = %s, want the logged %s", k, i, raw[i].Data, want[i].Data)
					}
				}
			}
			co := coSubscribeAll(t, s, kernel.SubscribeOptions{Since: &since, Coalesce: true})
			rawMeta := make([]coMeta, len(raw))
			for i, f := range raw {
				rawMeta[i] = coMetaOf(t, f)
			}
			// Walk the coalesced stream against the raw one.
			i := 0
			var prev uint64 = k
			for _, f := range co {
				m := coMetaOf(t, f)
				if m.seq <= prev {
					t.Fatalf("k=%d: coalesced seq %d after %d", k, m.seq, prev)
				}
				prev = m.seq
				if i >= len(raw) {
					t.Fatalf("k=%d: coalesced frame %s beyond the log", k, f.Data)
				}
				first := rawMeta[i]
				if m.mergedFrom == 0 {
					if !bytes.Equal(f.Data, raw[i].Data) {
						t.Fatalf("k=%d: frame seq %d = %s, want the logged %s", k, m.seq, f.Data, raw[i].Data)
					}
					if first.delt && i+1 < len(raw) && rawMeta[i+1].key == first.key {
						t.Errorf("k=%d: delta seq %d left unmerged although seq %d extends the same %s", k, first.seq, rawMeta[i+1].seq, first.key)
					}
					i++
					continue
				}
				merges++
				// A merged frame: metadata.orrery.merged_from is the first seq it
				// stands for, seq the last; every frame between is a delta of the
				// same message or call, and nothing else.
				if m.mergedFrom != first.seq {
					t.Fatalf("k=%d: merged frame %s: merged_from %d, want the next seq %d", k, f.Data, m.mergedFrom, first.seq)
				}
				if m.mergedFrom >= m.seq {
					t.Errorf("k=%d: merged frame %s: merged_from %d not before seq %d", k, f.Data, m.mergedFrom, m.seq)
				}
				if !first.delt {
					t.Fatalf("k=%d: merged frame %s starts at seq %d, a %s", k, f.Data, first.seq, first.typ)
				}
				var delta strings.Builder
				j := i
				for ; j < len(raw) && rawMeta[j].seq <= m.seq; j++ {
					if rawMeta[j].key != first.key {
						t.Fatalf("k=%d: merged frame seq %d (from %d) crosses seq %d: %s, not a delta of %s", k, m.seq, m.mergedFrom, rawMeta[j].seq, raw[j].Data, first.key)
					}
					delta.WriteString(rawMeta[j].delta)
				}
				if rawMeta[j-1].seq != m.seq {
					t.Fatalf("k=%d: merged frame's seq %d is not a logged seq", k, m.seq)
				}
				if m.key != first.key || m.typ != first.typ {
					t.Errorf("k=%d: merged frame %s is for %s, want %s", k, f.Data, m.key, first.key)
				}
				if m.delta != delta.String() {
					t.Errorf("k=%d: merged frame seq %d: delta %q, want the covered deltas joined %q", k, m.seq, m.delta, delta.String())
				}
				if i > 0 && rawMeta[i-1].key == first.key {
					t.Errorf("k=%d: merged frame from %d does not start its run: seq %d is a delta of the same %s", k, m.mergedFrom, rawMeta[i-1].seq, first.key)
				}
				if j < len(raw) && rawMeta[j].key == first.key {
					t.Errorf("k=%d: merged frame to %d stops early: seq %d extends the same %s", k, m.seq, rawMeta[j].seq, first.key)
				}
				// Besides delta, seq, merged_from and timestamp, it is the first
				// covered frame.
				if got, want := coFieldsBut(t, f.Data, "delta", "timestamp"), coFieldsBut(t, raw[i].Data, "delta", "timestamp"); !reflect.DeepEqual(got, want) {
					t.Errorf("k=%d: merged frame %s differs from its first frame %s beyond delta and seq", k, f.Data, raw[i].Data)
				}
				i = j
			}
			if i != len(raw) {
				t.Fatalf("k=%d: the coalesced stream stops at log seq %d, want it to cover up to %d", k, rawMeta[i].seq, head)
			}
			if got, want := coReduce(t, co), coReduce(t, raw); !reflect.DeepEqual(got, want) {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(want, "", " ")
				t.Fatalf("k=%d: the coalesced stream rebuilds\n%s\nwant what the log rebuilds\n%s", k, g, w)
			}

			// Tagged: every frame, merged ones too, names the session; without
			// the tag it is the untagged frame.
			for _, c := range []struct {
				name     string
				opts     kernel.SubscribeOptions
				untagged []kernel.Frame
			}{
				{"Tagged", kernel.SubscribeOptions{Since: &since, Tagged: true}, raw},
				{"Tagged+Coalesce", kernel.SubscribeOptions{Since: &since, Tagged: true, Coalesce: true}, co},
			} {
				tagged := coSubscribeAll(t, s, c.opts)
				if len(tagged) != len(c.untagged) {
					t.Fatalf("k=%d: %s replays %d frames, want %d", k, c.name, len(tagged), len(c.untagged))
				}
				for i, f := range tagged {
					if m := coMetaOf(t, f); m.session != s.ID() {
						t.Fatalf("k=%d: %s frame %s: metadata.orrery.session = %q, want %q", k, c.name, f.Data, m.session, s.ID())
					}
					if got := coUntag(t, f.Data, s.ID()); !bytes.Equal(got, c.untagged[i].Data) {
						t.Fatalf("k=%d: %s frame without its tag = %s, want %s", k, c.name, got, c.untagged[i].Data)
					}
				}
			}
		}
		if merges == 0 {
			t.Fatal("no frame was ever merged")
		}
		since := head + 1
		if _, err := s.SubscribeWith(context.Background(), kernel.SubscribeOptions{Since: &since, Coalesce: true}); !errors.As(err, new(*kernel.SinceError)) {
			t.Errorf("SubscribeWith(since head+1, Coalesce) = %v, want a *SinceError", err)
		}
		t.Logf("%d frames, %d deltas; %d merged frames over every k", head, deltas, merges)
	})
}
