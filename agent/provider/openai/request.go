package openai

import (
	"encoding/json"
	"fmt"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/protocol"
)

// params builds the streaming request for req. Tool names go out through
// names, which remembers them so that the answer's calls map back.
func (p *Provider) params(req agent.Request, names *toolNames) (oai.ChatCompletionNewParams, error) {
	params := oai.ChatCompletionNewParams{
		Model:         p.cfg.Model,
		Messages:      make([]oai.ChatCompletionMessageParamUnion, 0, len(req.Messages)),
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	if p.cfg.MaxTokens > 0 {
		if p.openAI {
			params.MaxCompletionTokens = param.NewOpt(p.cfg.MaxTokens)
		} else {
			params.MaxTokens = param.NewOpt(p.cfg.MaxTokens)
		}
	}
	// Tools first, so their names claim their wire names before any name
	// found only in the history.
	for _, spec := range req.Tools {
		def := shared.FunctionDefinitionParam{Name: names.wire(spec.Name)}
		if spec.Description != "" {
			def.Description = param.NewOpt(spec.Description)
		}
		schema := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
		if len(spec.Parameters) > 0 {
			schema = nil
			if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema == nil {
				return params, &agent.Error{Code: CodeError, Err: err,
					Message: fmt.Sprintf("tool %s has a parameters schema that is not a JSON object; fix the tool's schema or remove the tool", spec.Name)}
			}
		}
		def.Parameters = schema
		params.Tools = append(params.Tools, oai.ChatCompletionFunctionTool(def))
	}
	for _, m := range req.Messages {
		msg, ok := p.message(m, names)
		if !ok {
			continue
		}
		params.Messages = append(params.Messages, msg)
	}
	return params, nil
}

// message converts one conversation message; ok is false for a message the
// chat completions API has no place for.
func (p *Provider) message(m protocol.Message, names *toolNames) (msg oai.ChatCompletionMessageParamUnion, ok bool) {
	switch m.Role {
	case protocol.RoleSystem:
		return oai.SystemMessage(m.Content.String()), true
	case protocol.RoleDeveloper:
		// The developer role is OpenAI's; the chat templates of other
		// servers often know only system, so they get it as system.
		if p.openAI {
			return oai.DeveloperMessage(m.Content.String()), true
		}
		return oai.SystemMessage(m.Content.String()), true
	case protocol.RoleUser:
		if m.Content.Parts == nil {
			return oai.UserMessage(m.Content.Text), true
		}
		return oai.UserMessage(userParts(m.Content.Parts)), true
	case protocol.RoleAssistant:
		a := oai.ChatCompletionAssistantMessageParam{}
		if text := m.Content.String(); text != "" {
			a.Content.OfString = param.NewOpt(text)
		}
		for _, c := range m.ToolCalls {
			args := c.Function.Arguments
			if args == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID,
					Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      names.wire(c.Function.Name),
						Arguments: args,
					},
				},
			})
		}
		if param.IsOmitted(a.Content.OfString) && len(a.ToolCalls) == 0 {
			// An empty assistant turn (a step cut off before it said
			// anything) is refused by the API and tells the model nothing.
			return msg, false
		}
		return oai.ChatCompletionMessageParamUnion{OfAssistant: &a}, true
	case protocol.RoleTool:
		text := m.Content.String()
		if m.Error != "" {
			if text != "" {
				text += "\n"
			}
			text += "error: " + m.Error
		}
		return oai.ToolMessage(text, m.ToolCallID), true
	default:
		// Reasoning and activity messages (and any role the API lacks)
		// have no place in a chat completions request: the model's earlier
		// reasoning is not sent back, and activities are for clients.
		p.log.Debug("message skipped: chat completions has no role for it", "role", m.Role, "id", m.ID)
		return msg, false
	}
}

// userParts converts multimodal user content: text and images go as such;
// a part the chat completions API cannot carry becomes a short note, so the
// model knows something was there.
func userParts(parts []protocol.ContentPart) []oai.ChatCompletionContentPartUnionParam {
	out := make([]oai.ChatCompletionContentPartUnionParam, 0, len(parts))
	for _, part := range parts {
		switch {
		case part.Type == "text":
			out = append(out, oai.TextContentPart(part.Text))
		case part.Type == "image" && part.Source != nil && part.Source.Type == "url":
			out = append(out, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: part.Source.Value}))
		case part.Type == "image" && part.Source != nil && part.Source.Type == "data" && part.Source.MimeType != "":
			out = append(out, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{
				URL: "data:" + part.Source.MimeType + ";base64," + part.Source.Value,
			}))
		default:
			out = append(out, oai.TextContentPart(fmt.Sprintf("[an attachment of type %s was left out: this model's API takes only text and images]", part.Type)))
		}
	}
	return out
}
