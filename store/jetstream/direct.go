package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
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
	m, err := l.nc.RequestWithContext(ctx, l.directSubject(), body)
	if err != nil {
		return stored{}, fmt.Errorf("direct get from stream %s: %w", l.n.stream, err)
	}
	if len(m.Data) == 0 && m.Header.Get("Status") != "" {
		return stored{}, statusErr(m)
	}
	return parseStored(m)
}

// directBatch asks for up to req.Batch messages and calls fn with each, in
// stream order. It returns how many it passed to fn and whether the stream
// holds more that match (the end-of-batch marker's pending count).
func (l *Log) directBatch(ctx context.Context, req directReq, fn func(stored) error) (n int, more bool, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, false, err
	}
	inbox := l.nc.NewRespInbox()
	sub, err := l.nc.SubscribeSync(inbox)
	if err != nil {
		return 0, false, fmt.Errorf("direct get: subscribe: %w", err)
	}
	defer sub.Unsubscribe()
	if err := l.nc.PublishRequest(l.directSubject(), inbox, body); err != nil {
		return 0, false, fmt.Errorf("direct get: %w", err)
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, false, fmt.Errorf("direct get from stream %s: %w", l.n.stream, err)
		}
		if st := m.Header.Get("Status"); st != "" && len(m.Data) == 0 {
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
