package anthropic

import (
	"context"
	"fmt"
	"math"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/getorrery/orrery/agent"
)

// streamState turns one answer's stream events into deltas.
type streamState struct {
	ctx   context.Context
	names *toolNames
	emit  func(agent.Delta) error

	usage                        agent.Usage
	input, cacheRead, cacheWrite int64 // the input counts as last reported
	started                      bool  // message_start seen
	stopped                      bool  // message_stop seen: the answer is complete

	blocks   map[int64]*block
	openTool string // the tool call whose arguments may stream now, or ""

	keepSigned  bool          // keep thinking blocks to send back with the calls
	signed      []signedBlock // the answer's thinking blocks, in order
	firstToolID string        // the answer's first tool_use id
}

// block is a content block being streamed.
type block struct {
	kind      string // text, thinking, redacted_thinking, tool_use, or another the API added
	id        string // a tool_use's id
	thinking  strings.Builder
	signature string
	data      string // a redacted_thinking block's data
}

// emitError marks an error returned by emit, which Stream returns unchanged.
type emitError struct{ err error }

func (e *emitError) Error() string { return e.err.Error() }
func (e *emitError) Unwrap() error { return e.err }

func (s *streamState) send(d agent.Delta) error {
	if err := s.ctx.Err(); err != nil {
		return cancelled(err)
	}
	switch d.Kind {
	case agent.DeltaToolCall:
		s.openTool = d.ToolCallID
	case agent.DeltaText, agent.DeltaReasoning:
		// The loop closes the open call when anything else arrives.
		s.openTool = ""
	}
	if err := s.emit(d); err != nil {
		return &emitError{err}
	}
	return nil
}

// handle applies one stream event. Unknown event, block and delta types are
// ignored, so that an API that adds some keeps working.
func (s *streamState) handle(ev sdk.MessageStreamEventUnion) error {
	if s.blocks == nil {
		s.blocks = make(map[int64]*block)
	}
	switch ev.Type {
	case "message_start":
		s.started = true
		u := ev.Message.Usage
		s.input, s.cacheRead, s.cacheWrite = count(u.InputTokens), count(u.CacheReadInputTokens), count(u.CacheCreationInputTokens)
		s.sumInput()
		s.usage.OutputTokens = count(u.OutputTokens)
		if u.JSON.OutputTokensDetails.Valid() {
			s.usage.ReasoningTokens = count(u.OutputTokensDetails.ThinkingTokens)
		}
	case "message_delta":
		s.deltaUsage(ev.Usage)
	case "message_stop":
		s.stopped = true
	case "content_block_start":
		return s.start(ev.Index, ev.ContentBlock)
	case "content_block_delta":
		return s.delta(ev.Index, ev.Delta)
	case "content_block_stop":
		if b := s.blocks[ev.Index]; b != nil && b.kind == "tool_use" && s.openTool == b.id {
			s.openTool = ""
		}
		s.keep(s.blocks[ev.Index])
		delete(s.blocks, ev.Index)
	}
	return nil
}

// deltaUsage takes message_delta's usage. Its counts are cumulative: each
// replaces the last, and a count the event leaves out (or null) keeps its
// value.
func (s *streamState) deltaUsage(u sdk.MessageDeltaUsage) {
	if u.JSON.OutputTokens.Valid() {
		s.usage.OutputTokens = count(u.OutputTokens)
	}
	if u.JSON.OutputTokensDetails.Valid() {
		s.usage.ReasoningTokens = count(u.OutputTokensDetails.ThinkingTokens)
	}
	if u.JSON.InputTokens.Valid() {
		s.input = count(u.InputTokens)
	}
	if u.JSON.CacheReadInputTokens.Valid() {
		s.cacheRead = count(u.CacheReadInputTokens)
	}
	if u.JSON.CacheCreationInputTokens.Valid() {
		s.cacheWrite = count(u.CacheCreationInputTokens)
	}
	s.sumInput()
}

// count is a token count as reported, with nonsense (a negative number,
// such as an overflowed 1e30) read as 0.
func count(n int64) int64 { return max(n, 0) }

// sumInput sets the usage's input counts: the total of fresh, cache-read and
// cache-written input, of which the cache reads are the cached part.
func (s *streamState) sumInput() {
	s.usage.InputTokens = s.input + s.cacheRead + s.cacheWrite
	if s.usage.InputTokens < 0 { // overflowed: three absurd counts
		s.usage.InputTokens = math.MaxInt64
	}
	s.usage.CachedInputTokens = s.cacheRead
}

