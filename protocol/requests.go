package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Request is a client's intent. Every request has a kind t and an id the
// reply echoes as reqId.
type Request interface {
	// Head returns the request's t and id.
	Head() *Envelope
}

// Envelope holds the two fields every request has.
type Envelope struct {
	T  string `json:"t"`
	ID string `json:"id"`
}

// Head returns e itself.
func (e *Envelope) Head() *Envelope { return e }

// SessionNew creates a session.
type SessionNew struct {
	Envelope
	Cwd   string `json:"cwd,omitempty"`
	Title string `json:"title,omitempty"`
	Model string `json:"model,omitempty"`
}

// SessionNewReply is the value of a SessionNew reply.
type SessionNewReply struct {
	Session string `json:"session"`
}

// SessionList lists sessions.
type SessionList struct {
	Envelope
}

// SessionSummary describes one session in a SessionList reply.
type SessionSummary struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Created  string `json:"created"`
	Head     uint64 `json:"head"`
	Running  bool   `json:"running"`
	MicroUSD int64  `json:"micro_usd"`
	Model    string `json:"model,omitempty"`
}

// SessionListReply is the value of a SessionList reply.
type SessionListReply struct {
	Sessions []SessionSummary `json:"sessions"`
}

// SessionRead reads frames with seq > Since exactly as logged.
type SessionRead struct {
	Envelope
	Session string  `json:"session"`
	Since   *uint64 `json:"since,omitempty"`
	Limit   int     `json:"limit,omitempty"`
}

// SessionReadReply is the value of a SessionRead reply. Frames are the
// logged AG-UI events, in seq order.
type SessionReadReply struct {
	Frames []json.RawMessage `json:"frames"`
	Head   uint64            `json:"head"`
}

// RunSend starts a run on an idle session, or joins the run in flight as a
// steer when Target is "steer".
type RunSend struct {
	Envelope
	Session string   `json:"session"`
	Input   RunInput `json:"input"`
	Target  string   `json:"target,omitempty"`
}

// Targets of a RunSend.
const (
	TargetRun   = "run"
	TargetSteer = "steer"
)

// RunInput is what a person sends: text and optional attachments.
type RunInput struct {
	Text        string        `json:"text"`
	Attachments []ContentPart `json:"attachments,omitempty"`
}

// RunSendReply is the value of a RunSend reply: the run the input went to
// and whether it started that run or steered it.
type RunSendReply struct {
	RunID  string `json:"runId"`
	Target string `json:"target"`
}

// RunCancel cancels the run in flight. RunID, when given, must name it.
type RunCancel struct {
	Envelope
	Session string `json:"session"`
	RunID   string `json:"runId,omitempty"`
}

// Empty is the value of a reply that carries nothing.
type Empty struct{}

// Reply answers one request. A reply has t "reply" and never a seq.
type Reply struct {
	T     string          `json:"t"`
	ReqID string          `json:"reqId"`
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value,omitempty"`
	Error string          `json:"error,omitempty"`
}

// ErrorBody is the body of a non-2xx HTTP answer.
type ErrorBody struct {
	Error string `json:"error"`
}

var requestKinds = map[string]func() Request{
	"session.new":  func() Request { return new(SessionNew) },
	"session.list": func() Request { return new(SessionList) },
	"session.read": func() Request { return new(SessionRead) },
	"run.send":     func() Request { return new(RunSend) },
	"run.cancel":   func() Request { return new(RunCancel) },
}

// RequestKinds returns the request kinds DecodeRequest knows, sorted.
func RequestKinds() []string {
	kinds := make([]string, 0, len(requestKinds))
	for k := range requestKinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// DecodeRequest decodes one request. Its error is a sentence a client can
// act on: it names the field that failed and what to send instead.
func DecodeRequest(data []byte) (Request, error) {
	var env Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, describeJSONError("the request", err)
	}
	if env.T == "" {
		return nil, fmt.Errorf("t is missing: send one of %s", strings.Join(RequestKinds(), ", "))
	}
	mk, ok := requestKinds[env.T]
	if !ok {
		return nil, fmt.Errorf("t %q is not a request this server knows: send one of %s", env.T, strings.Join(RequestKinds(), ", "))
	}
	req := mk()
	if err := json.Unmarshal(data, req); err != nil {
		return nil, describeJSONError(env.T, err)
	}
	return req, nil
}

// DecodeRunAgentInput decodes and validates a RunAgentInput body.
func DecodeRunAgentInput(data []byte) (*RunAgentInput, error) {
	var in RunAgentInput
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, describeJSONError("the RunAgentInput", err)
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return &in, nil
}

// describeJSONError turns a decoding error into a sentence naming the field.
func describeJSONError(what string, err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		want := "another type"
		if typeErr.Type != nil {
			want = jsonKind(typeErr.Type.Kind().String())
		}
		return fmt.Errorf("%s: field %s is %s but must be %s", what, typeErr.Field, withArticle(typeErr.Value), want)
	case errors.As(err, &typeErr):
		return fmt.Errorf("%s must be a JSON object, not %s", what, withArticle(typeErr.Value))
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("%s is not valid JSON (at byte %d: %v): send one JSON object", what, syntaxErr.Offset, syntaxErr)
	case errors.Is(err, errEmpty) || strings.Contains(err.Error(), "unexpected end of JSON input"):
		return fmt.Errorf("%s is empty or cut short: send one whole JSON object", what)
	default:
		return fmt.Errorf("%s: %v", what, err)
	}
}

var errEmpty = errors.New("empty")

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int8", "int16", "int32", "int64":
		return "a whole number"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number, 0 or more"
	case "float32", "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	default:
		return "a " + goKind
	}
}

// withArticle puts "a" or "an" before a JSON value's description, such as
// "object" or "number -1".
func withArticle(desc string) string {
	if desc != "" && strings.ContainsRune("aeiou", rune(desc[0])) {
		return "an " + desc
	}
	return "a " + desc
}

// IsJSONObject reports whether data, trimmed, starts as a JSON object.
func IsJSONObject(data []byte) bool {
	data = bytes.TrimSpace(data)
	return len(data) > 0 && data[0] == '{'
}
