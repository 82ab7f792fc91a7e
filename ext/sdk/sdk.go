// Package sdk is the Go SDK for Orrery extensions. An extension is a
// program that the host starts with JSON-RPC on its stdin and stdout; with
// this package it is a few lines:
//
//	func main() {
//		sdk.Main(sdk.Extension{
//			OnLoad: func(ctx context.Context, h *sdk.Host) error {
//				return h.UI().Show(ctx, sdk.Show{ID: "hello", Placement: "pane.right",
//					Surface: sdk.Text("hello from Go")})
//			},
//		})
//	}
//
// Calls on a Host take effect in the order made: Show then Data(id).Set
// under the same id never race, even when sent without waiting (the Go
// variants). Handlers of ui/event and session events run one at a time, in
// order, on the connection: start long work on a goroutine.
package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/getorrery/orrery/ext/jsonrpc"
)

// Extension is what an extension does. Every field is optional.
type Extension struct {
	// OnLoad runs when the host sends ext/load: draw the declared
	// placements here. ui calls made from it are answered at once and
	// applied in order once the session's screen is up.
	OnLoad func(ctx context.Context, h *Host) error
	// Tools handle the tools the manifest declares, by name.
	Tools map[string]ToolFunc
	// OnEvent hears every committed action on a component the extension
	// showed; Host.UI().OnEvent hears one id.
	OnEvent func(ctx context.Context, h *Host, e Event)
	// OnSessionEvent hears the session events the manifest subscribes to.
	OnSessionEvent func(ctx context.Context, h *Host, e SessionEvent)
	// OnHubMessage hears what the run's event hub delivers to the
	// extension's seat (ext://<name>): posts, sends (ExpectsReply set;
	// answer with Host.Call "hub/reply") and topic relays.
	OnHubMessage func(ctx context.Context, h *Host, m HubMessage)
}

