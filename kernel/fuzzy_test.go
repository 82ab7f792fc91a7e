package kernel

import (
	"strings"
	"testing"
	"unicode"
)

// FuzzFuzzyMatch checks the matcher against its contract: it matches
// exactly when the query is a subsequence of the path ignoring case; the
// offsets it returns are increasing and point at the query's characters;
// its score is the score of those offsets; and no alignment scores more
// than it (checked against the leftmost one, and every alignment when the
// path is short).
func FuzzFuzzyMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"conn", "server/conn.go"}, {"conn", "scone/nn.txt"}, {"fb", "FooBar.go"},
		{"sc", "docs/scratch.md"}, {"üstr", "über/Straße.txt"}, {"aa", "a/a/aaa"},
		{"x", strings.Repeat("y/", 200) + "x"}, {"ab", "ba"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, query, path string) {
		if query == "" || len([]rune(query)) > MaxFilesQuery {
			return
		}
		m := newFuzzyMatcher(query)
		score, pos, ok := m.match(path)
		lower := []rune(strings.ToLower(path))
		q := []rune(strings.ToLower(query))
		if len(lower) != len([]rune(path)) {
			return // a rune whose lower case is longer: offsets differ
		}
		if want := subsequence(q, lower); ok != want {
			t.Fatalf("match(%q, %q) ok = %v, want %v", query, path, ok, want)
		}
		if !ok {
			return
		}
		runes := []rune(path)
		for i, j := range pos {
			if j < 0 || j >= len(runes) || i > 0 && j <= pos[i-1] || unicode.ToLower(runes[j]) != q[i] {
				t.Fatalf("match(%q, %q) offsets = %v, not the query's characters in order", query, path, pos)
			}
		}
		base := len([]rune(path[:strings.LastIndexByte(path, '/')+1]))
		if got := m.scoreOf(pos, base); got != score {
			t.Fatalf("match(%q, %q) score = %d, but its offsets %v score %d", query, path, score, pos, got)
		}
		if len(runes) <= 12 && len(q) <= 4 {
			best := -1 << 30
			alignments(q, []rune(strings.ToLower(path)), nil, func(p []int) { best = max(best, m.scoreOf(p, base)) })
			if score != best {
				t.Fatalf("match(%q, %q) score = %d, want the best alignment's %d", query, path, score, best)
			}
		}
	})
}

// subsequence reports whether q is a subsequence of p.
func subsequence(q, p []rune) bool {
	i := 0
	for _, r := range p {
		if i < len(q) && r == q[i] {
			i++
		}
	}
	return i == len(q)
}

// alignments calls f with every way of matching q in p, in order.
func alignments(q, p []rune, pos []int, f func([]int)) {
	if len(pos) == len(q) {
		f(pos)
		return
	}
	from := 0
	if len(pos) > 0 {
		from = pos[len(pos)-1] + 1
	}
	for j := from; j < len(p); j++ {
		if p[j] == q[len(pos)] {
			alignments(q, p, append(pos, j), f)
		}
	}
}
