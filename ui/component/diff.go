package component

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/wI2L/jsondiff"

	"github.com/getorrery/orrery/protocol"
)

// Diff returns the smallest change from one JSON document to another as
// RFC 6902 add, replace and remove operations, so that a stock JSON Patch
// library applying them to from gives to. Objects are compared by key and
// arrays by index; then, from the deepest level up, the operations under a
// value are swapped for one replace of that value whenever that is fewer
// bytes (a path of "" replaces the whole document). Numbers keep their
// exact text. Both documents must be JSON.
func Diff(from, to json.RawMessage) ([]protocol.PatchOp, error) {
	src, err := decode(from)
	if err != nil {
		return nil, fmt.Errorf("diff: read the old document: %w", err)
	}
	tgt, err := decode(to)
	if err != nil {
		return nil, fmt.Errorf("diff: read the new document: %w", err)
	}
	return diffValues(src, tgt)
}

// diffValues diffs decoded documents (numbers as json.Number).
func diffValues(src, tgt any) ([]protocol.PatchOp, error) {
	// jsondiff's own Rationalize finds each array element by scanning the
	// document's text from the start, which is quadratic in the array's
	// length (a second per update at 256 KiB); shrink does the same job in
	// one pass over the operations.
	patch, err := jsondiff.CompareWithoutMarshal(src, tgt)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	ops := make([]protocol.PatchOp, 0, len(patch))
	for _, op := range patch {
		p := protocol.PatchOp{Op: op.Type, Path: op.Path, From: op.From}
		if op.Type == jsondiff.OperationAdd || op.Type == jsondiff.OperationReplace {
			if p.Value, err = marshal(op.Value); err != nil {
				return nil, fmt.Errorf("diff: encode a value: %w", err)
			}
		}
		ops = append(ops, p)
	}
	if len(ops) > 1 {
		ops = shrink(ops, tgt, "")
	}
	return ops, nil
}

// shrink returns ops, all at or below prefix, with the operations under
// each value replaced by one replace of it (its value in target) wherever
// that is shorter. It relies on jsondiff listing the operations under one
// value together, depth first.
func shrink(ops []protocol.PatchOp, target any, prefix string) []protocol.PatchOp {
	out := make([]protocol.PatchOp, 0, len(ops))
	for i := 0; i < len(ops); {
		tok, ok := firstToken(ops[i].Path, prefix)
		j := i + 1
		for ok && j < len(ops) {
			if t, ok2 := firstToken(ops[j].Path, prefix); !ok2 || t != tok {
				break
			}
			j++
		}
		group := ops[i:j]
		if ok && len(group) > 1 {
			if child, found := childOf(target, tok); found {
				group = shrink(group, child, prefix+"/"+tok)
			}
		}
		out = append(out, group...)
		i = j
	}
	if len(out) <= 1 {
		return out
	}
	cost := 0
	for _, op := range out {
		cost += opLen(op)
	}
	head := len(`{"op":"replace","path":,"value":}`) + len(strconv.Quote(prefix))
	if head >= cost {
		return out
	}
	n, within := jsonLen(target, cost-head)
	if !within || head+n >= cost {
		return out
	}
	v, err := marshal(target)
	if err != nil {
		return out
	}
	return []protocol.PatchOp{{Op: "replace", Path: prefix, Value: v}}
}

// firstToken returns the escaped reference token that follows prefix in
// path, and false when path is prefix itself.
func firstToken(path, prefix string) (string, bool) {
	rest := strings.TrimPrefix(path, prefix)
	if rest == "" || rest[0] != '/' {
		return "", false
	}
	tok, _, _ := strings.Cut(rest[1:], "/")
	return tok, true
}

// childOf returns the container value at one escaped token below v.
func childOf(v any, tok string) (any, bool) {
	tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	c, ok := lookup(v, []string{tok})
	if !ok {
		return nil, false
	}
	switch c.(type) {
	case map[string]any, []any:
		return c, true
	}
	return nil, false
}

// opLen is the length of an operation's JSON.
func opLen(op protocol.PatchOp) int {
	n := len(`{"op":"","path":}`) + len(op.Op) + len(strconv.Quote(op.Path))
	if op.From != "" {
		n += len(`,"from":`) + len(strconv.Quote(op.From))
	}
	if op.Value != nil {
		n += len(`,"value":`) + len(op.Value)
	}
	return n
}

// jsonLen returns the length of v's compact JSON, giving up (false) as
// soon as it passes limit, so a large value costs no more than limit to
// measure. Strings count as strconv.Quote writes them, near enough to
// compare sizes.
func jsonLen(v any, limit int) (int, bool) {
	n := 0
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case nil:
			n += 4
		case bool:
			n += 5
		case json.Number:
			n += len(x)
		case string:
			n += len(strconv.Quote(x))
		case []any:
			n += 2 + max(len(x)-1, 0)
			for _, e := range x {
				if n > limit || !walk(e) {
					return false
				}
			}
		case map[string]any:
			n += 2 + max(len(x)-1, 0)
			for k, e := range x {
				n += len(strconv.Quote(k)) + 1
				if n > limit || !walk(e) {
					return false
				}
			}
		}
		return n <= limit
	}
	if !walk(v) {
		return n, false
	}
	return n, true
}
