package tui

import (
	"strings"
	"sync"

	"charm.land/glamour/v2"

	"github.com/getorrery/orrery/termtext"
)

// markdown renders Markdown with glamour, one renderer per width, and
// caches what it rendered, so that a message or pane redrawn on every frame
// costs one map lookup. Its output passes through keepSGR: only colours
// and attributes survive. The zero value is ready; a nil *markdown draws
// the source as plain wrapped text.
type markdown struct {
	mu        sync.Mutex // guards the fields below
	renderers map[int]*glamour.TermRenderer
	cache     map[mdKey][]string
	plain     bool // draw plain text (tests, or no renderer)
}

type mdKey struct {
	src string
	w   int
}

// maxMarkdownCache bounds the cache; past it the cache starts over.
const maxMarkdownCache = 512

func (m *markdown) render(src string, w int) []string {
	if m == nil || m.plain {
		return wrap(src, w)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := mdKey{src, w}
	if l, ok := m.cache[key]; ok {
		return append([]string(nil), l...)
	}
	r, ok := m.renderers[w]
	if !ok {
		var err error
		r, err = glamour.NewTermRenderer(glamour.WithStandardStyle("dark"), glamour.WithWordWrap(max(10, w-4)))
		if err != nil {
			return wrap(src, w)
		}
		if m.renderers == nil {
			m.renderers = make(map[int]*glamour.TermRenderer)
		}
		m.renderers[w] = r
	}
	out, err := r.Render(src)
	if err != nil {
		return wrap(src, w)
	}
	lines := strings.Split(strings.Trim(keepSGR(out), "\n"), "\n")
	for i, l := range lines {
		lines[i] = clip(strings.TrimRight(l, " "), w)
	}
	// glamour pads with blank lines: drop leading and trailing ones.
	for len(lines) > 0 && strings.TrimSpace(stripSGR(lines[0])) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(stripSGR(lines[len(lines)-1])) == "" {
		lines = lines[:len(lines)-1]
	}
	if m.cache == nil || len(m.cache) > maxMarkdownCache {
		m.cache = make(map[mdKey][]string)
	}
	m.cache[key] = lines
	return append([]string(nil), lines...)
}

// stripSGR removes every escape sequence.
func stripSGR(s string) string { return termtext.Strip(s) }

// keepSGR removes every escape sequence from s except SGR (CSI … m), the
// colours and attributes the TUI itself styles with. Renderers that produce
// styled text from sanitized input (markdown) pass through it, so that not
// even a library's output can carry a link, a title or a clipboard write.
func keepSGR(s string) string {
	if !strings.Contains(s, "\x1b") && !strings.ContainsAny(s, "\a") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0x07 {
			i++
			continue
		}
		if c != 0x1b {
			b.WriteByte(c)
			i++
			continue
		}
		end := termtext.SequenceEnd(s, i)
		if i+1 < len(s) && s[i+1] == '[' && end > i+2 && s[end-1] == 'm' && isSGRParams(s[i+2:end-1]) {
			b.WriteString(s[i:end])
		}
		i = end
	}
	return b.String()
}

func isSGRParams(p string) bool {
	for i := 0; i < len(p); i++ {
		if (p[i] < '0' || p[i] > '9') && p[i] != ';' && p[i] != ':' {
			return false
		}
	}
	return true
}
