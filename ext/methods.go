package ext

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/getorrery/orrery/ext/jsonrpc"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// orderedMethods take effect in the order sent, through one queue per
// extension; uiMethods among them are held during ext/load.
var (
	orderedMethods = map[string]bool{
		"ui/show": true, "ui/hide": true, "ui/data": true, "ui/notify": true,
		"state/set": true, "state/get": true, "tools/hide": true, "tools/show": true,
		"ext/register": true, "ext/unregister": true,
	}
	concurrentMethods = map[string]bool{"session/append": true, "session/read": true, "model/complete": true}
)

// Methods returns every method an extension may call, sorted.
func Methods() []string {
	var out []string
	for m := range orderedMethods {
		out = append(out, m)
	}
	for m := range concurrentMethods {
		out = append(out, m)
	}
	for m := range hubMethods {
		out = append(out, m)
	}
	return sortedStrings(out)
}

func sortedStrings(s []string) []string {
	m := make(map[string]bool, len(s))
	for _, x := range s {
		m[x] = true
	}
	return sortedKeys(m)
}

// handle takes one request or notification from the extension, on the
// connection's reading goroutine.
func (p *process) handle(m *jsonrpc.Message) {
	p.touch()
	switch {
	case orderedMethods[m.Method]:
		j := job{m: m}
		if strings.HasPrefix(m.Method, "ui/") && p.loading.Load() && m.IsRequest() {
			if p.held.Add(1) > MaxHeld {
				p.held.Add(-1)
				p.reply(m, nil, jsonrpc.Errorf(jsonrpc.CodeRefused, "more than %d ui calls are waiting for ext/load to be answered: answer ext/load first, then show the rest", MaxHeld))
				return
			}
			j.held = true
			p.reply(m, nil, nil)
		}
		select {
		case p.queue <- j:
		default:
			p.fail(fmt.Sprintf("it flooded the host: more than %d calls waited unanswered; await answers before sending more", cap(p.queue)))
		}
	case concurrentMethods[m.Method] || hubMethods[m.Method]:
		select {
		case p.sem <- struct{}{}:
		default:
			p.reply(m, nil, jsonrpc.Errorf(jsonrpc.CodeRefused, "%d calls are already in flight: await some answers before sending more", cap(p.sem)))
			return
		}
		go func() {
			defer func() { <-p.sem }()
			res, err := p.call(m)
			p.reply(m, res, err)
		}()
	default:
		p.in.log.Warn("extension called an unknown method", "method", m.Method)
		p.reply(m, nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q is unknown: use one of %s", m.Method, strings.Join(Methods(), ", ")))
	}
}

// bad logs a message that was not valid JSON-RPC; the connection answered
// it already.
func (p *process) bad(e *jsonrpc.Error) {
	p.in.log.Warn("extension sent a bad message", "err", e.Message)
	p.in.notice(context.Background(), "warning", fmt.Sprintf("extension %s sent a bad message: %s", p.in.m.Extension.Name, e.Message))
}

func (p *process) reply(m *jsonrpc.Message, res any, err *jsonrpc.Error) {
	if !m.IsRequest() {
		if err != nil {
			p.in.notice(context.Background(), "warning", fmt.Sprintf("extension %s: %s refused: %s", p.in.m.Extension.Name, m.Method, err.Message))
		}
		return
	}
	if rerr := p.conn.Reply(m.ID, res, err); rerr != nil {
		p.in.log.Debug("reply", "err", rerr)
	}
}

// ordered applies the ordered calls one at a time, in the order read.
func (p *process) ordered() {
	for {
		select {
		case <-p.quit:
			return
		case j := <-p.queue:
			res, err := p.call(j.m)
			if j.held {
				p.held.Add(-1)
				if err != nil {
					p.in.notice(context.Background(), "warning", fmt.Sprintf("extension %s: %s made during ext/load was refused: %s", p.in.m.Extension.Name, j.m.Method, err.Message))
				}
				continue
			}
			p.reply(j.m, res, err)
		}
	}
}

// refusal turns a kernel error into the JSON-RPC error the extension reads.
func refusal(err error) *jsonrpc.Error {
	var re *kernel.RequestError
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je):
		return je
	case errors.As(err, &re):
		return jsonrpc.Errorf(jsonrpc.CodeRefused, "%s", re.Msg)
	}
	return jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", err)
}

func decodeParams(m *jsonrpc.Message, v any) *jsonrpc.Error {
	params := m.Params
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s params: %v; see docs/extensions.md for the fields", m.Method, err)
	}
	return nil
}

