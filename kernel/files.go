package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/getorrery/orrery/internal/prose"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
)

// Limits of WorkspaceFiles, MatchWorkspaceFiles and AttachFiles.
const (
	// DefaultFilesLimit is how many files WorkspaceFiles lists when the
	// caller names no limit; MaxFilesLimit is the most it lists.
	DefaultFilesLimit = 50
	MaxFilesLimit     = 1000
	// DefaultFilesVisited bounds the directory entries one listing reads
	// when Config.MaxFilesVisited is 0, so a huge tree costs a bounded
	// walk; a listing cut short by it says it is truncated.
	DefaultFilesVisited = 20000
	// MaxFilesQuery is the longest query, in characters, that
	// MatchWorkspaceFiles takes.
	MaxFilesQuery = 128
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
	if limit, err = filesLimit(limit); err != nil {
		return nil, false, err
	}
	if strings.ContainsRune(prefix, 0) || strings.HasPrefix(prefix, "/") || strings.Contains(prefix, `\`) {
		return nil, false, &RequestError{Msg: fmt.Sprintf("prefix %q is not a path relative to the workspace: send the start of one, such as src/ma", prefix)}
	}
	for _, el := range strings.Split(prefix, "/") {
		if el == ".." {
			return nil, false, &RequestError{Msg: fmt.Sprintf("prefix %q climbs out of the workspace with \"..\": send the start of a path inside it", prefix)}
		}
	}
	w, err := s.filesWorkspace(ctx)
	if err != nil {
		return nil, false, err
	}
	dir, base := path.Split(prefix)
	start := "."
	if dir != "" {
		start = strings.TrimSuffix(dir, "/")
	}
	startAbs, err := w.Resolve(start)
	if err != nil {
		if dir != "" && !errors.Is(err, tool.ErrOutsideWorkspace) {
			return []string{}, false, nil
		}
		return nil, false, &RequestError{Msg: err.Error()}
	}
	byBase := dir == ""
	files = []string{}
	wk := filesWalk{w: w, hidden: strings.HasPrefix(base, "."), max: s.filesVisited()}
	wk.descend = func(rel string) bool {
		// Only directories that can still hold a match.
		return byBase || strings.HasPrefix(rel+"/", prefix) || strings.HasPrefix(prefix, rel+"/")
	}
	wk.file = func(rel, name string) bool {
		if strings.HasPrefix(rel, prefix) || byBase && strings.HasPrefix(name, base) {
			if len(files) == limit {
				truncated = true
				return false
			}
			files = append(files, rel)
		}
		return true
	}
	cut, err := wk.run(ctx, strings.TrimSuffix(dir, "/"), startAbs)
	if err != nil {
		return nil, false, err
	}
	return files, truncated || cut, nil
}

// FileMatch is one file MatchWorkspaceFiles found: its path relative to
// the workspace root, with "/" between elements, and the offsets in Path,
// counted in characters (Unicode code points) from 0, of the characters
// the query matched, in increasing order.
type FileMatch struct {
	Path    string
	Matched []int
}

// MatchWorkspaceFiles lists the regular files of the session's workspace
// whose path relative to the workspace root contains the characters of
// query in order, ignoring case (a fuzzy match: "conn" finds
// server/conn.go and client/connect.go, "sc" finds server/conn.go). The
// best matches come first: characters matched in the base name, in
// unbroken runs, and at the start of a path element or word (after "/",
// "_", "-", ".", a space, or a lower-case letter before an upper-case
// one) rank a file higher, and gaps between them lower; on equal ranks the
// shorter path comes first, then name order. At most limit files are
// listed (DefaultFilesLimit when limit is 0); truncated is set when more
// matched or the walk stopped at its bound (Config.MaxFilesVisited
// entries), in which case only the files walked so far were ranked. An
// empty query lists as WorkspaceFiles does with an empty prefix. .git and
// node_modules are skipped, and hidden entries unless the query names one
// (starts with "." or has "/."). Nothing outside the workspace is listed:
// the walk starts at the root and follows a symlink only to a regular file
// inside it.
func (s *Session) MatchWorkspaceFiles(ctx context.Context, query string, limit int) (files []FileMatch, truncated bool, err error) {
	if query == "" {
		paths, truncated, err := s.WorkspaceFiles(ctx, "", limit)
		if err != nil {
			return nil, false, err
		}
		files = make([]FileMatch, len(paths))
		for i, p := range paths {
			files[i] = FileMatch{Path: p, Matched: []int{}}
		}
		return files, truncated, nil
	}
	if limit, err = filesLimit(limit); err != nil {
		return nil, false, err
	}
	if strings.ContainsRune(query, 0) || !utf8.ValidString(query) {
		return nil, false, &RequestError{Msg: fmt.Sprintf("query %q is not plain text: send the characters of a file name, such as conn", query)}
	}
	if n := utf8.RuneCountInString(query); n > MaxFilesQuery {
		return nil, false, &RequestError{Msg: fmt.Sprintf("query is %d characters long, more than %d: send a few characters of the file name", n, MaxFilesQuery)}
	}
	w, err := s.filesWorkspace(ctx)
	if err != nil {
		return nil, false, err
	}
	root, err := w.Resolve(".")
	if err != nil {
		return nil, false, &RequestError{Msg: err.Error()}
	}
	m := newFuzzyMatcher(query)
	type ranked struct {
		FileMatch
		score, length int
	}
	var found []ranked
	wk := filesWalk{w: w, hidden: strings.HasPrefix(query, ".") || strings.Contains(query, "/."), max: s.filesVisited()}
	wk.descend = func(string) bool { return true }
	wk.file = func(rel, _ string) bool {
		if score, pos, ok := m.match(rel); ok {
			found = append(found, ranked{FileMatch{rel, pos}, score, utf8.RuneCountInString(rel)})
		}
		return true
	}
	truncated, err = wk.run(ctx, "", root)
	if err != nil {
		return nil, false, err
	}
	slices.SortFunc(found, func(a, b ranked) int {
		if a.score != b.score {
			return b.score - a.score
		}
		if a.length != b.length {
			return a.length - b.length
		}
		return strings.Compare(a.Path, b.Path)
	})
	if len(found) > limit {
		found, truncated = found[:limit], true
	}
	files = make([]FileMatch, len(found))
	for i, f := range found {
		files[i] = f.FileMatch
	}
	return files, truncated, nil
}

// filesLimit checks a listing's limit and applies its default.
func filesLimit(limit int) (int, error) {
	if limit < 0 || limit > MaxFilesLimit {
		return 0, &RequestError{Msg: fmt.Sprintf("limit must be between 1 and %d: narrow the prefix or query instead", MaxFilesLimit)}
	}
	if limit == 0 {
		limit = DefaultFilesLimit
	}
	return limit, nil
}

// filesWorkspace returns the session's workspace, read on its actor.
func (s *Session) filesWorkspace(ctx context.Context) (tool.Workspace, error) {
	var w tool.Workspace
	if err := s.do(ctx, func() { w = s.workspace() }); err != nil {
		return tool.Workspace{}, err
	}
	return w, nil
}

// filesVisited is the bound on the directory entries one listing reads.
func (s *Session) filesVisited() int {
	if n := s.k.cfg.MaxFilesVisited; n > 0 {
		return n
	}
	return DefaultFilesVisited
}

// filesWalk is a breadth-first walk of a workspace for a listing: nearest
// the root first, in name order within a directory. It skips skippedDirs,
// hidden entries unless hidden is set, and symlinks except to a regular
// file inside the workspace; it reads at most max directory entries.
type filesWalk struct {
	w      tool.Workspace
	hidden bool
	max    int
	// descend reports whether to walk the directory rel.
	descend func(rel string) bool
	// file is given each regular file; it returns false to stop the walk.
	file func(rel, name string) bool
}

// run walks from the directory abs, listed as rel ("" for the root). It
// reports whether the walk stopped at its bound.
func (wk *filesWalk) run(ctx context.Context, rel, abs string) (cut bool, err error) {
	type node struct{ rel, abs string }
	queue := []node{{rel: rel, abs: abs}}
	visited := 0
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("list workspace files: %w", err)
		}
		d := queue[0]
		queue = queue[1:]
		entries, err := os.ReadDir(d.abs)
		if err != nil {
			continue // unreadable: nothing of it can be attached either
		}
		for _, e := range entries {
			if visited++; visited > wk.max {
				return true, nil
			}
			name := e.Name()
			if slices.Contains(skippedDirs, name) || strings.HasPrefix(name, ".") && !wk.hidden {
				continue
			}
			rel := name
			if d.rel != "" {
				rel = d.rel + "/" + name
			}
			typ := e.Type()
			if typ&fs.ModeSymlink != 0 {
				// Follow it only to a file inside the workspace.
				real, err := wk.w.Resolve(rel)
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
				if wk.descend(rel) {
					queue = append(queue, node{rel: rel, abs: filepath.Join(d.abs, name)})
				}
			case typ.IsRegular():
				if !wk.file(rel, name) {
					return false, nil
				}
			}
		}
	}
	return false, nil
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

// fileSource returns the local path a part's source names: the value of a
// "path" source, or the path of a file: URL of any source; ok is false for
// a part that names no local file.
func fileSource(p protocol.ContentPart) (file string, ok bool, err error) {
	if p.Source == nil {
		return "", false, nil
	}
	v := p.Source.Value
	if len(v) >= 5 && strings.EqualFold(v[:5], "file:") {
		u, err := url.Parse(v)
		if err != nil || (u.Host != "" && u.Host != "localhost") {
			return "", true, fmt.Errorf("attachment %s is not a file URL of this machine: attach a file of the session's workspace by its path", prose.Quote(v))
		}
		return u.Path, true, nil
	}
	if p.Source.Type == "path" {
		return v, true, nil
	}
	return "", false, nil
}

// checkFileParts refuses a send whose attachments, or whose new user
// messages' parts, name a local file outside the session's workspace.
func (s *Session) checkFileParts(ctx context.Context, in SendInput) error {
	var paths []string
	add := func(parts []protocol.ContentPart) error {
		for _, p := range parts {
			file, ok, err := fileSource(p)
			if err != nil {
				return &RequestError{Msg: err.Error()}
			}
			if ok {
				paths = append(paths, file)
			}
		}
		return nil
	}
	if err := add(in.Attachments); err != nil {
		return err
	}
	for _, m := range in.Messages {
		if m.Role == protocol.RoleUser {
			if err := add(m.Content.Parts); err != nil {
				return err
			}
		}
	}
	if len(paths) == 0 {
		return nil
	}
	var w tool.Workspace
	if err := s.do(ctx, func() { w = s.workspace() }); err != nil {
		return err
	}
	for _, file := range paths {
		if file == "" {
			continue // names nothing: an agent drops it
		}
		if _, err := w.Resolve(file); err != nil {
			return &RequestError{Msg: fmt.Sprintf("attachment %s is outside the session's workspace (%s): attach a file inside it", prose.Quote(file), w.Root)}
		}
	}
	return nil
}
