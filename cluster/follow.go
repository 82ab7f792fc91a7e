package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/getorrery/orrery/store"
	jsstore "github.com/getorrery/orrery/store/jetstream"
	"github.com/nats-io/nats.go"
)

// Follower delivers the frames another node writes to a session, in
// order and each once, as they are stored: live from the subject
// JetStream republishes them to, and, where that skipped any (a message
// lost to a slow or reconnecting connection), from the log. It is how a
// node that does not own a session serves its subscribers.
type Follower struct {
	log  *jsstore.Log
	id   string
	fn   func(store.Frame)
	next uint64 // the seq fn expects next

	msgs   chan *nats.Msg
	sub    *nats.Subscription
	nudge  chan struct{}
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	logger *slog.Logger
}

// followCheck is how often a quiet follower reads the session's head, to
// find a last frame whose live message was lost.
const followCheck = 2 * time.Second

// Follow starts delivering the session's frames after seq after to fn,
// which runs on the follower's goroutine, one frame at a time.
func Follow(nc *nats.Conn, l *jsstore.Log, session string, after uint64, fn func(store.Frame), logger *slog.Logger) (*Follower, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f := &Follower{log: l, id: session, fn: fn, next: after + 1, msgs: make(chan *nats.Msg, 8192),
		nudge: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), logger: logger}
	// Subscribe before reading the log, so nothing falls between the two.
	sub, err := nc.ChanSubscribe(l.LiveSubject(session), f.msgs)
	if err != nil {
		return nil, err
	}
	f.sub = sub
	f.Nudge()
	go f.run()
	return f, nil
}

// Nudge makes the follower read the log for anything it missed: after a
// reconnection, or a slow-consumer drop.
func (f *Follower) Nudge() {
	select {
	case f.nudge <- struct{}{}:
	default:
	}
}

// Next is the seq of the frame the follower delivers next.
func (f *Follower) Next() uint64 { return f.next }

// Stop stops the follower and waits until fn has returned for the last
// time.
func (f *Follower) Stop() {
	f.once.Do(func() {
		close(f.stop)
		f.sub.Unsubscribe()
	})
	<-f.done
}

func (f *Follower) run() {
	defer close(f.done)
	check := time.NewTicker(followCheck)
	defer check.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-f.nudge:
			f.catchUp(0)
		case <-check.C:
			f.catchUp(0)
		case m := <-f.msgs:
			fr, err := jsstore.FrameOf(m)
			if err != nil {
				f.logger.Warn("a live message that carries no frame", "session", f.id, "err", err)
				continue
			}
			switch {
			case fr.Seq < f.next: // already delivered from the log
			case fr.Seq == f.next:
				f.deliver(fr)
			default: // a gap: the frames between are in the log
				f.catchUp(fr.Seq - 1)
				if fr.Seq == f.next {
					f.deliver(fr)
				}
			}
		}
	}
}

func (f *Follower) deliver(fr store.Frame) {
	f.fn(fr)
	f.next = fr.Seq + 1
}

// catchUp reads from the log what follows the last frame delivered, up to
// seq upTo (0: all there is).
func (f *Follower) catchUp(upTo uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errStop := errors.New("stop")
	err := f.log.Scan(ctx, f.id, f.next-1, func(fr store.Frame) error {
		select {
		case <-f.stop:
			return errStop
		default:
		}
		if upTo > 0 && fr.Seq > upTo {
			return errStop
		}
		fr.Data = append([]byte(nil), fr.Data...)
		f.deliver(fr)
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		f.logger.Warn("read a followed session's log", "session", f.id, "err", err)
	}
}
