package agent

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/getorrery/orrery/tool"
)

// argChecker checks a call's arguments against its tool's parameter schema
// before the call reaches the gate or the tool, so the model reads what is
// wrong with them. Schemas are compiled once per tool name. A schema that
// does not compile (an MCP server's, say) checks nothing: the tool still
// sees and judges the arguments.
type argChecker struct {
	mu      sync.Mutex
	schemas map[string]*jsonschema.Schema // nil value: no usable schema
}

func (c *argChecker) check(spec tool.Spec, args []byte) error {
	sch := c.schema(spec)
	if sch == nil {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("the arguments of %s are not valid JSON; send one JSON object that matches its parameters", spec.Name)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("the arguments of %s must be a JSON object, such as {\"name\": value}", spec.Name)
	}
	if err := sch.Validate(v); err != nil {
		var verr *jsonschema.ValidationError
		if errors.As(err, &verr) {
			return fmt.Errorf("the arguments of %s do not match its parameters: %s; fix them and call it again", spec.Name, describe(verr))
		}
		return fmt.Errorf("the arguments of %s do not match its parameters: %v", spec.Name, err)
	}
	return nil
}

func (c *argChecker) schema(spec tool.Spec) *jsonschema.Schema {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sch, ok := c.schemas[spec.Name]; ok {
		return sch
	}
	if c.schemas == nil {
		c.schemas = make(map[string]*jsonschema.Schema)
	}
	var sch *jsonschema.Schema
	if len(spec.Parameters) > 0 {
		if doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(spec.Parameters)); err == nil {
			comp := jsonschema.NewCompiler()
			comp.UseLoader(nil) // no file or network refs
			comp.DefaultDraft(jsonschema.Draft2020)
			const url = "urn:orrery:tool-args"
			if comp.AddResource(url, doc) == nil {
				sch, _ = comp.Compile(url)
			}
		}
	}
	c.schemas[spec.Name] = sch
	return sch
}

var english = message.NewPrinter(language.English)

// describe names the first failing leaf of a validation error: where it is
// in the arguments and what is wrong.
func describe(verr *jsonschema.ValidationError) string {
	leaf := verr
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	where := "/" + strings.Join(leaf.InstanceLocation, "/")
	if where == "/" {
		where = "the top level"
	} else {
		where = "at " + where
	}
	return where + ": " + leaf.ErrorKind.LocalizedString(english)
}
