package a2ui

import (
	"encoding/json"
	"strconv"
	"sync"

	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// A structure is parsed, checked and decoded once, then projected against
// each new data object: what a data update costs is binding the data and
// lowering the nodes, not parsing and validating the structure again. The
// cache is keyed by the structure's bytes, so a changed definition is a
// new entry and can never meet a stale one; entries of definitions no
// longer shown age out when the cache is full.

// compiled is a structure as ProjectComponent needs it, read-only once
// built, so projections on many goroutines share it.
type compiled struct {
	structure *component.Structure
	err       error          // what component.Parse refused
	node      map[string]any // the structure decoded, numbers as json.Number
	// sub holds, by component id (root-0-1), the parsed subtree of each
	// node the basic catalog lacks, which is shown as its text form.
	sub map[string]subtree
}

type subtree struct {
	structure *component.Structure
	err       error
}

// memo is a bounded map from bytes to a value. When it holds more than
// max bytes of keys it starts afresh: a long-lived face keeps the
// definitions it shows now and drops the ones it showed long ago.
type memo[V any] struct {
	mu    sync.Mutex
	m     map[string]V
	bytes int
	max   int
}

func newMemo[V any](maxBytes int) *memo[V] {
	return &memo[V]{m: map[string]V{}, max: maxBytes}
}

func (c *memo[V]) get(key []byte) (V, bool) {
	c.mu.Lock()
	v, ok := c.m[string(key)]
	c.mu.Unlock()
	return v, ok
}

func (c *memo[V]) put(key []byte, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[string(key)]; ok {
		return
	}
	if c.bytes+len(key) > c.max {
		clear(c.m)
		c.bytes = 0
	}
	c.m[string(key)] = v
	c.bytes += len(key)
}

// structures caches compiled structures by their bytes; 8 MiB of keys is
// 128 structures at the 64 KiB limit, thousands of typical ones.
var structures = newMemo[*compiled](8 << 20)

// compileCached returns the compiled form of structure, from the cache
// when it was compiled before.
func compileCached(structure json.RawMessage) *compiled {
	if c, ok := structures.get(structure); ok {
		return c
	}
	c := compile(structure)
	structures.put(structure, c)
	return c
}

// compile parses structure and decodes it, and parses each subtree shown
// as text, with the ids the projection gives them.
func compile(structure json.RawMessage) *compiled {
	c := &compiled{}
	if c.structure, c.err = component.Parse(structure, component.DefaultLimits()); c.err != nil {
		return c
	}
	if c.err = decodeJSON(structure, &c.node); c.err != nil {
		return c
	}
	c.sub = map[string]subtree{}
	c.walk(c.node, "root")
	return c
}

// walk visits n as component id, as projector.node names them.
func (c *compiled) walk(n map[string]any, id string) {
	switch typ, _ := n["type"].(string); typ {
	case ui.KindStack:
		kids, _ := n["children"].([]any)
		for i, k := range kids {
			if km, ok := k.(map[string]any); ok {
				c.walk(km, id+"-"+strconv.Itoa(i))
			}
		}
	case ui.KindText, ui.KindMarkdown, ui.KindImage, component.TypeButton, ui.KindQuestion:
	default:
		var st subtree
		raw, err := json.Marshal(n)
		if err != nil {
			st.err = err
		} else {
			st.structure, st.err = component.Parse(raw, component.DefaultLimits())
		}
		c.sub[id] = st
	}
}
