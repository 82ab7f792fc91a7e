package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/ui"
)

// Names of the CUSTOM events extensions cause.
const (
	// StateChangedEvent announces a new value of a shared state key.
	StateChangedEvent = "orrery.state.changed"
)

// StateChanged is the value of an orrery.state.changed event. Key is
// "<owner>/<key>", such as "ext:ci/failed"; a Value of null means the key
// was removed.
type StateChanged struct {
	Key   string          `json:"key"`
	Owner string          `json:"owner"`
	Value json.RawMessage `json:"value"`
}

// StateKey is the full name of owner's key in the shared state.
func StateKey(owner ui.Owner, key string) string { return string(owner) + "/" + key }

// checkStateKey refuses a key that is empty, too long or holds a control
// character.
func checkStateKey(key string) error {
	if key == "" || len(key) > 128 || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return &RequestError{Msg: fmt.Sprintf("state key %q is not valid: use 1 to 128 printable characters, such as \"build.failed\"", key)}
	}
	return nil
}

// SetState sets owner's state key to value (JSON; null or empty removes
// it) and logs orrery.state.changed. An owner sets only its own keys: the
// key is stored under owner's name.
func (s *Session) SetState(ctx context.Context, owner ui.Owner, key string, value json.RawMessage) error {
	if err := checkStateKey(key); err != nil {
		return err
	}
	if len(value) == 0 {
		value = json.RawMessage("null")
	}
	if !json.Valid(value) {
		return &RequestError{Msg: fmt.Sprintf("the value of state key %q is not valid JSON: send a JSON value", key)}
	}
	ev, err := json.Marshal(StateChanged{Key: StateKey(owner, key), Owner: string(owner), Value: value})
	if err != nil {
		return fmt.Errorf("encode state change: %w", err)
	}
	var eerr error
	if derr := s.do(ctx, func() { eerr = s.emit(s.runID(), &protocol.Custom{Name: StateChangedEvent, Value: ev}) }); derr != nil {
		return derr
	}
	return eerr
}

// State returns the value of owner's state key, and whether it is set.
func (s *Session) State(ctx context.Context, owner ui.Owner, key string) (json.RawMessage, bool, error) {
	if err := checkStateKey(key); err != nil {
		return nil, false, err
	}
	var v json.RawMessage
	var ok bool
	err := s.do(ctx, func() {
		s.assertActor()
		v, ok = s.extState[StateKey(owner, key)]
	})
	return v, ok, err
}

// applyExtension folds the events extensions cause into the actor's state:
// state keys. Runs on the actor, or in load before it starts.
func (s *Session) applyExtension(ev protocol.Event) {
	c, ok := ev.(*protocol.Custom)
	if !ok || c.Name != StateChangedEvent {
		return
	}
	var sc StateChanged
	if json.Unmarshal(c.Value, &sc) != nil || sc.Key == "" {
		return
	}
	if s.extState == nil {
		s.extState = make(map[string]json.RawMessage)
	}
	if string(sc.Value) == "null" {
		delete(s.extState, sc.Key)
		return
	}
	s.extState[sc.Key] = sc.Value
}

// Notify logs an orrery.notice from ext (an extension's name; empty for the
// host) at level ("info", "warning" or "error").
func (s *Session) Notify(ctx context.Context, ext, level, text string) error {
	v, err := json.Marshal(Notice{Ext: ext, Level: level, Text: text})
	if err != nil {
		return fmt.Errorf("encode notice: %w", err)
	}
	var eerr error
	if derr := s.do(ctx, func() { eerr = s.emit(s.runID(), &protocol.Custom{Name: NoticeEvent, Value: v}) }); derr != nil {
		return derr
	}
	return eerr
}

// AppendExtMessage adds owner's text to the conversation (session/append)
// as a host message from owner, which the model reads on its next turn. It
// starts no turn. It returns the message's id.
func (s *Session) AppendExtMessage(ctx context.Context, owner ui.Owner, text string) (string, error) {
	if strings.TrimSpace(text) == "" {
		return "", &RequestError{Msg: "the message is empty: send text"}
	}
	var id string
	var err error
	if derr := s.do(ctx, func() { id, err = s.hostMessage(string(owner), "["+string(owner)+"] "+text, false) }); derr != nil {
		return "", derr
	}
	return id, err
}

