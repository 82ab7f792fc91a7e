//go:build unix

package tool_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/ui"
)

// numbered returns lines from..to of a file whose line i is "line i", as
// read_file shows them.
func numbered(from, to int) string {
	var sb strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&sb, "%6d\tline %d\n", i, i)
	}
	return sb.String()
}

func TestReadFile(t *testing.T) {
	var long strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	ws, _ := newWorkspace(t, map[string]string{
		"a.txt":      "one\ntwo\r\nthree",
		"empty.txt":  "",
		"long.txt":   long.String(),
		"wide.txt":   strings.Repeat("x", 5000) + "\nshort\n",
		"bin.dat":    "ELF\x00\x01\x02",
		"dir/x.txt":  "x",
		"latin1.txt": "caf\xe9\n",
	})
	if err := syscall.Mkfifo(filepath.Join(ws.Root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, args string
		want       string
		wantErr    bool
	}{
		{"whole file", `{"path":"a.txt"}`, "     1\tone\n     2\ttwo\n     3\tthree\n", false},
		{"offset and limit", `{"path":"a.txt","offset":2,"limit":1}`, "     2\ttwo\n(lines 2–2 of 3; to read further, call read_file with offset 3)", false},
		{"empty file", `{"path":"empty.txt"}`, "(empty.txt is empty)", false},
		{"line cap", `{"path":"long.txt"}`, numbered(1, 2000) + "(lines 1–2000 of 2500; to read further, call read_file with offset 2001)", false},
		{"limit above cap", `{"path":"long.txt","offset":401,"limit":5000}`, numbered(401, 2400) + "(lines 401–2400 of 2500; to read further, call read_file with offset 2401)", false},
		{"the rest", `{"path":"long.txt","offset":2001}`, numbered(2001, 2500), false},
		{"long line cut", `{"path":"wide.txt"}`, "     1\t" + strings.Repeat("x", 2000) + " … (line cut at 2000 bytes)\n     2\tshort\n", false},
		{"invalid utf-8", `{"path":"latin1.txt"}`, "     1\tcaf\uFFFD\n", false},
		{"offset past end", `{"path":"a.txt","offset":9}`, "offset 9 is past the end of a.txt, which has 3 lines; pass an offset from 1 to 3", true},
		{"binary", `{"path":"bin.dat"}`, "bin.dat is a binary file; read_file shows text only", true},
		{"directory", `{"path":"dir"}`, "dir is a directory; list its entries with list_files", true},
		{"fifo", `{"path":"fifo"}`, "fifo is not a regular file (it is a named pipe)", true},
		{"missing file", `{"path":"nope.txt"}`, "nope.txt does not exist; check the path with list_files or glob", true},
		{"outside", `{"path":"../x"}`, "climbs out of the workspace", true},
		{"no path", `{}`, `read_file needs arguments {"path": "…", "offset"?: 1, "limit"?: 2000}: path is missing`, true},
		{"bad offset", `{"path":"a.txt","offset":0}`, "offset 0 is not a line number; lines count from 1", true},
		{"bad limit", `{"path":"a.txt","limit":-1}`, "limit -1 is not a line count", true},
		{"offset as string", `{"path":"a.txt","offset":"2"}`, "offset must be an integer, not a JSON string", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, tool.ReadFile{}, ws, tt.args)
			if res.Error != tt.wantErr || (tt.wantErr && !strings.Contains(res.Text, tt.want)) || (!tt.wantErr && res.Text != tt.want) {
				t.Errorf("Call(%s) = %q (error %v), want %q (error %v)", tt.args, trunc(res.Text), res.Error, trunc(tt.want), tt.wantErr)
			}
		})
	}
}

// TestReadFileByteCap reads a file whose first 2000 lines pass 256 KiB.
func TestReadFileByteCap(t *testing.T) {
	line := strings.Repeat("y", 199) + "\n"
	ws, _ := newWorkspace(t, map[string]string{"big.txt": strings.Repeat(line, 1500)})
	res := call(t, tool.ReadFile{}, ws, `{"path":"big.txt"}`)
	// Each shown line is 6 digits, a tab, 199 bytes and a newline: 207.
	shown := tool.ReadFileMaxBytes / 207
	want := fmt.Sprintf("(lines 1–%d of 1500; to read further, call read_file with offset %d)", shown, shown+1)
	if res.Error || !strings.HasSuffix(res.Text, want) || len(res.Text) > tool.ReadFileMaxBytes+len(want) {
		t.Errorf("Call() = …%q (%d bytes), want it to end %q", tail(res.Text), len(res.Text), want)
	}
}

