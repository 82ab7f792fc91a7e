package anthropic

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
)

// maxNameLen is the longest tool name the API accepts: a name must match
// ^[a-zA-Z0-9_-]{1,64}$.
const maxNameLen = 64

// toolNames maps Orrery's tool names ("ui.show", "mcp.github.create_issue")
// to names the Messages API accepts and back, for one request. A valid name
// is kept; any other character becomes '_' ("ui_show"), and a name that then
// collides with another, or is too long, gets a short hash of the original
// appended. The map is built from every name of the request, so the same set
// of names always maps the same way.
type toolNames struct {
	out map[string]string // Orrery name → wire name
	in  map[string]string // wire name → Orrery name
}

// newToolNames builds the map for names (duplicates are fine).
func newToolNames(names []string) *toolNames {
	n := &toolNames{out: make(map[string]string), in: make(map[string]string)}
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	// Valid names keep themselves, so they are placed first.
	var rest []string
	for _, name := range names {
		if validName(name) {
			n.out[name], n.in[name] = name, name
		} else {
			rest = append(rest, name)
		}
	}
	for _, name := range rest {
		n.add(name)
	}
	return n
}

func (n *toolNames) add(name string) string {
	wire := sanitize(name, maxNameLen)
	if wire == "" || n.taken(wire) {
		wire = sanitize(name, maxNameLen-9) + "_" + shortHash(name)
		for i := 2; n.taken(wire); i++ {
			wire = sanitize(name, maxNameLen-9-6) + "_" + shortHash(name) + strconv.Itoa(i)
		}
	}
	n.out[name], n.in[wire] = wire, name
	return wire
}

func (n *toolNames) taken(wire string) bool {
	_, ok := n.in[wire]
	return ok
}

// wire returns the name to send for an Orrery tool name.
func (n *toolNames) wire(name string) string {
	if w, ok := n.out[name]; ok {
		return w
	}
	return n.add(name)
}

// orrery returns the Orrery name of a name the model sent; a name the map
// does not know is returned unchanged (the loop reports an unknown tool).
func (n *toolNames) orrery(wire string) string {
	if name, ok := n.in[wire]; ok {
		return name
	}
	return wire
}

// validName reports whether name matches ^[a-zA-Z0-9_-]{1,64}$.
func validName(name string) bool {
	return name != "" && len(name) <= maxNameLen && sanitize(name, maxNameLen) == name
}

// sanitize replaces every character outside [a-zA-Z0-9_-] with '_' and cuts
// the result to at most limit bytes.
func sanitize(s string, limit int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= limit {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// wireID returns a tool call id the API accepts (^[a-zA-Z0-9_-]+$). A valid
// id is kept; another is sanitized with a hash appended, the same way every
// time, so a tool_use and its tool_result still match.
func wireID(id string) string {
	if id != "" && sanitize(id, len(id)) == id {
		return id
	}
	return "call_" + sanitize(id, 64) + "_" + shortHash(id)
}
