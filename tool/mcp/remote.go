package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/getorrery/orrery/tool"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// remoteTool is one tool of an MCP server as an Orrery tool.
type remoteTool struct {
	server *Server
	remote string // the server's own name for the tool
	spec   tool.Spec
}

var _ tool.Tool = (*remoteTool)(nil)

func newRemoteTool(s *Server, t *mcp.Tool) *remoteTool {
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	if desc == "" {
		desc = fmt.Sprintf("The tool %s of the MCP server %s.", t.Name, s.name)
	}
	return &remoteTool{
		server: s,
		remote: t.Name,
		spec: tool.Spec{
			Name:        "mcp." + s.name + "." + t.Name,
			Description: desc,
			Parameters:  parameters(t.InputSchema),
			// A server's readOnlyHint is a claim made by a party Orrery
			// does not trust: a server could call a tool that deletes
			// files read-only and have the consent gate wave it through.
			// So every MCP tool is asked about unless a rule allows it.
			ReadOnly: false,
		},
	}
}

// Spec implements tool.Tool.
func (t *remoteTool) Spec() tool.Spec { return t.spec }

// Call implements tool.Tool: it sends tools/call with c.Args as the
// arguments object. A failure the model should read (arguments that are
// not an object, a tool error, a server that died) is a Result with Error
// set; the error return is ctx's error when ctx ends first.
func (t *remoteTool) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	args, ok := objectArgs(c.Args)
	if !ok {
		return tool.Result{Error: true, Text: fmt.Sprintf(
			"%s takes its arguments as one JSON object, such as {\"name\": value}, not %s; call it again with an object that matches its schema",
			t.spec.Name, snippet(c.Args))}, nil
	}
	s := t.server
	if reason, ended := s.endedReason(); ended {
		return s.deadResult(t, reason), nil
	}
	callCtx, release := s.callContext(ctx)
	res, err := s.session.CallTool(callCtx, &mcp.CallToolParams{Name: t.remote, Arguments: args, Meta: traceMeta(ctx)})
	release()
	if err != nil {
		if ctx.Err() != nil {
			return tool.Result{}, fmt.Errorf("call %s: %w", t.spec.Name, ctx.Err())
		}
		return s.failedResult(ctx, t, err)
	}
	return resultOf(res), nil
}

// failedResult explains a call that got no result. It returns an error
// only when ctx ends first.
func (s *Server) failedResult(ctx context.Context, t *remoteTool, err error) (tool.Result, error) {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) && !transportError(err) {
		// The server is alive and answered, only with an error.
		return tool.Result{Error: true, Text: fmt.Sprintf(
			"the MCP server %q refused the call to %s: %s (code %d); check the arguments against the tool's schema, or use another tool",
			s.name, t.spec.Name, werr.Message, werr.Code)}, nil
	}
	if reason, ended := s.endedReason(); ended {
		return s.deadResult(t, reason), nil
	}
	if s.cfg.Command != "" && connectionLost(err) {
		// The pipe broke: the process is gone or going. Wait for the SDK
		// to see the session end, to say how it ended.
		select {
		case <-s.ended:
		case <-s.closing.Done():
		case <-ctx.Done():
			return tool.Result{}, fmt.Errorf("call %s: %w", t.spec.Name, ctx.Err())
		}
		reason, _ := s.endedReason()
		return s.deadResult(t, reason), nil
	}
	if s.cfg.URL != "" {
		return tool.Result{Error: true, Text: s.redact(fmt.Sprintf(
			"the MCP server %q at %s did not answer the call to %s (%v); check that it is running and that url in [mcp.servers.%s] is right; Orrery connects to it again with the next session",
			s.name, s.cfg.URL, t.spec.Name, err, s.name))}, nil
	}
	return tool.Result{Error: true, Text: fmt.Sprintf(
		"the MCP server %q failed the call to %s (%v); try again, and if it keeps failing check command and args in [mcp.servers.%s]%s",
		s.name, t.spec.Name, err, s.name, s.stderr.tailNote())}, nil
}

// transportCodes are the codes of the SDK's own JSON-RPC errors for a
// message that never reached the server or got no answer from it (a client
// or server closing, a message the transport rejected): they say nothing
// about the server's view of the call.
var transportCodes = []int64{-32003, -32004, -32005}

