package kernel_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
)

// gatedLog is a real store whose appends can be held, as a disk that has
// stalled holds them: shut makes every later Append wait until open.
type gatedLog struct {
	store.Log
	mu     sync.Mutex
	closed chan struct{} // nil while appends go through
}

func (g *gatedLog) shut() {
	g.mu.Lock()
	g.closed = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedLog) open() {
	g.mu.Lock()
	if g.closed != nil {
		close(g.closed)
		g.closed = nil
	}
	g.mu.Unlock()
}

func (g *gatedLog) Append(ctx context.Context, batches ...store.Batch) error {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed != nil {
		<-closed
	}
	return g.Log.Append(ctx, batches...)
}

// flood streams n one-frame deltas as fast as the loop takes them, shuts
// the gate after the first, and counts the deltas the loop took.
type flood struct {
	n       int
	gate    *gatedLog
	emitted atomic.Int64
}

func (p *flood) Name() string  { return "flood" }
func (p *flood) Model() string { return "flood" }
func (p *flood) Stream(ctx context.Context, _ agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	for i := range p.n {
		if err := emit(agent.Delta{Kind: agent.DeltaText, Text: "tok "}); err != nil {
			return agent.Usage{}, err
		}
		p.emitted.Add(1)
		if i == 0 {
			p.gate.shut()
		}
	}
	return agent.Usage{}, ctx.Err()
}

// waitForAdmit waits until a goroutine waits in the kernel's bound on
// unsaved frames, and fails if stop says to give up first.
func waitForAdmit(t *testing.T, stop func() bool) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if strings.Contains(string(buf[:n]), "(*backlog).admit") {
			return
		}
		if stop() {
			t.Fatal("no agent loop waited for the store")
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// TestUnsavedFramesBound: a loop streaming faster than the store commits
// (here a store that stops committing) waits once the kernel holds
// Config.UnsavedFrames frames not yet durable, instead of piling them up
// in memory; it goes on once the store catches up, and every frame is
// logged. A run waiting so is cancelled at once.
func TestUnsavedFramesBound(t *testing.T) {
	const bound = 40
	run(t, func(t *testing.T, m storeMode) {
		for _, tc := range []struct {
			name   string
			cancel bool
		}{{"catches up", false}, {"cancelled while waiting", true}} {
			t.Run(tc.name, func(t *testing.T) {
				st, err := m.open(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				gate := &gatedLog{Log: st}
				p := &flood{n: 10 * bound, gate: gate}
				k := kernel.New(kernel.Config{
					Store: gate, Models: func(string) (agent.Provider, error) { return p, nil },
					DefaultModel: "flood", UnsavedFrames: bound, DebugActor: true,
				})
				ctx := context.Background()
				if err := k.Open(ctx); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					gate.open()
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					k.Close(cctx)
					st.Close()
				})
				s, err := k.CreateSession(ctx, kernel.SessionOptions{})
				if err != nil {
					t.Fatal(err)
				}
				res, err := s.Send(ctx, kernel.SendInput{Text: "go", Subscribe: true})
				if err != nil {
					t.Fatal(err)
				}
				defer res.Sub.Close()
				waitForAdmit(t, func() bool { return p.emitted.Load() == int64(p.n) })
				// One delta is one frame; the loop stops at the bound, give
				// or take the frames of the delta that crossed it, plus the
				// first delta, which an append that began before the gate
				// shut may have logged (so it no longer counts as unsaved).
				if got := p.emitted.Load(); got > bound+3 {
					t.Fatalf("the loop took %d deltas with the store stalled, want at most %d", got, bound+3)
				}
				if tc.cancel {
					if err := s.Cancel(ctx, res.RunID); err != nil {
						t.Fatal(err)
					}
					// The loop leaves the wait though the store is still stalled.
					buf := make([]byte, 1<<20)
					for {
						n := runtime.Stack(buf, true)
						if !strings.Contains(string(buf[:n]), "(*backlog).admit") {
							break
						}
						time.Sleep(time.Millisecond)
					}
				}
				gate.open()
				var last protocol.EventType
				texts := 0
				var frames []kernel.Frame
				for last == "" || !last.Terminal() {
					select {
					case <-res.Sub.Ready():
					case <-time.After(30 * time.Second):
						t.Fatal("the run did not end once the store caught up")
					}
					frames = res.Sub.Take(frames[:0])
					for _, f := range frames {
						last = protocol.EventType(f.Type)
						if last == protocol.TypeTextMessageContent {
							texts++
						}
					}
					if err := res.Sub.Err(); err != nil {
						t.Fatalf("subscription ended: %v", err)
					}
				}
				logged, _, err := s.Read(ctx, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				stored := 0
				for _, f := range logged {
					if f.Type == string(protocol.TypeTextMessageContent) {
						stored++
					}
				}
				if stored != texts {
					t.Errorf("%d deltas logged, %d published", stored, texts)
				}
				switch {
				case !tc.cancel && (texts != p.n || last != protocol.TypeRunFinished):
					t.Errorf("run ended with %s after %d deltas, want RUN_FINISHED after %d", last, texts, p.n)
				case tc.cancel && texts >= p.n:
					t.Errorf("the cancelled run streamed all %d deltas", texts)
				}
			})
		}
	})
}
