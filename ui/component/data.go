package component

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/getorrery/orrery/internal/prose"
	"slices"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/getorrery/orrery/protocol"
)

// Options say what one instance's data is checked against.
type Options struct {
	// Limits bound the data's size; zero fields mean the defaults.
	Limits Limits
	// Schema is a declared component's data schema: defaults are filled,
	// then the data is validated. Nil for an inline structure.
	Schema *Schema
	// Structure is the component's structure: every data must bind into a
	// valid surface tree. Nil checks no binding.
	Structure *Structure
}

// Data is one component instance's last good data: one JSON object that
// fits the limits, matches the schema and binds into the structure. Set and
// Patch change it all or none; a refused update leaves it as it was. Data
// is not safe for concurrent use: its owner (the session actor) calls it.
type Data struct {
	opts      Options
	raw       []byte // compact, the last good data
	val       any    // raw decoded; never changed, only replaced
	bound     *Bound // raw bound into the structure; nil without one
	published any    // the decoded data Publish last handed out
}

// NewData checks an instance's first data, as ui.show gives it, and returns
// the instance. It refuses what Set refuses.
func NewData(first json.RawMessage, opts Options) (*Data, error) {
	opts.Limits = opts.Limits.withDefaults()
	d := &Data{opts: opts}
	c, err := d.accept(first)
	if err != nil {
		return nil, err
	}
	d.raw, d.val, d.bound, d.published = c.raw, c.val, c.bound, c.val
	return d, nil
}

// JSON returns the last good data as compact JSON, with the schema's
// defaults filled.
func (d *Data) JSON() json.RawMessage { return slices.Clone(d.raw) }

// Bound returns the last good data bound into the structure (its surface,
// text form and links), or nil when the Data has no structure.
func (d *Data) Bound() *Bound { return d.bound }

// Set replaces the data with obj, one JSON object, and returns the smallest
// change from the last good data as RFC 6902 add, replace and remove
// operations (paths relative to the data; none when nothing changed). It
// refuses, keeping the last good data, with an *Error: ErrNotObject,
// ErrTooLarge over limits.DataBytes, ErrBadSchema, ErrDataSchema or ErrBind.
func (d *Data) Set(obj json.RawMessage) ([]protocol.PatchOp, error) {
	c, err := d.accept(obj)
	if err != nil {
		return nil, err
	}
	return d.commit(c)
}

// Patch applies RFC 6902 operations (a JSON array) to the last good data,
// in order and all or none, and returns the resulting change as Set does.
// A patch that does not apply is refused with ErrPatch, naming the
// operation that failed; nothing of it is applied. The result is then
// checked as Set checks its object.
func (d *Data) Patch(ops json.RawMessage) ([]protocol.PatchOp, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(ops, &list); err != nil {
		return nil, refuse(ErrPatch, "", "the patch is not a JSON array of RFC 6902 operations; send one such as [{\"op\": \"replace\", \"path\": \"/failed\", \"value\": 3}] (nothing was applied)")
	}
	patch := make(jsonpatch.Patch, 0, len(list))
	for i, raw := range list {
		one, err := jsonpatch.DecodePatch(append(append([]byte{'['}, raw...), ']'))
		if err != nil || len(one) != 1 {
			p := fmt.Sprintf("/%d", i)
			return nil, refuse(ErrPatch, p, fmt.Sprintf("the patch at %s is not an RFC 6902 operation: its op is not add, remove, replace, move, copy or test, or a field is missing; write it as {\"op\": \"replace\", \"path\": \"/failed\", \"value\": 3} (nothing was applied)", p))
		}
		patch = append(patch, one[0])
	}
	next, err := patch.ApplyWithOptions(d.raw, patchOptions)
	if err != nil {
		return nil, d.patchError(patch)
	}
	c, err := d.accept(next)
	if err != nil {
		return nil, err
	}
	return d.commit(c)
}

var patchOptions = func() *jsonpatch.ApplyOptions {
	o := jsonpatch.NewApplyOptions()
	o.SupportNegativeIndices = false
	return o
}()

