package tui_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/tui"
	"github.com/getorrery/orrery/ui"
)

// tokensPerSecond is the stream the benchmarks follow, into the thread and
// into a pane at once.
const tokensPerSecond = 1000

var (
	streamOnce   sync.Once
	streamFrames []client.Frame
	streamErr    error
)

// oneSecondOfStream returns the frames of one second at tokensPerSecond:
// a run whose reply streams that many tokens, and a stream surface in
// pane.right that gets as many chunks, as a real kernel logs them.
func oneSecondOfStream(b *testing.B) []client.Frame {
	streamOnce.Do(func() { streamFrames, streamErr = recordStream(b.TempDir()) })
	if streamErr != nil {
		b.Fatal(streamErr)
	}
	return streamFrames
}

func recordStream(dir string) ([]client.Frame, error) {
	chunks := make([]string, tokensPerSecond)
	for i := range chunks {
		chunks[i] = "word "
		if i%12 == 11 {
			chunks[i] = "word\n"
		}
	}
	script := filepath.Join(dir, "stream.json")
	data, _ := json.Marshal(map[string]any{"turns": []any{map[string]any{"text": chunks}}})
	if err := os.WriteFile(script, data, 0o644); err != nil {
		return nil, err
	}
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	k := kernel.New(kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "script:" + script, Tools: tool.Builtins()})
	ctx := context.Background()
	if err := k.Open(ctx); err != nil {
		return nil, err
	}
	defer k.Close(ctx)
	s, err := k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		return nil, err
	}
	if err := s.Show(ctx, ui.OwnerAgent, kernel.ShowInput{ID: "log", Placement: "pane.right", Title: "Log", Surface: json.RawMessage(`{"kind":{"t":"stream","value":""}}`)}); err != nil {
		return nil, err
	}
	if _, err := s.Send(ctx, kernel.SendInput{Text: "stream"}); err != nil {
		return nil, err
	}
	for i := range tokensPerSecond {
		if err := s.AppendChunk(ctx, ui.OwnerAgent, "log", chunks[i]); err != nil {
			return nil, err
		}
	}
	for s.Running() {
		time.Sleep(time.Millisecond)
	}
	// The committer may still hold the last frames: read until all are in.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := readAll(ctx, s)
		if err != nil {
			return nil, err
		}
		text, nchunks := 0, 0
		for _, f := range out {
			switch d := string(f.Data); {
			case strings.Contains(d, `"TEXT_MESSAGE_CONTENT"`):
				text++
			case strings.Contains(d, `"STATE_DELTA"`) && strings.Contains(d, "/chunks"):
				nchunks++
			}
		}
		if text == tokensPerSecond && nchunks == tokensPerSecond {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, &recordError{text, nchunks}
		}
		time.Sleep(time.Millisecond)
	}
}

func readAll(ctx context.Context, s *kernel.Session) ([]client.Frame, error) {
	var out []client.Frame
	for since := uint64(0); ; {
		fs, head, err := s.Read(ctx, since, 0)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			out = append(out, client.Frame{Seq: f.Seq, Data: f.Data})
			since = f.Seq
		}
		if len(fs) == 0 || since >= head {
			return out, nil
		}
	}
}

type recordError struct{ text, chunks int }

func (e *recordError) Error() string {
	return "the recorded stream holds " + strconv.Itoa(e.text) + " text deltas and " + strconv.Itoa(e.chunks) + " chunks, want " + strconv.Itoa(tokensPerSecond) + " of each"
}

// framesPerSecond is the draws a second of stream gets: one per
// tui.FrameInterval.
var framesPerSecond = int(time.Second / tui.FrameInterval)

// BenchmarkFollowStream is one second of a 1,000 token/s stream into the
// thread and a pane, drawn as the TUI draws it: the frames that arrive in
// each FrameInterval are applied together and drawn once (60 draws at
// 120×40). Its baseline, BenchmarkFollowStreamBaseline, only folds the
// same frames into a client.State, as any client must. ns/op is CPU per
// second of stream: divided by 1e9 it is the share of one core the TUI
// needs to keep up.
func BenchmarkFollowStream(b *testing.B) {
	fs := oneSecondOfStream(b)
	b.ReportAllocs()
	for b.Loop() {
		m := tui.New(tui.Options{})
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		per := (len(fs) + framesPerSecond - 1) / framesPerSecond
		for i := 0; i < len(fs); i += per {
			if msg := m.Push(fs[i:min(len(fs), i+per)]...); msg != nil {
				m.Update(msg)
			}
			_ = m.View()
		}
	}
	b.ReportMetric(float64(len(fs)), "frames/op")
}

// BenchmarkFollowStreamBaseline folds the frames of BenchmarkFollowStream
// into a client.State and draws nothing.
func BenchmarkFollowStreamBaseline(b *testing.B) {
	fs := oneSecondOfStream(b)
	b.ReportAllocs()
	for b.Loop() {
		st := client.NewState()
		for _, f := range fs {
			if err := st.Apply(f); err != nil {
				b.Fatal(err)
			}
		}
		_ = st.Messages()
	}
}

// BenchmarkFrameToDraw is the work from one token frame arriving to the
// screen holding it, on a session that already streamed a second of
// tokens: taking it from the feed, applying it, and drawing the screen.
// (The coalescing wait before it is at most tui.FrameInterval.) Its
// baseline, BenchmarkFrameToDrawBaseline, only applies the frame.
func BenchmarkFrameToDraw(b *testing.B) {
	fs := oneSecondOfStream(b)
	m := tui.New(tui.Options{})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	if msg := m.Push(fs...); msg != nil {
		m.Update(msg)
	}
	tok := tokenFrame(b, fs)
	b.ReportAllocs()
	for b.Loop() {
		if msg := m.Push(tok); msg != nil {
			m.Update(msg)
		}
		_ = m.View()
	}
}

// BenchmarkFrameToDrawBaseline applies the same frame to a client.State.
func BenchmarkFrameToDrawBaseline(b *testing.B) {
	fs := oneSecondOfStream(b)
	st := client.NewState()
	for _, f := range fs {
		st.Apply(f)
	}
	tok := tokenFrame(b, fs)
	b.ReportAllocs()
	for b.Loop() {
		st.Apply(tok)
		_ = st.Messages()
	}
}

// tokenFrame returns a TEXT_MESSAGE_CONTENT of the stream, its seq cleared
// so that applying it again and again is allowed.
func tokenFrame(b *testing.B, fs []client.Frame) client.Frame {
	for _, f := range fs {
		if strings.Contains(string(f.Data), `"TEXT_MESSAGE_CONTENT"`) {
			return client.Frame{Data: f.Data}
		}
	}
	b.Fatal("the stream has no TEXT_MESSAGE_CONTENT")
	return client.Frame{}
}
