package tool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/tool"
)

// searchTree is a small source tree with the directories searches skip.
var searchTree = map[string]string{
	"main.go":                  "package main\n\nfunc main() {\n\tprintln(\"Hello\")\n}\n",
	"cmd/app/main.go":          "package main\n// TODO: hello\n",
	"cmd/app/main_test.go":     "package main\n",
	"pkg/util/strings.go":      "package util\n\nfunc Hello() string { return \"hello\" }\n",
	"pkg/util/notes.txt":       "hello from notes\r\n",
	"pkg/util/blob.bin":        "hello\x00binary",
	".git/config":              "hello = git\n",
	"node_modules/x/index.js":  "hello()\n",
	"web/src/app.ts":           "const hello = 1;\n",
	"web/src/deep/more/two.ts": "export {};\n",
	"empty/":                   "",
}

func TestGlob(t *testing.T) {
	ws, top := newWorkspace(t, copyMap(searchTree))
	os.Symlink(top, filepath.Join(ws.Root, "uplink"))
	tests := []struct {
		name, args string
		want       string
		wantErr    bool
	}{
		{"double star", `{"pattern":"**/*.go"}`, "cmd/app/main.go\ncmd/app/main_test.go\nmain.go\npkg/util/strings.go\n", false},
		{"one level", `{"pattern":"*.go"}`, "main.go\n", false},
		{"leading dot slash", `{"pattern":"./cmd/**/main.go"}`, "cmd/app/main.go\n", false},
		{"static prefix", `{"pattern":"cmd/*/main.go"}`, "cmd/app/main.go\n", false},
		{"under path", `{"pattern":"**/*.ts","path":"web"}`, "web/src/app.ts\nweb/src/deep/more/two.ts\n", false},
		{"alternatives", `{"pattern":"**/*.{ts,txt}"}`, "pkg/util/notes.txt\nweb/src/app.ts\nweb/src/deep/more/two.ts\n", false},
		{"directories", `{"pattern":"pkg/*"}`, "pkg/util/\n", false},
		{"skips git and node_modules", `{"pattern":"**/*.js"}`, "no paths match **/*.js in .", false},
		{"explicit node_modules", `{"pattern":"**/*.js","path":"node_modules"}`, "node_modules/x/index.js\n", false},
		{"no match", `{"pattern":"**/*.rs"}`, "no paths match **/*.rs in .", false},
		{"missing static dir", `{"pattern":"nope/**/*.go"}`, "no paths match nope/**/*.go in .", false},
		{"symlink out in pattern", `{"pattern":"uplink/**"}`, "is not inside the workspace", true},
		{"absolute pattern", `{"pattern":"/etc/*"}`, `pattern "/etc/*" is absolute; make it relative and pass the directory to search in path`, true},
		{"dotdot pattern", `{"pattern":"../*"}`, `climbs with ".."; pass the directory to search in path instead`, true},
		{"bad pattern", `{"pattern":"[a"}`, "is not a valid glob", true},
		{"path outside", `{"pattern":"*","path":".."}`, "climbs out of the workspace", true},
		{"path a file", `{"pattern":"*","path":"main.go"}`, "main.go is a file, not a directory; pass its directory in path", true},
		{"no pattern", `{}`, `glob needs arguments {"pattern": "**/*.go", "path"?: "."}: pattern is missing`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, tool.Glob{}, ws, tt.args)
			if res.Error != tt.wantErr || (tt.wantErr && !strings.Contains(res.Text, tt.want)) || (!tt.wantErr && res.Text != tt.want) {
				t.Errorf("Call(%s) = %q (error %v), want %q (error %v)", tt.args, res.Text, res.Error, tt.want, tt.wantErr)
			}
		})
	}
}

func TestGlobCap(t *testing.T) {
	files := map[string]string{}
	for i := range tool.GlobMax + 7 {
		files[fmt.Sprintf("d/%d/f.txt", i)] = ""
	}
	ws, _ := newWorkspace(t, files)
	res := call(t, tool.Glob{}, ws, `{"pattern":"**/f.txt"}`)
	lines := strings.Split(strings.TrimSuffix(res.Text, "\n"), "\n")
	if len(lines) != tool.GlobMax+1 || lines[len(lines)-1] != "(7 more matches not shown; narrow the pattern or the path)" {
		t.Errorf("Call() gave %d lines ending %q, want %d paths and a note", len(lines), lines[len(lines)-1], tool.GlobMax)
	}
}

