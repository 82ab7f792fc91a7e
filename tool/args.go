package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// argsError is a bad-arguments failure: its text tells the model which
// arguments the tool expects.
type argsError struct {
	tool, usage, reason string
}

func (e *argsError) Error() string {
	return fmt.Sprintf("%s needs arguments %s: %s", e.tool, e.usage, e.reason)
}

// result returns e as a Result the model reads.
func (e *argsError) result() Result { return Result{Text: e.Error(), Error: true} }

// decodeArgs decodes the JSON object raw into v strictly: raw must be one
// JSON object, with no field v lacks and each field of its type. An empty
// raw is the empty object. Required fields are checked by the caller (they
// are pointers in v, nil when missing).
func decodeArgs(tool, usage string, raw json.RawMessage, v any) *argsError {
	fail := func(reason string) *argsError { return &argsError{tool, usage, reason} }
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if raw[0] != '{' {
		return fail("the arguments must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te) && te.Field != "":
			return fail(fmt.Sprintf("%s must be %s, not a JSON %s", te.Field, kindName(te.Type.Kind().String()), te.Value))
		case errors.As(err, &se):
			return fail("the arguments are not valid JSON (" + se.Error() + ")")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return fail("the arguments are not valid JSON (they end too early)")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return fail("there is no argument " + strings.TrimPrefix(err.Error(), "json: unknown field "))
		default:
			return fail(err.Error())
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail("the arguments must be a single JSON object, with nothing after it")
	}
	return nil
}

// missing returns the failure for a required argument that was left out.
func missing(tool, usage, name string) *argsError {
	return &argsError{tool, usage, name + " is missing"}
}

// emptyPath returns the failure for a file path given as "".
func emptyPath(tool, usage string) *argsError {
	return &argsError{tool, usage, `path is empty; pass a file path relative to the workspace root, such as "README.md"`}
}

// kindName names a Go kind as the JSON type a model writes.
func kindName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int64", "int32", "uint", "uint64":
		return "an integer"
	case "float64":
		return "a number"
	default:
		return "a " + kind
	}
}
