package tool_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/getorrery/orrery/tool"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/diff")

// diffCases are the golden cases: testdata/diff/<name>.golden holds the
// diff of old to new.
var diffCases = []struct {
	name, old, new string
}{
	{"equal", "a\nb\n", "a\nb\n"},
	{"create", "", "one\ntwo\n"},
	{"delete_all", "one\ntwo\n", ""},
	{"change_middle", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n"},
	{"insert_top", "a\nb\nc\nd\ne\n", "new\na\nb\nc\nd\ne\n"},
	{"append", "a\nb\nc\nd\ne\n", "a\nb\nc\nd\ne\nf\n"},
	{"two_hunks", lines(1, 20), strings.Replace(strings.Replace(lines(1, 20), "3\n", "three\n", 1), "17\n", "", 1)},
	{"merged_hunks", lines(1, 20), strings.Replace(strings.Replace(lines(1, 20), "5\n", "five\n", 1), "12\n", "twelve\n", 1)},
	{"no_newline_old", "a\nb", "a\nb\n"},
	{"no_newline_both", "a\nb", "a\nc"},
	{"no_newline_new", "a\nb\n", "a\nb"},
	{"one_line", "x\n", "y\n"},
}

// lines returns the numbers from..to, one a line.
func lines(from, to int) string {
	var sb strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&sb, "%d\n", i)
	}
	return sb.String()
}

func TestUnifiedGolden(t *testing.T) {
	for _, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			oldName := "a/f.txt"
			if tc.old == "" {
				oldName = "/dev/null"
			}
			got := tool.Unified(oldName, "b/f.txt", tc.old, tc.new)
			golden := filepath.Join("testdata", "diff", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden file (run go test -update to create it): %v", err)
			}
			if got != string(want) {
				t.Errorf("Unified() =\n%s\nwant\n%s", got, want)
			}
			if back := applyUnified(t, tc.old, got); back != tc.new {
				t.Errorf("applying Unified() to old = %q, want %q", back, tc.new)
			}
		})
	}
}

// TestUnifiedMatchesDiff compares with the system's diff -u on cases where
// the shortest edit script is unique, so both must print the same bytes.
func TestUnifiedMatchesDiff(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("no diff command on this system")
	}
	for _, tc := range diffCases {
		if tc.old == tc.new || tc.old == "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o, n := filepath.Join(dir, "old"), filepath.Join(dir, "new")
			os.WriteFile(o, []byte(tc.old), 0o644)
			os.WriteFile(n, []byte(tc.new), 0o644)
			out, _ := exec.Command("diff", "-u", "--label", "a/f.txt", "--label", "b/f.txt", o, n).Output()
			if got := tool.Unified("a/f.txt", "b/f.txt", tc.old, tc.new); got != string(out) {
				t.Errorf("Unified() =\n%s\nwant (diff -u)\n%s", got, out)
			}
		})
	}
}

// randomText returns up to n lines drawn from a small alphabet, so that
// random pairs share lines, sometimes without a final newline.
func randomText(r *rand.Rand, n int) string {
	var sb strings.Builder
	k := r.IntN(n + 1)
	for range k {
		sb.WriteString(string(rune('a' + r.IntN(5))))
		sb.WriteByte('\n')
	}
	s := sb.String()
	if s != "" && r.IntN(4) == 0 {
		s = s[:len(s)-1]
	}
	return s
}

// TestUnifiedPatch applies random diffs with the system's patch and with
// the test's own applier.
func TestUnifiedPatch(t *testing.T) {
	_, err := exec.LookPath("patch")
	havePatch := err == nil
	r := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for i := range 200 {
		old, new := randomText(r, 40), randomText(r, 40)
		d := tool.Unified("a/f", "b/f", old, new)
		if got := applyUnified(t, old, d); got != new {
			t.Fatalf("case %d: applying\n%s\nto %q = %q, want %q", i, d, old, got, new)
		}
		if !havePatch || d == "" || i%4 != 0 {
			continue
		}
		f := filepath.Join(dir, "f")
		if err := os.WriteFile(f, []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("patch", "--quiet", "--force", "-p1", "--no-backup-if-mismatch")
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(d)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("case %d: patch: %v\n%s\ndiff:\n%s", i, err, out, d)
		}
		got, _ := os.ReadFile(f)
		if string(got) != new {
			t.Fatalf("case %d: patch gave %q, want %q\ndiff:\n%s", i, got, new, d)
		}
	}
}

