package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/getorrery/orrery/kernel"
)

// sseWriter frames kernel frames as Server-Sent Events: an id line with the
// seq (none for seq 0, which would reset a browser's Last-Event-ID), one
// data line, a blank line, LF only. A batch of frames is assembled in a
// pooled buffer and sent with one Write and one Flush, so an idle stream
// holds no buffer of its own.
type sseWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	buf   *[]byte   // the batch being assembled, from bufPool; nil when idle
	wrote bool      // something was written since the last keepalive check
	watch watchSet  // the state keys passed (GET /events?watch=); none by default
	set   time.Time // when the write deadline was last moved; zero before

	mu   sync.Mutex // guards cut and done, and orders the deadline's moves
	cut  bool       // the stream was cut off: its deadline stays in the past
	done bool       // its handler is returning: rc must not be used again
}

// maxBatchBytes is the size at which a batch is written before it ends.
const maxBatchBytes = 256 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// putBuf returns b to bufPool, emptied; one grown past 1 MiB is left to
// the collector, so the pool does not keep a burst's buffers.
func putBuf(b *[]byte) {
	*b = (*b)[:0]
	if cap(*b) <= 1<<20 {
		bufPool.Put(b)
	}
}

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// The request is read: a stream outlives ReadTimeout.
	_ = rc.SetReadDeadline(time.Time{})
	return &sseWriter{w: w, rc: rc}
}

// cutOff makes w's writes fail at once when ctx ends (the client left, or
// its token was revoked) or the server closes, so that a stream blocked on
// a client that stopped reading ends too. It returns the function that
// undoes the arrangement, to call before the handler returns: a
// ResponseController must not be used after that (over HTTP/2 it panics),
// and a cut that started may still be running.
func (s *Server) cutOff(ctx context.Context, w *sseWriter) (stop func()) {
	stopCtx := context.AfterFunc(ctx, w.cutOff)
	stopServer := context.AfterFunc(s.ctx, w.cutOff)
	return func() {
		stopCtx()
		stopServer()
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	}
}

// cutOff puts w's write deadline in the past for good: the write in
// progress and every later one fail.
func (w *sseWriter) cutOff() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || w.cut {
		return
	}
	w.cut = true
	_ = w.rc.SetWriteDeadline(time.Unix(1, 0))
}

// AppendSSE appends f framed as one SSE event to dst. A frame with seq 0,
// or with no Type (an encoder's frame that continues the next one's seq),
// has no id line.
func AppendSSE(dst []byte, f kernel.Frame) []byte {
	if f.Seq > 0 && f.Type != "" {
		dst = append(dst, "id: "...)
		dst = strconv.AppendUint(dst, f.Seq, 10)
		dst = append(dst, '\n')
	}
	dst = append(dst, "data: "...)
	dst = append(dst, f.Data...)
	return append(dst, '\n', '\n')
}

func (w *sseWriter) frame(f kernel.Frame) error {
	if !w.watch.keep(f) {
		return nil
	}
	if w.buf == nil {
		w.buf = bufPool.Get().(*[]byte)
	}
	*w.buf = AppendSSE(*w.buf, f)
	w.wrote = true
	if len(*w.buf) >= maxBatchBytes {
		return w.writeBuf()
	}
	return nil
}

// writeBuf writes the assembled batch and returns the buffer to the pool.
func (w *sseWriter) writeBuf() error {
	if w.buf == nil {
		return nil
	}
	w.deadline()
	_, err := w.w.Write(*w.buf)
	putBuf(w.buf)
	w.buf = nil
	return err
}

// deadline bounds the next write: a client that reads nothing for
// writeTimeout (less up to deadlineSlack) is cut off, so a stalled stream
// cannot hold its handler (or shutdown). A busy stream moves its deadline at
// most once per deadlineSlack, not before every write.
func (w *sseWriter) deadline() {
	now := time.Now()
	if !w.set.IsZero() && now.Sub(w.set) < deadlineSlack {
		return
	}
	w.set = now
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.cut && !w.done {
		// Once cut, a stream is never given time again.
		_ = w.rc.SetWriteDeadline(now.Add(writeTimeout))
	}
}

