package ext

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/tool"
)

// extTool is a tool an extension provides: the agent calls it through the
// consent gate and it reaches the extension as tools/call.
type extTool struct {
	in   *Instance
	spec tool.Spec
}

var _ tool.Tool = (*extTool)(nil)

func (t *extTool) Spec() tool.Spec { return t.spec }

// ToolResult is what an extension answers to tools/call.
type ToolResult struct {
	Text    string          `json:"text"`
	Error   bool            `json:"error,omitempty"`
	Surface json.RawMessage `json:"surface,omitempty"`
}

// Call starts the extension if needed and sends it tools/call.
func (t *extTool) Call(ctx context.Context, c tool.Call) (tool.Result, error) {
	p, err := t.in.ensure(ctx)
	if err != nil {
		return tool.Result{Text: fmt.Sprintf("tool %s is unavailable: %v", t.spec.Name, err), Error: true}, nil
	}
	p.touch()
	args := c.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var res ToolResult
	err = t.in.call(ctx, p, "tools/call", map[string]any{"name": t.spec.Name, "id": c.ID, "arguments": args}, &res)
	p.touch()
	if err != nil {
		return tool.Result{Text: fmt.Sprintf("tool %s failed: %v", t.spec.Name, err), Error: true}, nil
	}
	return tool.Result{Text: res.Text, Error: res.Error, Surface: res.Surface}, nil
}

func specOf(d ToolDecl) tool.Spec {
	params := json.RawMessage(d.Parameters)
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return tool.Spec{Name: d.Name, Description: d.Description, Parameters: params, ReadOnly: d.ReadOnly}
}

// declaredTools are the manifest's tools plus those registered at run
// time.
func (in *Instance) declaredTools() []tool.Tool {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []tool.Tool
	for _, d := range in.m.Provides.Tools {
		out = append(out, &extTool{in: in, spec: specOf(d)})
	}
	for _, name := range sortedKeys(in.registered) {
		out = append(out, &extTool{in: in, spec: specOf(in.registered[name])})
	}
	return out
}

// register adds a tool at run time (ext/register).
func (in *Instance) register(d ToolDecl) error {
	if !toolPattern.MatchString(d.Name) || d.Description == "" {
		return &kernel.RequestError{Msg: "ext/register needs tool {name, description, parameters?}: name is 1 to 64 letters, digits, \"-\" or \"_\""}
	}
	in.mu.Lock()
	if in.registered == nil {
		in.registered = make(map[string]ToolDecl)
	}
	prev, had := in.registered[d.Name]
	in.registered[d.Name] = d
	in.mu.Unlock()
	if err := in.s.SetExtTools(in.owner, in.declaredTools()); err != nil {
		in.mu.Lock()
		if had {
			in.registered[d.Name] = prev
		} else {
			delete(in.registered, d.Name)
		}
		in.mu.Unlock()
		return err
	}
	return nil
}

// unregister removes a tool registered at run time (ext/unregister).
func (in *Instance) unregister(name string) error {
	in.mu.Lock()
	_, ok := in.registered[name]
	delete(in.registered, name)
	in.mu.Unlock()
	if !ok {
		return &kernel.RequestError{Msg: fmt.Sprintf("%s registered no tool %q: only tools added with ext/register can be unregistered; hide a declared tool with tools/hide", in.owner, name)}
	}
	return in.s.SetExtTools(in.owner, in.declaredTools())
}
