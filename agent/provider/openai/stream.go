package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/internal/redact"
)

// streamState turns one streamed answer into Deltas.
//
// The agent loop takes a tool call's argument pieces only while that call is
// the latest one started (see agent.stepState.apply), but parallel calls
// arrive interleaved by index. So the first call streams live, and once it
// has started, everything else (a second call, text after a call) waits in
// queue, in the order it arrived, until the answer ends. The arguments of
// every call are kept byte for byte.
type streamState struct {
	emit  func(agent.Delta) error
	names *toolNames
	base  string // the API root, for messages

	usage  agent.Usage
	finish string // the finish_reason of choice 0, once sent
	done   bool   // [DONE] arrived

	byIndex map[int64]*pendingCall // the latest call at each index
	active  *pendingCall           // the call open in the loop, streaming live
	queue   []queued               // what waits for the answer to end
}

// pendingCall is a tool call as it arrives.
type pendingCall struct {
	id, name string
	args     strings.Builder // arguments not yet emitted
	startID  string          // the id given in DeltaToolCall
}

// queued is a delta or a call held back until the answer ends.
type queued struct {
	delta agent.Delta
	call  *pendingCall
}

// read consumes the SSE body of res.
func (s *streamState) read(ctx context.Context, res *http.Response) error {
	dec := ssestream.NewDecoder(res)
	if dec == nil {
		return &agent.Error{Code: CodeError,
			Message: fmt.Sprintf("the server at %s answered with no body; check that it serves the OpenAI chat completions API", s.base)}
	}
	defer func() { _ = dec.Close() }()
	for dec.Next() {
		if ctx.Err() != nil {
			return cancelled(ctx, nil)
		}
		ev := dec.Event()
		if err := s.event(ev); err != nil {
			return err
		}
		if s.done {
			return s.flush()
		}
	}
	if err := dec.Err(); err != nil {
		if isCancel(ctx) {
			return cancelled(ctx, err)
		}
		err = redact.Error(err)
		return &agent.Error{Code: CodeUnavailable, Err: err,
			Message: fmt.Sprintf("reading the answer from %s failed (%v); try again", s.base, err)}
	}
	if ctx.Err() != nil {
		return cancelled(ctx, nil)
	}
	return &agent.Error{Code: CodeUnavailable,
		Message: fmt.Sprintf("the answer from %s stopped before it finished (the stream closed without [DONE]); try again", s.base)}
}

// event handles one SSE event.
func (s *streamState) event(ev ssestream.Event) error {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return nil // an empty data line carries nothing
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		s.done = true
		return nil
	}
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	perr := json.Unmarshal(data, &probe)
	if ev.Type == "error" {
		// Some servers name the event instead of (or as well as) sending
		// an error object.
		if perr == nil && len(probe.Error) > 0 && !bytes.Equal(probe.Error, []byte("null")) {
			data = probe.Error
		}
		return streamError(data, s.base)
	}
	if perr != nil {
		return &agent.Error{Code: CodeError, Err: perr,
			Message: fmt.Sprintf("the server at %s sent a chunk that is not a JSON object (%v); try again, and if it keeps happening check that it serves the OpenAI chat completions API", s.base, perr)}
	}
	if len(probe.Error) > 0 && !bytes.Equal(probe.Error, []byte("null")) {
		return streamError(probe.Error, s.base)
	}
	var chunk oai.ChatCompletionChunk
	if err := json.Unmarshal(data, &chunk); err != nil {
		return &agent.Error{Code: CodeError, Err: err,
			Message: fmt.Sprintf("the server at %s sent a chunk that is not a chat.completion.chunk (%v); check that it serves the OpenAI chat completions API", s.base, err)}
	}
	if chunk.JSON.Usage.Valid() {
		u := chunk.Usage
		s.usage = agent.Usage{
			InputTokens:       u.PromptTokens,
			OutputTokens:      u.CompletionTokens,
			CachedInputTokens: u.PromptTokensDetails.CachedTokens,
			ReasoningTokens:   u.CompletionTokensDetails.ReasoningTokens,
		}
	}
	for _, choice := range chunk.Choices {
		if choice.Index != 0 {
			continue // Orrery asks for one choice (n=1)
		}
		if err := s.delta(choice.Delta); err != nil {
			return err
		}
		if choice.FinishReason != "" {
			s.finish = choice.FinishReason
		}
	}
	return nil
}

