package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/getorrery/orrery/dialect"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// The OpenAI-compatible endpoint (POST /v1/chat/completions, GET
// /v1/models) lets an OpenAI SDK client talk to an Orrery agent. The model
// name picks the session's model (an alias or spec; "orrery" is the
// default), the Orrery-Session header or the user field picks or creates the
// session, tools the caller declares come back as tool_calls while the
// kernel's own tools never do, and errors use OpenAI's error shape.

// SessionHeader names the session a chat completion runs in.
const SessionHeader = "Orrery-Session"

// DefaultModelName is the model name that means the kernel's default model.
const DefaultModelName = "orrery"

// oaError is OpenAI's error body.
type oaError struct {
	Error oaErrorBody `json:"error"`
}

type oaErrorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param,omitempty"`
	Code    string `json:"code,omitempty"`
}

func writeOAError(w http.ResponseWriter, status int, param, code, msg string) {
	typ := "invalid_request_error"
	switch {
	case status >= 500:
		typ = "server_error"
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	}
	writeJSON(w, status, oaError{Error: oaErrorBody{Message: msg, Type: typ, Param: param, Code: code}})
}

// writeTurnError answers a request whose turn ran and failed: a
// server_error, though its status is not 5xx, with x-should-retry false
// (noRetry).
func writeTurnError(w http.ResponseWriter, status int, code, msg string) {
	noRetry(w)
	writeJSON(w, status, oaError{Error: oaErrorBody{Message: msg, Type: "server_error", Code: code}})
}

// noRetry tells OpenAI's SDKs not to retry the request answered with an
// error: its turn ran, with whatever side effects its tools had, and a
// retry would run it again. (They retry 408, 409, 429 and 5xx by default,
// unless x-should-retry says otherwise.)
func noRetry(w http.ResponseWriter) { w.Header().Set("x-should-retry", "false") }

// chatRequest is the part of a chat completion request Orrery reads; other
// fields (temperature, max_tokens, tool_choice …) are accepted and ignored.
type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []chatMessage  `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	Tools         []chatTool     `json:"tools"`
	User          string         `json:"user"`
	N             *int           `json:"n"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// badChat is a request of the wrong shape: the param it names and why.
type badChat struct {
	param, msg string
}

func (e *badChat) Error() string { return e.msg }

// decodeChat reads and checks a chat completion request.
func decodeChat(body []byte) (*chatRequest, error) {
	var req chatRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, &badChat{te.Field, fmt.Sprintf("%s has the wrong type (%s): see the OpenAI chat completions reference", te.Field, te.Value)}
		}
		return nil, &badChat{"", "the body is not a JSON chat completion request: " + err.Error()}
	}
	if req.Model == "" {
		return nil, &badChat{"model", "model is missing: name an Orrery model alias, or \"orrery\" for the default (GET /v1/models lists them)"}
	}
	if len(req.Messages) == 0 {
		return nil, &badChat{"messages", "messages is missing or empty: send at least one user message"}
	}
	if req.N != nil && *req.N != 1 {
		return nil, &badChat{"n", "n must be 1: an Orrery agent gives one answer per turn, so omit n"}
	}
	for i, m := range req.Messages {
		p := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer", "user", "assistant":
		case "tool":
			if m.ToolCallID == "" {
				return nil, &badChat{p + ".tool_call_id", p + " is a tool message without tool_call_id: name the call it answers"}
			}
		case "":
			return nil, &badChat{p + ".role", p + ".role is missing: use system, developer, user, assistant or tool"}
		default:
			return nil, &badChat{p + ".role", fmt.Sprintf("%s.role %q is unknown: use system, developer, user, assistant or tool", p, m.Role)}
		}
		if _, err := chatContent(m.Content); err != nil {
			return nil, &badChat{p + ".content", p + ".content " + err.Error()}
		}
	}
	for i, tl := range req.Tools {
		p := fmt.Sprintf("tools[%d]", i)
		if tl.Type != "function" {
			return nil, &badChat{p + ".type", fmt.Sprintf("%s.type %q is not taken: declare tools as {\"type\":\"function\",\"function\":{…}}", p, tl.Type)}
		}
		if tl.Function.Name == "" {
			return nil, &badChat{p + ".function.name", p + ".function.name is missing: name the tool"}
		}
		if len(tl.Function.Parameters) > 0 && !json.Valid(tl.Function.Parameters) {
			return nil, &badChat{p + ".function.parameters", p + ".function.parameters is not JSON: send a JSON Schema object"}
		}
	}
	return &req, nil
}

