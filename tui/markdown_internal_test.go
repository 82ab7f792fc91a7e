package tui

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestMarkdownBlocks cuts Markdown at blank lines, except inside a fenced
// code block or before an indented line that continues a list item.
func TestMarkdownBlocks(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"one paragraph", "hello\nthere", []string{"hello\nthere"}},
		{"two paragraphs", "one\n\ntwo", []string{"one", "two"}},
		{"many blank lines", "one\n\n\n\ntwo\n\n", []string{"one", "two"}},
		{"a fence keeps its blank lines", "```go\na := 1\n\nb := 2\n```\n\nafter", []string{"```go\na := 1\n\nb := 2\n```", "after"}},
		{"a tilde fence", "~~~\nx\n\ny\n~~~\nz", []string{"~~~\nx\n\ny\n~~~\nz"}},
		{"a longer fence closes only on its length", "````\n```\n\nstill code\n````\n\nout", []string{"````\n```\n\nstill code\n````", "out"}},
		{"an open fence runs to the end", "```\ncode\n\nmore", []string{"```\ncode\n\nmore"}},
		{"an indented line continues", "- item\n\n    more of it\n\nnext", []string{"- item\n\n    more of it", "next"}},
		{"inline backticks open no fence", "```a`b\n\nnext", []string{"```a`b", "next"}},
		{"empty", "", nil},
		{"only blank lines", "\n\n  \n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := markdownBlocks(tc.src); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("markdownBlocks(%q) = %q, want %q", tc.src, got, tc.want)
			}
		})
	}
}

// streamedReply has the Markdown a model streams: a heading, paragraphs, a
// list, a code block with a blank line in it, a table, and a code block
// and a list long enough to be drawn in pieces.
var streamedReply = "# Plan\n\nFirst we read the **config**, then we write it back.\n\n" +
	"1. read `orrery.toml`\n2. change the listen address\n\n```toml\n[server]\n\nlisten = \"127.0.0.1:7400\"\n```\n\n" +
	"| key | value |\n|-----|-------|\n| a   | 1     |\n\n" +
	"```go\n" + strings.Repeat("x := f(x) // step\n", 40) + "```\n\n" +
	strings.Repeat("- a point\n", 35) + "\nThat is all."

// TestBlockPieces cuts long blocks where each piece draws alone as in the
// whole: code into fenced pieces of its language, lists at an item, never
// inside a table, at a blank line of code, or past a closed fence.
func TestBlockPieces(t *testing.T) {
	code := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "line%d\n", i)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	list := strings.TrimSuffix(strings.Repeat("- item\n", 20), "\n")
	table := "| a |\n|---|\n" + strings.TrimSuffix(strings.Repeat("| 1 |\n", 30), "\n")
	for _, tc := range []struct {
		name, block string
		want        []string
	}{
		{"short stays whole", "```go\n" + code(10) + "\n```", []string{"```go\n" + code(10) + "\n```"}},
		// The opening fence counts as one of the first piece's lines.
		{"a long fence in fenced pieces", "```go\n" + code(40) + "\n```", []string{
			"```go\n" + strings.Join(strings.Split(code(40), "\n")[:15], "\n") + "\n```",
			"```go\n" + strings.Join(strings.Split(code(40), "\n")[15:31], "\n") + "\n```",
			"```go\n" + strings.Join(strings.Split(code(40), "\n")[31:], "\n") + "\n```",
		}},
		{"an open fence too", "~~~\n" + code(20), []string{
			"~~~\n" + strings.Join(strings.Split(code(20), "\n")[:15], "\n") + "\n~~~",
			"~~~\n" + strings.Join(strings.Split(code(20), "\n")[15:], "\n"),
		}},
		{"a list at an item", list, []string{strings.TrimSuffix(strings.Repeat("- item\n", 16), "\n"), "- item\n- item\n- item\n- item"}},
		{"a table stays whole", table, []string{table}},
		{"a blank code line is no cut", "```\n" + strings.Repeat("a\n\n", 12) + "```", []string{"```\n" + strings.Repeat("a\n\n", 12) + "```"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := blockPieces(tc.block); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("blockPieces =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestStreamedReplyDoesNotJump draws a reply at lengths it passes through
// while it streams, as the TUI does on each delta, and checks that
// the blocks already finished are drawn exactly as the whole reply draws
// them: only the last block grows, and the end of the turn moves nothing.
// Finished blocks are cached, the growing one is not, so a long stream
// does not flush the cache.
func TestStreamedReplyDoesNotJump(t *testing.T) {
	for _, w := range []int{100, 60, 30} {
		md := &markdown{}
		whole := md.renderBlocks(streamedReply, w)
		if len(whole) == 0 {
			t.Fatalf("at %d columns the reply draws nothing", w)
		}
		for n := 1; n <= len(streamedReply); n++ {
			// Every line's end and a spread of lengths between them.
			if !utf8.ValidString(streamedReply[:n]) || (streamedReply[n-1] != '\n' && n%7 != 0) {
				continue
			}
			part := streamedReply[:n]
			got := md.renderBlocks(part, w)
			blocks := markdownBlocks(part)
			if len(blocks) == 0 {
				continue
			}
			pieces := blockPieces(blocks[len(blocks)-1])
			done := len(got) - len(md.renderBlock(pieces[len(pieces)-1], w, false))
			if done < 0 || done > len(whole) || strings.Join(got[:done], "\n") != strings.Join(whole[:done], "\n") {
				t.Fatalf("at %d columns, after %d bytes (%q) the finished pieces are drawn\n%s\nbut the whole reply draws\n%s",
					w, n, part[max(0, n-20):], stripSGR(strings.Join(got, "\n")), stripSGR(strings.Join(whole, "\n")))
			}
		}
		most := 0
		for _, b := range markdownBlocks(streamedReply) {
			most += len(blockPieces(b))
		}
		if n := len(md.cache); n > most {
			t.Errorf("at %d columns the cache holds %d drawings after one streamed reply of %d pieces", w, n, most)
		}
		if got := md.renderBlocks(streamedReply, w); !reflect.DeepEqual(got, whole) {
			t.Errorf("at %d columns the reply drawn again differs", w)
		}
	}
}

// TestWrapCommandKeepsFlags: a command line wraps at spaces only, at every
// width its longest word fits: no row ends in a hyphen cut from its flag,
// and no word is lost.
func TestWrapCommandKeepsFlags(t *testing.T) {
	text := `asked because the parts "make -j8", "rm -rf ./important" and "git push --force-with-lease" match no allow rule`
	for w := len(`--force-with-lease"`); w <= 80; w++ {
		rows := wrapCommand(text, w)
		for _, r := range rows {
			if strings.HasSuffix(strings.TrimSpace(r), "-") {
				t.Errorf("at %d columns a row ends in a cut hyphen: %q", w, r)
			}
		}
		if got := strings.Join(strings.Fields(strings.Join(rows, " ")), " "); got != text {
			t.Errorf("at %d columns the words are %q, want %q", w, got, text)
		}
	}
}
