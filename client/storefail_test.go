package client_test

import (
	"testing"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/internal/testdisk"
	"github.com/getorrery/orrery/protocol"
)

// TestStoreFailureEndsRun fills the disk under the kernel's log during a
// run a Stream follows, over each transport: the Stream gets the run's end
// with seq 0 (TEXT_MESSAGE_END, RUN_ERROR store_failed), a send is refused
// while the disk is full, and once there is room the next run follows
// without a gap or a resume, though the log took the failed run's end at
// seqs the Stream never received.
func TestStoreFailureEndsRun(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			dir := testdisk.Tmpfs(t, 24<<20)
			flood := testdisk.NewFlood(true)
			h := newHarnessIn(t, dir, flood)
			c := h.dial(tr, client.Options{})
			ctx := timeout(t)
			session, err := c.NewSession(ctx, protocol.SessionNew{})
			if err != nil {
				t.Fatal(err)
			}
			var zero uint64
			s, err := c.Attach(ctx, session, &zero)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := c.Send(ctx, session, protocol.RunInput{Text: "flood"}); err != nil {
				t.Fatal(err)
			}
			readUntil(t, ctx, s, func(f client.Frame) bool { return f.Type == protocol.TypeTextMessageContent })
			fill := testdisk.Fill(t, dir)
			fill.Leave(1 << 20)
			flood.Release()
			got := readUntil(t, ctx, s, terminal)
			n := len(got)
			if n < 2 || got[n-1].Type != protocol.TypeRunError || got[n-1].Seq != 0 || got[n-2].Type != protocol.TypeTextMessageEnd || got[n-2].Seq != 0 {
				t.Fatalf("the run ended with %v, want TEXT_MESSAGE_END and RUN_ERROR with seq 0", got[max(0, n-2):])
			}
			if e, ok := got[n-1].Event.(*protocol.RunError); !ok || e.Code != "store_failed" {
				t.Errorf("RUN_ERROR = %+v, want code store_failed", got[n-1].Event)
			}
			if _, err := c.Send(ctx, session, protocol.RunInput{Text: "again"}); err == nil {
				t.Errorf("Send() on a full disk = nil, want a refusal")
			}

			fill.Free()
			if _, err := c.Send(ctx, session, protocol.RunInput{Text: "back?"}); err != nil {
				t.Fatalf("Send() once the disk has room = %v", err)
			}
			next := readUntil(t, ctx, s, terminal)
			if last := next[len(next)-1]; last.Type != protocol.TypeRunFinished {
				t.Errorf("the next run ended with %s, want RUN_FINISHED", last.Type)
			}
			for _, f := range next {
				if f.Type == protocol.TypeRunError {
					t.Errorf("the Stream got a RUN_ERROR again (seq %d) after the store worked again", f.Seq)
				}
			}
			if g, r := s.Gaps(), s.Reconnects(); g != 0 || r != 0 {
				t.Errorf("Gaps() = %d, Reconnects() = %d, want 0, 0: the skipped seqs are the failed run's end", g, r)
			}
		})
	}
}
