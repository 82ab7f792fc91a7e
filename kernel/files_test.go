package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getorrery/orrery/agent/models"
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

// symlink makes link point at target.
func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// sessionIn creates a session of e whose workspace is root.
func sessionIn(t *testing.T, e *env, root string) *kernel.Session {
	t.Helper()
	s, err := e.k.CreateSession(context.Background(), kernel.SessionOptions{Cwd: root})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWorkspaceFiles(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
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
		symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(root, "link-out.txt"))
		symlink(t, filepath.Join(root, "notes.txt"), filepath.Join(root, "link-in.txt"))
		symlink(t, outside, filepath.Join(root, "dir-out"))
		e := mode.newEnv(t, "offline")
		s := sessionIn(t, e, root)
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
	})
}

func TestAttachFiles(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		// Two bytes a character after one: the limit falls inside a character.
		big := "x" + strings.Repeat("é", kernel.MaxAttachmentBytes/2)
		root := workspaceTree(t, map[string]string{
			"notes.txt":   "apples\n",
			"big.txt":     big,
			"bin.dat":     "a\x00b",
			"src/main.go": "package main\n",
		})
		outside := workspaceTree(t, map[string]string{"secret.txt": "s\n"})
		symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(root, "link-out.txt"))
		e := mode.newEnv(t, "offline")
		s := sessionIn(t, e, root)
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
	})
}

// matchPaths returns the paths of matches.
func matchPaths(ms []kernel.FileMatch) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Path
	}
	return out
}

func TestWorkspaceFilesFuzzy(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		root := workspaceTree(t, map[string]string{
			"server/conn.go":           "x",
			"server/control.go":        "x",
			"client/connect_test.go":   "x",
			"docs/conventions.md":      "x",
			"scone/nn.txt":             "x",
			"docs/scratch.md":          "x",
			"FooBar.go":                "x",
			"fab.go":                   "x",
			"a/x.go":                   "x",
			"bb/x.go":                  "x",
			"README.md":                "x",
			"über/Straße.txt":          "x",
			".github/workflows/ci.yml": "x",
			".git/conn":                "x",
			"node_modules/conn/x.js":   "x",
		})
		outside := workspaceTree(t, map[string]string{"conn-secret.txt": "s\n"})
		symlink(t, filepath.Join(outside, "conn-secret.txt"), filepath.Join(root, "conn-out.txt"))
		symlink(t, outside, filepath.Join(root, "conn-dir"))
		e := mode.newEnv(t, "offline")
		s := sessionIn(t, e, root)
		tests := []struct {
			name      string
			query     string
			limit     int
			want      []string
			truncated bool
		}{
			// The base name, unbroken and at its start, then shorter first;
			// then a gap inside the base name; then a run across directories.
			{"basename run first", "conn", 0, []string{"server/conn.go", "client/connect_test.go", "docs/conventions.md", "scone/nn.txt"}, false},
			{"case ignored", "CONN", 0, []string{"server/conn.go", "client/connect_test.go", "docs/conventions.md", "scone/nn.txt"}, false},
			{"limit", "conn", 2, []string{"server/conn.go", "client/connect_test.go"}, true},
			// A run at the start of the base name first; a run at the start of
			// the path ties with two path-element starts (shorter first); a
			// match inside a word last.
			{"runs and boundaries", "sc", 0, []string{"docs/scratch.md", "scone/nn.txt", "server/conn.go", "server/control.go", "docs/conventions.md"}, false},
			{"camel case boundary", "fb", 0, []string{"FooBar.go", "fab.go"}, false},
			{"shorter path on ties", "x.go", 0, []string{"a/x.go", "bb/x.go"}, false},
			{"across the path", "svctl", 0, []string{"server/control.go"}, false},
			{"subsequence only", "rdme", 0, []string{"README.md"}, false},
			{"ß is not ss", "strasse", 0, []string{}, false},
			{"non-ASCII", "üstr", 0, []string{"über/Straße.txt"}, false},
			{"hidden skipped", "ciyml", 0, []string{}, false},
			{"hidden named", ".ghci", 0, []string{".github/workflows/ci.yml"}, false},
			{"no match", "zzz", 0, []string{}, false},
			{"empty query lists from the root", "", 3, []string{"FooBar.go", "README.md", "fab.go"}, true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, truncated, err := s.MatchWorkspaceFiles(context.Background(), tt.query, tt.limit)
				if err != nil {
					t.Fatalf("MatchWorkspaceFiles(%q, %d) error = %v", tt.query, tt.limit, err)
				}
				if paths := matchPaths(got); !slices.Equal(paths, tt.want) || truncated != tt.truncated {
					t.Errorf("MatchWorkspaceFiles(%q, %d) = %q, %v, want %q, %v", tt.query, tt.limit, paths, truncated, tt.want, tt.truncated)
				}
			})
		}

		// The offsets are of characters, those the best alignment matched.
		for _, tt := range []struct {
			query, path string
			want        []int
		}{
			{"conn", "server/conn.go", []int{7, 8, 9, 10}},
			{"conn", "scone/nn.txt", []int{1, 2, 6, 7}}, // the run in the base name, not the leftmost
			{"svctl", "server/control.go", []int{0, 3, 7, 10, 13}},
			{"üstr", "über/Straße.txt", []int{0, 5, 6, 7}},
			{"fb", "FooBar.go", []int{0, 3}},
		} {
			got, _, err := s.MatchWorkspaceFiles(context.Background(), tt.query, kernel.MaxFilesLimit)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(got, func(m kernel.FileMatch) bool { return m.Path == tt.path })
			if i < 0 || !slices.Equal(got[i].Matched, tt.want) {
				t.Errorf("MatchWorkspaceFiles(%q) for %s = %+v, want matched %v", tt.query, tt.path, got, tt.want)
			}
		}

		for _, bad := range []struct {
			query string
			limit int
			want  string
		}{
			{"a\x00b", 0, "not plain text"},
			{"\xff", 0, "not plain text"},
			{strings.Repeat("a", kernel.MaxFilesQuery+1), 0, "more than 128"},
			{"conn", 1001, "limit must be between 1 and 1000"},
			{"conn", -1, "limit must be between 1 and 1000"},
		} {
			_, _, err := s.MatchWorkspaceFiles(context.Background(), bad.query, bad.limit)
			var re *kernel.RequestError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("MatchWorkspaceFiles(%.20q, %d) error = %v, want a RequestError containing %q", bad.query, bad.limit, err, bad.want)
			}
		}
	})
}