func (s *streamState) start(index int64, cb sdk.ContentBlockStartEventContentBlockUnion) error {
	b := &block{kind: cb.Type}
	s.blocks[index] = b
	switch cb.Type {
	case "text":
		if cb.Text != "" {
			return s.send(agent.Delta{Kind: agent.DeltaText, Text: cb.Text})
		}
	case "thinking":
		b.signature = cb.Signature
		if cb.Thinking != "" {
			b.thinking.WriteString(cb.Thinking)
			return s.send(agent.Delta{Kind: agent.DeltaReasoning, Text: cb.Thinking})
		}
	case "redacted_thinking":
		// Encrypted reasoning: nothing to show, but it is sent back with
		// the answer's tool calls.
		b.data = cb.Data
	case "tool_use":
		if cb.ID == "" || cb.Name == "" {
			return &agent.Error{Code: "provider_error",
				Message: "Anthropic started a tool call without an id or a name; try again, and if it repeats choose another model"}
		}
		b.id = cb.ID
		if s.firstToolID == "" {
			s.firstToolID = cb.ID
		}
		return s.send(agent.Delta{Kind: agent.DeltaToolCall, ToolCallID: cb.ID, ToolName: s.names.orrery(cb.Name)})
	}
	return nil
}

func (s *streamState) delta(index int64, d sdk.MessageStreamEventUnionDelta) error {
	b := s.blocks[index]
	switch d.Type {
	case "text_delta":
		if d.Text != "" {
			return s.send(agent.Delta{Kind: agent.DeltaText, Text: d.Text})
		}
	case "thinking_delta":
		if b != nil {
			b.thinking.WriteString(d.Thinking)
		}
		if d.Thinking != "" {
			return s.send(agent.Delta{Kind: agent.DeltaReasoning, Text: d.Thinking})
		}
	case "signature_delta":
		if b != nil {
			b.signature += d.Signature
		}
	case "input_json_delta":
		if b == nil || b.kind != "tool_use" || b.id != s.openTool {
			return &agent.Error{Code: "provider_error",
				Message: fmt.Sprintf("Anthropic sent tool input for content block %d, which is not the tool call being streamed; try again, and if it repeats choose another model", index)}
		}
		if d.PartialJSON != "" {
			return s.send(agent.Delta{Kind: agent.DeltaToolArgs, ToolCallID: b.id, Text: d.PartialJSON})
		}
	}
	return nil
}

// keep records a finished thinking block, to be sent back with the
// answer's tool calls.
func (s *streamState) keep(b *block) {
	if !s.keepSigned || b == nil {
		return
	}
	switch b.kind {
	case "thinking":
		if b.signature != "" {
			s.signed = append(s.signed, signedBlock{thinking: b.thinking.String(), signature: b.signature})
		}
	case "redacted_thinking":
		if b.data != "" {
			s.signed = append(s.signed, signedBlock{redacted: b.data})
		}
	}
}

// signedBlock is a thinking or redacted_thinking block of an answer that
// called tools. With thinking on, the API wants an answer's thinking back,
// unchanged, when the conversation continues after its tool results; Orrery's
// transcript keeps the text but not the signature, so the provider keeps
// the blocks itself, by the answer's first tool_use id.
type signedBlock struct {
	thinking, signature string
	redacted            string
}

func (b signedBlock) param() sdk.ContentBlockParamUnion {
	if b.redacted != "" {
		return sdk.NewRedactedThinkingBlock(b.redacted)
	}
	return sdk.NewThinkingBlock(b.signature, b.thinking)
}

func (p *Provider) keepsThinking() bool {
	return p.thinking.OfEnabled != nil || p.thinking.OfAdaptive != nil
}

// remember keeps a complete answer's thinking blocks for its tool calls. It
// keeps the last maxKeep answers' blocks.
func (p *Provider) remember(s *streamState) {
	if len(s.signed) == 0 || s.firstToolID == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.signed[s.firstToolID]; !ok {
		p.order = append(p.order, s.firstToolID)
	}
	p.signed[s.firstToolID] = s.signed
	for len(p.order) > p.maxKeep {
		delete(p.signed, p.order[0])
		p.order = p.order[1:]
	}
}

// lookup returns the thinking blocks kept for the answer whose first tool
// call is id.
func (p *Provider) lookup(id string) []signedBlock {
	if !p.keepsThinking() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signed[id]
}