// ShowParams are ui/show's params: exactly one of Surface, Component or
// Structure.
type ShowParams struct {
	ID        string          `json:"id"`
	Placement string          `json:"placement"`
	Title     string          `json:"title,omitempty"`
	Surface   json.RawMessage `json:"surface,omitempty"`
	Component string          `json:"component,omitempty"`
	Structure json.RawMessage `json:"structure,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Fallback  json.RawMessage `json:"fallback,omitempty"`
}

// DataParams are ui/data's params: exactly one of Set or Patch.
type DataParams struct {
	ID    string          `json:"id"`
	Set   json.RawMessage `json:"set,omitempty"`
	Patch json.RawMessage `json:"patch,omitempty"`
}

// call runs one method for the extension and returns its result.
func (p *process) call(m *jsonrpc.Message) (any, *jsonrpc.Error) {
	in := p.in
	ctx := context.Background()
	if hubMethods[m.Method] {
		return p.callHub(ctx, m)
	}
	switch m.Method {
	case "ui/show":
		var q ShowParams
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		if err := in.show(ctx, kernel.ShowInput{ID: q.ID, Placement: q.Placement, Title: q.Title, Surface: q.Surface,
			Component: q.Component, Structure: q.Structure, Data: q.Data, Fallback: q.Fallback}); err != nil {
			return nil, refusal(err)
		}
		return nil, nil
	case "ui/hide":
		var q struct {
			ID string `json:"id"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		if err := in.s.Hide(ctx, in.owner, q.ID); err != nil {
			return nil, refusal(err)
		}
		in.mu.Lock()
		delete(in.shown, q.ID)
		in.mu.Unlock()
		return nil, nil
	case "ui/data":
		var q DataParams
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		if err := in.s.Data(ctx, in.owner, q.ID, kernel.DataUpdate{Set: q.Set, Patch: q.Patch}); err != nil {
			return nil, refusal(err)
		}
		return nil, nil
	case "ui/notify":
		var q struct {
			Level string `json:"level,omitempty"`
			Text  string `json:"text"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		switch q.Level {
		case "":
			q.Level = "info"
		case "info", "warning", "error":
		default:
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "ui/notify level %q is unknown: use info, warning or error", q.Level)
		}
		if err := in.s.Notify(ctx, in.m.Extension.Name, q.Level, q.Text); err != nil {
			return nil, refusal(err)
		}
		return nil, nil
	case "state/set":
		var q struct {
			Key   string          `json:"key"`
			Value json.RawMessage `json:"value"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		if err := in.s.SetState(ctx, in.owner, q.Key, q.Value); err != nil {
			return nil, refusal(err)
		}
		return nil, nil
	case "state/get":
		var q struct {
			Key string `json:"key"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		v, ok, err := in.s.State(ctx, in.owner, q.Key)
		if err != nil {
			return nil, refusal(err)
		}
		if !ok {
			return map[string]any{"found": false}, nil
		}
		return map[string]any{"found": true, "value": v}, nil
	case "tools/hide", "tools/show":
		var q struct {
			Name string `json:"name"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		if err := in.s.SetToolHidden(in.owner, q.Name, m.Method == "tools/hide"); err != nil {
			return nil, refusal(err)
		}
		return nil, nil
	case "ext/register":
		var q struct {
			Tool ToolDecl `json:"tool"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		if err := in.register(q.Tool); err != nil {
			return nil, refusal(err)
		}
		return nil, nil
	case "ext/unregister":
		var q struct {
			Tool string `json:"tool"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		if err := in.unregister(q.Tool); err != nil {
			return nil, refusal(err)
		}
		return nil, nil
	case "session/append":
		var q struct {
			Text string `json:"text"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		id, err := in.s.AppendExtMessage(ctx, in.owner, q.Text)
		if err != nil {
			return nil, refusal(err)
		}
		return map[string]string{"id": id}, nil
	case "session/read":
		var q struct {
			Since uint64 `json:"since,omitempty"`
			Limit int    `json:"limit,omitempty"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		if q.Limit <= 0 || q.Limit > 1000 {
			q.Limit = 1000
		}
		frames, head, err := in.s.Read(ctx, q.Since, q.Limit)
		if err != nil {
			return nil, refusal(err)
		}
		out := make([]json.RawMessage, len(frames))
		for i, f := range frames {
			out[i] = f.Data
		}
		return map[string]any{"frames": out, "head": head}, nil
	case "model/complete":
		var q struct {
			Messages []protocol.Message `json:"messages"`
			System   string             `json:"system,omitempty"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		if len(q.Messages) == 0 {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "model/complete needs messages: send [{\"id\":\"m1\",\"role\":\"user\",\"content\":\"…\"}]")
		}
		msgs := q.Messages
		if q.System != "" {
			msgs = append([]protocol.Message{{ID: "system", Role: protocol.RoleSystem, Content: protocol.TextContent(q.System)}}, msgs...)
		}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-p.quit:
				cancel()
			case <-cctx.Done():
			}
		}()
		text, usage, err := in.s.Complete(cctx, msgs)
		if err != nil {
			return nil, refusal(err)
		}
		return map[string]any{"text": text, "usage": map[string]int64{"inputTokens": usage.InputTokens, "outputTokens": usage.OutputTokens}}, nil
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q is unknown", m.Method)
}

// forwardEvents sends the session events the extension subscribes to, as
// session/event notifications, from the moment it loaded.
func (p *process) forwardEvents() {
	s := p.in.s
	head := s.Head()
	sub, err := s.Subscribe(context.Background(), &head)
	if err != nil {
		p.in.log.Warn("subscribe to session events", "err", err)
		return
	}
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	err = sub.Backlog(ctx, func(f kernel.Frame) error { return p.forward(f) })
	for err == nil {
		select {
		case <-ctx.Done():
			return
		case <-sub.Done():
			return
		case <-sub.Ready():
		}
		for _, f := range sub.Take(nil) {
			if err = p.forward(f); err != nil {
				break
			}
		}
	}
}

func (p *process) forward(f kernel.Frame) error {
	name := f.Type
	if f.Type == string(protocol.TypeCustom) {
		var c struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(f.Data, &c) == nil {
			name = c.Name
		}
	}
	if !p.in.m.Subscribes(name) && !p.in.m.Subscribes(f.Type) {
		return nil
	}
	return p.conn.Notify("session/event", map[string]any{"seq": f.Seq, "type": f.Type, "name": name, "event": json.RawMessage(f.Data)})
}
