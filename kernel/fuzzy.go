package kernel

import (
	"strings"
	"unicode"
)

// Scores of a fuzzy match (MatchWorkspaceFiles). Each matched character
// earns fuzzyMatch, plus the bonus of where it falls; a gap between two
// matched characters costs fuzzyGapStart and fuzzyGapExtend for each
// character past the first. A character that continues a run inherits the
// best bonus of the run, so a run that starts at a boundary keeps ranking
// as one.
const (
	fuzzyMatch       = 16
	fuzzyGapStart    = 3
	fuzzyGapExtend   = 1
	fuzzyBonusPath   = 10 // at the start of the path or just after "/"
	fuzzyBonusWord   = 8  // just after "_", "-", ".", a space, or a lower-case letter before an upper-case one
	fuzzyBonusRun    = 5  // continuing a run that started inside a word
	fuzzyBonusInBase = 8  // in the base name (after the last "/")
	// fuzzyMaxCells bounds the table of one path's best alignment; a
	// longer path is scored by its first (leftmost) alignment instead.
	fuzzyMaxCells = 1 << 14
)

// fuzzyMatcher matches paths against one query, reusing its tables.
type fuzzyMatcher struct {
	query []rune // lower-cased
	// Per path, reused: the path's runes lower-cased and the bonus of
	// each; the best score with query[i] matched at j, the bonus of the
	// run it ends, and where query[i-1] was matched (-1 for i == 0).
	path, lower []rune
	bonus       []int
	score, run  []int
	from        []int
}

// newFuzzyMatcher returns a matcher for query, matched ignoring case.
func newFuzzyMatcher(query string) *fuzzyMatcher {
	return &fuzzyMatcher{query: []rune(strings.ToLower(query))}
}

// match reports whether the matcher's query is a subsequence of p,
// ignoring case, and if so the score of its best alignment and the
// offsets (in runes) of the characters it matched.
func (m *fuzzyMatcher) match(p string) (score int, pos []int, ok bool) {
	q := m.query
	m.path = append(m.path[:0], []rune(p)...)
	m.lower = m.lower[:0]
	for _, r := range m.path {
		m.lower = append(m.lower, unicode.ToLower(r))
	}
	n, k := len(m.lower), len(q)
	// The leftmost alignment, if there is one.
	greedy := make([]int, 0, k)
	for j := 0; j < n && len(greedy) < k; j++ {
		if m.lower[j] == q[len(greedy)] {
			greedy = append(greedy, j)
		}
	}
	if len(greedy) < k {
		return 0, nil, false
	}
	base := strings.LastIndexByte(p, '/') + 1
	base = len([]rune(p[:base]))
	m.bonus = m.bonus[:0]
	for j := range n {
		b := boundaryBonus(m.path, j)
		if j >= base {
			b += fuzzyBonusInBase
		}
		m.bonus = append(m.bonus, b)
	}
	if n*k > fuzzyMaxCells {
		return m.scoreOf(greedy, base), greedy, true
	}
	cells := n * k
	m.score = resize(m.score, cells)
	m.run = resize(m.run, cells)
	m.from = resize(m.from, cells)
	const none = -1 << 30
	for i := range k {
		// best is the highest score[i-1][x] + fuzzyGapExtend*x over
		// x < j-1 seen so far, at bestAt: a jump from x to j over the gap
		// j-x-1 costs fuzzyGapStart + fuzzyGapExtend*(j-x-2).
		best, bestAt := none, -1
		for j := range n {
			c := i*n + j
			m.score[c], m.from[c] = none, -1
			if i > 0 && j >= 2 {
				if prev := m.score[(i-1)*n+j-2]; prev != none && prev+fuzzyGapExtend*(j-2) > best {
					best, bestAt = prev+fuzzyGapExtend*(j-2), j-2
				}
			}
			if m.lower[j] != q[i] {
				continue
			}
			pb := boundaryBonus(m.path, j)
			inBase := m.bonus[j] - pb
			if i == 0 {
				m.score[c], m.run[c] = fuzzyMatch+m.bonus[j], pb
				continue
			}
			if best != none {
				// A jump over the gap j-bestAt-1 >= 1.
				s := best - fuzzyGapExtend*(j-2) - fuzzyGapStart + fuzzyMatch + m.bonus[j]
				m.score[c], m.run[c], m.from[c] = s, pb, bestAt
			}
			if j > 0 {
				if prev := m.score[(i-1)*n+j-1]; prev != none {
					rb := max(m.run[(i-1)*n+j-1], pb)
					s := prev + fuzzyMatch + max(rb, fuzzyBonusRun) + inBase
					if s >= m.score[c] {
						m.score[c], m.run[c], m.from[c] = s, rb, j-1
					}
				}
			}
		}
	}
	end, score := -1, none
	for j := range n {
		if s := m.score[(k-1)*n+j]; s > score {
			end, score = j, s
		}
	}
	pos = make([]int, k)
	for i, j := k-1, end; i >= 0; i-- {
		pos[i] = j
		j = m.from[i*n+j]
	}
	return score, pos, true
}

// scoreOf scores one alignment, pos, as match's table would.
func (m *fuzzyMatcher) scoreOf(pos []int, base int) int {
	score, run := 0, 0
	for i, j := range pos {
		pb := boundaryBonus(m.path, j)
		inBase := 0
		if j >= base {
			inBase = fuzzyBonusInBase
		}
		switch {
		case i > 0 && pos[i-1] == j-1:
			run = max(run, pb)
			score += fuzzyMatch + max(run, fuzzyBonusRun) + inBase
		default:
			if i > 0 {
				score -= fuzzyGapStart + fuzzyGapExtend*(j-pos[i-1]-2)
			}
			run = pb
			score += fuzzyMatch + pb + inBase
		}
	}
	return score
}

// boundaryBonus is the bonus of matching p[j] for where it falls: the
// start of a path element, of a word, or neither.
func boundaryBonus(p []rune, j int) int {
	if j == 0 || p[j-1] == '/' {
		return fuzzyBonusPath
	}
	switch prev := p[j-1]; {
	case prev == '_' || prev == '-' || prev == '.' || prev == ' ':
		return fuzzyBonusWord
	case unicode.IsLower(prev) && unicode.IsUpper(p[j]):
		return fuzzyBonusWord
	}
	return 0
}

// resize returns s with length n, reusing its array when it is big enough.
func resize(s []int, n int) []int {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]int, n)
}
