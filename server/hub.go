package server

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// seatTable holds the hub seats of connected clients. client://NAME is one
// seat on the hub however many connections named NAME in their hello:
// every one of them gets what the hub delivers to it, and the seat is left
// when the last one ends.
type seatTable struct {
	mu    sync.Mutex // guards seats; taken before the hub's own lock
	seats map[string]*seat
}

type seat struct {
	detach  func()
	holders map[*conn]struct{}
}

// takeSeat gives c a share of its client's seat on the hub. A server with
// no hub, or a connection that named no client, takes none.
func (s *Server) takeSeat(c *conn) {
	h := s.cfg.Hub
	if h == nil || c.client == "" {
		return
	}
	addr := hub.Client(c.client)
	t := &s.seats
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.seats[addr]; st != nil {
		st.holders[c] = struct{}{}
		return
	}
	st := &seat{holders: map[*conn]struct{}{c: {}}}
	detach, err := h.Attach(addr, func(m hub.Message) { s.deliverSeat(addr, m) })
	if err != nil {
		// A client name that is no hub address ("orrery watch") only
		// means the client takes no seat: not worth a warning in the log of
		// every kernel it connects to (orrery run's is on its stderr).
		c.log.Info("no hub seat for this client", "seat", addr, "err", err)
		return
	}
	st.detach = detach
	if t.seats == nil {
		t.seats = make(map[string]*seat)
	}
	t.seats[addr] = st
}

// leaveSeat ends c's share of its seat; the last holder leaves it.
func (s *Server) leaveSeat(c *conn) {
	if s.cfg.Hub == nil || c.client == "" {
		return
	}
	addr := hub.Client(c.client)
	t := &s.seats
	t.mu.Lock()
	st := t.seats[addr]
	if st == nil {
		t.mu.Unlock()
		return
	}
	delete(st.holders, c)
	if len(st.holders) == 0 {
		// Under the lock, so a connection taking the seat at this moment
		// finds it either held or free on the hub, never half left.
		delete(t.seats, addr)
		st.detach()
	}
	t.mu.Unlock()
}

// deliverSeat writes what the hub delivered to seat addr, as a CUSTOM
// orrery.hub.message frame of seq 0 and no session, to every connection
// holding it. A connection whose queue is full is closed as slow.
func (s *Server) deliverSeat(addr string, m hub.Message) {
	value, _ := json.Marshal(protocol.HubMessage{To: addr, From: m.From, Topic: m.Topic, Payload: m.Payload,
		CorrelationID: m.CorrelationID, ExpectsReply: m.ExpectsReply})
	frame, err := json.Marshal(&protocol.Custom{
		Base:  protocol.Base{Type: protocol.TypeCustom, Timestamp: time.Now().UnixMilli(), Metadata: &protocol.Metadata{Orrery: &protocol.OrreryMeta{}}},
		Name:  protocol.HubMessageEvent,
		Value: value,
	})
	if err != nil {
		s.log.Error("encode a hub message", "seat", addr, "err", err)
		return
	}
	t := &s.seats
	t.mu.Lock()
	var holders []*conn
	if st := t.seats[addr]; st != nil {
		for c := range st.holders {
			holders = append(holders, c)
		}
	}
	t.mu.Unlock()
	for _, c := range holders {
		if !c.out.tryPush(frame) {
			c.cancel(&closeError{closeSlow, "too slow to take hub messages: reconnect, and attach with since=<last seq>"})
		}
	}
}

// hubFor returns the hub and the caller's seat address, or a refusal
// saying what to do.
func (s *Server) hubFor(caller kernel.Caller, kind string) (*hub.Hub, string, error) {
	if s.cfg.Hub == nil {
		return nil, "", &kernel.RequestError{Msg: kind + ": this server has no event hub: send hub requests to orrery serve"}
	}
	if caller.Client == "" {
		return nil, "", &kernel.RequestError{Msg: kind + " acts from the client's seat client://NAME: declare a client name (hello.client on a WebSocket or pipe, ?client=NAME on POST /control)"}
	}
	addr, err := hub.ParseAddress(hub.Client(caller.Client))
	if err != nil {
		return nil, "", &kernel.RequestError{Msg: kind + ": the client name " + caller.Client + " cannot be a hub seat: use letters, digits and dashes"}
	}
	return s.cfg.Hub, addr.String(), nil
}

// hubError turns a hub error into a refusal.
func hubError(kind string, err error) error {
	if err == nil {
		return nil
	}
	var re *kernel.RequestError
	if errors.As(err, &re) {
		return err
	}
	return &kernel.RequestError{Msg: kind + ": " + err.Error()}
}

