package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/getorrery/orrery/bus"
	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/protocol"
)

// orrery run --events jsonl on a data dir another process holds speaks the
// same bus as on a kernel of its own, as a client of the holder over the
// dir's pipe:
//
//   - its connection names the watching program's seat (--client, else
//     hub.DefaultClient) and draws consent, so the holder asks it, and its
//     hub verbs act from that seat, which the connection holds;
//   - consent and questions are answered with consent.answer, input.answer
//     and input.refuse;
//   - cost.updated comes from the run's orrery.usage events, which the
//     run.send asks for (usageEvents) for this run alone.

// busSeat is the client name the bus's connection declares: its hub seat.
func (c *runCmd) busSeat() string {
	if c.client != "" {
		return c.client
	}
	return hub.DefaultClient
}

// remoteHub is the holder's event hub, reached over the client's
// connection, acting from its seat.
type remoteHub struct {
	ctx context.Context
	cl  *client.Client // set once dialled

	mu      sync.Mutex
	deliver func(hub.Message)
}

// onMessage hands a hub message the connection received to the bridge.
func (h *remoteHub) onMessage(m protocol.HubMessage) {
	h.mu.Lock()
	deliver := h.deliver
	h.mu.Unlock()
	if deliver != nil {
		deliver(hub.Message{From: m.From, To: m.To, Topic: m.Topic, Payload: m.Payload, CorrelationID: m.CorrelationID, ExpectsReply: m.ExpectsReply})
	}
}

// Attach implements bus.Hub: the connection holds the seat already; this
// routes what reaches it.
func (h *remoteHub) Attach(_ string, deliver func(hub.Message)) (func(), error) {
	h.mu.Lock()
	h.deliver = deliver
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.deliver = nil
		h.mu.Unlock()
	}, nil
}

// Post implements bus.Hub.
func (h *remoteHub) Post(_, to string, payload json.RawMessage) error {
	return h.cl.HubPost(h.ctx, to, payload)
}

// Send implements bus.Hub. Silence past the timeout is hub.ErrTimeout, as
// on a hub of this process.
func (h *remoteHub) Send(ctx context.Context, _, to string, payload json.RawMessage, timeout time.Duration, correlationID string) (hub.Message, error) {
	out, err := h.cl.HubSend(ctx, to, payload, timeout, correlationID)
	if err != nil {
		if strings.Contains(err.Error(), hub.ErrTimeout.Error()) {
			return hub.Message{CorrelationID: correlationID}, fmt.Errorf("%w (%v)", hub.ErrTimeout, err)
		}
		return hub.Message{}, err
	}
	return hub.Message{CorrelationID: out.CorrelationID, Payload: out.Payload}, nil
}

// Publish implements bus.Hub.
func (h *remoteHub) Publish(_, topic string, payload json.RawMessage, retainAs string) (hub.PublishReport, error) {
	rep, err := h.cl.HubPublish(h.ctx, topic, payload, retainAs)
	if err != nil {
		return hub.PublishReport{}, err
	}
	out := hub.PublishReport{Delivered: rep.Delivered}
	for _, r := range rep.Refused {
		out.Refused = append(out.Refused, errors.New(r))
	}
	return out, nil
}

// Reply implements bus.Hub.
func (h *remoteHub) Reply(correlationID string, payload json.RawMessage) error {
	return h.cl.HubReply(h.ctx, correlationID, payload)
}

// Subscribe implements bus.Hub.
func (h *remoteHub) Subscribe(_, topic string) error { return h.cl.HubSubscribe(h.ctx, topic) }

// Unsubscribe implements bus.Hub.
func (h *remoteHub) Unsubscribe(_, topic string) error { return h.cl.HubUnsubscribe(h.ctx, topic) }

// remoteSession is a session of the holder, answered over the connection.
type remoteSession struct {
	cl      *client.Client
	session string
}

func (s remoteSession) AnswerConsent(ctx context.Context, request, option string) error {
	return s.cl.AnswerConsent(ctx, s.session, request, option)
}

func (s remoteSession) AnswerInput(ctx context.Context, request, value string) error {
	return s.cl.AnswerInput(ctx, s.session, request, value)
}

func (s remoteSession) RefuseInput(ctx context.Context, request string) error {
	return s.cl.RefuseInput(ctx, s.session, request)
}

// runEventsClient runs prompt in session on the kernel cl is a client of
// and speaks the run event bus, as runEvents does on a kernel of this
// process.
func (c *runCmd) runEventsClient(ctx context.Context, cl *client.Client, rh *remoteHub, session, target, prompt string) error {
	log := newLogger(c.env, slog.LevelWarn)
	bg := context.WithoutCancel(ctx)
	rh.ctx, rh.cl = bg, cl
	w := bus.NewWriter(c.env.stdout)
	w.Logger = log
	br, err := bus.NewRemoteBridge(bg, w, remoteSession{cl, session}, rh, bus.Options{Client: c.busSeat(), Stream: c.stream, Logger: log})
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	defer br.Close()
	st, err := attachAtHead(bg, cl, session)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := br.Started(target); err != nil {
		return err
	}
	sent, err := cl.SendWith(bg, session, protocol.RunInput{Text: prompt},
		client.SendOptions{Permissions: c.wirePermissions(), UsageEvents: true})
	if err != nil {
		return err
	}
	runID := sent.RunID
	br.Follow(runID)
	go func() {
		if err := bus.ReadLines(ctx, c.env.stdin, log, func(in bus.Inbound) { br.Handle(bg, in) }); err != nil && ctx.Err() == nil {
			log.Warn("bus: stopped reading stdin", "err", err)
		}
		// Nobody can answer from here on: every question is refused.
		br.InputClosed()
	}()
	stop := context.AfterFunc(ctx, func() { _ = cl.Cancel(bg, session, runID) })
	defer stop()
	frames := runFrames{runID: runID}
	for {
		f, err := st.Next(bg)
		if err != nil {
			return fmt.Errorf("the session stopped before the run ended: %v", err)
		}
		kf, ok := frames.next(f)
		if !ok {
			continue
		}
		if done, code := br.Frame(kf); done {
			if code != 0 {
				return &exitCodeError{code: code, err: errors.New("")}
			}
			return nil
		}
	}
}