// Complete asks the session's model for one answer to msgs, with no tools,
// and returns its text. It is what an extension's model/complete does; it
// runs outside the actor and is not logged.
func (s *Session) Complete(ctx context.Context, msgs []protocol.Message) (string, agent.Usage, error) {
	var spec string
	if err := s.do(ctx, func() { spec = s.model() }); err != nil {
		return "", agent.Usage{}, err
	}
	p, err := s.k.provider(spec)
	if err != nil {
		return "", agent.Usage{}, err
	}
	var b strings.Builder
	usage, err := p.Stream(ctx, agent.Request{Messages: msgs}, func(d agent.Delta) error {
		if d.Kind == agent.DeltaText {
			b.WriteString(d.Text)
		}
		return nil
	})
	if err != nil {
		return "", usage, fmt.Errorf("model %s: %w", spec, err)
	}
	return b.String(), usage, nil
}

// extTools are the tools extensions add to one session, by owner, and the
// ones each has hidden. They are read by the loop goroutine when a run
// starts, so they are guarded by a mutex rather than owned by the actor.
type extTools struct {
	mu     sync.Mutex // guards byName and hidden
	byName map[string]extTool
	hidden map[string]bool
}

type extTool struct {
	owner ui.Owner
	tool  tool.Tool
}

// SetExtTools replaces the tools owner adds to this session with tools
// (nil removes them). A name the kernel's own tools or another owner
// already use is refused, and nothing changes.
func (s *Session) SetExtTools(owner ui.Owner, tools []tool.Tool) error {
	x := &s.ext
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, t := range tools {
		name := t.Spec().Name
		if _, ok := s.k.cfg.Tools.Lookup(name); ok {
			return &RequestError{Msg: fmt.Sprintf("tool %s is one of the kernel's own tools: rename %s's tool", name, owner)}
		}
		if _, ok := s.k.cfg.Searchable.Lookup(name); ok {
			return &RequestError{Msg: fmt.Sprintf("tool %s is already provided (by an MCP server or the kernel): rename %s's tool", name, owner)}
		}
		if have, ok := x.byName[name]; ok && have.owner != owner {
			return &RequestError{Msg: fmt.Sprintf("tool %s is already provided by %s: rename %s's tool", name, have.owner, owner)}
		}
	}
	for name, t := range x.byName {
		if t.owner == owner {
			delete(x.byName, name)
			delete(x.hidden, name)
		}
	}
	if x.byName == nil {
		x.byName = make(map[string]extTool)
		x.hidden = make(map[string]bool)
	}
	for _, t := range tools {
		x.byName[t.Spec().Name] = extTool{owner: owner, tool: t}
	}
	return nil
}

// SetToolHidden hides (or shows again) owner's tool name from the model's
// next runs. An owner hides only its own tools.
func (s *Session) SetToolHidden(owner ui.Owner, name string, hidden bool) error {
	x := &s.ext
	x.mu.Lock()
	defer x.mu.Unlock()
	t, ok := x.byName[name]
	if !ok || t.owner != owner {
		return &RequestError{Msg: fmt.Sprintf("%s provides no tool %s: name one of its own tools (declared in [[provides.tools]] or added with ext/register)", owner, name)}
	}
	if hidden {
		x.hidden[name] = true
	} else {
		delete(x.hidden, name)
	}
	return nil
}

// ExtToolNames returns the names of the tools extensions add to this
// session that the model sees now, sorted.
func (s *Session) ExtToolNames() []string {
	x := &s.ext
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	for name := range x.byName {
		if !x.hidden[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// runTools returns the tools a run offers the model: the kernel's own and
// the visible tools of extensions.
func (s *Session) runTools() *tool.Set {
	x := &s.ext
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.byName) == len(x.hidden) {
		return s.k.cfg.Tools
	}
	var tools []tool.Tool
	for _, spec := range s.k.cfg.Tools.Specs() {
		t, _ := s.k.cfg.Tools.Lookup(spec.Name)
		tools = append(tools, t)
	}
	for name, t := range x.byName {
		if !x.hidden[name] {
			tools = append(tools, t.tool)
		}
	}
	return tool.NewSet(tools...)
}
