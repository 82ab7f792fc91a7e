package bus

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// The inbound verbs.
const (
	VerbInputGiven  = "input.given"
	VerbPost        = "post"
	VerbSend        = "send"
	VerbPublish     = "publish"
	VerbReply       = "reply"
	VerbSubscribe   = "subscribe"
	VerbUnsubscribe = "unsubscribe"
)

// Verbs lists the inbound verbs.
var Verbs = []string{VerbInputGiven, VerbPost, VerbSend, VerbPublish, VerbReply, VerbSubscribe, VerbUnsubscribe}

// Inbound is one line a watching program wrote on stdin.
type Inbound struct {
	// Kind is the verb.
	Kind string `json:"kind"`
	// CorrelationID ties an answer to its question (input.given, reply)
	// or names a send so its answer can be paired.
	CorrelationID string `json:"correlationId,omitempty"`
	// Value is input.given's answer.
	Value json.RawMessage `json:"value,omitempty"`
	// To is the hub address of post and send.
	To string `json:"to,omitempty"`
	// Payload is what post, send, publish and reply carry.
	Payload json.RawMessage `json:"payload,omitempty"`
	// TimeoutMS bounds how long a send waits for its answer; 0 is the
	// hub's default.
	TimeoutMS int64 `json:"timeoutMs,omitempty"`
	// Topic is what publish, subscribe and unsubscribe name.
	Topic string `json:"topic,omitempty"`
	// RetainAs keeps a published payload under that name for later
	// subscribers of the topic.
	RetainAs string `json:"retainAs,omitempty"`
}

// ErrNotJSON is the error of a line that is not a JSON object.
var ErrNotJSON = errors.New("the line is not a JSON object: write one JSON object per line")

// Parse decodes one inbound line. Its error is a sentence that says why
// the line cannot be used and what a valid one looks like.
func Parse(line []byte) (Inbound, error) {
	line = bytes.TrimSpace(line)
	var in Inbound
	if len(line) == 0 || line[0] != '{' {
		return in, ErrNotJSON
	}
	if err := json.Unmarshal(line, &in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return in, fmt.Errorf("field %s has the wrong type (%s): see the inbound verbs in docs/bus.md", te.Field, te.Value)
		}
		return in, ErrNotJSON
	}
	need := func(field, value string) error {
		if value == "" {
			return fmt.Errorf("%s needs %s", in.Kind, field)
		}
		return nil
	}
	var err error
	switch in.Kind {
	case "":
		return in, fmt.Errorf("the line has no kind: name one of %s", strings.Join(Verbs, ", "))
	case VerbInputGiven:
		if len(in.Value) == 0 {
			err = errors.New(`input.given needs a value, such as {"kind":"input.given","value":"yes"}`)
		}
	case VerbPost:
		err = need("to, a hub address such as agent://CREW/AGENT", in.To)
	case VerbSend:
		err = need("to, a hub address such as agent://CREW/AGENT", in.To)
		if err == nil && in.TimeoutMS < 0 {
			err = errors.New("send needs a timeoutMs of 0 (the default) or more")
		}
	case VerbPublish:
		err = need("a topic", in.Topic)
	case VerbReply:
		err = need("the correlationId of the question it answers", in.CorrelationID)
	case VerbSubscribe, VerbUnsubscribe:
		err = need("a topic", in.Topic)
	default:
		return in, fmt.Errorf("unknown verb %q: the inbound verbs are %s", in.Kind, strings.Join(Verbs, ", "))
	}
	return in, err
}

// MaxLine bounds an inbound line; a longer one is skipped.
const MaxLine = 4 << 20

// ReadLines reads r line by line and calls handle with each line that
// parses. A line that does not is logged and skipped: nothing a driver
// writes stops the run. ReadLines returns nil at the end of r, or ctx's
// error.
func ReadLines(ctx context.Context, r io.Reader, log *slog.Logger, handle func(Inbound)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, tooLong, err := readLine(br)
		if err == nil || len(line) > 0 || tooLong {
			n++
			switch {
			case tooLong:
				log.Warn("bus: ignored an inbound line longer than the limit", "line", n, "limit", MaxLine)
			case len(bytes.TrimSpace(line)) == 0:
			default:
				in, perr := Parse(line)
				if perr != nil {
					log.Warn("bus: ignored an inbound line", "line", n, "why", perr.Error())
				} else {
					handle(in)
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the inbound stream: %w", err)
		}
	}
}

// readLine returns the next line without its newline; tooLong reports a
// line beyond MaxLine, whose bytes are discarded.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, isPrefix, err := br.ReadLine()
		if !tooLong {
			line = append(line, chunk...)
			if len(line) > MaxLine {
				line, tooLong = nil, true
			}
		}
		if err != nil || !isPrefix {
			if err == nil {
				return line, tooLong, nil
			}
			return line, tooLong, err
		}
	}
}
