package acp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"github.com/getorrery/orrery"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// ServeConfig is what Serve needs. Kernel is required.
type ServeConfig struct {
	Kernel *kernel.Kernel
	// Model is the model spec of the sessions the editor creates; ""
	// means the kernel's default.
	Model string
	// Logger receives notes; nil means slog.Default().
	Logger *slog.Logger
}

// acpCaller is how the editor appears to the kernel: it draws consent, so
// consent requests become session/request_permission.
var acpCaller = kernel.Caller{Client: "acp", Draws: []string{protocol.DrawConsent}}

// Serve makes Orrery an ACP agent on r and w (an editor's stdio): it
// answers initialize, session/new, session/load (replayed from Orrery's
// log), session/prompt and session/cancel, sends the session's frames as
// session updates (text, thoughts, tool calls, plan, usage) and turns
// Orrery's consent requests into session/request_permission. It returns
// when r ends or ctx is cancelled.
func Serve(ctx context.Context, r io.Reader, w io.Writer, cfg ServeConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &acpServer{cfg: cfg, ctx: ctx, sessions: make(map[string]*servedSession)}
	s.conn = NewConn(w, s.handle, cfg.Logger)
	done := make(chan error, 1)
	go func() { done <- s.conn.Serve(r) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	cancel()
	s.wg.Wait()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// acpServer is one editor connection.
type acpServer struct {
	cfg  ServeConfig
	ctx  context.Context
	conn *Conn
	wg   sync.WaitGroup // the sessions' pumps

	mu          sync.Mutex // guards initialized and sessions
	initialized bool
	sessions    map[string]*servedSession
}

// servedSession is an Orrery session the editor opened.
type servedSession struct {
	sess *kernel.Session
	sub  *kernel.Subscription

	mu      sync.Mutex                 // guards waiters and asked
	waiters map[string]json.RawMessage // run id → the session/prompt request waiting for it
	asked   map[string]json.RawMessage // consent request → our request_permission id
}

func (s *acpServer) handle(m *Message) {
	if m.IsNotification() {
		switch m.Method {
		case "session/cancel":
			var p struct {
				SessionID string `json:"sessionId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if ss := s.session(p.SessionID); ss != nil {
				_ = ss.sess.Cancel(s.ctx, "")
			}
		}
		return
	}
	if !m.IsRequest() {
		return
	}
	if m.Method != "initialize" {
		s.mu.Lock()
		ok := s.initialized
		s.mu.Unlock()
		if !ok {
			_ = s.conn.ReplyError(m.ID, CodeInvalidRequest, "Invalid request: send initialize before "+m.Method)
			return
		}
	}
	var result any
	var err error
	switch m.Method {
	case "initialize":
		result, err = s.initialize(m.Params)
	case "authenticate":
		result = struct{}{}
	case "session/new":
		result, err = s.newSession(m.Params)
	case "session/load":
		result, err = s.loadSession(m.Params)
	case "session/prompt":
		if err = s.prompt(m.ID, m.Params); err == nil {
			return // answered when the run ends
		}
	default:
		_ = s.conn.ReplyError(m.ID, CodeMethodNotFound, "Method not found: Orrery does not offer "+m.Method)
		return
	}
	if err != nil {
		var re *RPCError
		if !errors.As(err, &re) {
			re = &RPCError{Code: CodeInternalError, Message: err.Error()}
		}
		_ = s.conn.ReplyError(m.ID, re.Code, re.Message)
		return
	}
	_ = s.conn.Reply(m.ID, result)
}

func (s *acpServer) session(id string) *servedSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

func (s *acpServer) initialize(params json.RawMessage) (any, error) {
	var p struct {
		ProtocolVersion *int `json:"protocolVersion"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.ProtocolVersion == nil {
		return nil, &RPCError{Code: CodeInvalidParams, Message: "Invalid params: initialize needs protocolVersion"}
	}
	s.mu.Lock()
	s.initialized = true
	s.mu.Unlock()
	return map[string]any{
		"protocolVersion": ProtocolVersion,
		"agentCapabilities": map[string]any{
			"loadSession":        true,
			"promptCapabilities": map[string]bool{"image": false, "audio": false, "embeddedContext": false},
			"mcpCapabilities":    map[string]bool{"http": false, "sse": false},
		},
		"authMethods": []any{},
		"agentInfo":   map[string]string{"name": "orrery", "title": "Orrery", "version": orrery.Version},
	}, nil
}

type sessionParams struct {
	SessionID  string          `json:"sessionId"`
	Cwd        string          `json:"cwd"`
	MCPServers json.RawMessage `json:"mcpServers"`
}

func (s *acpServer) newSession(params json.RawMessage) (any, error) {
	var p sessionParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &RPCError{Code: CodeInvalidParams, Message: "Invalid params: " + err.Error()}
	}
	if p.Cwd != "" && !filepath.IsAbs(p.Cwd) {
		return nil, &RPCError{Code: CodeInvalidParams, Message: "Invalid params: cwd must be an absolute path"}
	}
	if len(p.MCPServers) > 2 {
		s.cfg.Logger.Info("acp: the editor's MCP servers are not used; Orrery uses the servers of its own [mcp] config")
	}
	sess, err := s.cfg.Kernel.CreateSession(s.ctx, kernel.SessionOptions{Model: s.cfg.Model, Cwd: p.Cwd})
	if err != nil {
		return nil, err
	}
	if err := s.open(sess); err != nil {
		return nil, err
	}
	return map[string]string{"sessionId": sess.ID()}, nil
}

// loadSession replays an Orrery session as updates, then serves it.
func (s *acpServer) loadSession(params json.RawMessage) (any, error) {
	var p sessionParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &RPCError{Code: CodeInvalidParams, Message: "Invalid params: " + err.Error()}
	}
	sess, err := s.cfg.Kernel.Session(s.ctx, p.SessionID)
	if err != nil {
		if errors.Is(err, kernel.ErrUnknownSession) {
			return nil, &RPCError{Code: CodeNotFound, Message: "Resource not found: no Orrery session " + p.SessionID}
		}
		return nil, err
	}
	var proj Projector
	for since := uint64(0); ; {
		frames, head, err := sess.Read(s.ctx, since, 1000)
		if err != nil {
			return nil, err
		}
		for _, f := range frames {
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				return nil, err
			}
			if c, ok := ev.(*protocol.Custom); ok && c.Name == kernel.UserMessageEvent {
				var um kernel.UserMessage
				_ = json.Unmarshal(c.Value, &um)
				s.update(sess.ID(), mustJSON(map[string]any{"sessionUpdate": "user_message_chunk", "messageId": um.ID, "content": textBlock(um.Content.String())}))
				continue
			}
			for _, u := range proj.Updates(ev) {
				s.update(sess.ID(), u)
			}
			since = f.Seq
		}
		if len(frames) == 0 || since >= head {
			break
		}
	}
	if s.session(sess.ID()) == nil {
		if err := s.open(sess); err != nil {
			return nil, err
		}
	}
	return struct{}{}, nil
}

func mustJSON(v any) json.RawMessage {
	data, _ := json.Marshal(v)
	return data
}

func (s *acpServer) update(session string, u json.RawMessage) {
	_ = s.conn.Notify("session/update", map[string]any{"sessionId": session, "update": u})
}

// open subscribes to sess from its head and starts its pump.
func (s *acpServer) open(sess *kernel.Session) error {
	head := sess.Head()
	sub, err := sess.SubscribeWith(s.ctx, kernel.SubscribeOptions{Since: &head, Caller: acpCaller})
	if err != nil {
		return err
	}
	ss := &servedSession{sess: sess, sub: sub, waiters: make(map[string]json.RawMessage), asked: make(map[string]json.RawMessage)}
	s.mu.Lock()
	s.sessions[sess.ID()] = ss
	s.mu.Unlock()
	s.wg.Go(func() {
		defer sub.Close()
		s.pump(ss)
	})
	return nil
}

// prompt starts a run; its answer is sent when the run ends.
func (s *acpServer) prompt(id json.RawMessage, params json.RawMessage) error {
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
			URI  string `json:"uri"`
			Name string `json:"name"`
		} `json:"prompt"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return &RPCError{Code: CodeInvalidParams, Message: "Invalid params: " + err.Error()}
	}
	ss := s.session(p.SessionID)
	if ss == nil {
		return &RPCError{Code: CodeNotFound, Message: "Resource not found: session " + p.SessionID + " is not open; call session/new or session/load first"}
	}
	var texts []string
	var parts []protocol.ContentPart
	for _, b := range p.Prompt {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "resource_link":
			meta, _ := json.Marshal(map[string]string{"name": b.Name})
			parts = append(parts, protocol.ContentPart{Type: "document", Source: &protocol.Source{Type: "url", Value: b.URI}, Metadata: meta})
		}
	}
	runID := "run_acp_" + randHex()
	ss.mu.Lock()
	ss.waiters[runID] = id
	ss.mu.Unlock()
	_, err := ss.sess.Send(s.ctx, kernel.SendInput{RunID: runID, Text: strings.Join(texts, "\n"), Attachments: parts})
	if err != nil {
		ss.mu.Lock()
		delete(ss.waiters, runID)
		ss.mu.Unlock()
		var busy *kernel.BusyError
		if errors.As(err, &busy) {
			return &RPCError{Code: CodeInvalidRequest, Message: "Invalid request: a turn is already running in this session; send session/cancel first"}
		}
		return err
	}
	return nil
}

func randHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// pump sends a session's frames to the editor until the connection ends.
func (s *acpServer) pump(ss *servedSession) {
	var proj Projector
	var stop string
	var frames []kernel.Frame
	for {
		select {
		case <-ss.sub.Ready():
		case <-ss.sub.Done():
			s.failWaiters(ss, "the session's stream ended: "+fmt.Sprint(ss.sub.Err()))
			return
		case <-s.ctx.Done():
			return
		}
		frames = ss.sub.Take(frames[:0])
		for _, f := range frames {
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				continue
			}
			switch e := ev.(type) {
			case *protocol.Custom:
				switch e.Name {
				case kernel.ConsentRequestedEvent:
					s.askPermission(ss, e.Value)
				case kernel.ConsentResolvedEvent:
					s.withdrawPermission(ss, e.Value)
				case StopEvent:
					var v struct {
						StopReason string `json:"stopReason"`
					}
					_ = json.Unmarshal(e.Value, &v)
					stop = v.StopReason
				}
			case *protocol.RunStarted:
				stop = ""
			case *protocol.RunFinished:
				if u := usageUpdate(e.Result); u != nil {
					s.update(ss.sess.ID(), u)
				}
				reason := stop
				if e.Outcome != nil && e.Outcome.Type == protocol.OutcomeCancelled {
					reason = "cancelled"
				}
				if reason == "" {
					reason = "end_turn"
				}
				s.answerWaiter(ss, f.Run, map[string]string{"stopReason": reason}, nil)
				continue
			case *protocol.RunError:
				s.answerWaiter(ss, f.Run, nil, &RPCError{Code: CodeInternalError, Message: e.Message})
				continue
			}
			for _, u := range proj.Updates(ev) {
				s.update(ss.sess.ID(), u)
			}
		}
	}
}

// usageUpdate is the usage_update of a run's result.
func usageUpdate(result json.RawMessage) json.RawMessage {
	var r protocol.RunResult
	if json.Unmarshal(result, &r) != nil {
		return nil
	}
	used := r.InputTokens + r.OutputTokens
	return mustJSON(map[string]any{"sessionUpdate": "usage_update", "used": used, "size": used,
		"cost": map[string]any{"amount": float64(r.MicroUSD) / 1e6, "currency": "USD"}})
}

func (s *acpServer) answerWaiter(ss *servedSession, runID string, result any, rerr *RPCError) {
	ss.mu.Lock()
	id, ok := ss.waiters[runID]
	delete(ss.waiters, runID)
	ss.mu.Unlock()
	if !ok {
		return
	}
	if rerr != nil {
		_ = s.conn.ReplyError(id, rerr.Code, rerr.Message)
		return
	}
	_ = s.conn.Reply(id, result)
}

func (s *acpServer) failWaiters(ss *servedSession, msg string) {
	ss.mu.Lock()
	ids := make([]json.RawMessage, 0, len(ss.waiters))
	for _, id := range ss.waiters {
		ids = append(ids, id)
	}
	clear(ss.waiters)
	ss.mu.Unlock()
	for _, id := range ids {
		_ = s.conn.ReplyError(id, CodeInternalError, msg)
	}
}

// askPermission sends session/request_permission for a consent request and
// answers the consent request with the editor's choice.
func (s *acpServer) askPermission(ss *servedSession, value json.RawMessage) {
	var req kernel.ConsentRequested
	if json.Unmarshal(value, &req) != nil || req.Request == "" {
		return
	}
	params, reject := permissionParams(ss.sess.ID(), req)
	id, ch, err := s.conn.Start("session/request_permission", params)
	if err != nil {
		return
	}
	ss.mu.Lock()
	ss.asked[req.Request] = id
	ss.mu.Unlock()
	s.wg.Go(func() {
		var m *Message
		select {
		case m = <-ch:
		case <-s.ctx.Done():
			return
		}
		ss.mu.Lock()
		delete(ss.asked, req.Request)
		ss.mu.Unlock()
		option := reject
		if m.Error == nil {
			var res struct {
				Outcome struct {
					Outcome  string `json:"outcome"`
					OptionID string `json:"optionId"`
				} `json:"outcome"`
			}
			if json.Unmarshal(m.Result, &res) == nil && res.Outcome.Outcome == "selected" && res.Outcome.OptionID != "" {
				option = res.Outcome.OptionID
			}
		}
		if option == "" {
			return
		}
		if err := ss.sess.AnswerConsent(s.ctx, acpCaller, req.Request, option); err != nil {
			s.cfg.Logger.Info("acp: the editor's permission answer was not taken", "request", req.Request, "err", err)
		}
	})
}

// withdrawPermission withdraws a request the editor has not answered when
// the consent request was resolved otherwise (timeout, cancel, another
// client).
func (s *acpServer) withdrawPermission(ss *servedSession, value json.RawMessage) {
	var res kernel.ConsentResolved
	if json.Unmarshal(value, &res) != nil {
		return
	}
	ss.mu.Lock()
	id, ok := ss.asked[res.Request]
	delete(ss.asked, res.Request)
	ss.mu.Unlock()
	if ok {
		_ = s.conn.Notify("$/cancel_request", map[string]json.RawMessage{"requestId": id})
	}
}

// permissionParams is the RequestPermissionRequest of a consent request,
// and the option that rejects it.
func permissionParams(session string, req kernel.ConsentRequested) (map[string]any, string) {
	var src struct {
		ToolCall json.RawMessage `json:"toolCall"`
		Options  json.RawMessage `json:"options"`
	}
	if len(req.Source) > 0 && json.Unmarshal(req.Source, &src) == nil && len(src.Options) > 0 {
		var opts []permissionOption
		_ = json.Unmarshal(src.Options, &opts)
		return map[string]any{"sessionId": session, "toolCall": src.ToolCall, "options": src.Options}, pick(opts, "reject_once", "reject_always")
	}
	opts := make([]permissionOption, 0, len(req.Options))
	reject := ""
	for _, o := range req.Options {
		kind := "allow_once"
		switch o.ID {
		case kernel.ConsentAllowSession:
			kind = "allow_always"
		case kernel.ConsentDeny:
			kind, reject = "reject_once", o.ID
		}
		opts = append(opts, permissionOption{OptionID: o.ID, Name: o.Label, Kind: kind})
	}
	title := req.Tool
	if req.Subject != "" {
		title += " " + req.Subject
	}
	toolCall := map[string]any{"toolCallId": req.ToolCallID, "title": title, "kind": ToolKind(req.Tool), "status": "pending", "rawInput": req.Args}
	return map[string]any{"sessionId": session, "toolCall": toolCall, "options": opts}, reject
}
