package main

import (
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr error
	}{
		{"", nil, nil},
		{" \t\n ", nil, nil},
		{"gemini --acp", []string{"gemini", "--acp"}, nil},
		{"  gemini\t--acp\n", []string{"gemini", "--acp"}, nil},
		{`'/opt/my agent/bin' --acp`, []string{"/opt/my agent/bin", "--acp"}, nil},
		{`"/opt/my agent/bin" --acp`, []string{"/opt/my agent/bin", "--acp"}, nil},
		{`/opt/my\ agent/bin --acp`, []string{"/opt/my agent/bin", "--acp"}, nil},
		{`a'b c'd "e f"g`, []string{"ab cd", "e fg"}, nil},
		{`'' ""`, []string{"", ""}, nil},
		{`x '' y`, []string{"x", "", "y"}, nil},
		{`'it'\''s'`, []string{"it's"}, nil},
		{`'a "b" \c'`, []string{`a "b" \c`}, nil},
		{`"say \"hi\" \\ \$HOME \` + "`" + `x\` + "`" + `"`, []string{"say \"hi\" \\ $HOME `x`"}, nil},
		{`"\a \n"`, []string{`\a \n`}, nil},
		{"\"a\\\nb\"", []string{"ab"}, nil},
		{"a\\\nb", []string{"ab"}, nil},
		{`\'\"\\`, []string{`'"\`}, nil},
		{`$HOME ~/bin *.go`, []string{"$HOME", "~/bin", "*.go"}, nil},
		{"caf\u00e9 \u00a0x", []string{"café", "\u00a0x"}, nil},
		{`'/opt/my agent`, nil, errOpenSingle},
		{`a "b`, nil, errOpenDouble},
		{`"b\"`, nil, errOpenDouble},
		{`a \`, nil, errTrailingBackslash},
		{`"\`, nil, errOpenDouble},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.in)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Errorf("splitWords(%q) error = %v, want %v", tt.in, err, tt.wantErr)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("splitWords(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestJoinWords(t *testing.T) {
	tests := []struct {
		words []string
		want  string
	}{
		{[]string{"gemini", "--acp"}, "gemini --acp"},
		{[]string{"/opt/my agent/bin", "--acp"}, "'/opt/my agent/bin' --acp"},
		{[]string{"it's", ""}, `'it'\''s' ''`},
		{[]string{`a\b`, `say "x"`, "~/bin", "$HOME"}, `'a\b' 'say "x"' ~/bin $HOME`},
	}
	for _, tt := range tests {
		if got := joinWords(tt.words); got != tt.want {
			t.Errorf("joinWords(%q) = %q, want %q", tt.words, got, tt.want)
		}
	}
}

func TestACPCommandErrors(t *testing.T) {
	tests := []struct {
		line string
		want string
	}{
		{`'/opt/my agent --acp`, "unterminated ' quote: close it, as in acp:'/opt/my agent/bin' --acp"},
		{`"/opt/my agent --acp`, `unterminated " quote: close it`},
		{`agent \`, "ends with a backslash"},
		{"  ", "names no command"},
		{`'' --acp`, "empty word"},
	}
	for _, tt := range tests {
		_, err := acpCommand(tt.line)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("acpCommand(%q) error = %v, want one containing %q", tt.line, err, tt.want)
		}
	}
}

// FuzzSplitWords checks that any words, quoted with quoteWord and joined,
// split back into the same words, and that whatever splitWords accepts
// splits the same again once re-joined. The input's NUL bytes separate
// the words (a command-line word cannot hold a NUL).
func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{"", "gemini\x00--acp", "/opt/my agent/bin\x00--acp", "it's\x00\x00x", `a "b" \c` + "\x00\t\n", `'/opt/x`, `"a\"b" c\ d`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words := strings.Split(s, "\x00")
		line := joinWords(words)
		got, err := splitWords(line)
		if err != nil || !slices.Equal(got, words) {
			t.Fatalf("splitWords(joinWords(%q)) = %q, %v; joined %q", words, got, err, line)
		}
		// s read as a command line.
		first, err := splitWords(s)
		if err != nil {
			return
		}
		again, err := splitWords(joinWords(first))
		if err != nil || !slices.Equal(again, first) {
			t.Fatalf("splitWords(joinWords(splitWords(%q))) = %q, %v, want %q", s, again, err, first)
		}
	})
}

// TestExitAfter: a command stopped by Ctrl-C exits 130 unless it failed
// otherwise; SIGTERM leaves a clean stop at 0.
func TestExitAfter(t *testing.T) {
	for _, tc := range []struct {
		code int
		sig  os.Signal
		want int
	}{
		{exitOK, nil, exitOK},
		{exitOK, os.Interrupt, exitCancelled},
		{exitOK, syscall.SIGTERM, exitOK},
		{exitError, os.Interrupt, exitError},
		{exitCancelled, os.Interrupt, exitCancelled},
	} {
		if got := exitAfter(tc.code, tc.sig); got != tc.want {
			t.Errorf("exitAfter(%d, %v) = %d, want %d", tc.code, tc.sig, got, tc.want)
		}
	}
}
