package protocol

import (
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
	// Agent names an external ACP agent to run the session: a name from
	// [agents.<name>], or "acp:COMMAND ARGS…".
	Agent string `json:"agent,omitempty"`
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
	// Damaged, when set, is the refusal every request naming the session
	// gets: its log is damaged after some seq, and head is what its record
	// says, not what can be read.
	Damaged string `json:"damaged,omitempty"`
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
// steer when Target is "steer". Permissions, on a send that starts a run,
// add consent rules for that run only. UsageEvents, on a send that starts
// a run, logs an orrery.usage event after each of the run's model calls
// (the run's tokens and cost so far), as orrery run --events jsonl needs
// for its cost.updated.
type RunSend struct {
	Envelope
	Session     string          `json:"session"`
	Input       RunInput        `json:"input"`
	Target      string          `json:"target,omitempty"`
	Permissions *RunPermissions `json:"permissions,omitempty"`
	UsageEvents bool            `json:"usageEvents,omitempty"`
}

// RunPermissions are consent rules a client adds for the run it starts, on
// top of the kernel's [permissions] (orrery run's --allow, --deny and
// --yes): rules as [permissions] writes them, such as "shell(go test*)".
// A deny rule of either beats an allow rule of either. Deny only narrows
// what the run may do, so any client may send it; Allow and Yes (allow
// every call the rules would ask about) are for a connection that may
// answer consent, and refused from any other.
type RunPermissions struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	Yes   bool     `json:"yes,omitempty"`
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

// Hello opens a WebSocket or pipe connection: it authenticates (token) and
// declares the client (client, draws). It may only be the first request.
type Hello struct {
	Envelope
	Token  string   `json:"token,omitempty"`
	Client string   `json:"client,omitempty"`
	Draws  []string `json:"draws,omitempty"`
	// Batch asks a WebSocket to carry several objects in one message,
	// separated by "\n", when the server has several to send at once.
	// Without it each message is one JSON object. A pipe carries one
	// object a line either way.
	Batch bool `json:"batch,omitempty"`
}

// HelloReply is the value of a Hello reply.
type HelloReply struct {
	Node     string `json:"node"`
	Version  string `json:"version"`
	Protocol string `json:"protocol"`
}

// ProtocolVersion is the version of Orrery's wire protocol a HelloReply names.
const ProtocolVersion = "orrery/1"

// SessionAttach starts sending a session's frames on this connection,
// after Since when given (a resume), or from a seq-0 snapshot when not.
// Coalesce merges runs of text and argument deltas in the replayed part.
// StreamMode picks the dialect of the frames (agui_spec, agui, openai,
// dual; empty means agui_spec). Snapshot, with Since, starts the replay
// with a seq-0 STATE_SNAPSHOT of the state as it stood at Since. A2UI adds
// an ACTIVITY_SNAPSHOT a2ui-surface before each placement and removal.
type SessionAttach struct {
	Envelope
	Session    string  `json:"session"`
	Since      *uint64 `json:"since,omitempty"`
	Coalesce   bool    `json:"coalesce,omitempty"`
	StreamMode string  `json:"stream_mode,omitempty"`
	Snapshot   bool    `json:"snapshot,omitempty"`
	A2UI       bool    `json:"a2ui,omitempty"`
}

// SessionAttachReply is the value of a SessionAttach reply: the session's
// head when it attached.
type SessionAttachReply struct {
	Head uint64 `json:"head"`
}

// SessionDetach stops sending a session's frames on this connection.
type SessionDetach struct {
	Envelope
	Session string `json:"session"`
}

// UIMove is the person moving a placed node to another placement. Node is
// the node's id, placed:<owner>:<id> (the request's own id is its id).
type UIMove struct {
	Envelope
	Session   string `json:"session"`
	Node      string `json:"node"`
	Placement string `json:"placement"`
}

// UIHide is the person hiding a placed node, placed:<owner>:<id>.
type UIHide struct {
	Envelope
	Session string `json:"session"`
	Node    string `json:"node"`
}

// UISave is the person keeping a placed node where it is now: the server
// writes [ui.placements."<id>"] placement into its config file, so the
// surface goes there from the next session on.
type UISave struct {
	Envelope
	Session string `json:"session"`
	Node    string `json:"node"`
}

// UIIntent is a person's committed action on a placed component, node
// placed:<owner>:<id>: an action its structure declares in on (press,
// submit, select, open), with what came with it in Value. An open of an
// href the component shows is a link, which the host opens; every other
// action goes to the component's owner.
type UIIntent struct {
	Envelope
	Session string          `json:"session"`
	Node    string          `json:"node"`
	Action  string          `json:"action"`
	Value   json.RawMessage `json:"value,omitempty"`
}

// A2UIAction is an action an A2UI renderer sent back from a surface of the
// A2UI face (a2ui=1): Message is the renderer's v0.9 client message,
// {"version": "v0.9", "action": {name, surfaceId, sourceComponentId,
// timestamp, context}}, or the bare action object, as AG-UI clients put it
// in forwardedProps.a2uiAction.userAction. Its surfaceId is the placed node
// (placed:<owner>:<id>); the server checks it and the action as ui.intent
// does, and delivers the intent to the node's owner.
type A2UIAction struct {
	Envelope
	Session string          `json:"session"`
	Message json.RawMessage `json:"message"`
}

// ConsentAnswer answers a pending consent request with one of the options
// its orrery.consent.requested offered. Only a client that draws consent may
// send it; the first answer wins.
type ConsentAnswer struct {
	Envelope
	Session string `json:"session"`
	Request string `json:"request"`
	Option  string `json:"option"`
}

// WorkspaceFiles lists files of a session's workspace, for a client that
// completes @mentions. With Prefix, the regular files whose path relative
// to the workspace root starts with Prefix (or, for a Prefix without "/",
// whose base name does), nearest the root first. With Query instead, the
// files whose path contains Query's characters in order, ignoring case
// (a fuzzy match), best first, each with the offsets it matched
// (WorkspaceFilesReply.Matches). At most Limit of them (50 when 0, at most
// 1000). .git and node_modules are never listed, nor hidden entries unless
// Prefix or Query names them. A request may not carry both.
type WorkspaceFiles struct {
	Envelope
	Session string `json:"session"`
	Prefix  string `json:"prefix,omitempty"`
	Query   string `json:"query,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

// WorkspaceFilesReply is the value of a WorkspaceFiles reply: the paths,
// relative to the workspace root with "/" between elements. Truncated is
// set when more files matched than were listed, or the walk stopped at its
// bound. Matches is set for a Query: for each path, the offsets in it,
// counted in characters (Unicode code points) from 0, of the characters
// the query matched, for a client to highlight.
type WorkspaceFilesReply struct {
	Files     []string `json:"files"`
	Matches   [][]int  `json:"matches,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
}

// Elements a client may declare it draws (hello.draws, GET /events?draws=).
// A client that declares anything must draw every element of RequiredDraws.
const (
	DrawThread    = "thread"    // messages, their streamed text and the user's own
	DrawReasoning = "reasoning" // reasoning messages
	DrawTools     = "tools"     // tool calls, their arguments and results
	DrawSurfaces  = "surfaces"  // surfaces in the shared state
	DrawConsent   = "consent"   // consent requests, which only such a client may answer
)

// RequiredDraws are the elements every declaring client must draw.
var RequiredDraws = []string{DrawThread, DrawTools}

// CheckDraws returns an error naming the first required element draws
// lacks. An empty declaration is accepted: such a client only watches.
func CheckDraws(client string, draws []string) error {
	if len(draws) == 0 {
		return nil
	}
	have := make(map[string]bool, len(draws))
	for _, d := range draws {
		have[d] = true
	}
	for _, req := range RequiredDraws {
		if !have[req] {
			name := client
			if name == "" {
				name = "this client"
			}
			return fmt.Errorf("%s declares draws %s but lacks %q, which every client must draw (required: %s)",
				name, strings.Join(draws, ","), req, strings.Join(RequiredDraws, ", "))
		}
	}
	return nil
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
	"session.new":     func() Request { return new(SessionNew) },
	"session.list":    func() Request { return new(SessionList) },
	"session.read":    func() Request { return new(SessionRead) },
	"run.send":        func() Request { return new(RunSend) },
	"run.cancel":      func() Request { return new(RunCancel) },
	"hello":           func() Request { return new(Hello) },
	"session.attach":  func() Request { return new(SessionAttach) },
	"session.detach":  func() Request { return new(SessionDetach) },
	"ui.move":         func() Request { return new(UIMove) },
	"ui.hide":         func() Request { return new(UIHide) },
	"ui.save":         func() Request { return new(UISave) },
	"ui.intent":       func() Request { return new(UIIntent) },
	"a2ui.action":     func() Request { return new(A2UIAction) },
	"consent.answer":  func() Request { return new(ConsentAnswer) },
	"workspace.files": func() Request { return new(WorkspaceFiles) },
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
	case strings.Contains(err.Error(), "unexpected end of JSON input"):
		return fmt.Errorf("%s is empty or cut short: send one whole JSON object", what)
	default:
		return fmt.Errorf("%s: %v", what, err)
	}
}

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