func TestGrep(t *testing.T) {
	ws, _ := newWorkspace(t, copyMap(searchTree))
	tests := []struct {
		name, args string
		want       string
		wantErr    bool
	}{
		{"plain", `{"pattern":"hello"}`,
			"README.md:1: hello\ncmd/app/main.go:2: // TODO: hello\npkg/util/notes.txt:1: hello from notes\npkg/util/strings.go:3: func Hello() string { return \"hello\" }\nweb/src/app.ts:1: const hello = 1;\n", false},
		{"ignore case", `{"pattern":"^\\s*println\\(\"hello","ignore_case":true}`, "main.go:4: \tprintln(\"Hello\")\n", false},
		{"glob on names", `{"pattern":"hello","glob":"*.go"}`,
			"cmd/app/main.go:2: // TODO: hello\npkg/util/strings.go:3: func Hello() string { return \"hello\" }\n", false},
		{"glob on paths", `{"pattern":"(?i)hello","glob":"pkg/**/*.go"}`, "pkg/util/strings.go:3: func Hello() string { return \"hello\" }\n", false},
		{"one file", `{"pattern":"func","path":"main.go"}`, "main.go:3: func main() {\n", false},
		{"under path", `{"pattern":"package","path":"cmd"}`, "cmd/app/main.go:1: package main\ncmd/app/main_test.go:1: package main\n", false},
		{"no match", `{"pattern":"zebra"}`, "no lines match zebra in .", false},
		{"bad regexp", `{"pattern":"(unclosed"}`, "pattern is not a valid Go regular expression (error parsing regexp: missing closing ): `(unclosed`); escape special characters", true},
		{"bad glob", `{"pattern":"x","glob":"{a"}`, `glob "{a" is not a valid glob`, true},
		{"outside", `{"pattern":"x","path":"/etc"}`, "/etc is not inside the workspace", true},
		{"missing path", `{"pattern":"x","path":"nope"}`, "nope does not exist", true},
		{"ignore_case not bool", `{"pattern":"x","ignore_case":1}`, "ignore_case must be true or false, not a JSON number", true},
		{"no pattern", `{"path":"."}`, `grep needs arguments {"pattern": "regexp", "path"?: ".", "glob"?: "*.go", "ignore_case"?: false}: pattern is missing`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, tool.Grep{}, ws, tt.args)
			if res.Error != tt.wantErr || (tt.wantErr && !strings.Contains(res.Text, tt.want)) || (!tt.wantErr && res.Text != tt.want) {
				t.Errorf("Call(%s) = %q (error %v), want %q (error %v)", tt.args, res.Text, res.Error, tt.want, tt.wantErr)
			}
		})
	}
}

func TestGrepCap(t *testing.T) {
	ws, _ := newWorkspace(t, map[string]string{"many.txt": strings.Repeat("match\n", tool.GrepMax+50), "z.txt": "match\n"})
	res := call(t, tool.Grep{}, ws, `{"pattern":"match"}`)
	lines := strings.Split(strings.TrimSuffix(res.Text, "\n"), "\n")
	want := fmt.Sprintf("(stopped after %d matching lines; narrow the pattern, the path or the glob to see the rest)", tool.GrepMax)
	if len(lines) != tool.GrepMax+1 || lines[0] != "many.txt:1: match" || lines[len(lines)-1] != want {
		t.Errorf("Call() gave %d lines ending %q, want %d matches and %q", len(lines), lines[len(lines)-1], tool.GrepMax, want)
	}
}

func TestGrepLongLine(t *testing.T) {
	ws, _ := newWorkspace(t, map[string]string{"min.js": "x" + strings.Repeat("é", 400) + "needle\n"})
	res := call(t, tool.Grep{}, ws, `{"pattern":"needle"}`)
	if !strings.HasPrefix(res.Text, "min.js:1: x") || !strings.HasSuffix(res.Text, " …\n") || strings.ContainsRune(res.Text, '\uFFFD') || len(res.Text) > 400 {
		t.Errorf("Call() = %q, want the line cut at a character boundary", res.Text)
	}
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