// TestWorkspaceFilesBound: both forms stop at Config.MaxFilesVisited
// directory entries and say the listing is truncated.
func TestWorkspaceFilesBound(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		files := map[string]string{}
		for i := range 30 {
			files[fmt.Sprintf("d%02d/conn%02d.go", i, i)] = "x"
		}
		root := workspaceTree(t, files)
		tests := []struct {
			bound     int
			want      int // files listed
			truncated bool
		}{
			// The root's 30 directories, then one file in each directory read.
			{0, 30, false},
			{60, 30, false},
			{59, 29, true},
			{40, 10, true},
			{30, 0, true},
		}
		for _, tt := range tests {
			e := mode.newEnv(t, "offline", func(c *kernel.Config) { c.MaxFilesVisited = tt.bound })
			s, err := e.k.CreateSession(context.Background(), kernel.SessionOptions{Cwd: root})
			if err != nil {
				t.Fatal(err)
			}
			got, truncated, err := s.MatchWorkspaceFiles(context.Background(), "conn", kernel.MaxFilesLimit)
			if err != nil || len(got) != tt.want || truncated != tt.truncated {
				t.Errorf("MaxFilesVisited %d: MatchWorkspaceFiles(conn) = %d files, %v, %v, want %d, %v", tt.bound, len(got), truncated, err, tt.want, tt.truncated)
			}
			if err == nil && tt.want > 0 && got[0].Path != "d00/conn00.go" {
				t.Errorf("MaxFilesVisited %d: MatchWorkspaceFiles(conn)[0] = %s, want d00/conn00.go (equal ranks in name order)", tt.bound, got[0].Path)
			}
			paths, truncated, err := s.WorkspaceFiles(context.Background(), "", kernel.MaxFilesLimit)
			if err != nil || len(paths) != tt.want || truncated != tt.truncated {
				t.Errorf("MaxFilesVisited %d: WorkspaceFiles(\"\") = %d files, %v, %v, want %d, %v", tt.bound, len(paths), truncated, err, tt.want, tt.truncated)
			}
		}
	})
}

// BenchmarkWorkspaceFiles lists a tree of 5,000 files by a prefix that
// matches nothing (the baseline: the whole walk, no match) and by a fuzzy
// query that matches most files, so the cost of matching and ranking reads
// as a ratio of the two.
func BenchmarkWorkspaceFiles(b *testing.B) {
	files := map[string]string{}
	for i := range 50 {
		for j := range 100 {
			files[fmt.Sprintf("pkg%02d/sub%d/file_%03d_conn.go", i, j%5, j)] = "x"
		}
	}
	root := b.TempDir()
	for p := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	st, err := storeModes[0].open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	k := kernel.New(kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "offline"})
	if err := k.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer k.Close(context.Background())
	s, err := k.CreateSession(context.Background(), kernel.SessionOptions{Cwd: root})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("prefix", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got, _, err := s.WorkspaceFiles(context.Background(), "zzz", 20); err != nil || len(got) != 0 {
				b.Fatalf("WorkspaceFiles() = %d files, %v", len(got), err)
			}
		}
	})
	b.Run("fuzzy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got, _, err := s.MatchWorkspaceFiles(context.Background(), "p7fconn", 20); err != nil || len(got) != 20 {
				b.Fatalf("MatchWorkspaceFiles() = %d files, %v", len(got), err)
			}
		}
	})
}
