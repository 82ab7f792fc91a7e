// Package bus is the run event bus: the versioned JSONL protocol that
// orrery run --events jsonl speaks on stdout and stdin, so that another
// program (a UI, a gateway, a CI job) can watch and drive a run.
//
// Every outbound line is one envelope: v, seq (from 1), ts (ISO-8601 UTC),
// kind, and crewId, agentId, correlationId and causationId when known.
// Payload fields sit flat beside the envelope; a payload field that
// collides with one of those eight reserved names is dropped. An absent key
// is omitted, never null. Inbound lines are verbs (input.given, post, send,
// publish, reply, subscribe, unsubscribe); the inbound side is tolerant, so
// a line it cannot use is reported and ignored, never fatal.
package bus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Version is the protocol version every envelope carries as v.
const Version = 2

// The outbound kinds.
const (
	KindRunStarted        = "run.started"
	KindTaskStarted       = "task.started"
	KindTaskCompleted     = "task.completed"
	KindToolCalled        = "tool.called"
	KindToolReturned      = "tool.returned"
	KindDelegationStarted = "delegation.started"
	KindAgentSpawned      = "agent.spawned"
	KindCostUpdated       = "cost.updated"
	KindLLMDelta          = "llm.delta"
	KindInputNeeded       = "input.needed"
	KindHubMessage        = "hub.message"
	KindError             = "error"
	KindRunFinished       = "run.finished"
)

// The codes of the error kind that ends a run which stopped.
const (
	CodeCrewCancelled = "crew_cancelled"
	CodeCrewFailed    = "crew_failed"
)

// The input kinds of input.needed.
const (
	InputText    = "text"
	InputConfirm = "confirm"
	InputChoice  = "choice"
)

// Reserved are the envelope's eight names. A payload field with one of
// these names is dropped rather than allowed to impersonate the envelope.
var Reserved = []string{"v", "seq", "ts", "kind", "crewId", "agentId", "correlationId", "causationId"}

// IsReserved reports whether name is one of the envelope's names.
func IsReserved(name string) bool { return slices.Contains(Reserved, name) }

// Field is one payload field. A nil Value is absent and is not written.
type Field struct {
	Key   string
	Value any
}

// Event is one outbound event before the Writer stamps it with v, seq and
// ts. Empty identity fields are omitted.
type Event struct {
	Kind          string
	CrewID        string
	AgentID       string
	CorrelationID string
	CausationID   string
	// Payload is written flat beside the envelope, in order.
	Payload []Field
}

// With returns e with the field key=value added to its payload. A nil
// value, or an empty string, adds nothing: an absent key is omitted.
func (e Event) With(key string, value any) Event {
	if value == nil {
		return e
	}
	if s, ok := value.(string); ok && s == "" {
		return e
	}
	if r, ok := value.(json.RawMessage); ok && len(r) == 0 {
		return e
	}
	e.Payload = append(slices.Clip(e.Payload), Field{key, value})
	return e
}

// TimeFormat is the layout of ts: ISO-8601 in UTC with milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Writer writes envelopes, one JSON object per line, numbering them from 1.
// It is safe for concurrent use; each envelope is flushed as it is written,
// so a driver reading line by line sees it at once.
type Writer struct {
	// Now replaces the clock of ts; nil means time.Now.
	Now func() time.Time
	// Logger receives the payload fields dropped for their reserved
	// names; nil means slog.Default().
	Logger *slog.Logger

	mu  sync.Mutex // guards w, seq and buf
	w   *bufio.Writer
	seq uint64
	buf bytes.Buffer
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriter(w)} }

// Seq returns the seq of the last envelope written, 0 before the first.
func (w *Writer) Seq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq
}

// Write stamps ev with the next seq and the time and writes it as one line.
// It returns the seq it gave.
func (w *Writer) Write(ev Event) (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	w.seq++
	w.buf.Reset()
	if err := encode(&w.buf, w.seq, now(), ev, w.logger()); err != nil {
		w.seq--
		return 0, err
	}
	w.buf.WriteByte('\n')
	if _, err := w.w.Write(w.buf.Bytes()); err != nil {
		return 0, fmt.Errorf("write the event stream: %w", err)
	}
	if err := w.w.Flush(); err != nil {
		return 0, fmt.Errorf("write the event stream: %w", err)
	}
	return w.seq, nil
}

func (w *Writer) logger() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.Default()
}

// Encode returns ev as one envelope (without the line's newline), with seq
// and ts given.
func Encode(seq uint64, ts time.Time, ev Event) ([]byte, error) {
	var b bytes.Buffer
	err := encode(&b, seq, ts, ev, nil)
	return b.Bytes(), err
}

func encode(b *bytes.Buffer, seq uint64, ts time.Time, ev Event, log *slog.Logger) error {
	if ev.Kind == "" {
		return fmt.Errorf("encode bus event: it has no kind")
	}
	fmt.Fprintf(b, `{"v":%d,"seq":%d,"ts":"%s","kind":`, Version, seq, ts.UTC().Format(TimeFormat))
	writeString(b, ev.Kind)
	for _, id := range [...]struct{ k, v string }{
		{"crewId", ev.CrewID}, {"agentId", ev.AgentID},
		{"correlationId", ev.CorrelationID}, {"causationId", ev.CausationID},
	} {
		if id.v == "" {
			continue
		}
		b.WriteString(`,"` + id.k + `":`)
		writeString(b, id.v)
	}
	seen := make(map[string]bool, len(ev.Payload))
	for _, f := range ev.Payload {
		if IsReserved(f.Key) {
			if log != nil {
				log.Debug("bus: dropped a payload field with a reserved name", "kind", ev.Kind, "field", f.Key)
			}
			continue
		}
		if f.Value == nil || seen[f.Key] {
			continue
		}
		v, err := json.Marshal(f.Value)
		if err != nil {
			return fmt.Errorf("encode bus event %s field %s: %w", ev.Kind, f.Key, err)
		}
		if string(v) == "null" {
			continue
		}
		seen[f.Key] = true
		b.WriteByte(',')
		writeString(b, f.Key)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	v, _ := json.Marshal(s)
	b.Write(v)
}

// Flatten turns a JSON object into payload fields in its key order, for a
// payload that arrives as JSON. A value that is not an object becomes the
// single field "value".
func Flatten(obj json.RawMessage) []Field {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	tok, err := dec.Token()
	if d, ok := tok.(json.Delim); err != nil || !ok || d != '{' {
		if len(bytes.TrimSpace(obj)) == 0 {
			return nil
		}
		return []Field{{"value", obj}}
	}
	var out []Field
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return out
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return out
		}
		out = append(out, Field{kt.(string), v})
	}
	return out
}