func trunc(s string) string {
	if len(s) > 300 {
		return s[:150] + " … " + s[len(s)-150:]
	}
	return s
}

func tail(s string) string { return s[max(0, len(s)-120):] }

// diffOf returns the diff a result's surface carries, checking that the
// surface is a valid diff surface for path.
func diffOf(t *testing.T, res tool.Result, path string) string {
	t.Helper()
	if err := ui.Validate(res.Surface); err != nil {
		t.Fatalf("Surface %s is not a valid surface: %v", res.Surface, err)
	}
	var s struct {
		Kind struct {
			T, Path, Value string
		} `json:"kind"`
	}
	if err := json.Unmarshal(res.Surface, &s); err != nil {
		t.Fatal(err)
	}
	if s.Kind.T != "diff" || s.Kind.Path != path {
		t.Fatalf("Surface = %s, want a diff of %s", res.Surface, path)
	}
	return s.Kind.Value
}

func readFile(t *testing.T, ws tool.Workspace, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ws.Root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestWriteFile(t *testing.T) {
	ws, top := newWorkspace(t, map[string]string{"old.txt": "a\nb\nc\n", "dir/": ""})
	if err := os.Chmod(filepath.Join(ws.Root, "old.txt"), 0o750); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(top, "elsewhere"), filepath.Join(ws.Root, "out"))

	res := call(t, tool.WriteFile{}, ws, `{"path":"old.txt","content":"a\nB\nc\n"}`)
	if res.Error || res.Text != "wrote old.txt (6 bytes, +1 -1 lines)" {
		t.Errorf("write over old.txt = %q, want it written", res.Text)
	}
	if got := readFile(t, ws, "old.txt"); got != "a\nB\nc\n" {
		t.Errorf("old.txt = %q after the write", got)
	}
	if fi, _ := os.Stat(filepath.Join(ws.Root, "old.txt")); fi.Mode().Perm() != 0o750 {
		t.Errorf("old.txt mode = %v, want 0750 kept", fi.Mode().Perm())
	}
	wantDiff := "--- a/old.txt\n+++ b/old.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
	if got := diffOf(t, res, "old.txt"); got != wantDiff {
		t.Errorf("diff = %q, want %q", got, wantDiff)
	}

	res = call(t, tool.WriteFile{}, ws, `{"path":"new/deep/f.go","content":"package f\n"}`)
	if res.Error || res.Text != "created new/deep/f.go (10 bytes, +1 -0 lines)" {
		t.Errorf("write of a new file = %q", res.Text)
	}
	if got := diffOf(t, res, "new/deep/f.go"); got != "--- /dev/null\n+++ b/new/deep/f.go\n@@ -0,0 +1 @@\n+package f\n" {
		t.Errorf("diff of a new file = %q", got)
	}
	if fi, _ := os.Stat(filepath.Join(ws.Root, "new/deep/f.go")); fi.Mode().Perm() != 0o644 {
		t.Errorf("new file mode = %v, want 0644", fi.Mode().Perm())
	}

	res = call(t, tool.WriteFile{}, ws, `{"path":"new/deep/f.go","content":"package f\n"}`)
	if res.Error || res.Surface != nil || res.Text != "new/deep/f.go already has this content; nothing changed" {
		t.Errorf("write of the same content = %+v", res)
	}

	refusals := []struct{ name, args, want string }{
		{"directory", `{"path":"dir","content":"x"}`, "dir is a directory; write to a file path, such as dir/name"},
		{"outside", `{"path":"/tmp/x","content":"x"}`, "/tmp/x is not inside the workspace"},
		{"through a link out", `{"path":"out/f","content":"x"}`, "which is not inside the workspace"},
		{"no content", `{"path":"a"}`, `write_file needs arguments {"path": "…", "content": "…"}: content is missing`},
		{"content not string", `{"path":"a","content":3}`, "content must be a string, not a JSON number"},
		{"trailing garbage", `{"path":"a","content":"x"} {}`, "the arguments must be a single JSON object"},
		{"truncated json", `{"path":"a","content":"x`, "the arguments are not valid JSON"},
	}
	for _, tt := range refusals {
		res := call(t, tool.WriteFile{}, ws, tt.args)
		if !res.Error || !strings.Contains(res.Text, tt.want) {
			t.Errorf("%s: Call(%s) = %q, want an error containing %q", tt.name, tt.args, res.Text, tt.want)
		}
	}
	if _, err := os.Lstat(filepath.Join(top, "elsewhere")); !os.IsNotExist(err) {
		t.Errorf("a refused write through a symlink created its target: %v", err)
	}
	// No temporary file is left beside the written ones.
	entries, _ := os.ReadDir(ws.Root)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".orrery-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestWriteFileThroughSymlink checks that writing to a symlink inside the
// workspace replaces its target's content and keeps the link.
func TestWriteFileThroughSymlink(t *testing.T) {
	ws, _ := newWorkspace(t, map[string]string{"real.txt": "old\n"})
	if err := os.Symlink("real.txt", filepath.Join(ws.Root, "link.txt")); err != nil {
		t.Fatal(err)
	}
	res := call(t, tool.WriteFile{}, ws, `{"path":"link.txt","content":"new\n"}`)
	if res.Error || readFile(t, ws, "real.txt") != "new\n" {
		t.Errorf("write through link = %q, real.txt = %q", res.Text, readFile(t, ws, "real.txt"))
	}
	if fi, err := os.Lstat(filepath.Join(ws.Root, "link.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link.txt is no longer a symlink: %v", err)
	}
}

func TestEditFile(t *testing.T) {
	const src = "func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n"
	tests := []struct {
		name, args string
		want       string // the result text, or a part of the refusal
		wantErr    bool
		wantFile   string // the file after the call
		wantDiff   string
	}{
		{"unique", `{"path":"f.go","old_string":"func a() {\n\treturn 1","new_string":"func a() {\n\treturn 2"}`,
			"replaced 1 occurrence in f.go (+1 -1 lines)", false,
			strings.Replace(src, "return 1", "return 2", 1),
			"--- a/f.go\n+++ b/f.go\n@@ -1,5 +1,5 @@\n func a() {\n-\treturn 1\n+\treturn 2\n }\n \n func b() {\n"},
		{"replace all", `{"path":"f.go","old_string":"return 1","new_string":"return 0","replace_all":true}`,
			"replaced 2 occurrences in f.go (+2 -2 lines)", false,
			strings.ReplaceAll(src, "return 1", "return 0"),
			"--- a/f.go\n+++ b/f.go\n@@ -1,7 +1,7 @@\n func a() {\n-\treturn 1\n+\treturn 0\n }\n \n func b() {\n-\treturn 1\n+\treturn 0\n }\n"},
		{"several", `{"path":"f.go","old_string":"return 1","new_string":"return 0"}`,
			"old_string occurs 2 times in f.go; include more surrounding lines to make it unique, or pass replace_all: true to replace all 2", true, src, ""},
		{"none", `{"path":"f.go","old_string":"return 9","new_string":"return 0"}`,
			"old_string was not found in f.go; read the file with read_file and copy the text exactly", true, src, ""},
		{"same", `{"path":"f.go","old_string":"return 1","new_string":"return 1"}`,
			"old_string and new_string are the same, so nothing would change; pass the replacement text in new_string", true, src, ""},
		{"empty old", `{"path":"f.go","old_string":"","new_string":"x"}`, "old_string is empty", true, src, ""},
		{"missing file", `{"path":"g.go","old_string":"a","new_string":"b"}`, "g.go does not exist; create it with write_file", true, src, ""},
		{"missing new_string", `{"path":"f.go","old_string":"a"}`,
			`edit_file needs arguments {"path": "…", "old_string": "…", "new_string": "…", "replace_all"?: false}: new_string is missing`, true, src, ""},
		{"replace_all not bool", `{"path":"f.go","old_string":"a","new_string":"b","replace_all":"yes"}`,
			"replace_all must be true or false, not a JSON string", true, src, ""},
		{"outside", `{"path":"../f.go","old_string":"a","new_string":"b"}`, "climbs out of the workspace", true, src, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, _ := newWorkspace(t, map[string]string{"f.go": src})
			if err := os.Chmod(filepath.Join(ws.Root, "f.go"), 0o600); err != nil {
				t.Fatal(err)
			}
			res := call(t, tool.EditFile{}, ws, tt.args)
			if res.Error != tt.wantErr || (tt.wantErr && !strings.Contains(res.Text, tt.want)) || (!tt.wantErr && res.Text != tt.want) {
				t.Errorf("Call() = %q (error %v), want %q (error %v)", res.Text, res.Error, tt.want, tt.wantErr)
			}
			if got := readFile(t, ws, "f.go"); got != tt.wantFile {
				t.Errorf("f.go = %q, want %q", got, tt.wantFile)
			}
			if fi, _ := os.Stat(filepath.Join(ws.Root, "f.go")); fi.Mode().Perm() != 0o600 {
				t.Errorf("f.go mode = %v, want 0600 kept", fi.Mode().Perm())
			}
			if tt.wantErr {
				if res.Surface != nil {
					t.Errorf("refused edit has a surface %s", res.Surface)
				}
				return
			}
			if got := diffOf(t, res, "f.go"); got != tt.wantDiff {
				t.Errorf("diff = %q, want %q", got, tt.wantDiff)
			}
		})
	}
}