// deadlineSlack is how stale a stream's write deadline may get.
const deadlineSlack = time.Second

func (w *sseWriter) keepalive() error {
	w.deadline()
	if _, err := io.WriteString(w.w, ": keepalive\n\n"); err != nil {
		return err
	}
	return w.rc.Flush()
}

func (w *sseWriter) flush() error {
	if err := w.writeBuf(); err != nil {
		return err
	}
	w.deadline()
	return w.rc.Flush()
}

// stream writes sub's backlog, then its live frames, until stop returns true
// for a frame written, the subscription ends, ctx ends or the server closes.
// It reports whether stop ended it.
func (s *Server) stream(ctx context.Context, w *sseWriter, sub *kernel.Subscription, stop func(kernel.Frame) bool) (bool, error) {
	// Close, a revoked token or a client that left ends the stream at
	// once, even one blocked writing to a client that stopped reading.
	defer s.cutOff(ctx, w)()
	n := 0
	stopped := false
	err := sub.Backlog(ctx, func(f kernel.Frame) error {
		if err := w.frame(f); err != nil {
			return err
		}
		if n++; n%512 == 0 {
			if err := w.flush(); err != nil {
				return err
			}
		}
		if stop != nil && stop(f) {
			stopped = true
			return errStop
		}
		return nil
	})
	if stopped {
		return true, w.flush()
	}
	if err != nil {
		return false, err
	}
	if err := w.flush(); err != nil {
		return false, err
	}
	return s.live(ctx, w, sub, stop)
}

// live writes sub's live frames until the stream ends. The server's
// flusher writes them (see flusher); this goroutine only sends keepalives
// and notices the stream's end.
func (s *Server) live(ctx context.Context, w *sseWriter, sub *kernel.Subscription, stop func(kernel.Frame) bool) (bool, error) {
	var (
		mu       sync.Mutex // serializes writes: drains, keepalives, the last drain
		over     bool       // the stream ended: nothing more is written
		stopped  bool       // stop returned true
		werr     error      // the write that ended the stream failed so
		batch    []kernel.Frame
		finished = make(chan struct{}) // closed when a drain ends the stream
	)
	// writeBatch writes everything queued; mu is held.
	writeBatch := func() (bool, error) {
		batch = sub.Take(batch[:0])
		if len(batch) == 0 {
			return false, nil
		}
		for _, f := range batch {
			if err := w.frame(f); err != nil {
				return false, err
			}
			if stop != nil && stop(f) {
				return true, w.flush()
			}
		}
		return false, w.flush()
	}
	sk := &sink{drain: func() {
		mu.Lock()
		defer mu.Unlock()
		if over {
			return
		}
		if done, err := writeBatch(); done || err != nil {
			over, stopped, werr = true, done, err
			close(finished)
		}
	}}
	sub.Notify(func() { s.flush.schedule(sk) })
	// end stops the stream; if a drain ended it first, that drain's
	// outcome is the stream's.
	end := func(last bool) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if over {
			return stopped, werr
		}
		over = true
		if last {
			return writeBatch()
		}
		return false, nil
	}

	tick := time.NewTicker(s.cfg.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-finished:
			return end(false)
		case <-sub.Done():
			if errors.Is(sub.Err(), kernel.ErrSlow) {
				// A drain may be blocked on this very client: cut it off.
				w.cutOff()
				_, _ = end(false)
				return false, kernel.ErrSlow
			}
			if done, err := end(true); done || err != nil {
				return done, err
			}
			return false, sub.Err()
		case <-tick.C:
			mu.Lock()
			var err error
			if !over && !w.wrote {
				err = w.keepalive()
			}
			w.wrote = false
			mu.Unlock()
			if err != nil {
				_, _ = end(false)
				return false, err
			}
		case <-ctx.Done():
			_, _ = end(false)
			return false, ctx.Err()
		case <-s.ctx.Done():
			_, _ = end(false)
			return false, s.ctx.Err()
		}
	}
}

// errStop ends a backlog replay once the stream's last frame is written.
var errStop = errors.New("stop")