// transportError reports whether err is one of the SDK's transport errors
// rather than an error response from the server.
func transportError(err error) bool {
	for _, code := range transportCodes {
		if errors.Is(err, &jsonrpc.Error{Code: code}) {
			return true
		}
	}
	return false
}

// connectionLost reports whether err says the pipe to a command server
// broke.
func connectionLost(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed)
}

// deadResult explains a call to a server whose session has ended.
func (s *Server) deadResult(t *remoteTool, reason string) tool.Result {
	check := fmt.Sprintf("check command and args in [mcp.servers.%s]", s.name)
	if s.cfg.URL != "" {
		check = fmt.Sprintf("check that it is running and that url in [mcp.servers.%s] is right", s.name)
	}
	return tool.Result{Error: true, Text: s.redact(fmt.Sprintf(
		"the MCP server %q is not running (%s), so %s cannot be called in this session; it is started again with the next session, and if it keeps stopping, %s%s",
		s.name, reason, t.spec.Name, check, s.stderr.tailNote()))}
}

// jsonSpace is the white space JSON allows around a value.
const jsonSpace = " \t\r\n"

// objectArgs returns raw when it is one JSON object, and {} when it is
// empty, as a model sends for a tool without parameters.
func objectArgs(raw json.RawMessage) (json.RawMessage, bool) {
	trimmed := bytes.Trim(raw, jsonSpace)
	if len(trimmed) == 0 {
		return json.RawMessage("{}"), true
	}
	if trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, false
	}
	return json.RawMessage(trimmed), true
}

// snippet quotes the start of raw for an error message.
func snippet(raw json.RawMessage) string {
	const max = 60
	s := string(bytes.TrimSpace(raw))
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// parameters returns a tool's input schema as JSON. An absent, empty or
// non-object schema becomes {"type":"object"}; an object schema without a
// type gets type "object", the only type MCP allows for arguments.
func parameters(schema any) json.RawMessage {
	if schema == nil {
		return objectSchema()
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return objectSchema()
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || len(m) == 0 {
		return objectSchema()
	}
	if _, ok := m["type"]; ok {
		return b
	}
	m["type"] = json.RawMessage(`"object"`)
	b, err = json.Marshal(m)
	if err != nil {
		return objectSchema()
	}
	return b
}

// resultOf turns a tools/call result into a tool.Result: the text blocks
// joined by newlines, and one line for each block that is not text.
func resultOf(res *mcp.CallToolResult) tool.Result {
	var lines []string
	for _, c := range res.Content {
		lines = append(lines, contentText(c))
	}
	text := strings.Join(lines, "\n")
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			text = string(b)
		}
	}
	if res.IsError && strings.TrimSpace(text) == "" {
		text = "the tool reported an error without saying what it was"
	}
	return tool.Result{Text: text, Error: res.IsError}
}

// contentText returns a text block's text, and a one-line description of
// any other block.
func contentText(c mcp.Content) string {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.ImageContent:
		return fmt.Sprintf("[image: %s, %d bytes]", mimeOr(c.MIMEType), len(c.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio: %s, %d bytes]", mimeOr(c.MIMEType), len(c.Data))
	case *mcp.ResourceLink:
		size := "size unknown"
		if c.Size != nil {
			size = fmt.Sprintf("%d bytes", *c.Size)
		}
		return fmt.Sprintf("[resource link: %s, %s, %s]", c.URI, mimeOr(c.MIMEType), size)
	case *mcp.EmbeddedResource:
		if c.Resource == nil {
			return "[resource: empty]"
		}
		n := len(c.Resource.Blob)
		if c.Resource.Text != "" {
			n = len(c.Resource.Text)
		}
		return fmt.Sprintf("[resource: %s, %s, %d bytes]", c.Resource.URI, mimeOr(c.Resource.MIMEType), n)
	default:
		return fmt.Sprintf("[content of type %T, left out]", c)
	}
}

func mimeOr(mime string) string {
	if mime == "" {
		return "type unknown"
	}
	return mime
}

// validToolName reports whether name may be a server's tool name: MCP
// allows 1 to 128 letters, digits, '_', '-' and '.', and the name becomes
// the end of an Orrery tool name.
func validToolName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("a tool name has 1 to 128 characters, %q has %d", name, len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("the tool name %q holds %q; MCP tool names hold only letters, digits, '_', '-' and '.'", name, r)
		}
	}
	return nil
}
