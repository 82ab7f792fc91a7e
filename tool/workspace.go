package tool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrOutsideWorkspace marks a path that Resolve refuses because it leads
// outside the workspace (by "..", as an absolute path, or through a symlink).
var ErrOutsideWorkspace = errors.New("path is outside the workspace")

// ErrNoWorkspace marks a call made in a Workspace with an empty Root.
var ErrNoWorkspace = errors.New("the session has no workspace")

// maxLinks bounds how many dangling symlinks Resolve follows for one path,
// as the kernel's own limit bounds a lookup.
const maxLinks = 40

// Resolve returns the absolute, cleaned path that path names in the
// workspace: a relative path is taken from Root, an absolute one as it is.
// The result has the symlinks of its existing prefix resolved, so it names
// the file a call really touches; its last elements need not exist yet (a
// file about to be written) as long as their existing parent is inside.
//
// Resolve refuses, with ErrOutsideWorkspace and a sentence naming the fix,
// a path that leads outside Root and every Extra root, whether by "..", as an
// absolute path, or through a symlink whose target leaves the roots. An empty
// Root is refused with ErrNoWorkspace.
func (w Workspace) Resolve(path string) (string, error) {
	if w.Root == "" {
		return "", fmt.Errorf("%w: start the session with a working directory to use file and shell tools", ErrNoWorkspace)
	}
	if path == "" {
		return "", errors.New("the path is empty: pass a file path relative to the workspace root, such as \"README.md\"")
	}
	if strings.ContainsRune(path, 0) {
		return "", errors.New("the path contains a NUL byte: pass a plain file path relative to the workspace root")
	}
	roots, err := w.roots()
	if err != nil {
		return "", err
	}
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(roots[0].lexical, abs)
	}
	abs = filepath.Clean(abs)
	if !roots.contain(abs, false) && !roots.contain(abs, true) {
		if filepath.IsAbs(path) {
			return "", fmt.Errorf("%w: %s is not inside the workspace %s; pass a path inside it, best relative to it", ErrOutsideWorkspace, path, w.Root)
		}
		return "", fmt.Errorf("%w: %s climbs out of the workspace %s with \"..\"; pass a path that stays inside it", ErrOutsideWorkspace, path, w.Root)
	}
	real, err := realPath(abs)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	if !roots.contain(real, true) {
		return "", fmt.Errorf("%w: %s is a symlink to %s, which is not inside the workspace %s; use a path whose target is inside it", ErrOutsideWorkspace, path, real, w.Root)
	}
	return real, nil
}

// Rel returns abs as it is shown to a person or a model: relative to Root
// (with forward slashes) when abs is inside Root, "." for Root itself, and
// abs unchanged otherwise (a path in an Extra root).
func (w Workspace) Rel(abs string) string {
	if w.Root == "" {
		return abs
	}
	abs = filepath.Clean(abs)
	cands := []string{filepath.Clean(w.Root)}
	if r, err := filepath.EvalSymlinks(w.Root); err == nil && r != cands[0] {
		cands = append(cands, r)
	}
	for _, root := range cands {
		if within(root, abs) {
			rel, err := filepath.Rel(root, abs)
			if err == nil {
				return filepath.ToSlash(rel)
			}
		}
	}
	return abs
}

// root is one workspace root, as given (cleaned, absolute) and with its
// symlinks resolved.
type root struct {
	lexical, real string
}

type rootList []root

// roots returns Root then every Extra root. A root that does not exist is an
// error: nothing inside it can be touched.
func (w Workspace) roots() (rootList, error) {
	var out rootList
	for i, r := range append([]string{w.Root}, w.Extra...) {
		if r == "" {
			continue
		}
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, fmt.Errorf("workspace root %s: %w", r, err)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			if i == 0 {
				return nil, fmt.Errorf("the workspace %s cannot be used (%v); start the session in a directory that exists", r, err)
			}
			continue // an Extra root that is gone widens nothing
		}
		out = append(out, root{lexical: abs, real: real})
	}
	return out, nil
}

// contain reports whether p is inside one of the roots, comparing with the
// real (symlink-resolved) roots when real is set.
func (rs rootList) contain(p string, real bool) bool {
	for _, r := range rs {
		base := r.lexical
		if real {
			base = r.real
		}
		if within(base, p) {
			return true
		}
	}
	return false
}

// within reports whether the clean absolute path p is root or below it.
func within(root, p string) bool {
	if p == root {
		return true
	}
	if !strings.HasSuffix(root, string(filepath.Separator)) {
		root += string(filepath.Separator)
	}
	return strings.HasPrefix(p, root)
}

// realPath resolves the symlinks of the longest existing prefix of the clean
// absolute path p and joins the rest to it. A dangling symlink is followed to
// where its target would be, so a write through it is judged by where it
// would land.
func realPath(p string) (string, error) {
	for range maxLinks {
		cur, rest := p, ""
		for {
			fi, err := os.Lstat(cur)
			if err == nil {
				real, err := filepath.EvalSymlinks(cur)
				if err == nil {
					return filepath.Join(real, rest), nil
				}
				if fi.Mode()&fs.ModeSymlink == 0 || !errors.Is(err, fs.ErrNotExist) {
					return "", err
				}
				// cur is a dangling symlink: continue from its target.
				target, err := os.Readlink(cur)
				if err != nil {
					return "", err
				}
				if !filepath.IsAbs(target) {
					target = filepath.Join(filepath.Dir(cur), target)
				}
				p = filepath.Clean(filepath.Join(target, rest))
				break
			}
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				return "", err
			}
			parent := filepath.Dir(cur)
			if parent == cur {
				return p, nil
			}
			rest = filepath.Join(filepath.Base(cur), rest)
			cur = parent
		}
	}
	return "", errors.New("too many levels of symbolic links")
}
