package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/getorrery/orrery/agent/acp"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// OriHistory bounds the recorded events GET /acp/ws replays on connect.
const OriHistory = 4096

// oriCaller is how an ori browser that may answer consent appears to the
// kernel: it draws consent, so questions are put to it rather than failed
// closed.
var oriCaller = kernel.Caller{Client: "ori", Draws: []string{protocol.DrawConsent}}

// handleOri serves GET /acp/ws?session=ID: the ori relay's browser
// protocol, one JSON object per WebSocket text message. On connect it
// sends hello, the session's recorded history (at most OriHistory events),
// the permission requests still pending, then live events. It works for
// sessions of any agent: an ACP agent's updates are relayed verbatim, the
// built-in agent's frames are projected into ACP updates.
func (s *Server) handleOri(w http.ResponseWriter, r *http.Request) {
	var sess *kernel.Session
	if id := r.URL.Query().Get("session"); id != "" {
		var err error
		if sess, err = s.k.Session(r.Context(), id); err != nil {
			s.kernelError(w, r, err)
			return
		}
	}
	c, err := s.acceptWS(w, r)
	if err != nil {
		s.log.Info("websocket upgrade failed", "err", err)
		return
	}
	if !s.track() {
		c.Close(websocket.StatusGoingAway, "the server is shutting down")
		return
	}
	defer s.wg.Done()
	// coder/websocket closes a connection at once, without a close frame,
	// when its read's context ends: a revoked token closes it first, with
	// the reason, and only then ends the reads.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	stopRequest := context.AfterFunc(r.Context(), func() {
		var ce *closeError
		if errors.As(context.Cause(r.Context()), &ce) {
			c.Close(websocket.StatusCode(ce.code), ce.reason)
		}
		cancel()
	})
	defer stopRequest()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	// An ori browser answers the agent's permission requests only when its
	// connection earned it (see peer.mayConsent); any other watches.
	caller := kernel.Caller{Client: "ori"}
	if peerOf(r.Context()).mayConsent() {
		caller = oriCaller
	}
	o := &oriConn{s: s, c: c, sess: sess, caller: caller, pending: make(map[string]*oriPending)}
	err = o.serve(ctx)
	switch {
	case err == nil, errors.Is(err, context.Canceled), websocket.CloseStatus(err) != -1:
		c.Close(websocket.StatusNormalClosure, "")
	default:
		s.log.Info("ori connection ended", "err", err)
		c.Close(websocket.StatusInternalError, "the connection failed: reconnect to replay the session")
	}
}

// oriConn is one browser connection.
type oriConn struct {
	s    *Server
	c    *websocket.Conn
	sess *kernel.Session // nil when the browser named no session
	// caller is who the kernel sees: oriCaller (it draws consent) when the
	// connection may answer consent, else a watcher.
	caller kernel.Caller

	wmu sync.Mutex // serialises writes

	mu      sync.Mutex // guards pending and proj
	pending map[string]*oriPending
	proj    oriProjector
}

// oriPending is a permission request awaiting an answer.
type oriPending struct {
	msg     []byte // its permission_request message
	options []kernel.ConsentOption
	reject  string // the option that dismisses it (a reject, or deny)
}

func (o *oriConn) write(ctx context.Context, msg []byte) error {
	o.wmu.Lock()
	defer o.wmu.Unlock()
	return o.c.Write(ctx, websocket.MessageText, msg)
}

func oriMsg(typ string, fields map[string]any) []byte {
	if fields == nil {
		fields = map[string]any{}
	}
	fields["type"] = typ
	data, _ := json.Marshal(fields)
	return data
}

func (o *oriConn) sendError(ctx context.Context, msg string) error {
	return o.write(ctx, oriMsg("error", map[string]any{"message": msg}))
}

