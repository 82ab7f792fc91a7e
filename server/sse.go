package server

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/getorrery/orrery/kernel"
)

// sseWriter frames kernel frames as Server-Sent Events: an id line with the
// seq (none for seq 0, which would reset a browser's Last-Event-ID), one
// data line, a blank line, LF only. Frames are buffered and sent with one
// Flush per batch.
type sseWriter struct {
	bw    *bufio.Writer
	rc    *http.ResponseController
	num   []byte
	wrote bool // something was written since the last keepalive check
}

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{bw: bufio.NewWriterSize(w, 64<<10), rc: http.NewResponseController(w), num: make([]byte, 0, 20)}
}

// AppendSSE appends f framed as one SSE event to dst.
func AppendSSE(dst []byte, f kernel.Frame) []byte {
	if f.Seq > 0 {
		dst = append(dst, "id: "...)
		dst = strconv.AppendUint(dst, f.Seq, 10)
		dst = append(dst, '\n')
	}
	dst = append(dst, "data: "...)
	dst = append(dst, f.Data...)
	return append(dst, '\n', '\n')
}

func (w *sseWriter) frame(f kernel.Frame) error {
	if f.Seq > 0 {
		w.bw.WriteString("id: ")
		w.num = strconv.AppendUint(w.num[:0], f.Seq, 10)
		w.bw.Write(w.num)
		w.bw.WriteByte('\n')
	}
	w.bw.WriteString("data: ")
	w.bw.Write(f.Data)
	_, err := w.bw.WriteString("\n\n")
	w.wrote = true
	return err
}

func (w *sseWriter) keepalive() error {
	_, err := w.bw.WriteString(": keepalive\n\n")
	if err != nil {
		return err
	}
	return w.flush()
}

func (w *sseWriter) flush() error {
	if err := w.bw.Flush(); err != nil {
		return err
	}
	return w.rc.Flush()
}

// stream writes sub's backlog, then its live frames, until stop returns true
// for a frame written, the subscription ends, ctx ends or the server closes.
// It reports whether stop ended it.
func (s *Server) stream(ctx context.Context, w *sseWriter, sub *kernel.Subscription, stop func(kernel.Frame) bool) (bool, error) {
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
	tick := time.NewTicker(s.cfg.KeepAlive)
	defer tick.Stop()
	var batch []kernel.Frame
	writeBatch := func() (bool, error) {
		batch = sub.Take(batch[:0])
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
	for {
		select {
		case <-sub.Ready():
			if done, err := writeBatch(); done || err != nil {
				return done, err
			}
		case <-sub.Done():
			done, err := writeBatch()
			if done || err != nil {
				return done, err
			}
			return false, sub.Err()
		case <-tick.C:
			if !w.wrote {
				if err := w.keepalive(); err != nil {
					return false, err
				}
			}
			w.wrote = false
		case <-ctx.Done():
			return false, ctx.Err()
		case <-s.ctx.Done():
			return false, s.ctx.Err()
		}
	}
}

type stopError struct{}

func (stopError) Error() string { return "stop" }

var errStop error = stopError{}
