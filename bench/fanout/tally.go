package fanout

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Receiver is one subscriber's tally. Only its connection's goroutine
// calls Frame.
type Receiver struct {
	t      *tally
	frames atomic.Int64
	bytes  atomic.Int64
	last   uint64
	gaps   int64
	hist   hist
	err    error
}

// Now is the receive time to pass to Frame, on the machine's wall clock
// (shared by every process): take it right after the read that brought the
// frame in.
func (r *Receiver) Now() int64 { return time.Now().UnixNano() }

// Frame counts a received frame with seq, published at stamp and received
// at now (both from Now's clock; a stamp of 0 means the frame carried
// none).
func (r *Receiver) Frame(seq uint64, stamp, now int64) {
	r.frames.Add(1)
	if r.last != 0 && seq != r.last+1 {
		r.gaps++
	}
	r.last = seq
	if stamp != 0 && r.t.measuring.Load() {
		r.hist.add(now - stamp)
	}
}

// Bytes counts n bytes read from the wire.
func (r *Receiver) Bytes(n int) { r.bytes.Add(int64(n)) }

// tally is the receiving side's instruments: every subscriber's Receiver,
// and the window opened by begin and closed by end. It lives in whichever
// process runs the subscribers.
type tally struct {
	measuring atomic.Bool

	mu sync.Mutex // guards rx
	rx []*Receiver

	// The window.
	frames0, bytes0 int64
	cpu0            time.Duration
	frames, bytes   int64
	cpu             time.Duration
}

func (t *tally) receiver() *Receiver {
	r := &Receiver{t: t}
	t.mu.Lock()
	t.rx = append(t.rx, r)
	t.mu.Unlock()
	return r
}

func (t *tally) totals() (frames, bytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.rx {
		frames += r.frames.Load()
		bytes += r.bytes.Load()
	}
	return
}

func (t *tally) begin() {
	t.frames0, t.bytes0 = t.totals()
	t.cpu0 = processCPU()
	t.measuring.Store(true)
}

func (t *tally) end() {
	t.measuring.Store(false)
	t.cpu = processCPU() - t.cpu0
	f, b := t.totals()
	t.frames, t.bytes = f-t.frames0, b-t.bytes0
}

// Summary is what the subscribers measured over the window: it crosses
// from the subscriber process to the harness as one JSON line.
type Summary struct {
	Subs    int           `json:"subs"`
	Frames  int64         `json:"frames"` // frames received in the window, all subscribers
	Bytes   int64         `json:"bytes"`  // bytes read in the window
	CPU     time.Duration `json:"cpu"`    // CPU the subscribers' process used in the window
	Gaps    int64         `json:"gaps"`
	Dropped int           `json:"dropped"`
	Err     string        `json:"err,omitempty"` // the first dropped subscriber's error
	Attach  time.Duration `json:"attach"`
	// Hist is the latency histogram's non-empty buckets, [bucket, count].
	Hist [][2]int64 `json:"hist"`
}

func (s Summary) histogram() hist {
	var h hist
	for _, bc := range s.Hist {
		if i := int(bc[0]); i >= 0 && i < len(h.b) {
			h.b[i] += uint32(bc[1])
			h.n += bc[1]
		}
	}
	return h
}

// crowd is n subscribers reading on their own goroutines into a tally.
type crowd struct {
	t       tally
	conns   []Conn
	wg      sync.WaitGroup
	closing atomic.Bool
	dropped atomic.Int64
	attach  time.Duration
}

// attach dials n subscribers, a few at a time, and starts reading them.
func attach(ctx context.Context, n int, dial func(context.Context, int) (Conn, error)) (*crowd, error) {
	t0 := time.Now()
	conns, err := dialAll(ctx, n, dial)
	if err != nil {
		return nil, err
	}
	c := &crowd{conns: conns, attach: time.Since(t0)}
	for _, conn := range conns {
		rx := c.t.receiver()
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			err := conn.Run(rx)
			if !c.closing.Load() {
				c.dropped.Add(1)
				rx.err = err
			}
		}()
	}
	return c, nil
}

// close ends every connection, waits for the readers and sums them up.
func (c *crowd) close() (Summary, error) {
	c.closing.Store(true)
	for _, conn := range c.conns {
		conn.Close()
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		return Summary{}, fmt.Errorf("subscribers still reading 30s after their connections were closed")
	}
	var h hist
	s := Summary{Subs: len(c.t.rx), Frames: c.t.frames, Bytes: c.t.bytes, CPU: c.t.cpu,
		Dropped: int(c.dropped.Load()), Attach: c.attach}
	for _, r := range c.t.rx {
		h.merge(&r.hist)
		s.Gaps += r.gaps
		if r.err != nil && s.Err == "" {
			s.Err = r.err.Error()
		}
	}
	for i, n := range h.b {
		if n > 0 {
			s.Hist = append(s.Hist, [2]int64{int64(i), int64(n)})
		}
	}
	return s, nil
}

// dialAll attaches n subscribers, 16 at a time.
func dialAll(ctx context.Context, n int, dial func(context.Context, int) (Conn, error)) ([]Conn, error) {
	conns := make([]Conn, n)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				c, err := dial(ctx, i)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("attach subscriber %d: %w", i, err)
					}
					mu.Unlock()
					next.Store(int64(n))
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	if first != nil {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		return nil, first
	}
	return conns, nil
}
