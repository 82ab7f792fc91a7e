package fanout

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestFindSeqAndStamp(t *testing.T) {
	tests := []struct {
		name  string
		line  string
		seq   uint64
		ok    bool
		stamp int64
	}{
		{"orrery frame", `{"type":"TEXT_MESSAGE_CONTENT","metadata":{"orrery":{"seq":42}},"delta":"tok@1700000000123456789 "}`, 42, true, 1700000000123456789},
		{"centrifuge push", `data: {"push":{"channel":"fanout","pub":{"data":{"metadata":{"orrery":{"seq":7}},"delta":"tok@5 "},"offset":7}}}`, 7, true, 5},
		{"no seq, no stamp", `{"t":"reply","reqId":"a","ok":true}`, 0, false, 0},
		{"empty stamp", `{"seq":3,"delta":"tok@ "}`, 3, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seq, ok := FindSeq([]byte(tt.line))
			if seq != tt.seq || ok != tt.ok {
				t.Errorf("FindSeq() = %d, %v, want %d, %v", seq, ok, tt.seq, tt.ok)
			}
			if got := FindStamp([]byte(tt.line)); got != tt.stamp {
				t.Errorf("FindStamp() = %d, want %d", got, tt.stamp)
			}
		})
	}
}

func TestFrameCarriesItsStamp(t *testing.T) {
	before := time.Now().UnixNano()
	f := Frame(9, "s")
	after := time.Now().UnixNano()
	if !json.Valid(f) {
		t.Fatalf("Frame() = %s, not JSON", f)
	}
	if seq, _ := FindSeq(f); seq != 9 {
		t.Errorf("FindSeq(Frame(9)) = %d, want 9", seq)
	}
	if s := FindStamp(f); s < before || s > after {
		t.Errorf("FindStamp(Frame()) = %d, want within [%d, %d]", s, before, after)
	}
}

func TestHistQuantile(t *testing.T) {
	var h hist
	for us := int64(1); us <= 1000; us++ {
		h.add(us * 1000)
	}
	tests := []struct {
		q        float64
		min, max time.Duration // the bucket's upper edge is within ~6% above the exact value
	}{
		{0.5, 500 * time.Microsecond, 532 * time.Microsecond},
		{0.99, 990 * time.Microsecond, 1056 * time.Microsecond},
		{1, 1000 * time.Microsecond, 1064 * time.Microsecond},
	}
	for _, tt := range tests {
		if got := h.quantile(tt.q); got < tt.min || got > tt.max {
			t.Errorf("quantile(%v) = %v, want in [%v, %v]", tt.q, got, tt.min, tt.max)
		}
	}
	// A Summary carries the histogram across processes unchanged.
	var c crowd
	c.t.receiver().hist = h
	s, err := c.close()
	if err != nil {
		t.Fatal(err)
	}
	back := s.histogram()
	if back != h {
		t.Errorf("Summary.histogram() differs from the histogram summed up (n %d, want %d)", back.n, h.n)
	}
}

// TestSubscriberMain drives the subscriber program's body as the harness
// does, against a ceiling in this process: every frame published inside
// the window reaches every subscriber, in order, with its latency.
func TestSubscriberMain(t *testing.T) {
	for _, ws := range []bool{false, true} {
		t.Run(fmt.Sprintf("ws=%v", ws), func(t *testing.T) {
			const subs = 5
			c := newCeiling(t, ws)
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			errc := make(chan error, 1)
			go func() {
				errc <- SubscriberMain(c.System().Subscribers.args(subs), inR, outW)
				outW.Close()
			}()
			out := bufio.NewReader(outR)
			if line, err := out.ReadString('\n'); strings.TrimSpace(line) != "ready" {
				t.Fatalf("first line = %q, %v, want ready (%v)", line, err, <-errc)
			}
			// Every subscriber is registered with the ceiling before the
			// first frame, or it would miss frames published while its
			// connection was still being set up.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				c.mu.Lock()
				n := len(c.subs)
				c.mu.Unlock()
				if n == subs {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d subscribers registered with the ceiling", n, subs)
				}
			}
			seq := uint64(0)
			publish := func(n int) {
				for range n {
					seq++
					c.Publish(seq)
				}
			}
			publish(10)
			waitFor(t, inW, out, 10*subs) // none of these in the window
			io.WriteString(inW, "begin\n")
			// The program reads its commands in order: once it answers a
			// count, it has opened the window, and what comes next is in it.
			waitFor(t, inW, out, 10*subs)
			publish(100)
			waitFor(t, inW, out, 110*subs)
			io.WriteString(inW, "end\nstop\n")
			line, err := out.ReadBytes('\n')
			if err != nil {
				t.Fatalf("read summary: %v (%v)", err, <-errc)
			}
			if err := <-errc; err != nil {
				t.Fatalf("SubscriberMain() = %v", err)
			}
			var s Summary
			if err := json.Unmarshal(line, &s); err != nil {
				t.Fatalf("summary %s: %v", line, err)
			}
			if s.Subs != subs || s.Frames != 100*subs || s.Gaps != 0 || s.Dropped != 0 {
				t.Errorf("summary = %d subs, %d frames, %d gaps, %d dropped; want %d, %d, 0, 0", s.Subs, s.Frames, s.Gaps, s.Dropped, subs, 100*subs)
			}
			if h := s.histogram(); h.n != 100*subs {
				t.Errorf("latency samples = %d, want %d", h.n, 100*subs)
			}
		})
	}
}

// waitFor asks the subscribers for their count until it is want.
func waitFor(t *testing.T, in io.Writer, out *bufio.Reader, want int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		io.WriteString(in, "count\n")
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if err != nil {
			t.Fatalf("count = %q, want a number", line)
		}
		if n == want {
			return
		}
		if n > want {
			t.Fatalf("count = %d, want %d", n, want)
		}
	}
	t.Fatalf("the subscribers did not receive %d frames within 10s", want)
}
