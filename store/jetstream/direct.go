package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// directReq is a JetStream direct get request (ADR-31): any replica of the
// stream answers it, without a consumer.
type directReq struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	Batch   int    `json:"batch,omitempty"`
}

// stored is one message as a direct get returns it.
type stored struct {
	sseq    uint64 // its stream sequence
	subject string
	hdr     nats.Header
	data    []byte
	time    time.Time // when it was stored; only leader reads fill it
}

// errNotFound is a direct get that found no message.
var errNotFound = errors.New("no such message")

func (l *Log) directSubject() string { return "$JS.API.DIRECT.GET." + l.n.stream }

func parseStored(m *nats.Msg) (stored, error) {
	sseq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return stored{}, fmt.Errorf("direct get: a reply without a stream sequence (status %q %q)", m.Header.Get("Status"), m.Header.Get("Description"))
	}
	return stored{sseq: sseq, subject: m.Header.Get("Nats-Subject"), hdr: m.Header, data: m.Data}, nil
}

// statusErr turns a status-only reply into an error: errNotFound for 404.
func statusErr(m *nats.Msg) error {
	switch st := m.Header.Get("Status"); st {
	case "404":
		return errNotFound
	case "":
		return nil
	default:
		return fmt.Errorf("direct get: status %s %s", st, m.Header.Get("Description"))
	}
}

// directGet fetches one message, or errNotFound.
func (l *Log) directGet(ctx context.Context, req directReq) (stored, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return stored{}, err
	}
	var m *nats.Msg
	for wait := 10 * time.Millisecond; ; wait *= 2 {
		m, err = l.nc.RequestWithContext(ctx, l.directSubject(), body)
		// No responders: the stream's replicas are not answering yet (it
		// was just made, or is electing a leader). Try again a while.
		if !errors.Is(err, nats.ErrNoResponders) || wait > time.Second {
			break
		}
		select {
		case <-ctx.Done():
			return stored{}, fmt.Errorf("direct get from stream %s: %w", l.n.stream, err)
		case <-time.After(wait):
		}
	}
	if err != nil {
		return stored{}, fmt.Errorf("direct get from stream %s: %w", l.n.stream, err)
	}
	if len(m.Data) == 0 && m.Header.Get("Status") != "" {
		return stored{}, statusErr(m)
	}
	return parseStored(m)
}

// replies routes the answers to direct get batches: one wildcard
// subscription for the Log's whole life, as nats.go's own requests use.
// A subscription made per request would race its own answer in a
// cluster: the server that answers may not yet know of the new interest
// and drop the reply.
type replies struct {
	prefix string
	sub    *nats.Subscription
	mu     sync.Mutex
	chans  map[string]chan *nats.Msg
}

func newReplies(nc *nats.Conn) (*replies, error) {
	r := &replies{prefix: nc.NewRespInbox() + ".", chans: make(map[string]chan *nats.Msg)}
	sub, err := nc.Subscribe(r.prefix+"*", func(m *nats.Msg) {
		r.mu.Lock()
		ch := r.chans[m.Subject[len(r.prefix):]]
		r.mu.Unlock()
		if ch != nil {
			select {
			case ch <- m:
			default: // more than was asked for: cannot happen
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("direct get: subscribe: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		return nil, err
	}
	r.sub = sub
	return r, nil
}

func (r *replies) open(n int) (string, chan *nats.Msg, func()) {
	tok := nuid.Next()
	ch := make(chan *nats.Msg, n+2)
	r.mu.Lock()
	r.chans[tok] = ch
	r.mu.Unlock()
	return r.prefix + tok, ch, func() {
		r.mu.Lock()
		delete(r.chans, tok)
		r.mu.Unlock()
	}
}

// directBatch asks for up to req.Batch messages and calls fn with each, in
// stream order. It returns how many it passed to fn and whether the stream
// holds more that match (the end-of-batch marker's pending count).
func (l *Log) directBatch(ctx context.Context, req directReq, fn func(stored) error) (n int, more bool, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, false, err
	}
	inbox, ch, done := l.replies.open(req.Batch)
	defer done()
	if err := l.nc.PublishRequest(l.directSubject(), inbox, body); err != nil {
		return 0, false, fmt.Errorf("direct get: %w", err)
	}
	wait := 10 * time.Millisecond
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return n, false, fmt.Errorf("direct get from stream %s: %w", l.n.stream, ctx.Err())
		}
		if st := m.Header.Get("Status"); st != "" && len(m.Data) == 0 {
			if st == "503" && n == 0 && wait <= time.Second {
				// No responders yet, as directGet: ask again.
				select {
				case <-ctx.Done():
					return n, false, fmt.Errorf("direct get from stream %s: %w", l.n.stream, ctx.Err())
				case <-time.After(wait):
				}
				wait *= 2
				if err := l.nc.PublishRequest(l.directSubject(), inbox, body); err != nil {
					return 0, false, fmt.Errorf("direct get: %w", err)
				}
				continue
			}
			switch st {
			case "204": // end of batch
				pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				return n, pending > 0, nil
			case "404":
				return n, false, nil
			default:
				return n, false, statusErr(m)
			}
		}
		s, err := parseStored(m)
		if err != nil {
			return n, false, err
		}
		n++
		if err := fn(s); err != nil {
			return n, false, err
		}
	}
}