func TestEditFileBinary(t *testing.T) {
	ws, _ := newWorkspace(t, map[string]string{"b.bin": "a\x00b"})
	res := call(t, tool.EditFile{}, ws, `{"path":"b.bin","old_string":"a","new_string":"c"}`)
	if !res.Error || !strings.Contains(res.Text, "b.bin is a binary file") {
		t.Errorf("Call() = %q, want a refusal of the binary file", res.Text)
	}
}

func TestListFiles(t *testing.T) {
	ws, _ := newWorkspace(t, map[string]string{"b.txt": "", "a/x": "", ".hidden": "", "empty/": ""})
	os.Symlink("a", filepath.Join(ws.Root, "alink"))
	tests := []struct {
		name, args string
		want       string
		wantErr    bool
	}{
		{"root", `{}`, ".hidden\nREADME.md\na/\nalink/\nb.txt\nempty/\n", false},
		{"root by dot", `{"path":"."}`, ".hidden\nREADME.md\na/\nalink/\nb.txt\nempty/\n", false},
		{"subdir", `{"path":"a"}`, "x\n", false},
		{"empty", `{"path":"empty"}`, "(the directory empty is empty)", false},
		{"file", `{"path":"b.txt"}`, "b.txt is a file, not a directory; read it with read_file", true},
		{"missing", `{"path":"nope"}`, "nope does not exist", true},
		{"outside", `{"path":"/"}`, "/ is not inside the workspace", true},
		{"path not string", `{"path":1}`, `list_files needs arguments {"path"?: "."}: path must be a string, not a JSON number`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, tool.ListFiles{}, ws, tt.args)
			if res.Error != tt.wantErr || (tt.wantErr && !strings.Contains(res.Text, tt.want)) || (!tt.wantErr && res.Text != tt.want) {
				t.Errorf("Call(%s) = %q (error %v), want %q (error %v)", tt.args, res.Text, res.Error, tt.want, tt.wantErr)
			}
		})
	}
}

func TestListFilesCap(t *testing.T) {
	files := map[string]string{}
	for i := range tool.ListFilesMax + 5 {
		files[fmt.Sprintf("d/f%04d", i)] = ""
	}
	ws, _ := newWorkspace(t, files)
	res := call(t, tool.ListFiles{}, ws, `{"path":"d"}`)
	lines := strings.Split(strings.TrimSuffix(res.Text, "\n"), "\n")
	if len(lines) != tool.ListFilesMax+1 || lines[0] != "f0000" || lines[len(lines)-1] != "(5 more entries not shown; use glob with a pattern to narrow the listing)" {
		t.Errorf("Call() gave %d lines ending %q, want %d entries and a note", len(lines), lines[len(lines)-1], tool.ListFilesMax)
	}
}
