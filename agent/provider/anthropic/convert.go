package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// noResult is the tool_result sent for a call whose result the conversation
// lacks (its run was cancelled while the tool ran): the API refuses a
// tool_use that is not answered in the next message.
const noResult = "This call has no result: its run ended before the tool finished."

// request builds the streaming request for req, and the tool-name map that
// reads the answer's tool calls back.
func (p *Provider) request(req agent.Request) (sdk.MessageNewParams, *toolNames, error) {
	var all []string
	for _, spec := range req.Tools {
		all = append(all, spec.Name)
	}
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			all = append(all, c.Function.Name)
		}
	}
	names := newToolNames(all)

	params := sdk.MessageNewParams{
		Model:     sdk.Model(p.model),
		MaxTokens: p.maxTokens,
		Thinking:  p.thinking,
	}
	params.System, params.Messages = p.messages(req.Messages, names)
	if len(params.Messages) == 0 {
		return params, nil, &agent.Error{Code: "provider_error",
			Message: "there is nothing to send to the model: the conversation has no user message yet; send a prompt"}
	}
	for _, spec := range req.Tools {
		t, err := toolParam(spec, names)
		if err != nil {
			return params, nil, err
		}
		params.Tools = append(params.Tools, t)
	}
	return params, names, nil
}

// toolParam describes one tool in the API's terms.
func toolParam(spec tool.Spec, names *toolNames) (sdk.ToolUnionParam, error) {
	// A tool without parameters takes an empty object; input_schema is
	// required, and a zero schema would be left out of the request.
	schema := sdk.ToolInputSchemaParam{Properties: map[string]any{}}
	if len(bytes.TrimSpace(spec.Parameters)) > 0 {
		var fields map[string]any
		if err := json.Unmarshal(spec.Parameters, &fields); err != nil || fields == nil {
			return sdk.ToolUnionParam{}, &agent.Error{Code: "provider_error",
				Message: fmt.Sprintf("tool %s has parameters that are not a JSON Schema object; fix the tool's schema or leave the tool out", spec.Name)}
		}
		// "type" is always "object", which the SDK writes itself.
		delete(fields, "type")
		schema.Properties = nil
		schema.ExtraFields = fields
	}
	t := sdk.ToolParam{Name: names.wire(spec.Name), InputSchema: schema}
	if spec.Description != "" {
		t.Description = sdk.String(spec.Description)
	}
	return sdk.ToolUnionParam{OfTool: &t}, nil
}

// wireBlock is a content block on its way out, with what pairing needs to
// know about it.
type wireBlock struct {
	param    sdk.ContentBlockParamUnion
	useID    string // a tool_use block's id
	resultID string // a tool_result block's tool_use_id
	text     string // a tool_result's text, should it have to become text
}

// wireTurn is one message on its way out.
type wireTurn struct {
	assistant bool
	blocks    []wireBlock
}

// messages converts the conversation. System and developer messages become
// the system prompt, in order. User and tool messages become user messages
// (a tool message is a tool_result block); assistant messages carry their
// text and tool_use blocks. Reasoning and activity messages are left out:
// the API has no place for Orrery's copy of them (a thinking block must be
// the model's own, signed, and this provider sends those itself), and an
// activity is the client's, not the model's. Consecutive messages of one
// role are merged, since the API requires user and assistant to alternate,
// and every tool_use is answered by a tool_result in the next user message.
func (p *Provider) messages(msgs []protocol.Message, names *toolNames) ([]sdk.TextBlockParam, []sdk.MessageParam) {
	var system []sdk.TextBlockParam
	var turns []wireTurn
	add := func(assistant bool, blocks ...wireBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].assistant == assistant {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, wireTurn{assistant: assistant, blocks: blocks})
	}
	for _, m := range msgs {
		switch m.Role {
		case protocol.RoleSystem, protocol.RoleDeveloper:
			if text := m.Content.String(); strings.TrimSpace(text) != "" {
				system = append(system, sdk.TextBlockParam{Text: text})
			}
		case protocol.RoleUser:
			add(false, wrap(contentBlocks(m.Content))...)
		case protocol.RoleTool:
			add(false, toolResult(m))
		case protocol.RoleAssistant:
			add(true, p.assistantBlocks(m, names)...)
		default:
			// reasoning, activity: see the doc comment.
		}
	}
	turns = pair(turns)
	if len(turns) > 0 && turns[0].assistant {
		// The API wants the conversation to open with a user message.
		turns = append([]wireTurn{{blocks: wrap([]sdk.ContentBlockParamUnion{sdk.NewTextBlock("(The conversation opens with the assistant's message below.)")})}}, turns...)
	}
	out := make([]sdk.MessageParam, 0, len(turns))
	for _, t := range turns {
		blocks := make([]sdk.ContentBlockParamUnion, len(t.blocks))
		for i, b := range t.blocks {
			blocks[i] = b.param
		}
		if t.assistant {
			out = append(out, sdk.NewAssistantMessage(blocks...))
		} else {
			out = append(out, sdk.NewUserMessage(blocks...))
		}
	}
	return system, out
}

