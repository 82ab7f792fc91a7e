package ext

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/getorrery/orrery/ext/jsonrpc"
	"github.com/getorrery/orrery/hub"
)

// hubMethods are the calls on the run's event hub (Config.Hub). They run
// concurrently, like session/append: await one before a call that depends
// on it.
var hubMethods = map[string]bool{
	"hub/post": true, "hub/send": true, "hub/reply": true,
	"hub/publish": true, "hub/subscribe": true, "hub/unsubscribe": true,
}

// hubAddr is the extension's seat on the hub: ext://<name>.
func (in *Instance) hubAddr() string {
	return hub.Address{Scheme: hub.SchemeExt, Name: in.m.Extension.Name}.String()
}

// seat takes the extension's seat on the hub, once per instance. What the
// hub delivers to it reaches the process as a hub/message notification,
// started again if it is parked.
func (in *Instance) seat() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.detach != nil {
		return nil
	}
	if in.gone {
		return errors.New("the extension was unloaded")
	}
	detach, err := in.h.eventHub().Attach(in.hubAddr(), in.deliver)
	if err != nil {
		return fmt.Errorf("%w (one session at a time holds an extension's hub seat)", err)
	}
	in.detach = detach
	return nil
}

// unseat gives the hub seat up.
func (in *Instance) unseat() {
	in.mu.Lock()
	detach := in.detach
	in.detach = nil
	in.mu.Unlock()
	if detach != nil {
		detach()
	}
}

// hubMessage is the params of a hub/message notification.
type hubMessage = hub.Message

// deliver passes a hub message to the process: at once when it runs,
// otherwise once it started again. Messages to a process that cannot start
// are dropped with a log line.
func (in *Instance) deliver(m hub.Message) {
	in.mu.Lock()
	p := in.proc
	in.mu.Unlock()
	if p != nil {
		select {
		case <-p.loaded:
			p.touch()
			if err := p.conn.Notify("hub/message", hubMessage(m)); err == nil {
				return
			}
		default:
		}
	}
	in.h.wg.Add(1)
	go func() {
		defer in.h.wg.Done()
		ctx, cancel := context.WithTimeout(in.h.ctx, in.h.cfg.LoadTimeout)
		defer cancel()
		p, err := in.ensure(ctx)
		if err != nil {
			in.log.Warn("hub message dropped: the extension did not start", "from", m.From, "topic", m.Topic, "err", err)
			return
		}
		p.touch()
		if err := p.conn.Notify("hub/message", hubMessage(m)); err != nil {
			in.log.Warn("hub message dropped", "from", m.From, "err", err)
		}
	}()
}

// callHub runs one hub/* method for the extension.
func (p *process) callHub(ctx context.Context, m *jsonrpc.Message) (any, *jsonrpc.Error) {
	in := p.in
	h := in.h.eventHub()
	if h == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeRefused, "%s: this kernel runs no event hub (orrery serve has none yet; orrery run has one)", m.Method)
	}
	if err := in.seat(); err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeRefused, "%s: %v", m.Method, err)
	}
	from := in.hubAddr()
	hubErr := func(err error) *jsonrpc.Error { return jsonrpc.Errorf(jsonrpc.CodeRefused, "%s: %v", m.Method, err) }
	switch m.Method {
	case "hub/post":
		var q struct {
			To      string          `json:"to"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		if err := h.Post(from, q.To, q.Payload); err != nil {
			return nil, hubErr(err)
		}
		return nil, nil
	case "hub/send":
		var q struct {
			To        string          `json:"to"`
			Payload   json.RawMessage `json:"payload"`
			TimeoutMS int64           `json:"timeout_ms,omitempty"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
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
		reply, err := h.Send(cctx, from, q.To, q.Payload, time.Duration(q.TimeoutMS)*time.Millisecond, "")
		if err != nil {
			return nil, hubErr(err)
		}
		return reply, nil
	case "hub/reply":
		var q struct {
			CorrelationID string          `json:"correlationId"`
			Payload       json.RawMessage `json:"payload"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		if err := h.Reply(q.CorrelationID, q.Payload); err != nil {
			return nil, hubErr(err)
		}
		return nil, nil
	case "hub/publish":
		var q struct {
			Topic   string          `json:"topic"`
			Payload json.RawMessage `json:"payload"`
			Retain  string          `json:"retain,omitempty"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		rep, err := h.Publish(from, q.Topic, q.Payload, q.Retain)
		if err != nil {
			return nil, hubErr(err)
		}
		refused := make([]string, len(rep.Refused))
		for i, r := range rep.Refused {
			refused[i] = r.Error()
		}
		return map[string]any{"delivered": rep.Delivered, "refused": refused}, nil
	case "hub/subscribe", "hub/unsubscribe":
		var q struct {
			Topic string `json:"topic"`
		}
		if err := decodeParams(m, &q); err != nil {
			return nil, err
		}
		var err error
		if m.Method == "hub/subscribe" {
			err = h.Subscribe(from, q.Topic)
		} else {
			err = h.Unsubscribe(from, q.Topic)
		}
		if err != nil {
			return nil, hubErr(err)
		}
		return nil, nil
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q is unknown", m.Method)
}
