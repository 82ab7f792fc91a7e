package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/tool"
)

// call runs t with args in ws and fails the test on a Go error.
func call(t *testing.T, tl tool.Tool, ws tool.Workspace, args string) tool.Result {
	t.Helper()
	res, err := tl.Call(context.Background(), tool.Call{ID: "c1", Args: json.RawMessage(args), Workspace: ws})
	if err != nil {
		t.Fatalf("%s.Call(%s) error = %v", tl.Spec().Name, args, err)
	}
	return res
}

// newWorkspace returns a workspace rooted in a fresh temporary directory
// (symlinks resolved), holding the given files, and the directory outside
// it that holds the root.
func newWorkspace(t *testing.T, files map[string]string) (tool.Workspace, string) {
	t.Helper()
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(top, "root")
	for name, content := range map[string]string{"README.md": "hello\n"} {
		files[name] = content
	}
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tool.Workspace{Root: root}, top
}

func TestResolve(t *testing.T) {
	ws, top := newWorkspace(t, map[string]string{"src/a.go": "package a\n", "extra/": ""})
	root := ws.Root
	outside := filepath.Join(top, "outside")
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	extra := filepath.Join(top, "more")
	os.MkdirAll(extra, 0o755)
	ws.Extra = []string{extra}
	mustLink := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	mustLink(outside, "out")                           // a directory link leaving the root
	mustLink(filepath.Join(outside, "secret"), "leak") // a file link leaving the root
	mustLink("src", "srclink")                         // a relative link inside
	mustLink(filepath.Join(outside, "new"), "dangling")
	mustLink(filepath.Join(root, "src", "b.go"), "dangling_in")

	tests := []struct {
		name, path string
		want       string // the resolved path; "" when refused
		wantErr    string
	}{
		{"relative file", "README.md", filepath.Join(root, "README.md"), ""},
		{"root itself", ".", root, ""},
		{"nested", "src/a.go", filepath.Join(root, "src", "a.go"), ""},
		{"dotdot inside", "src/../README.md", filepath.Join(root, "README.md"), ""},
		{"absolute inside", filepath.Join(root, "src"), filepath.Join(root, "src"), ""},
		{"new file", "src/new.go", filepath.Join(root, "src", "new.go"), ""},
		{"new file in new dirs", "a/b/c.txt", filepath.Join(root, "a", "b", "c.txt"), ""},
		{"symlink inside", "srclink/a.go", filepath.Join(root, "src", "a.go"), ""},
		{"new file through symlink inside", "srclink/z.go", filepath.Join(root, "src", "z.go"), ""},
		{"dangling symlink inside", "dangling_in", filepath.Join(root, "src", "b.go"), ""},
		{"extra root", filepath.Join(extra, "x"), filepath.Join(extra, "x"), ""},
		{"dotdot escape", "../outside/secret", "", `../outside/secret climbs out of the workspace ` + root + ` with ".."; pass a path that stays inside it`},
		{"dotdot escape deep", "src/../../x", "", "climbs out of the workspace"},
		{"absolute outside", "/etc/passwd", "", "/etc/passwd is not inside the workspace " + root + "; pass a path inside it"},
		{"symlink dir leaving", "out/secret", "", "out/secret is a symlink to " + filepath.Join(outside, "secret") + ", which is not inside the workspace"},
		{"symlink file leaving", "leak", "", "which is not inside the workspace"},
		{"new file under leaving link", "out/new.txt", "", "which is not inside the workspace"},
		{"dangling link leaving", "dangling", "", "which is not inside the workspace"},
		{"empty", "", "", "the path is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ws.Resolve(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve(%q) = %q, %v, want error containing %q", tt.path, got, err, tt.wantErr)
				}
				if tt.path != "" && !errors.Is(err, tool.ErrOutsideWorkspace) {
					t.Errorf("Resolve(%q) error %v is not ErrOutsideWorkspace", tt.path, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Resolve(%q) = %q, %v, want %q", tt.path, got, err, tt.want)
			}
		})
	}
}

func TestResolveNoWorkspace(t *testing.T) {
	_, err := tool.Workspace{}.Resolve("a.txt")
	if !errors.Is(err, tool.ErrNoWorkspace) || !strings.Contains(err.Error(), "start the session with a working directory") {
		t.Errorf("Resolve() = %v, want ErrNoWorkspace naming the fix", err)
	}
	_, err = tool.Workspace{Root: filepath.Join(t.TempDir(), "gone")}.Resolve("a.txt")
	if err == nil || !strings.Contains(err.Error(), "start the session in a directory that exists") {
		t.Errorf("Resolve() in a missing root = %v, want a refusal naming the fix", err)
	}
}

// TestResolveLinkedRoot checks a root reached through a symlink: paths
// given either way resolve, and Rel shows them relative to the root.
func TestResolveLinkedRoot(t *testing.T) {
	ws, top := newWorkspace(t, map[string]string{"src/a.go": ""})
	link := filepath.Join(top, "link")
	if err := os.Symlink(ws.Root, link); err != nil {
		t.Fatal(err)
	}
	lw := tool.Workspace{Root: link}
	for _, p := range []string{"src/a.go", filepath.Join(link, "src/a.go"), filepath.Join(ws.Root, "src/a.go")} {
		got, err := lw.Resolve(p)
		if err != nil || got != filepath.Join(ws.Root, "src", "a.go") {
			t.Errorf("Resolve(%q) = %q, %v, want the real path", p, got, err)
		}
		if rel := lw.Rel(got); rel != "src/a.go" {
			t.Errorf("Rel(%q) = %q, want src/a.go", got, rel)
		}
	}
}

func TestRel(t *testing.T) {
	ws := tool.Workspace{Root: "/w/root"}
	tests := []struct{ abs, want string }{
		{"/w/root", "."},
		{"/w/root/a/b.txt", "a/b.txt"},
		{"/w/rootx/a", "/w/rootx/a"},
		{"/elsewhere/x", "/elsewhere/x"},
	}
	for _, tt := range tests {
		if got := ws.Rel(tt.abs); got != tt.want {
			t.Errorf("Rel(%q) = %q, want %q", tt.abs, got, tt.want)
		}
	}
}