func (o *oriConn) serve(ctx context.Context) error {
	hello := map[string]any{"sessionId": "", "turnActive": false}
	var sub *kernel.Subscription
	if o.sess != nil {
		hello["sessionId"] = o.sess.ID()
		hello["turnActive"] = o.sess.Running()
		var zero uint64
		var err error
		sub, err = o.sess.SubscribeWith(ctx, kernel.SubscribeOptions{Since: &zero, Caller: o.caller})
		if err != nil {
			return err
		}
		defer sub.Close()
	}
	if err := o.write(ctx, oriMsg("hello", hello)); err != nil {
		return err
	}
	if sub != nil {
		if err := o.replay(ctx, sub); err != nil {
			return err
		}
	}
	errc := make(chan error, 2)
	go func() { errc <- o.read(ctx) }()
	if sub != nil {
		go func() { errc <- o.pump(ctx, sub) }()
	}
	return <-errc
}

// replay sends the recorded history (its last OriHistory events), then the
// permission requests still pending.
func (o *oriConn) replay(ctx context.Context, sub *kernel.Subscription) error {
	var history [][]byte
	err := sub.Backlog(ctx, func(f kernel.Frame) error {
		msgs, err := o.project(f, true)
		if err != nil {
			return err
		}
		history = append(history, msgs...)
		if len(history) > 2*OriHistory {
			history = append(history[:0], history[len(history)-OriHistory:]...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(history) > OriHistory {
		history = history[len(history)-OriHistory:]
	}
	for _, m := range history {
		if err := o.write(ctx, m); err != nil {
			return err
		}
	}
	o.mu.Lock()
	var pending [][]byte
	for _, p := range o.proj.order {
		if q := o.pending[p]; q != nil {
			pending = append(pending, q.msg)
		}
	}
	o.mu.Unlock()
	for _, m := range pending {
		if err := o.write(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// pump sends live events.
func (o *oriConn) pump(ctx context.Context, sub *kernel.Subscription) error {
	var frames []kernel.Frame
	for {
		select {
		case <-sub.Ready():
		case <-sub.Done():
			if err := sub.Err(); err != nil {
				return fmt.Errorf("session stream ended: %w", err)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
		frames = sub.Take(frames[:0])
		for _, f := range frames {
			msgs, err := o.project(f, false)
			if err != nil {
				return err
			}
			for _, m := range msgs {
				if err := o.write(ctx, m); err != nil {
					return err
				}
			}
		}
	}
}

// project turns one frame into browser messages. In the replayed history a
// permission request is held back until the history ends (it is sent then
// if still pending).
func (o *oriConn) project(f kernel.Frame, history bool) ([][]byte, error) {
	ev, err := protocol.DecodeEvent(f.Data)
	if err != nil {
		return nil, fmt.Errorf("decode frame %d: %w", f.Seq, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	msgs, req := o.proj.project(ev, o.sess.ID())
	if req != nil {
		o.pending[req.id] = req.pending
		if !history {
			msgs = append(msgs, req.pending.msg)
		}
	}
	if id := o.proj.resolved; id != "" {
		delete(o.pending, id)
		o.proj.resolved = ""
	}
	if o.proj.ended {
		// A consent request never outlives its run (one left by a server
		// that stopped has no resolution in the log).
		clear(o.pending)
		o.proj.order = o.proj.order[:0]
		o.proj.ended = false
	}
	return msgs, nil
}

// read handles the browser's messages until it leaves.
func (o *oriConn) read(ctx context.Context) error {
	for {
		typ, data, err := o.c.Read(ctx)
		if err != nil {
			return err
		}
		if typ != websocket.MessageText {
			if err := o.sendError(ctx, "malformed message: binary messages are not accepted; send JSON text"); err != nil {
				return err
			}
			continue
		}
		if err := o.handle(ctx, data); err != nil {
			return err
		}
	}
}

// oriInput is a browser message.
type oriInput struct {
	Type        string          `json:"type"`
	Text        *string         `json:"text"`
	Attachments []oriAttachment `json:"attachments"`
	RequestID   string          `json:"requestId"`
	OptionID    string          `json:"optionId"`
	Cancelled   bool            `json:"cancelled"`
}

// oriAttachment is a file mentioned in a prompt.
type oriAttachment struct {
	Path string `json:"path"`
	Name string `json:"name,omitempty"`
}

// handle answers one browser message; only a failed write ends the
// connection.
func (o *oriConn) handle(ctx context.Context, data []byte) error {
	var in oriInput
	if err := json.Unmarshal(data, &in); err != nil {
		return o.sendError(ctx, "malformed message: "+err.Error()+"; send one JSON object with a type")
	}
	switch in.Type {
	case "prompt":
		if in.Text == nil {
			return o.sendError(ctx, "malformed message: prompt needs text")
		}
		return o.prompt(ctx, *in.Text, in.Attachments)
	case "cancel":
		if o.sess == nil {
			return o.sendError(ctx, "no agent session")
		}
		if err := o.sess.Cancel(ctx, ""); err != nil {
			return o.sendError(ctx, "cancel failed: "+err.Error())
		}
		return nil
	case "permission_response":
		return o.answer(ctx, in)
	case "":
		return o.sendError(ctx, "malformed message: type is missing; send prompt, cancel or permission_response")
	default:
		return o.sendError(ctx, fmt.Sprintf("unknown message type %q: send prompt, cancel or permission_response", in.Type))
	}
}

func (o *oriConn) prompt(ctx context.Context, text string, atts []oriAttachment) error {
	if o.sess == nil {
		return o.sendError(ctx, "no agent session")
	}
	if o.sess.Running() {
		return o.sendError(ctx, "a turn is already running")
	}
	var parts []protocol.ContentPart
	for _, a := range atts {
		meta, _ := json.Marshal(map[string]any{"name": a.Name, "ori": a})
		parts = append(parts, protocol.ContentPart{Type: "document", Source: &protocol.Source{Type: "path", Value: a.Path}, Metadata: meta})
	}
	if strings.TrimSpace(text) == "" && len(parts) == 0 {
		return o.sendError(ctx, "malformed message: prompt text is empty")
	}
	_, err := o.sess.Send(ctx, kernel.SendInput{Text: text, Attachments: parts})
	var busy *kernel.BusyError
	switch {
	case errors.As(err, &busy):
		return o.sendError(ctx, "a turn is already running")
	case err != nil:
		return o.sendError(ctx, "prompt failed: "+err.Error())
	}
	return nil
}

func (o *oriConn) answer(ctx context.Context, in oriInput) error {
	if o.sess == nil {
		return o.sendError(ctx, "no agent session")
	}
	if !o.caller.DrawsConsent() {
		return o.sendError(ctx, "permission_response refused: "+errNoConsentRight)
	}
	if in.RequestID == "" || (in.OptionID == "" && !in.Cancelled) {
		return o.sendError(ctx, "malformed message: permission_response needs requestId and optionId (or cancelled: true)")
	}
	o.mu.Lock()
	p := o.pending[in.RequestID]
	o.mu.Unlock()
	option := in.OptionID
	if in.Cancelled && option == "" {
		if p == nil {
			return o.sendError(ctx, fmt.Sprintf("no permission request %q is pending: it was answered or withdrawn", in.RequestID))
		}
		option = p.reject
		if option == "" {
			return o.sendError(ctx, "permission_response refused: this request offers no option that rejects it; answer with one of its optionIds")
		}
	}
	if err := o.sess.AnswerConsent(ctx, o.caller, in.RequestID, option); err != nil {
		return o.sendError(ctx, "permission_response refused: "+err.Error())
	}
	return nil
}

// oriProjector turns frames into ori messages; it is owned by oriConn
// under its mu.
type oriProjector struct {
	acp      acp.Projector
	stop     string   // the stop reason the agent gave in the run in flight
	order    []string // permission requests in the order asked
	resolved string   // the request the last frame resolved
	ended    bool     // the last frame ended a run
}

type oriRequest struct {
	id      string
	pending *oriPending
}

// project returns the messages a frame stands for, and the permission
// request it asks, if any.
func (p *oriProjector) project(ev protocol.Event, session string) ([][]byte, *oriRequest) {
	switch e := ev.(type) {
	case *protocol.RunStarted:
		p.stop = ""
		return [][]byte{oriMsg("turn_started", nil)}, nil
	case *protocol.RunFinished:
		p.ended = true
		reason := p.stop
		if e.Outcome != nil && e.Outcome.Type == protocol.OutcomeCancelled {
			reason = "cancelled"
		}
		if reason == "" {
			reason = "end_turn"
		}
		return [][]byte{oriMsg("turn_ended", map[string]any{"stopReason": reason})}, nil
	case *protocol.RunError:
		p.ended = true
		return [][]byte{
			oriMsg("error", map[string]any{"message": "prompt failed: " + e.Message}),
			oriMsg("turn_ended", map[string]any{"stopReason": "end_turn"}),
		}, nil
	case *protocol.Custom:
		switch e.Name {
		case kernel.UserMessageEvent:
			return [][]byte{userMessage(e.Value)}, nil
		case acp.StopEvent:
			var v struct {
				StopReason string `json:"stopReason"`
			}
			_ = json.Unmarshal(e.Value, &v)
			p.stop = v.StopReason
			return nil, nil
		case kernel.ConsentRequestedEvent:
			return nil, p.permissionRequest(e.Value, session)
		case kernel.ConsentResolvedEvent:
			var v kernel.ConsentResolved
			_ = json.Unmarshal(e.Value, &v)
			p.resolved = v.Request
			return [][]byte{oriMsg("permission_resolved", map[string]any{"requestId": v.Request})}, nil
		}
	}
	var out [][]byte
	for _, u := range p.acp.Updates(ev) {
		out = append(out, oriMsg("session_update", map[string]any{"update": u}))
	}
	return out, nil
}

// userMessage is the user_message of an orrery.user.message.
func userMessage(value json.RawMessage) []byte {
	var um kernel.UserMessage
	_ = json.Unmarshal(value, &um)
	fields := map[string]any{"text": um.Content.String()}
	var atts []any
	for _, part := range um.Content.Parts {
		if part.Type == "text" {
			continue
		}
		var meta struct {
			Ori json.RawMessage `json:"ori"`
		}
		_ = json.Unmarshal(part.Metadata, &meta)
		switch {
		case len(meta.Ori) > 0:
			atts = append(atts, meta.Ori)
		case part.Source != nil:
			atts = append(atts, oriAttachment{Path: strings.TrimPrefix(part.Source.Value, "file://")})
		}
	}
	if len(atts) > 0 {
		fields["attachments"] = atts
	}
	return oriMsg("user_message", fields)
}

// permissionRequest makes the permission_request of a consent request: the
// ACP agent's own request when it asked, else one made from Orrery's.
func (p *oriProjector) permissionRequest(value json.RawMessage, session string) *oriRequest {
	var req kernel.ConsentRequested
	if err := json.Unmarshal(value, &req); err != nil || req.Request == "" {
		return nil
	}
	raw := req.Source
	reject := ""
	if len(raw) > 0 {
		var src struct {
			Options []struct {
				OptionID string `json:"optionId"`
				Kind     string `json:"kind"`
			} `json:"options"`
		}
		_ = json.Unmarshal(raw, &src)
		for _, kind := range []string{"reject_once", "reject_always"} {
			for _, o := range src.Options {
				if reject == "" && o.Kind == kind {
					reject = o.OptionID
				}
			}
		}
	} else {
		opts := make([]map[string]string, 0, len(req.Options))
		for _, o := range req.Options {
			kind := "allow_once"
			switch o.ID {
			case kernel.ConsentAllowSession:
				kind = "allow_always"
			case kernel.ConsentDeny:
				kind = "reject_once"
				reject = o.ID
			}
			opts = append(opts, map[string]string{"optionId": o.ID, "name": o.Label, "kind": kind})
		}
		title := req.Tool
		if req.Subject != "" {
			title += "(" + req.Subject + ")"
		}
		raw, _ = json.Marshal(map[string]any{
			"sessionId": session,
			"toolCall":  map[string]any{"toolCallId": req.ToolCallID, "title": title, "kind": acp.ToolKind(req.Tool), "status": "pending", "rawInput": req.Args},
			"options":   opts,
		})
	}
	p.order = append(p.order, req.Request)
	return &oriRequest{id: req.Request, pending: &oriPending{
		msg:     oriMsg("permission_request", map[string]any{"requestId": req.Request, "request": raw}),
		options: req.Options,
		reject:  reject,
	}}
}