func wrap(params []sdk.ContentBlockParamUnion) []wireBlock {
	out := make([]wireBlock, len(params))
	for i, p := range params {
		out[i] = wireBlock{param: p}
	}
	return out
}

// assistantBlocks converts an assistant message: the thinking this provider
// kept for its tool calls, its text, and its tool calls.
func (p *Provider) assistantBlocks(m protocol.Message, names *toolNames) []wireBlock {
	var out []wireBlock
	if len(m.ToolCalls) > 0 {
		for _, s := range p.lookup(wireID(m.ToolCalls[0].ID)) {
			out = append(out, wireBlock{param: s.param()})
		}
	}
	if text := m.Content.String(); strings.TrimSpace(text) != "" {
		out = append(out, wireBlock{param: sdk.NewTextBlock(text)})
	}
	for _, c := range m.ToolCalls {
		id := wireID(c.ID)
		out = append(out, wireBlock{
			param: sdk.NewToolUseBlock(id, toolInput(c.Function.Arguments), names.wire(c.Function.Name)),
			useID: id,
		})
	}
	return out
}

// toolInput is a call's arguments as the input object the API wants: the
// JSON object itself, or an empty one when the text is empty or not an
// object (a call cut off mid-arguments).
func toolInput(args string) any {
	raw := bytes.TrimSpace([]byte(args))
	if len(raw) > 0 && raw[0] == '{' && json.Valid(raw) {
		return json.RawMessage(raw)
	}
	return map[string]any{}
}

// toolResult converts a tool message into a tool_result block.
func toolResult(m protocol.Message) wireBlock {
	id := wireID(m.ToolCallID)
	var content []sdk.ToolResultBlockParamContentUnion
	for _, b := range contentBlocks(m.Content) {
		switch {
		case b.OfText != nil:
			content = append(content, sdk.ToolResultBlockParamContentUnion{OfText: b.OfText})
		case b.OfImage != nil:
			content = append(content, sdk.ToolResultBlockParamContentUnion{OfImage: b.OfImage})
		case b.OfDocument != nil:
			content = append(content, sdk.ToolResultBlockParamContentUnion{OfDocument: b.OfDocument})
		}
	}
	text := m.Content.String()
	r := sdk.ToolResultBlockParam{ToolUseID: id}
	if m.Error != "" {
		content = append(content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: m.Error}})
		text = strings.TrimSpace(text + "\n" + m.Error)
		r.IsError = sdk.Bool(true)
	}
	r.Content = content
	return wireBlock{param: sdk.ContentBlockParamUnion{OfToolResult: &r}, resultID: id, text: text}
}

// pair makes every assistant tool_use answered by a tool_result in the next
// user message, first in it and in the calls' order: a missing result is
// filled with noResult, and a result that answers no call of the message
// before it becomes plain text (the API refuses both).
func pair(turns []wireTurn) []wireTurn {
	out := make([]wireTurn, 0, len(turns))
	for i := 0; i < len(turns); i++ {
		t := turns[i]
		if !t.assistant {
			out = append(out, answer(t, nil))
			continue
		}
		out = append(out, t)
		var ids []string
		for _, b := range t.blocks {
			if b.useID != "" {
				ids = append(ids, b.useID)
			}
		}
		if len(ids) == 0 {
			continue
		}
		next := wireTurn{}
		if i+1 < len(turns) && !turns[i+1].assistant {
			next = turns[i+1]
			i++
		}
		out = append(out, answer(next, ids))
	}
	return out
}

