package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// Limits of WorkspaceFiles and AttachFiles.
const (
	// DefaultFilesLimit is how many files WorkspaceFiles lists when the
	// caller names no limit; MaxFilesLimit is the most it lists.
	DefaultFilesLimit = 50
	MaxFilesLimit     = 1000
	// maxFilesVisited bounds the directory entries one listing reads, so
	// a huge tree costs a bounded walk; a listing cut short by it says it
	// is truncated.
	maxFilesVisited = 20000
	// MaxAttachmentBytes bounds the text of one attached file, as the
	// terminal UI bounds an @mention's.
	MaxAttachmentBytes = 256 << 10
)

// skippedDirs are never listed: they are large and rarely what a person
// means.
var skippedDirs = []string{".git", "node_modules"}

// WorkspaceFiles lists the regular files of the session's workspace whose
// path relative to the workspace root starts with prefix or, when prefix
// has no "/", whose base name does. Paths use "/" and are listed nearest
// the root first, in name order within a directory, at most limit of them
// (DefaultFilesLimit when limit is 0); truncated is set when more matched
// or the walk stopped at its bound. .git and node_modules are skipped, and
// hidden entries unless prefix names one (starts with "."). Nothing outside
// the workspace is listed: a prefix that leads out of it is refused, and a
// symlink is listed only when its target is a regular file inside.
func (s *Session) WorkspaceFiles(ctx context.Context, prefix string, limit int) (files []string, truncated bool, err error) {
	if limit < 0 || limit > MaxFilesLimit {
		return nil, false, &RequestError{Msg: fmt.Sprintf("limit must be between 1 and %d: narrow the prefix instead", MaxFilesLimit)}
	}
	if limit == 0 {
		limit = DefaultFilesLimit
	}
	if strings.ContainsRune(prefix, 0) || strings.HasPrefix(prefix, "/") || strings.Contains(prefix, `\`) {
		return nil, false, &RequestError{Msg: fmt.Sprintf("prefix %q is not a path relative to the workspace: send the start of one, such as src/ma", prefix)}
	}
	for _, el := range strings.Split(prefix, "/") {
		if el == ".." {
			return nil, false, &RequestError{Msg: fmt.Sprintf("prefix %q climbs out of the workspace with \"..\": send the start of a path inside it", prefix)}
		}
	}
	var w tool.Workspace
	if err := s.do(ctx, func() { w = s.workspace() }); err != nil {
		return nil, false, err
	}
	root, err := w.Resolve(".")
	if err != nil {
		return nil, false, &RequestError{Msg: err.Error()}
	}
	dir, base := path.Split(prefix)
	start := root
	if dir != "" {
		if start, err = w.Resolve(strings.TrimSuffix(dir, "/")); err != nil {
			if errors.Is(err, tool.ErrOutsideWorkspace) {
				return nil, false, &RequestError{Msg: err.Error()}
			}
			return []string{}, false, nil
		}
	}
	hidden := strings.HasPrefix(base, ".")
	byBase := dir == ""
	files = []string{}
	visited := 0
	// A breadth-first walk: rel is the directory's path as listed ("" for
	// start), abs where it is.
	type node struct{ rel, abs string }
	queue := []node{{rel: strings.TrimSuffix(dir, "/"), abs: start}}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		d := queue[0]
		queue = queue[1:]
		entries, err := os.ReadDir(d.abs)
		if err != nil {
			continue // unreadable: nothing of it can be attached either
		}
		for _, e := range entries {
			if visited++; visited > maxFilesVisited {
				return files, true, nil
			}
			name := e.Name()
			if slices.Contains(skippedDirs, name) || strings.HasPrefix(name, ".") && !hidden {
				continue
			}
			rel := name
			if d.rel != "" {
				rel = d.rel + "/" + name
			}
			typ := e.Type()
			if typ&fs.ModeSymlink != 0 {
				// Follow it only to a file inside the workspace.
				real, err := w.Resolve(rel)
				if err != nil {
					continue
				}
				fi, err := os.Stat(real)
				if err != nil || !fi.Mode().IsRegular() {
					continue
				}
				typ = 0
			}
			switch {
			case typ.IsDir():
				// Only directories that can still hold a match.
				if strings.HasPrefix(rel+"/", prefix) || strings.HasPrefix(prefix, rel+"/") || byBase {
					queue = append(queue, node{rel: rel, abs: filepath.Join(d.abs, name)})
				}
			case typ.IsRegular():
				if strings.HasPrefix(rel, prefix) || byBase && strings.HasPrefix(name, base) {
					if len(files) == limit {
						return files, true, nil
					}
					files = append(files, rel)
				}
			}
		}
	}
	return files, false, nil
}

// AttachFiles returns parts with each workspace file attachment (a part
// whose source is {"type": "path", "value": P}, P relative to the
// workspace root) replaced by the text part the terminal UI sends for an
// @mention: "File @P:\n" then the file's text, at most MaxAttachmentBytes
// of it. Other parts are kept as they are. A path outside the workspace,
// a missing file, a directory, or a file that is not UTF-8 text is refused
// with a *RequestError that names it.
func (s *Session) AttachFiles(ctx context.Context, parts []protocol.ContentPart) ([]protocol.ContentPart, error) {
	if !slices.ContainsFunc(parts, isPathPart) {
		return parts, nil
	}
	var w tool.Workspace
	if err := s.do(ctx, func() { w = s.workspace() }); err != nil {
		return nil, err
	}
	out := make([]protocol.ContentPart, 0, len(parts))
	for _, p := range parts {
		if !isPathPart(p) {
			out = append(out, p)
			continue
		}
		text, err := readAttachment(w, p.Source.Value)
		if err != nil {
			return nil, &RequestError{Msg: err.Error()}
		}
		out = append(out, protocol.ContentPart{Type: "text", Text: "File @" + p.Source.Value + ":\n" + text})
	}
	return out, nil
}

func isPathPart(p protocol.ContentPart) bool {
	return p.Source != nil && p.Source.Type == "path"
}

// readAttachment reads the text of the workspace file rel, cut at
// MaxAttachmentBytes on a character boundary.
func readAttachment(w tool.Workspace, rel string) (string, error) {
	if rel == "" || filepath.IsAbs(rel) {
		return "", fmt.Errorf("attachment path %q is not relative to the workspace: send a path such as src/main.go", rel)
	}
	real, err := w.Resolve(rel)
	if err != nil {
		return "", fmt.Errorf("attach %s: %w", rel, err)
	}
	f, err := os.Open(real)
	if err != nil {
		return "", fmt.Errorf("attach %s: the file cannot be read (%v); list the workspace with workspace.files and attach one it names", rel, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("attach %s: it is not a regular file; attach a file, not a directory", rel)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxAttachmentBytes))
	if err != nil {
		return "", fmt.Errorf("attach %s: %w", rel, err)
	}
	// Drop a character cut in two by the limit, then require text.
	for i := 0; len(data) == MaxAttachmentBytes-i && i < utf8.UTFMax && !utf8.Valid(data); i++ {
		data = data[:len(data)-1]
	}
	if !utf8.Valid(data) || slices.Contains(data, 0) {
		return "", fmt.Errorf("attach %s: it is not UTF-8 text; attach text files only", rel)
	}
	return string(data), nil
}
