package kernel_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
)

// waitChanges takes changes from w until one of kind last arrives.
func waitChanges(t *testing.T, w *kernel.SessionWatch, last string) []kernel.SessionChange {
	t.Helper()
	var out []kernel.SessionChange
	timeout := time.After(10 * time.Second)
	for {
		select {
		case <-w.Ready():
		case <-timeout:
			t.Fatalf("no %s change; got %+v", last, out)
		}
		out = w.Take(out)
		if len(out) > 0 && out[len(out)-1].Kind == last {
			return out
		}
	}
}

// TestWatchSessions: a run gives created, running, title, cost and ended,
// in order, each with the summary after it; a watch that takes nothing past
// its bound ends with ErrSlow.
func TestWatchSessions(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		model := script(t, map[string]any{"text": []string{"hi"}, "usage": map[string]any{"inputTokens": 1000, "outputTokens": 100}})
		e := mode.newEnv(t, model, func(c *kernel.Config) {
			c.Prices = agent.PriceTable{"script:*": {Input: 2_000_000, Output: 10_000_000}}
			c.QueueFrames = 8
		})
		w := e.k.WatchSessions()
		defer w.Close()
		s := e.session(t)
		if _, err := s.Send(context.Background(), kernel.SendInput{Text: "Plan  the\ttrip"}); err != nil {
			t.Fatal(err)
		}
		got := waitChanges(t, w, kernel.SessionEnded)
		var kinds []string
		for i, c := range got {
			kinds = append(kinds, c.Kind)
			if c.Session.ID != s.ID() {
				t.Errorf("change %d is for %s, want %s", i, c.Session.ID, s.ID())
			}
			if i > 0 && c.Seq <= got[i-1].Seq {
				t.Errorf("change seqs %d then %d, want increasing", got[i-1].Seq, c.Seq)
			}
		}
		want := []string{kernel.SessionCreated, kernel.SessionRunning, kernel.SessionTitle, kernel.SessionCost, kernel.SessionEnded}
		if !slices.Equal(kinds, want) {
			t.Fatalf("changes = %v, want %v", kinds, want)
		}
		end := got[len(got)-1].Session
		if end.Running || end.Title != "Plan the trip" || end.MicroUSD != 3000 {
			t.Errorf("ended summary = %+v, want idle, titled, micro_usd 3000", end)
		}
		if !got[1].Session.Running {
			t.Errorf("running change has running=false")
		}

		// A watch nobody reads is dropped, never waited for.
		slow := e.k.WatchSessions()
		for range 9 {
			e.session(t)
		}
		select {
		case <-slow.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("a watch 9 changes behind (bound 8) was not dropped")
		}
		if !errors.Is(slow.Err(), kernel.ErrSlow) {
			t.Errorf("Err() = %v, want ErrSlow", slow.Err())
		}
		slow.Close()
		slow.Close() // twice is safe
	})
}