// HubMessage is one hub/message: what the event hub delivered.
type HubMessage struct {
	From          string          `json:"from,omitempty"`
	To            string          `json:"to,omitempty"`
	Topic         string          `json:"topic,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	CorrelationID string          `json:"correlationId,omitempty"`
	ExpectsReply  bool            `json:"expectsReply,omitempty"`
}

// ToolFunc runs one call of a tool with its JSON arguments.
type ToolFunc func(ctx context.Context, h *Host, args json.RawMessage) (ToolResult, error)

// ToolResult is a tool's answer: text for the model, and optionally a
// surface for a screen. Error marks a failure the model should read.
type ToolResult struct {
	Text    string          `json:"text"`
	Error   bool            `json:"error,omitempty"`
	Surface json.RawMessage `json:"surface,omitempty"`
}

// Event is a committed action (ui/event): a press, a submit, a choice.
type Event struct {
	ID     string          `json:"id"`
	Action string          `json:"action"`
	Value  json.RawMessage `json:"value,omitempty"`
}

// SessionEvent is one session event the extension subscribes to: its seq,
// its AG-UI type, its name (a CUSTOM event's name, else the type) and the
// whole frame.
type SessionEvent struct {
	Seq   uint64          `json:"seq"`
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Event json.RawMessage `json:"event"`
}

// Load is what the host says in ext/load.
type Load struct {
	API        string `json:"api"`
	Name       string `json:"name"`
	Version    string `json:"version"`
	Session    string `json:"session"`
	Placements []struct {
		ID        string `json:"id"`
		Placement string `json:"placement"`
		Title     string `json:"title"`
	} `json:"placements"`
}

// Main serves ext on stdin and stdout until the host closes them, and exits
// the process: 0 on a clean end, 1 (with the reason on stderr) otherwise.
func Main(ext Extension) {
	if err := Serve(context.Background(), os.Stdin, os.Stdout, ext); err != nil {
		fmt.Fprintln(os.Stderr, "extension:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Serve speaks the extension protocol on r and w until r ends or ctx is
// done.
func Serve(ctx context.Context, r io.Reader, w io.Writer, ext Extension) error {
	conn := jsonrpc.NewConn(r, w, 0)
	h := &Host{conn: conn, ext: ext, events: make(chan func(), 256), handlers: make(map[string]map[int]func(context.Context, Event))}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case fn := <-h.events:
				fn()
			case <-ctx.Done():
				return
			}
		}
	}()
	err := conn.Run(func(m *jsonrpc.Message) { h.handle(ctx, m) }, nil)
	cancel()
	<-done
	return err
}

// Host is the extension's handle on the host.
type Host struct {
	conn   *jsonrpc.Conn
	ext    Extension
	events chan func()

	mu       sync.Mutex // guards load, handlers and nextID
	load     Load
	handlers map[string]map[int]func(context.Context, Event)
	nextID   int
}

// Load returns what the host said in ext/load.
func (h *Host) Load() Load {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.load
}

func (h *Host) handle(ctx context.Context, m *jsonrpc.Message) {
	switch m.Method {
	case "ext/ping":
		_ = h.conn.Reply(m.ID, nil, nil)
	case "ext/load":
		var l Load
		_ = json.Unmarshal(m.Params, &l)
		h.mu.Lock()
		h.load = l
		h.mu.Unlock()
		go func() {
			var rerr *jsonrpc.Error
			if h.ext.OnLoad != nil {
				if err := h.ext.OnLoad(ctx, h); err != nil {
					rerr = jsonrpc.Errorf(jsonrpc.CodeInternalError, "onLoad: %v", err)
				}
			}
			_ = h.conn.Reply(m.ID, nil, rerr)
		}()
	case "tools/call":
		go h.callTool(ctx, m)
	case "ui/event":
		var e Event
		if json.Unmarshal(m.Params, &e) != nil {
			return
		}
		h.queue(ctx, func() { h.dispatch(ctx, e) })
	case "session/event":
		var e SessionEvent
		if json.Unmarshal(m.Params, &e) != nil || h.ext.OnSessionEvent == nil {
			return
		}
		h.queue(ctx, func() { h.ext.OnSessionEvent(ctx, h, e) })
	case "hub/message":
		var hm HubMessage
		if json.Unmarshal(m.Params, &hm) != nil || h.ext.OnHubMessage == nil {
			return
		}
		h.queue(ctx, func() { h.ext.OnHubMessage(ctx, h, hm) })
	default:
		if m.IsRequest() {
			_ = h.conn.Reply(m.ID, nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "this extension does not serve %s", m.Method))
		}
	}
}

func (h *Host) queue(ctx context.Context, fn func()) {
	select {
	case h.events <- fn:
	case <-ctx.Done():
	}
}

type traceparentKey struct{}

// Traceparent is the W3C traceparent of the host's tools/call whose
// handler got ctx ("" when Orrery is not tracing): an extension that
// traces with OpenTelemetry makes its spans children of the tool call's by
// extracting it (propagation.TraceContext with a MapCarrier).
func Traceparent(ctx context.Context) string {
	s, _ := ctx.Value(traceparentKey{}).(string)
	return s
}

func (h *Host) callTool(ctx context.Context, m *jsonrpc.Message) {
	var q struct {
		Name      string          `json:"name"`
		ID        string          `json:"id"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      struct {
			Traceparent string `json:"traceparent"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &q); err != nil {
		_ = h.conn.Reply(m.ID, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "tools/call params: %v", err))
		return
	}
	fn, ok := h.ext.Tools[q.Name]
	if !ok {
		_ = h.conn.Reply(m.ID, ToolResult{Text: "this extension has no tool " + q.Name, Error: true}, nil)
		return
	}
	if q.Meta.Traceparent != "" {
		ctx = context.WithValue(ctx, traceparentKey{}, q.Meta.Traceparent)
	}
	res, err := fn(ctx, h, q.Arguments)
	if err != nil {
		res = ToolResult{Text: err.Error(), Error: true}
	}
	_ = h.conn.Reply(m.ID, res, nil)
}

func (h *Host) dispatch(ctx context.Context, e Event) {
	h.mu.Lock()
	var fns []func(context.Context, Event)
	for _, fn := range h.handlers[e.ID] {
		fns = append(fns, fn)
	}
	h.mu.Unlock()
	for _, fn := range fns {
		fn(ctx, e)
	}
	if h.ext.OnEvent != nil {
		h.ext.OnEvent(ctx, h, e)
	}
}

// Call sends any method and waits for its result.
func (h *Host) Call(ctx context.Context, method string, params, result any) error {
	return h.conn.Call(ctx, method, params, result)
}

// Go sends any method without waiting: calls sent one after another reach
// the host, and take effect, in that order. Wait on the result when it
// matters.
func (h *Host) Go(method string, params any) *jsonrpc.Pending {
	return h.conn.Go(method, params)
}

// UI returns the calls on the extension's surfaces.
func (h *Host) UI() UI { return UI{h: h} }

// State returns the calls on the extension's shared state keys.
func (h *Host) State() State { return State{h: h} }

// Tools returns the calls on the extension's tools.
func (h *Host) Tools() Tools { return Tools{h: h} }

// Append adds text to the conversation as a host message, which the model
// reads on its next turn; it starts no turn.
func (h *Host) Append(ctx context.Context, text string) error {
	return h.conn.Call(ctx, "session/append", map[string]string{"text": text}, nil)
}

// Complete asks the session's model for one answer to prompt.
func (h *Host) Complete(ctx context.Context, system, prompt string) (string, error) {
	var res struct {
		Text string `json:"text"`
	}
	msgs := []map[string]string{{"id": "m1", "role": "user", "content": prompt}}
	err := h.conn.Call(ctx, "model/complete", map[string]any{"system": system, "messages": msgs}, &res)
	return res.Text, err
}

// Notify shows a notice from the extension (info, warning or error).
func (h *Host) Notify(ctx context.Context, level, text string) error {
	return h.conn.Call(ctx, "ui/notify", map[string]string{"level": level, "text": text}, nil)
}

// Show is ui/show's params: exactly one of Surface, Component or
// Structure; Data is a component's or a structure's first data.
type Show struct {
	ID        string          `json:"id"`
	Placement string          `json:"placement"`
	Title     string          `json:"title,omitempty"`
	Surface   json.RawMessage `json:"surface,omitempty"`
	Component string          `json:"component,omitempty"`
	Structure json.RawMessage `json:"structure,omitempty"`
	Data      any             `json:"data,omitempty"`
	Fallback  json.RawMessage `json:"fallback,omitempty"`
}

// Text is a text surface.
func Text(s string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"kind": map[string]string{"t": "text", "value": s}})
	return b
}

// UI is the extension's surfaces.
type UI struct{ h *Host }

// Show places a surface, a component or a structure, or replaces what the
// extension placed under the same id.
func (u UI) Show(ctx context.Context, s Show) error { return u.h.conn.Call(ctx, "ui/show", s, nil) }

// Hide removes what the extension placed under id.
func (u UI) Hide(ctx context.Context, id string) error {
	return u.h.conn.Call(ctx, "ui/hide", map[string]string{"id": id}, nil)
}

// Data returns the data of the component shown under id.
func (u UI) Data(id string) Data { return Data{h: u.h, id: id} }

// OnEvent calls fn for every committed action on the component id until
// the returned stop is called.
func (u UI) OnEvent(id string, fn func(ctx context.Context, e Event)) (stop func()) {
	h := u.h
	h.mu.Lock()
	h.nextID++
	n := h.nextID
	if h.handlers[id] == nil {
		h.handlers[id] = make(map[int]func(context.Context, Event))
	}
	h.handlers[id][n] = fn
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.handlers[id], n)
		h.mu.Unlock()
	}
}

// Data is one component instance's data.
type Data struct {
	h  *Host
	id string
}

// ErrNotObject refuses data that is not one JSON object before it is sent.
var ErrNotObject = errors.New("sdk: component data must be one JSON object")

// Set replaces the whole data object; the host diffs it into the smallest
// change.
func (d Data) Set(ctx context.Context, obj any) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("ui data %s: %w", d.id, err)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return ErrNotObject
	}
	return d.h.conn.Call(ctx, "ui/data", map[string]any{"id": d.id, "set": json.RawMessage(raw)}, nil)
}

// Patch applies RFC 6902 operations, in order, all or none.
func (d Data) Patch(ctx context.Context, ops []PatchOp) error {
	return d.h.conn.Call(ctx, "ui/data", map[string]any{"id": d.id, "patch": ops}, nil)
}

// PatchOp is one RFC 6902 operation.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
	From  string `json:"from,omitempty"`
}

// State is the extension's shared state keys; clients watching a key get
// orrery.state.changed.
type State struct{ h *Host }

// Set sets key to value (nil removes it).
func (s State) Set(ctx context.Context, key string, value any) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("state %s: %w", key, err)
	}
	return s.h.conn.Call(ctx, "state/set", map[string]any{"key": key, "value": json.RawMessage(raw)}, nil)
}

// Get reads key into v and reports whether it was set.
func (s State) Get(ctx context.Context, key string, v any) (bool, error) {
	var res struct {
		Found bool            `json:"found"`
		Value json.RawMessage `json:"value"`
	}
	if err := s.h.conn.Call(ctx, "state/get", map[string]string{"key": key}, &res); err != nil {
		return false, err
	}
	if !res.Found {
		return false, nil
	}
	return true, json.Unmarshal(res.Value, v)
}

// Tools is the extension's tools.
type Tools struct{ h *Host }

// Hide hides a tool of the extension from the model's next runs.
func (t Tools) Hide(ctx context.Context, name string) error {
	return t.h.conn.Call(ctx, "tools/hide", map[string]string{"name": name}, nil)
}

// Show shows a hidden tool again.
func (t Tools) Show(ctx context.Context, name string) error {
	return t.h.conn.Call(ctx, "tools/show", map[string]string{"name": name}, nil)
}

// Tool is a tool an extension adds at run time with Register.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	// ReadOnly tools are allowed by the consent gate by default.
	ReadOnly bool `json:"read_only,omitempty"`
}

// Register adds a tool the model may call from its next run; its calls
// reach Extension.Tools[t.Name].
func (t Tools) Register(ctx context.Context, tool Tool) error {
	return t.h.conn.Call(ctx, "ext/register", map[string]Tool{"tool": tool}, nil)
}

// Unregister removes a tool added with Register.
func (t Tools) Unregister(ctx context.Context, name string) error {
	return t.h.conn.Call(ctx, "ext/unregister", map[string]string{"tool": name}, nil)
}