// answer returns user turn t with a tool_result for each of ids first, and
// its other blocks after, results for other ids turned into text.
func answer(t wireTurn, ids []string) wireTurn {
	results := make(map[string]wireBlock)
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var others []wireBlock
	for _, b := range t.blocks {
		switch {
		case b.resultID == "":
			others = append(others, b)
		case want[b.resultID]:
			if _, dup := results[b.resultID]; !dup {
				results[b.resultID] = b
				continue
			}
			fallthrough
		default:
			if strings.TrimSpace(b.text) != "" {
				others = append(others, wireBlock{param: sdk.NewTextBlock(fmt.Sprintf("Result of tool call %s: %s", b.resultID, b.text))})
			}
		}
	}
	blocks := make([]wireBlock, 0, len(ids)+len(others))
	for _, id := range ids {
		b, ok := results[id]
		if !ok {
			r := sdk.NewToolResultBlock(id, noResult, true)
			b = wireBlock{param: r, resultID: id, text: noResult}
		}
		blocks = append(blocks, b)
	}
	blocks = append(blocks, others...)
	if len(blocks) == 0 {
		// A user message whose only blocks were empty results: keep the
		// alternation with a minimal text.
		blocks = wrap([]sdk.ContentBlockParamUnion{sdk.NewTextBlock("(no content)")})
	}
	return wireTurn{blocks: blocks}
}

// contentBlocks converts message content: text, and images and documents
// with a data or url source. Blank text is left out (the API refuses it);
// a part the API cannot take (audio, video, a provider file) becomes a
// short note so the model knows something was there.
func contentBlocks(c protocol.Content) []sdk.ContentBlockParamUnion {
	if c.Parts == nil {
		if strings.TrimSpace(c.Text) == "" {
			return nil
		}
		return []sdk.ContentBlockParamUnion{sdk.NewTextBlock(c.Text)}
	}
	var out []sdk.ContentBlockParamUnion
	for _, part := range c.Parts {
		switch {
		case part.Type == "text":
			if strings.TrimSpace(part.Text) != "" {
				out = append(out, sdk.NewTextBlock(part.Text))
			}
		case part.Source == nil:
			out = append(out, sdk.NewTextBlock(fmt.Sprintf("[a %s part without a source was left out]", part.Type)))
		case part.Type == "image" && part.Source.Type == "data":
			out = append(out, sdk.NewImageBlockBase64(part.Source.MimeType, part.Source.Value))
		case part.Type == "image" && part.Source.Type == "url":
			out = append(out, sdk.NewImageBlock(sdk.URLImageSourceParam{URL: part.Source.Value}))
		case part.Type == "document" && part.Source.Type == "url":
			out = append(out, sdk.NewDocumentBlock(sdk.URLPDFSourceParam{URL: part.Source.Value}))
		case part.Type == "document" && part.Source.Type == "data" && strings.HasPrefix(part.Source.MimeType, "text/"):
			text, err := base64.StdEncoding.DecodeString(part.Source.Value)
			if err != nil {
				out = append(out, sdk.NewTextBlock("[a text document that is not valid base64 was left out]"))
				continue
			}
			out = append(out, sdk.NewDocumentBlock(sdk.PlainTextSourceParam{Data: string(text)}))
		case part.Type == "document" && part.Source.Type == "data":
			out = append(out, sdk.NewDocumentBlock(sdk.Base64PDFSourceParam{Data: part.Source.Value}))
		default:
			out = append(out, sdk.NewTextBlock(fmt.Sprintf("[a %s part (%s source) was left out: Anthropic does not accept it]", part.Type, part.Source.Type)))
		}
	}
	return out
}