// patchError replays a failed patch one operation at a time to name the
// one that fails.
func (d *Data) patchError(patch jsonpatch.Patch) error {
	doc := d.raw
	for i, op := range patch {
		next, err := jsonpatch.Patch{op}.ApplyWithOptions(doc, patchOptions)
		if err == nil {
			doc = next
			continue
		}
		kind := op.Kind()
		path, _ := op.Path()
		reason := "it does not apply"
		switch {
		case errors.Is(err, jsonpatch.ErrTestFailed):
			reason = "its test failed: the value there differs"
		case errors.Is(err, jsonpatch.ErrMissing):
			reason = "nothing is at its path"
		case errors.Is(err, jsonpatch.ErrInvalidIndex):
			reason = "its array index is out of range"
		case errors.Is(err, jsonpatch.ErrInvalid):
			reason = "it is not a valid operation"
		}
		p := fmt.Sprintf("/%d", i)
		return refuse(ErrPatch, p, fmt.Sprintf("the patch at %s (%s %s) does not apply: %s; check it against the current data (nothing was applied, and the data is unchanged)", p, kind, prose.Shorten(path), reason))
	}
	return refuse(ErrPatch, "", "the patch does not apply; check it against the current data (nothing was applied, and the data is unchanged)")
}

// candidate is data that passed every check.
type candidate struct {
	raw   []byte
	val   any
	bound *Bound
}

// accept checks a candidate data and returns it compact, decoded and bound.
func (d *Data) accept(obj json.RawMessage) (candidate, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, obj); err != nil {
		return candidate{}, refuse(ErrNotObject, "", fmt.Sprintf("the data is not JSON (%v); send one JSON object such as {\"failed\": 0}", err))
	}
	if err := d.checkSize(buf.Len()); err != nil {
		return candidate{}, err
	}
	v, err := decode(buf.Bytes())
	if err != nil {
		return candidate{}, refuse(ErrNotObject, "", fmt.Sprintf("the data is not JSON (%v); send one JSON object such as {\"failed\": 0}", err))
	}
	if _, ok := v.(map[string]any); !ok {
		return candidate{}, notObject(v)
	}
	if hasEmptyKey(v) {
		p, _ := emptyKey(v, "")
		return candidate{}, refuse(ErrEmptyKey, p, fmt.Sprintf("%s has an empty key; give it a name: the JSON Patch libraries clients apply updates with cannot address an empty key reliably", dataAt(p)))
	}
	raw := buf.Bytes()
	if d.opts.Schema != nil {
		if v, err = d.opts.Schema.check(v); err != nil {
			return candidate{}, err
		}
		if raw, err = marshal(v); err != nil {
			return candidate{}, fmt.Errorf("accept component data: %w", err)
		}
		if err := d.checkSize(len(raw)); err != nil {
			return candidate{}, err
		}
	}
	var bound *Bound
	if d.opts.Structure != nil {
		b, err := d.opts.Structure.bind(v)
		if err != nil {
			var e *bindError
			if errors.As(err, &e) {
				return candidate{}, e.refusal()
			}
			return candidate{}, err
		}
		bound = b
	}
	return candidate{raw: slices.Clone(raw), val: v, bound: bound}, nil
}

func (d *Data) checkSize(n int) error {
	if n <= d.opts.Limits.DataBytes {
		return nil
	}
	return refuse(ErrTooLarge, "", fmt.Sprintf("the data is %s bytes, over limits.dataBytes (%s); send less (page or trim long lists), or raise limits.dataBytes; the last good data is kept",
		prose.Group(n), prose.Group(d.opts.Limits.DataBytes)))
}

// commit makes c the last good data and returns the change.
func (d *Data) commit(c candidate) ([]protocol.PatchOp, error) {
	ops, err := diffValues(d.val, c.val)
	if err != nil {
		return nil, err
	}
	d.raw, d.val, d.bound = c.raw, c.val, c.bound
	return ops, nil
}

// Publish returns the change from the data it last published (at first,
// the data NewData accepted) to the last good data, and marks the last good
// data published. A caller that coalesces updates (see Coalescer) publishes
// this at each allowed moment, so intermediate values are skipped and the
// last one always goes out. It returns no operations when nothing changed.
func (d *Data) Publish() ([]protocol.PatchOp, error) {
	ops, err := diffValues(d.published, d.val)
	if err != nil {
		return nil, err
	}
	d.published = d.val
	return ops, nil
}

// hasEmptyKey reports whether some object in v has an empty key; it is
// the fast check before emptyKey finds where.
func hasEmptyKey(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "" || hasEmptyKey(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasEmptyKey(e) {
				return true
			}
		}
	}
	return false
}

// emptyKey returns the path of the first object (in key order) that has an
// empty key.
func emptyKey(v any, path string) (string, bool) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x[""]; ok {
			return path, true
		}
		for _, k := range sortedKeys(x) {
			if p, ok := emptyKey(x[k], path+"/"+escapeToken(k)); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range x {
			if p, ok := emptyKey(e, fmt.Sprintf("%s/%d", path, i)); ok {
				return p, true
			}
		}
	}
	return "", false
}
