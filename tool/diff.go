package tool

import (
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines around each change in a hunk,
// as diff -u prints by default.
const diffContext = 3

// maxDiffEdits bounds the edit distance the line diff searches for a minimal
// script. Past it, the changed middle of the files (what lies between their
// common head and tail) is shown as removed and added whole: still a correct
// diff, only not the shortest, and computed in bounded time and memory.
const maxDiffEdits = 2000

// Unified returns the unified diff (diff -u style, 3 lines of context) that
// turns oldText into newText, with the headers "--- oldName" and
// "+++ newName" (callers pass "a/path" and "b/path", or "/dev/null" for the
// side of a file that does not exist). Equal texts give "". A last line
// without a newline is marked "\ No newline at end of file", as diff marks
// it, so patch and git apply reproduce newText exactly.
func Unified(oldName, newName, oldText, newText string) string {
	if oldText == newText {
		return ""
	}
	a, b := splitLines(oldText), splitLines(newText)
	ops := diffLines(a, b)
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", oldName, newName)
	for _, h := range hunks(ops) {
		writeHunk(&sb, ops[h.from:h.to])
	}
	return sb.String()
}

// splitLines splits s into lines that keep their "\n"; the last line lacks
// it when s does not end in one.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// lineOp is one line of an edit script: kept (' '), removed ('-') or added
// ('+'), with its 0-based index in the old and the new text (the index it
// would have, for the side it is not on).
type lineOp struct {
	kind       byte
	line       string
	oldI, newI int
}

// diffLines returns an edit script from a to b: the common head and tail
// kept, and between them a shortest script by Myers' algorithm (or, past
// maxDiffEdits, a plain replacement).
func diffLines(a, b []string) []lineOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]lineOp, 0, len(a)+len(b)-pre-suf)
	for i := range pre {
		ops = append(ops, lineOp{' ', a[i], i, i})
	}
	midA, midB := a[pre:len(a)-suf], b[pre:len(b)-suf]
	script, ok := myers(intern(midA, midB))
	if !ok {
		script = script[:0]
		for range midA {
			script = append(script, '-')
		}
		for range midB {
			script = append(script, '+')
		}
	}
	i, j := pre, pre
	for _, k := range script {
		switch k {
		case ' ':
			ops = append(ops, lineOp{' ', a[i], i, j})
			i, j = i+1, j+1
		case '-':
			ops = append(ops, lineOp{'-', a[i], i, j})
			i++
		case '+':
			ops = append(ops, lineOp{'+', b[j], i, j})
			j++
		}
	}
	for s := range suf {
		ops = append(ops, lineOp{' ', a[i+s], i + s, j + s})
	}
	return ops
}

// intern maps equal lines of a and b to equal integers, so the search
// compares integers instead of strings.
func intern(a, b []string) ([]int32, []int32) {
	ids := make(map[string]int32, len(a)+len(b))
	conv := func(lines []string) []int32 {
		out := make([]int32, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	return conv(a), conv(b)
}

// myers returns a shortest edit script from a to b as one byte per line:
// ' ' kept, '-' removed, '+' added (E. Myers, "An O(ND) Difference Algorithm
// and Its Variations", 1986). It gives up, returning false, when the script
// needs more than maxDiffEdits edits.
func myers(a, b []int32) ([]byte, bool) {
	n, m := len(a), len(b)
	limit := min(n+m, maxDiffEdits)
	// v[k+off] is the furthest x reached on diagonal k; trace[d] holds v's
	// diagonals -d..d as they stood before round d.
	off := limit + 1
	v := make([]int32, 2*limit+3)
	var trace [][]int32
	for d := 0; d <= limit; d++ {
		trace = append(trace, append([]int32(nil), v[off-d:off+d+1]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = int(v[off+k+1])
			} else {
				x = int(v[off+k-1]) + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = int32(x)
			if x >= n && y >= m {
				return backtrack(trace, n, m), true
			}
		}
	}
	return nil, false
}

// backtrack walks trace back from (n, m) to (0, 0) and returns the script.
func backtrack(trace [][]int32, n, m int) []byte {
	script := make([]byte, 0, n+m)
	x, y := n, m
	for d := len(trace) - 1; d >= 0; d-- {
		at := func(k int) int { return int(trace[d][k+d]) }
		k := x - y
		var prevX, prevY int
		if d > 0 {
			prevK := k - 1
			if k == -d || (k != d && at(k-1) < at(k+1)) {
				prevK = k + 1
			}
			prevX = at(prevK)
			prevY = prevX - prevK
		}
		for x > prevX && y > prevY {
			script = append(script, ' ')
			x, y = x-1, y-1
		}
		if d > 0 {
			if x == prevX {
				script = append(script, '+')
			} else {
				script = append(script, '-')
			}
		}
		x, y = prevX, prevY
	}
	for i, j := 0, len(script)-1; i < j; i, j = i+1, j-1 {
		script[i], script[j] = script[j], script[i]
	}
	return script
}

// span is a half-open range of ops.
type span struct{ from, to int }

// hunks groups the changes of ops with diffContext kept lines around each;
// changes closer than twice that share a hunk.
func hunks(ops []lineOp) []span {
	var out []span
	for i := 0; i < len(ops); i++ {
		if ops[i].kind == ' ' {
			continue
		}
		from := max(0, i-diffContext)
		// Extend to the last change followed by more than 2*context kept
		// lines (or by the end).
		last := i
		for j := i + 1; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				last = j
			} else if j-last > 2*diffContext {
				break
			}
		}
		to := min(len(ops), last+1+diffContext)
		if n := len(out); n > 0 && out[n-1].to > from {
			from = out[n-1].from
			out = out[:n-1]
		}
		out = append(out, span{from, to})
		i = last
	}
	return out
}

// writeHunk writes one hunk: its header and its lines.
func writeHunk(sb *strings.Builder, ops []lineOp) {
	oldStart, newStart := ops[0].oldI, ops[0].newI
	oldN, newN := 0, 0
	for _, o := range ops {
		if o.kind != '+' {
			oldN++
		}
		if o.kind != '-' {
			newN++
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(oldStart, oldN), hunkRange(newStart, newN))
	for _, o := range ops {
		sb.WriteByte(o.kind)
		sb.WriteString(o.line)
		if !strings.HasSuffix(o.line, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange formats one side of a hunk header as diff -u does: "start,count",
// just "start" for one line, and for no lines the line before the hunk.
func hunkRange(start0, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start0)
	case 1:
		return fmt.Sprintf("%d", start0+1)
	default:
		return fmt.Sprintf("%d,%d", start0+1, n)
	}
}