// TestUnifiedLarge checks that a change past the edit-script search limit
// still gives a diff that applies.
func TestUnifiedLarge(t *testing.T) {
	var a, b strings.Builder
	for i := range 6000 {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	old, new := "head\n"+a.String()+"tail\n", "head\n"+b.String()+"tail\n"
	d := tool.Unified("a/f", "b/f", old, new)
	if got := applyUnified(t, old, d); got != new {
		t.Fatalf("applying the large diff did not give the new text")
	}
	if !strings.HasPrefix(d, "--- a/f\n+++ b/f\n@@ -1,6002 +1,6002 @@\n head\n-a0\n") {
		t.Errorf("Unified() starts %q, want one hunk replacing the middle", d[:60])
	}
}

func FuzzUnified(f *testing.F) {
	for _, tc := range diffCases {
		f.Add(tc.old, tc.new)
	}
	f.Fuzz(func(t *testing.T, old, new string) {
		if len(old) > 4000 || len(new) > 4000 {
			return
		}
		d := tool.Unified("a/f", "b/f", old, new)
		if got := applyUnified(t, old, d); got != new {
			t.Fatalf("applying\n%s\nto %q = %q, want %q", d, old, got, new)
		}
	})
}

// applyUnified applies the unified diff d to old, checking every context and
// removed line against old, and returns the result.
func applyUnified(t testing.TB, old, d string) string {
	t.Helper()
	if d == "" {
		return old
	}
	src := strings.SplitAfter(old, "\n")
	if src[len(src)-1] == "" {
		src = src[:len(src)-1]
	}
	dl := strings.SplitAfter(d, "\n")
	if len(dl) < 3 || !strings.HasPrefix(dl[0], "--- ") || !strings.HasPrefix(dl[1], "+++ ") {
		t.Fatalf("diff has no headers:\n%s", d)
	}
	var out []string
	pos := 0 // next line of src to copy
	for i := 2; i < len(dl) && dl[i] != ""; {
		h := dl[i]
		var os, on, ns, nn int
		if !parseHunk(h, &os, &on, &ns, &nn) {
			t.Fatalf("bad hunk header %q in\n%s", h, d)
		}
		start := os - 1
		if on == 0 {
			start = os
		}
		if start < pos {
			t.Fatalf("hunk %q overlaps the previous one", h)
		}
		out = append(out, src[pos:start]...)
		pos = start
		i++
		gotOld, gotNew := 0, 0
		for i < len(dl) && dl[i] != "" && !strings.HasPrefix(dl[i], "@@") {
			l := dl[i]
			i++
			noNL := i < len(dl) && strings.HasPrefix(dl[i], `\ No newline at end of file`)
			body := l[1:]
			if noNL {
				body = strings.TrimSuffix(body, "\n")
				i++
			}
			switch l[0] {
			case ' ', '-':
				if pos >= len(src) || src[pos] != body {
					t.Fatalf("line %d of old is %q, diff says %q", pos+1, at(src, pos), body)
				}
				if l[0] == ' ' {
					out = append(out, body)
					gotNew++
				}
				pos++
				gotOld++
			case '+':
				out = append(out, body)
				gotNew++
			default:
				t.Fatalf("bad diff line %q", l)
			}
		}
		if gotOld != on || gotNew != nn {
			t.Fatalf("hunk %q has %d old and %d new lines", h, gotOld, gotNew)
		}
	}
	out = append(out, src[pos:]...)
	return strings.Join(out, "")
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<end of file>"
}

// parseHunk parses "@@ -os,on +ns,nn @@" where a missing count is 1.
func parseHunk(h string, os, on, ns, nn *int) bool {
	f := strings.Fields(h)
	if len(f) != 4 || f[0] != "@@" || f[3] != "@@" || f[1][0] != '-' || f[2][0] != '+' {
		return false
	}
	side := func(s string, start, n *int) bool {
		a, b, ok := strings.Cut(s[1:], ",")
		var err1, err2 error
		*start, err1 = strconv.Atoi(a)
		*n = 1
		if ok {
			*n, err2 = strconv.Atoi(b)
		}
		return err1 == nil && err2 == nil
	}
	return side(f[1], os, on) && side(f[2], ns, nn)
}
