package kernel_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// workspaceTree writes files (path → content) under a fresh directory and
// returns it.
func workspaceTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestWorkspaceFiles(t *testing.T) {
	root := workspaceTree(t, map[string]string{
		"notes.txt":                 "apples\n",
		"README.md":                 "# r\n",
		"src/main.go":               "package main\n",
		"src/map.go":                "package main\n",
		"src/deep/notes.md":         "deep\n",
		".env":                      "SECRET=1\n",
		".git/config":               "[core]\n",
		"node_modules/x/notes.js":   "x\n",
		"src/node_modules/y/map.js": "y\n",
	})
	outside := workspaceTree(t, map[string]string{"secret.txt": "s\n"})
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "link-out.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "notes.txt"), filepath.Join(root, "link-in.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "dir-out")); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "offline")
	s, err := e.k.CreateSession(context.Background(), kernel.SessionOptions{Cwd: root})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		prefix    string
		limit     int
		want      []string
		truncated bool
	}{
		{"", 0, []string{"README.md", "link-in.txt", "notes.txt", "src/main.go", "src/map.go", "src/deep/notes.md"}, false},
		{"no", 0, []string{"notes.txt", "src/deep/notes.md"}, false},
		{"src/ma", 0, []string{"src/main.go", "src/map.go"}, false},
		{"src/", 0, []string{"src/main.go", "src/map.go", "src/deep/notes.md"}, false},
		{"src/deep/", 0, []string{"src/deep/notes.md"}, false},
		{".e", 0, []string{".env"}, false},
		{"", 2, []string{"README.md", "link-in.txt"}, true},
		{"nothing", 0, []string{}, false},
		{"missing/dir/x", 0, []string{}, false},
	}
	for _, tt := range tests {
		got, truncated, err := s.WorkspaceFiles(context.Background(), tt.prefix, tt.limit)
		if err != nil {
			t.Errorf("WorkspaceFiles(%q, %d) error = %v", tt.prefix, tt.limit, err)
			continue
		}
		if !slices.Equal(got, tt.want) || truncated != tt.truncated {
			t.Errorf("WorkspaceFiles(%q, %d) = %q, %v, want %q, %v", tt.prefix, tt.limit, got, truncated, tt.want, tt.truncated)
		}
	}

	for _, bad := range []struct {
		prefix string
		limit  int
		want   string
	}{
		{"../", 0, "climbs out"},
		{"src/../../x", 0, "climbs out"},
		{"/etc/pa", 0, "not a path relative"},
		{"dir-out/", 0, "outside the workspace"},
		{"", 5000, "limit must be between 1 and 1000"},
	} {
		_, _, err := s.WorkspaceFiles(context.Background(), bad.prefix, bad.limit)
		var re *kernel.RequestError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("WorkspaceFiles(%q, %d) error = %v, want a RequestError containing %q", bad.prefix, bad.limit, err, bad.want)
		}
	}
}

func TestAttachFiles(t *testing.T) {
	// Two bytes a character after one: the limit falls inside a character.
	big := "x" + strings.Repeat("é", kernel.MaxAttachmentBytes/2)
	root := workspaceTree(t, map[string]string{
		"notes.txt":   "apples\n",
		"big.txt":     big,
		"bin.dat":     "a\x00b",
		"src/main.go": "package main\n",
	})
	outside := workspaceTree(t, map[string]string{"secret.txt": "s\n"})
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "link-out.txt")); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "offline")
	s, err := e.k.CreateSession(context.Background(), kernel.SessionOptions{Cwd: root})
	if err != nil {
		t.Fatal(err)
	}
	path := func(p string) protocol.ContentPart {
		return protocol.ContentPart{Type: "document", Source: &protocol.Source{Type: "path", Value: p}}
	}
	text := protocol.ContentPart{Type: "text", Text: "kept"}
	got, err := s.AttachFiles(context.Background(), []protocol.ContentPart{text, path("notes.txt"), path("src/main.go")})
	if err != nil {
		t.Fatalf("AttachFiles() error = %v", err)
	}
	want := []protocol.ContentPart{text,
		{Type: "text", Text: "File @notes.txt:\napples\n"},
		{Type: "text", Text: "File @src/main.go:\npackage main\n"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AttachFiles() = %+v, want %+v", got, want)
	}

	got, err = s.AttachFiles(context.Background(), []protocol.ContentPart{path("big.txt")})
	if err != nil {
		t.Fatalf("AttachFiles(big.txt) error = %v", err)
	}
	if body := strings.TrimPrefix(got[0].Text, "File @big.txt:\n"); len(body) != kernel.MaxAttachmentBytes-1 || !strings.HasPrefix(big, body) {
		t.Errorf("AttachFiles(big.txt) kept %d bytes, want the first %d of the file (the limit less the cut character)", len(body), kernel.MaxAttachmentBytes-1)
	}

	for _, bad := range []struct{ path, want string }{
		{"../x", "outside the workspace"},
		{"/etc/passwd", "not relative"},
		{"link-out.txt", "outside the workspace"},
		{"missing.txt", "cannot be read"},
		{"src", "not a regular file"},
		{"bin.dat", "not UTF-8 text"},
	} {
		_, err := s.AttachFiles(context.Background(), []protocol.ContentPart{path(bad.path)})
		var re *kernel.RequestError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("AttachFiles(%s) error = %v, want a RequestError containing %q", bad.path, err, bad.want)
		}
	}
}