// chatContent reads a message's content: a string, an array of text parts,
// or absent.
func chatContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("must be a string or an array of {\"type\":\"text\",\"text\":…} parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("has a %q part: only text parts are taken", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func randomID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// messages converts the request's messages to the session's: all of them
// for a new session, else only those after the last assistant message (the
// session already holds the earlier ones, its own answers among them).
func (req *chatRequest) messages(fresh bool) ([]protocol.Message, error) {
	msgs := req.Messages
	if !fresh {
		last := -1
		for i, m := range msgs {
			if m.Role == "assistant" {
				last = i
			}
		}
		msgs = msgs[last+1:]
		if len(msgs) == 0 {
			return nil, &badChat{"messages", "the last message is the assistant's: end messages with a user or tool message for the agent to answer"}
		}
	}
	out := make([]protocol.Message, 0, len(msgs))
	for _, m := range msgs {
		text, _ := chatContent(m.Content)
		pm := protocol.Message{ID: randomID("oai_"), Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
		if text != "" || m.Role != "assistant" {
			pm.Content = protocol.TextContent(text)
		}
		for _, tc := range m.ToolCalls {
			pm.ToolCalls = append(pm.ToolCalls, protocol.ToolCall{ID: tc.ID, Type: "function",
				Function: protocol.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
		out = append(out, pm)
	}
	return out, nil
}

func (req *chatRequest) tools() []protocol.Tool {
	out := make([]protocol.Tool, 0, len(req.Tools))
	for _, t := range req.Tools {
		out = append(out, protocol.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return out
}

// handleModels serves GET /v1/models: "orrery" (the default model) and
// every name in Config.Models.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	names := append([]string{DefaultModelName}, s.cfg.Models...)
	data := make([]oaModel, 0, len(names))
	for _, n := range names {
		data = append(data, oaModel{ID: n, Object: "model", OwnedBy: "orrery"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// oaModel is a model as GET /v1/models lists it.
type oaModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// handleModel serves GET /v1/models/{id}: one model of the list, or
// OpenAI's 404 model_not_found.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == DefaultModelName || slices.Contains(s.cfg.Models, id) {
		writeJSON(w, http.StatusOK, oaModel{ID: id, Object: "model", OwnedBy: "orrery"})
		return
	}
	writeOAError(w, http.StatusNotFound, "model", "model_not_found", fmt.Sprintf("The model %q does not exist: GET /v1/models lists the models this server has", id))
}

// handleV1NotFound answers a /v1 route Orrery does not serve in OpenAI's
// error shape, which OpenAI's SDKs read.
func (s *Server) handleV1NotFound(w http.ResponseWriter, r *http.Request) {
	writeOAError(w, http.StatusNotFound, "", "unknown_url", fmt.Sprintf("Orrery serves no %s %s: it serves POST /v1/chat/completions, GET /v1/models and GET /v1/models/{id}", r.Method, r.URL.Path))
}

// handleChat serves POST /v1/chat/completions.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	body, err := readLimited(r, w, s.cfg.MaxBodyBytes)
	if err != nil {
		writeOAError(w, http.StatusRequestEntityTooLarge, "", "body_too_large", err.Error())
		return
	}
	req, err := decodeChat(body)
	if err != nil {
		var bad *badChat
		errors.As(err, &bad)
		writeOAError(w, http.StatusBadRequest, bad.param, "invalid_request", bad.msg)
		return
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		rec, done := s.idem.claim(w, r, key, body)
		if rec == nil {
			return // answered: replayed, refused, or the caller left
		}
		defer done()
		w = rec
	}
	sess, fresh, err := s.chatSession(r, req)
	if err != nil {
		s.chatKernelError(w, err)
		return
	}
	msgs, err := req.messages(fresh)
	if err != nil {
		var bad *badChat
		errors.As(err, &bad)
		writeOAError(w, http.StatusBadRequest, bad.param, "invalid_request", bad.msg)
		return
	}
	res, err := sess.Send(r.Context(), kernel.SendInput{Messages: msgs, Tools: req.tools(), Subscribe: true})
	if err != nil {
		s.chatKernelError(w, err)
		return
	}
	sub := res.Sub
	defer sub.Close()
	if rec, ok := w.(*idemRecorder); ok {
		rec.turned = true
	}
	if !s.track() {
		sess.Cancel(context.WithoutCancel(r.Context()), res.RunID)
		// The turn began (its message is logged): a retry would log it
		// again.
		noRetry(w)
		writeOAError(w, http.StatusServiceUnavailable, "", "shutting_down", "the server is shutting down: send the request again in a moment")
		return
	}
	defer s.wg.Done()
	w.Header().Set(SessionHeader, sess.ID())
	c := &chatTurn{
		id: "chatcmpl-" + res.RunID, model: req.Model, created: time.Now().Unix(),
		declared: make(map[string]bool), calls: make(map[string]int), hidden: make(map[string]bool),
	}
	for _, t := range req.Tools {
		c.declared[t.Function.Name] = true
	}
	if req.Stream {
		err = s.streamChat(r.Context(), w, sub, c, res.RunID, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	} else {
		err = s.answerChat(r.Context(), w, sub, c, res.RunID)
	}
	if err != nil && r.Context().Err() != nil {
		// The client went away: its request was the run.
		_ = sess.Cancel(context.WithoutCancel(r.Context()), res.RunID)
	}
}

// readLimited reads the body up to limit bytes.
func readLimited(r *http.Request, w http.ResponseWriter, limit int64) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		bodyRead(w)
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fmt.Errorf("the body is over the %d-byte limit: send less, or raise max_body_bytes in the [server] config", limit)
	}
	return b.Bytes(), err
}

// chatSession returns the session the request names (Orrery-Session, then
// user), creating it with the request's model when it is new; with neither,
// a new session. fresh reports whether it holds no conversation yet.
func (s *Server) chatSession(r *http.Request, req *chatRequest) (*kernel.Session, bool, error) {
	id := r.Header.Get(SessionHeader)
	if id == "" {
		id = req.User
	}
	model := req.Model
	if model == DefaultModelName {
		model = ""
	}
	if id != "" {
		if err := kernel.ValidateSessionID(id); err != nil {
			return nil, false, err
		}
		sess, err := s.k.Session(r.Context(), id)
		if err == nil {
			info, err := sess.Info(r.Context())
			if err != nil {
				return nil, false, err
			}
			return sess, info.Head == 0, nil
		}
		if !errors.Is(err, kernel.ErrUnknownSession) {
			return nil, false, err
		}
	}
	if _, err := s.checkNew(r.Context(), model, ""); err != nil {
		return nil, false, err
	}
	sess, err := s.k.CreateSession(r.Context(), kernel.SessionOptions{ID: id, Model: model})
	if err != nil {
		return nil, false, err
	}
	return sess, true, nil
}

func (s *Server) chatKernelError(w http.ResponseWriter, err error) {
	var reqErr *kernel.RequestError
	var busy *kernel.BusyError
	var damaged *kernel.DamagedError
	var storeErr *kernel.StoreError
	switch {
	case errors.As(err, &busy):
		writeOAError(w, http.StatusConflict, "", "session_busy", busy.Error())
	case errors.As(err, &damaged):
		writeOAError(w, http.StatusConflict, "", "session_damaged", damaged.Error())
	case errors.As(err, &storeErr):
		writeOAError(w, http.StatusServiceUnavailable, "", kernel.CodeStoreFailed, storeErr.Error())
	case errors.As(err, &reqErr):
		param := ""
		if strings.Contains(reqErr.Msg, "model") {
			param = "model"
		}
		writeOAError(w, http.StatusBadRequest, param, "invalid_request", reqErr.Error())
	case errors.Is(err, kernel.ErrSessionClosed):
		writeOAError(w, http.StatusServiceUnavailable, "", "shutting_down", "the session is closed because the server is stopping: retry in a moment")
	default:
		s.log.Error("chat completion failed", "err", err)
		writeOAError(w, http.StatusInternalServerError, "", "internal", "internal error: "+err.Error())
	}
}

// chatTurn turns one run's frames into one chat completion: the text of
// every assistant message (messages after the first are separated by a
// blank line), and the calls of the caller's own tools; the kernel's own
// tool calls are left out.
type chatTurn struct {
	id, model string
	created   int64

	declared map[string]bool // the caller's tool names
	calls    map[string]int  // the caller's calls in this turn, by id → index
	hidden   map[string]bool // the kernel's own calls
	order    []dialect.ToolCallDelta
	args     map[int]*strings.Builder

	text     strings.Builder
	sepNext  bool // a new message started after text: separate them
	usage    *dialect.Usage
	finish   string
	failure  *protocol.RunError
	terminal bool
}

// apply takes one frame and returns the chunk deltas it adds.
func (c *chatTurn) apply(f kernel.Frame, runID string) []dialect.Delta {
	if f.Run != runID {
		return nil
	}
	ev, err := protocol.DecodeEvent(f.Data)
	if err != nil {
		return nil
	}
	switch e := ev.(type) {
	case *protocol.TextMessageStart:
		c.sepNext = c.text.Len() > 0
	case *protocol.TextMessageContent:
		if e.Delta == "" {
			return nil
		}
		d := e.Delta
		if c.sepNext {
			d = "\n\n" + d
			c.sepNext = false
		}
		c.text.WriteString(d)
		return []dialect.Delta{{Content: &d}}
	case *protocol.ToolCallStart:
		if !c.declared[e.ToolCallName] {
			c.hidden[e.ToolCallID] = true
			return nil
		}
		i := len(c.order)
		c.calls[e.ToolCallID] = i
		tc := dialect.ToolCallDelta{Index: i, ID: e.ToolCallID, Type: "function", Function: dialect.FunctionDelta{Name: e.ToolCallName}}
		c.order = append(c.order, tc)
		if c.args == nil {
			c.args = make(map[int]*strings.Builder)
		}
		c.args[i] = &strings.Builder{}
		return []dialect.Delta{{ToolCalls: []dialect.ToolCallDelta{tc}}}
	case *protocol.ToolCallArgs:
		i, ok := c.calls[e.ToolCallID]
		if !ok {
			return nil
		}
		c.args[i].WriteString(e.Delta)
		return []dialect.Delta{{ToolCalls: []dialect.ToolCallDelta{{Index: i, Function: dialect.FunctionDelta{Arguments: e.Delta}}}}}
	case *protocol.RunFinished:
		c.terminal = true
		c.usage = chatUsage(e.Usage)
		c.finish = "stop"
		if len(c.order) > 0 || (e.Outcome != nil && len(e.Outcome.PendingToolCallIDs) > 0) {
			c.finish = "tool_calls"
		}
	case *protocol.RunError:
		c.terminal = true
		c.usage = chatUsage(e.Usage)
		c.failure = e
	}
	return nil
}

func chatUsage(us []protocol.TokenUsage) *dialect.Usage {
	u := dialect.Usage{}
	for _, x := range us {
		u.PromptTokens += x.InputTokens
		u.CompletionTokens += x.OutputTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return &u
}

func (c *chatTurn) chunk(d dialect.Delta, finish string) dialect.Chunk {
	ch := dialect.ChunkChoice{Delta: d}
	if finish != "" {
		ch.FinishReason = &finish
	}
	return dialect.Chunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model, Choices: []dialect.ChunkChoice{ch}}
}

// frames calls fn for every frame of sub until the run's terminal frame,
// the subscription's end or ctx's.
func frames(ctx context.Context, sub *kernel.Subscription, fn func(kernel.Frame) (bool, error)) error {
	done := false
	err := sub.Backlog(ctx, func(f kernel.Frame) error {
		var err error
		done, err = fn(f)
		if done {
			return errStop
		}
		return err
	})
	if done {
		return nil
	}
	if err != nil {
		return err
	}
	var batch []kernel.Frame
	for {
		select {
		case <-sub.Ready():
		case <-sub.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
		batch = sub.Take(batch[:0])
		for _, f := range batch {
			if done, err := fn(f); done || err != nil {
				return err
			}
		}
		if len(batch) == 0 {
			select {
			case <-sub.Done():
				if err := sub.Err(); err != nil {
					return err
				}
				return kernel.ErrSessionClosed
			default:
			}
		}
	}
}

// answerChat waits for the run's end and answers with one chat.completion.
func (s *Server) answerChat(ctx context.Context, w http.ResponseWriter, sub *kernel.Subscription, c *chatTurn, runID string) error {
	ctx, cancel := mergeDone(ctx, s.ctx)
	defer cancel()
	err := frames(ctx, sub, func(f kernel.Frame) (bool, error) {
		c.apply(f, runID)
		return c.terminal, nil
	})
	if err != nil {
		writeTurnError(w, http.StatusConflict, "interrupted", "the run ended before its answer: "+err.Error()+"; send the request again to run a new turn")
		return err
	}
	if c.failure != nil {
		writeTurnError(w, http.StatusUnprocessableEntity, c.failure.Code, "the agent's run failed: "+c.failure.Message)
		return nil
	}
	type toolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	msg := struct {
		Role      string     `json:"role"`
		Content   *string    `json:"content"`
		ToolCalls []toolCall `json:"tool_calls,omitempty"`
	}{Role: "assistant"}
	if c.text.Len() > 0 || len(c.order) == 0 {
		text := c.text.String()
		msg.Content = &text
	}
	for i, tc := range c.order {
		var out toolCall
		out.ID, out.Type, out.Function.Name = tc.ID, "function", tc.Function.Name
		out.Function.Arguments = c.args[i].String()
		msg.ToolCalls = append(msg.ToolCalls, out)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": c.finish}},
		"usage":   c.usage,
	})
	return nil
}

// streamChat streams the run as chat.completion.chunk events, ending with
// data: [DONE]; with includeUsage, a last chunk with no choices carries the
// usage. A failed run ends with an OpenAI error event.
func (s *Server) streamChat(ctx context.Context, w http.ResponseWriter, sub *kernel.Subscription, c *chatTurn, runID string, includeUsage bool) error {
	sw := newSSEWriter(w)
	defer s.cutOff(ctx, sw)()
	write := func(v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return sw.frame(kernel.Frame{Data: data})
	}
	if err := write(c.chunk(dialect.Delta{Role: "assistant", Content: new(string)}, "")); err != nil {
		return err
	}
	if err := sw.flush(); err != nil {
		return err
	}
	ctx, cancel := mergeDone(ctx, s.ctx)
	defer cancel()
	err := frames(ctx, sub, func(f kernel.Frame) (bool, error) {
		for _, d := range c.apply(f, runID) {
			if err := write(c.chunk(d, "")); err != nil {
				return false, err
			}
		}
		if c.terminal {
			return true, nil
		}
		// Each frame goes out as it comes: a chat client shows tokens live.
		return false, sw.flush()
	})
	if err != nil {
		return err
	}
	if c.failure != nil {
		_ = write(oaError{Error: oaErrorBody{Message: "the agent's run failed: " + c.failure.Message, Type: "server_error", Code: c.failure.Code}})
		return sw.flush()
	}
	if err := write(c.chunk(dialect.Delta{}, c.finish)); err != nil {
		return err
	}
	if includeUsage {
		if err := write(dialect.Chunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model, Choices: []dialect.ChunkChoice{}, Usage: c.usage}); err != nil {
			return err
		}
	}
	if err := sw.frame(kernel.Frame{Data: []byte("[DONE]")}); err != nil {
		return err
	}
	return sw.flush()
}

// mergeDone returns a context that ends when either a or b does, and the
// function that releases it.
func mergeDone(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}
