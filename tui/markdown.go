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
	return m.renderBlock(src, w, true)
}

// renderBlocks draws src one block at a time: each run of lines up to a
// blank line (outside a code fence, and not followed by an indented line)
// is rendered alone, and the blocks are joined with one blank line. A
// block longer than pieceLines is drawn in pieces of about that many lines
// (see blockPieces), joined with nothing between them. A reply drawn this
// way while it streams is the reply drawn when it is whole, with only its
// last piece still growing, so nothing above it moves when the turn ends,
// and a delta costs the drawing of one piece however long the reply or
// its code block. Finished pieces come from the cache; the last one, still
// changing while text streams, is drawn without filling it.
func (m *markdown) renderBlocks(src string, w int) []string {
	blocks := markdownBlocks(src)
	var out []string
	for i, b := range blocks {
		if i > 0 {
			out = append(out, "")
		}
		ps := blockPieces(b)
		for j, p := range ps {
			out = append(out, m.renderBlock(p, w, i < len(blocks)-1 || j < len(ps)-1)...)
		}
	}
	return out
}

// pieceLines is about how many source lines one drawn piece of a long
// block holds: syntax highlighting costs a few hundred µs a line, so a
// streamed code block redraws at most this many lines a frame.
const pieceLines = 16

// blockPieces cuts a block of more than pieceLines lines into pieces that
// draw alone as they would in the whole: a fenced code block into fenced
// blocks of the same language, anything else at a line that starts in the
// first column and is neither a table row nor a heading's underline. No
// piece starts or ends with a blank line, which the drawing would lose.
func blockPieces(b string) []string {
	lines := strings.Split(b, "\n")
	if len(lines) <= pieceLines {
		return []string{b}
	}
	open := ""
	if mk := fenceMarker(strings.TrimLeft(lines[0], " ")); mk != "" && len(lines[0])-len(strings.TrimLeft(lines[0], " ")) < 4 {
		open = lines[0]
	}
	end := len(lines) - 1 // cut before no later line
	if open != "" {
		// Only inside the fence: what follows its close stays whole.
		mk := fenceMarker(strings.TrimLeft(open, " "))
		for i := 1; i < len(lines); i++ {
			if closesFence(strings.TrimLeft(lines[i], " "), mk) {
				end = i
				break
			}
		}
	}
	var pieces []string
	start := 0
	for i := start + pieceLines; i < end; i++ {
		if i-start < pieceLines || !pieceCut(lines, i, open != "") {
			continue
		}
		p := strings.Join(lines[start:i], "\n")
		if open != "" {
			if start > 0 {
				p = open + "\n" + p
			}
			p += "\n" + fenceMarker(strings.TrimLeft(open, " "))
		}
		pieces = append(pieces, p)
		start = i
	}
	p := strings.Join(lines[start:], "\n")
	if open != "" && start > 0 {
		p = open + "\n" + p
	}
	return append(pieces, p)
}

// pieceCut says whether a block may be cut before lines[i].
func pieceCut(lines []string, i int, code bool) bool {
	prev, next := lines[i-1], lines[i]
	if strings.TrimSpace(prev) == "" || strings.TrimSpace(next) == "" {
		return false
	}
	if code {
		return i > 1 // never right after the opening fence
	}
	if next[0] == ' ' || next[0] == '\t' || next[0] == '|' || strings.HasPrefix(prev, "|") {
		return false
	}
	t := strings.TrimSpace(next)
	return strings.Trim(t, "=") != "" && strings.Trim(t, "-") != ""
}

// markdownBlocks cuts src at its block boundaries: a blank line outside a
// fenced code block whose next line starts in the first column (an
// indented one may continue a list item). Blank lines are not kept.
func markdownBlocks(src string) []string {
	lines := strings.Split(src, "\n")
	var blocks []string
	var fence string // the open fence's marker, "" outside one
	start, blank := 0, false
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		if fence == "" && strings.TrimSpace(l) == "" {
			blank = true
			continue
		}
		if blank && fence == "" && l[0] != ' ' && l[0] != '\t' {
			if b := strings.Trim(strings.Join(lines[start:i], "\n"), "\n"); strings.TrimSpace(b) != "" {
				blocks = append(blocks, b)
			}
			start = i
		}
		blank = false
		if len(l)-len(t) < 4 {
			if fence == "" {
				if mk := fenceMarker(t); mk != "" {
					fence = mk
				}
			} else if closesFence(t, fence) {
				fence = ""
			}
		}
	}
	if b := strings.Trim(strings.Join(lines[start:], "\n"), "\n"); strings.TrimSpace(b) != "" {
		blocks = append(blocks, b)
	}
	return blocks
}

// closesFence reports whether line t (its indent removed) closes a fence
// opened with marker: as many of its characters or more, and nothing else.
func closesFence(t, marker string) bool {
	return strings.HasPrefix(t, marker) && strings.TrimSpace(strings.TrimLeft(t, marker[:1])) == ""
}

// fenceMarker is the run of three or more backticks or tildes that opens a
// fenced code block on line t, or "".
func fenceMarker(t string) string {
	if len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return ""
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 || (t[0] == '`' && strings.Contains(t[n:], "`")) {
		return ""
	}
	return t[:n]
}

// renderBlock draws one piece of Markdown, from and (when keep) into the
// cache.
func (m *markdown) renderBlock(src string, w int, keep bool) []string {
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
	if !keep {
		return lines
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
