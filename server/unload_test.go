package server_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/internal/fakeclock"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// TestSSEResumeAcrossUnload: an SSE client that reconnects with since=N
// after its session was unloaded (idle_unload) gets every later frame once,
// with no gap and no duplicate, while the session loads again.
func TestSSEResumeAcrossUnload(t *testing.T) {
	const idle = 10 * time.Minute
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	unloaded := make(chan string, 16)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(kernel.Config{
		Store: st, Models: models.Resolve, DefaultModel: "offline", Tools: tool.Builtins(), DebugActor: true,
		Now: clock.Now, AfterFunc: clock.AfterFunc, IdleUnload: idle,
		SessionUnloaded: func(s *kernel.Session) { unloaded <- s.ID() },
	})
	ctx := context.Background()
	if err := k.Open(ctx); err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Kernel: k})
	ts := httptest.NewServer(srv)
	h := &harness{url: ts.URL, client: ts.Client()}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close(ctx)
		ts.Close()
		k.Close(ctx)
		st.Close()
	})
	s, err := k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	read := func(ev *sse) {
		_, frames := ev.until(func(f frame) bool { return f.terminal() })
		for _, f := range frames {
			seq, _ := f.seq()
			seqs = append(seqs, seq)
		}
	}

	first := h.openEvents(t, "session="+s.ID()+"&since=0", nil)
	if _, err := s.Send(ctx, kernel.SendInput{Text: "one"}); err != nil {
		t.Fatal(err)
	}
	read(first)
	first.close()
	last := seqs[len(seqs)-1]

	deadline := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case <-unloaded:
			done = true
		case <-deadline:
			t.Fatal("the session did not unload")
		case <-time.After(10 * time.Millisecond):
			// The stream's end reaches the kernel in its own time.
			clock.Advance(idle)
		}
	}
	if k.Loaded() != 0 {
		t.Fatalf("Loaded() = %d after the unload, want 0", k.Loaded())
	}

	again := h.openEvents(t, "session="+s.ID()+"&since="+strconv.FormatUint(last, 10), nil)
	if k.Loaded() != 1 {
		t.Errorf("Loaded() = %d once a client attached, want 1", k.Loaded())
	}
	if _, err := s.Send(ctx, kernel.SendInput{Text: "two"}); err != nil {
		t.Fatal(err)
	}
	read(again)
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("seqs over both streams %v: at %d got %d, want %d (a gap or a duplicate)", seqs, i, seq, i+1)
		}
	}
}