// reasoningFields are the delta fields servers use for visible reasoning,
// which the SDK's delta type lacks: reasoning_content (vLLM, DeepSeek,
// llama.cpp) and reasoning (vLLM's newer name, Ollama, OpenRouter).
type reasoningFields struct {
	ReasoningContent *string `json:"reasoning_content"`
	Reasoning        *string `json:"reasoning"`
}

// delta handles one choice delta: reasoning, then text, then tool calls.
func (s *streamState) delta(d oai.ChatCompletionChunkChoiceDelta) error {
	if raw := d.RawJSON(); strings.Contains(raw, `"reasoning`) {
		var r reasoningFields
		if err := json.Unmarshal([]byte(raw), &r); err == nil {
			text := ""
			switch {
			case r.ReasoningContent != nil:
				text = *r.ReasoningContent
			case r.Reasoning != nil:
				text = *r.Reasoning
			}
			if err := s.say(agent.DeltaReasoning, text); err != nil {
				return err
			}
		}
	}
	if err := s.say(agent.DeltaText, d.Content); err != nil {
		return err
	}
	if err := s.say(agent.DeltaText, d.Refusal); err != nil {
		return err
	}
	for _, f := range d.ToolCalls {
		if err := s.toolCall(f); err != nil {
			return err
		}
	}
	return nil
}

// say emits a piece of text or reasoning, or queues it behind a started
// tool call.
func (s *streamState) say(kind agent.DeltaKind, text string) error {
	if text == "" {
		return nil
	}
	d := agent.Delta{Kind: kind, Text: text}
	if s.active != nil || len(s.queue) > 0 {
		s.queue = append(s.queue, queued{delta: d})
		return nil
	}
	return s.emit(d)
}

// toolCall handles one tool-call fragment.
func (s *streamState) toolCall(f oai.ChatCompletionChunkChoiceDeltaToolCall) error {
	if s.byIndex == nil {
		s.byIndex = make(map[int64]*pendingCall)
	}
	c := s.byIndex[f.Index]
	// A new id at a known index is a new call: Ollama sends every parallel
	// call at index 0.
	fresh := c == nil || (f.ID != "" && c.id != "" && f.ID != c.id)
	if fresh {
		c = &pendingCall{id: f.ID}
		s.byIndex[f.Index] = c
	} else if c.id == "" {
		c.id = f.ID
	}
	if c.name == "" && f.Function.Name != "" {
		c.name = s.names.orrery(f.Function.Name)
	}
	args := f.Function.Arguments
	if c == s.active {
		if args == "" {
			return nil
		}
		return s.emit(agent.Delta{Kind: agent.DeltaToolArgs, ToolCallID: c.startID, Text: args})
	}
	c.args.WriteString(args)
	if fresh {
		s.queue = append(s.queue, queued{call: c})
	}
	return s.promote()
}

// promote starts the first queued call while no call is open: text queued
// before it goes out first, and a call waits there until it has a name.
func (s *streamState) promote() error {
	for s.active == nil && len(s.queue) > 0 {
		q := s.queue[0]
		if q.call == nil {
			if err := s.emit(q.delta); err != nil {
				return err
			}
			s.queue = s.queue[1:]
			continue
		}
		if q.call.name == "" {
			return nil
		}
		s.queue = s.queue[1:]
		if err := s.start(q.call); err != nil {
			return err
		}
	}
	return nil
}

// start emits a call and the arguments it has so far, and makes it the
// open call.
func (s *streamState) start(c *pendingCall) error {
	if c.name == "" {
		return &agent.Error{Code: CodeError,
			Message: fmt.Sprintf("the model at %s sent a tool call with no function name; try again or choose another model", s.base)}
	}
	c.startID = c.id
	s.active = c
	if err := s.emit(agent.Delta{Kind: agent.DeltaToolCall, ToolCallID: c.id, ToolName: c.name}); err != nil {
		return err
	}
	if c.args.Len() == 0 {
		return nil
	}
	args := c.args.String()
	c.args.Reset()
	return s.emit(agent.Delta{Kind: agent.DeltaToolArgs, ToolCallID: c.startID, Text: args})
}

// flush emits everything queued, in order, once the answer has ended.
func (s *streamState) flush() error {
	s.active = nil
	queue := s.queue
	s.queue = nil
	for _, q := range queue {
		var err error
		if q.call == nil {
			err = s.emit(q.delta)
		} else {
			err = s.start(q.call)
		}
		if err != nil {
			return err
		}
	}
	s.active = nil
	return nil
}
