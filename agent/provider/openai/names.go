package openai

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// maxNameLen is the longest function name the API accepts. Its documented
// pattern is ^[a-zA-Z0-9_-]{1,64}$.
const maxNameLen = 64

// toolNames maps Orrery's tool names (which contain dots: ui.show,
// mcp.github.create_issue) to function names the API accepts, and back.
// One toolNames serves one request, so a name sent out is always found on
// the way back, whatever the encoding did to it.
type toolNames struct {
	out  map[string]string // Orrery name → wire name
	back map[string]string // wire name → Orrery name
}

func newToolNames() *toolNames {
	return &toolNames{out: make(map[string]string), back: make(map[string]string)}
}

// wire returns the name to send for the Orrery tool name.
func (n *toolNames) wire(name string) string {
	if w, ok := n.out[name]; ok {
		return w
	}
	base := encodeName(name)
	w := base
	for i := 2; ; i++ {
		if _, taken := n.back[w]; !taken {
			break
		}
		// Two names encoded alike (a.b and a__b): number the later one.
		suffix := "_" + strconv.Itoa(i)
		w = base
		if len(w)+len(suffix) > maxNameLen {
			w = w[:maxNameLen-len(suffix)]
		}
		w += suffix
	}
	n.out[name] = w
	n.back[w] = name
	return w
}

// orrery returns the Orrery name for a wire name the model sent. A name this
// request never sent (a model inventing a tool) comes back unchanged, and
// the agent loop tells the model which tools exist.
func (n *toolNames) orrery(wire string) string {
	if name, ok := n.back[wire]; ok {
		return name
	}
	return wire
}

// encodeName makes name fit the API's pattern: a dot becomes "__", any other
// byte outside [a-zA-Z0-9_-] becomes "_", and a name longer than 64 bytes
// keeps its first 55 and gains a hash of the whole. Names that already fit
// and have no dots go out as they are.
func encodeName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			b.WriteString("__")
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" {
		s = "tool"
	}
	if len(s) > maxNameLen {
		h := fnv.New32a()
		h.Write([]byte(name))
		s = fmt.Sprintf("%s_%08x", s[:maxNameLen-9], h.Sum32())
	}
	return s
}