// doHub carries out one hub.* request from caller. A hub.send waits for
// its reply (or its timeout, or ctx's end).
func (s *Server) doHub(ctx context.Context, caller kernel.Caller, req protocol.Request) (any, error) {
	kind := req.Head().T
	h, self, err := s.hubFor(caller, kind)
	if err != nil {
		return nil, err
	}
	switch q := req.(type) {
	case *protocol.HubPost:
		if err := h.Post(self, q.To, q.Payload); err != nil {
			return nil, hubError(kind, err)
		}
		return protocol.Empty{}, nil
	case *protocol.HubSend:
		if q.TimeoutMS < 0 {
			return nil, &kernel.RequestError{Msg: "hub.send: timeoutMs must be positive, or omitted for 30 seconds"}
		}
		m, err := h.Send(ctx, self, q.To, q.Payload, time.Duration(q.TimeoutMS)*time.Millisecond, q.CorrelationID)
		if err != nil {
			if errors.Is(err, hub.ErrTimeout) {
				return nil, &kernel.RequestError{Msg: "hub.send: " + err.Error() + ": send again with a longer timeoutMs, or do without the answer"}
			}
			return nil, hubError(kind, err)
		}
		return protocol.HubSendReply{CorrelationID: m.CorrelationID, Payload: m.Payload}, nil
	case *protocol.HubPublish:
		rep, err := h.Publish(self, q.Topic, q.Payload, q.RetainAs)
		if err != nil {
			return nil, hubError(kind, err)
		}
		out := protocol.HubPublishReply{Delivered: rep.Delivered}
		for _, r := range rep.Refused {
			out.Refused = append(out.Refused, r.Error())
		}
		return out, nil
	case *protocol.HubReply:
		if q.CorrelationID == "" {
			return nil, &kernel.RequestError{Msg: "hub.reply needs correlationId: answer the correlationId of an orrery.hub.message with expectsReply"}
		}
		if err := h.Reply(q.CorrelationID, q.Payload); err != nil {
			return nil, hubError(kind, err)
		}
		return protocol.Empty{}, nil
	case *protocol.HubSubscribe:
		if err := h.Subscribe(self, q.Topic); err != nil {
			if errors.Is(err, hub.ErrUnknownAddress) {
				return nil, &kernel.RequestError{Msg: "hub.subscribe: " + self + " has no seat to receive on: open a WebSocket or pipe whose hello names client " + caller.Client + ", and keep it open"}
			}
			return nil, hubError(kind, err)
		}
		return protocol.Empty{}, nil
	case *protocol.HubUnsubscribe:
		if err := h.Unsubscribe(self, q.Topic); err != nil {
			return nil, hubError(kind, err)
		}
		return protocol.Empty{}, nil
	}
	return nil, &kernel.RequestError{Msg: "request " + kind + " is not served here"}
}

// answerInput carries out input.answer.
func (s *Server) answerInput(ctx context.Context, caller kernel.Caller, q *protocol.InputAnswer) (any, error) {
	sess, err := s.sessionFor(ctx, q.Session)
	if err != nil {
		return nil, err
	}
	if q.Request == "" {
		return nil, &kernel.RequestError{Msg: "input.answer needs request: answer the request of an orrery.input.requested event"}
	}
	if err := sess.AnswerInput(ctx, caller, q.Request, q.Value); err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

// refuseInput carries out input.refuse.
func (s *Server) refuseInput(ctx context.Context, caller kernel.Caller, q *protocol.InputRefuse) (any, error) {
	sess, err := s.sessionFor(ctx, q.Session)
	if err != nil {
		return nil, err
	}
	if q.Request == "" {
		return nil, &kernel.RequestError{Msg: "input.refuse needs request: refuse the request of an orrery.input.requested event"}
	}
	if err := sess.RefuseInput(ctx, caller, q.Request); err != nil {
		return nil, err
	}
	return protocol.Empty{}, nil
}

// hubSends are a connection's hub.send requests waiting for their
// replies. Owned by the read loop until leaveHub.
type hubSends struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// sendAsync answers a hub.send on a connection from its own goroutine, so
// the connection goes on serving requests while the send waits.
func (c *conn) sendAsync(id string, q *protocol.HubSend) {
	if c.sends.ctx == nil {
		c.sends.ctx, c.sends.cancel = context.WithCancel(c.ctx)
	}
	caller := kernel.Caller{Client: c.client, Draws: c.draws}
	c.sends.wg.Add(1)
	go func() {
		defer c.sends.wg.Done()
		value, err := c.s.doHub(c.sends.ctx, caller, q)
		c.reply(id, value, err)
	}()
}

// leaveHub ends what the connection holds on the hub once its read loop
// is over: the sends still waiting, and its share of the seat.
func (c *conn) leaveHub() {
	if c.sends.cancel != nil {
		c.sends.cancel()
		c.sends.wg.Wait()
	}
	c.s.leaveSeat(c)
}
