package tool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Limits of the search tools.
const (
	// GlobMax is the most paths glob returns.
	GlobMax = 1000
	// GrepMax is the most matching lines grep returns.
	GrepMax = 500
	// grepMaxLine is where grep cuts a long matching line.
	grepMaxLine = 300
	// grepMaxScan is the longest line grep reads; a file with a longer one
	// is searched up to it.
	grepMaxScan = 1 << 20
)

// Interface guards.
var (
	_ WorkspaceSubjecter = Glob{}
	_ WorkspaceSubjecter = Grep{}
)

// skipDir reports whether a directory met while walking is left out of
// searches: version-control and dependency trees.
func skipDir(name string) bool {
	return name == ".git" || name == "node_modules"
}

// Glob is the glob tool: the paths under a directory that match a pattern
// with ** (any number of directories), *, ?, [class] and {alt,ernatives}.
type Glob struct{}

const globUsage = `{"pattern": "**/*.go", "path"?: "."}`

type globArgs struct {
	Pattern *string `json:"pattern"`
	Path    *string `json:"path"`
}

func (Glob) args(raw json.RawMessage) (pattern, dir string, err *argsError) {
	var a globArgs
	if err := decodeArgs("glob", globUsage, raw, &a); err != nil {
		return "", "", err
	}
	if a.Pattern == nil {
		return "", "", missing("glob", globUsage, "pattern")
	}
	dir = "."
	if a.Path != nil && *a.Path != "" {
		dir = *a.Path
	}
	pattern = strings.TrimPrefix(*a.Pattern, "./")
	if reason := checkPattern(pattern); reason != "" {
		return "", "", &argsError{"glob", globUsage, reason}
	}
	return pattern, dir, nil
}

// checkPattern returns why pattern cannot be used, or "".
func checkPattern(pattern string) string {
	switch {
	case pattern == "":
		return "pattern is empty; pass a pattern such as **/*.go"
	case strings.HasPrefix(pattern, "/"):
		return fmt.Sprintf("pattern %q is absolute; make it relative and pass the directory to search in path", pattern)
	case pattern == ".." || strings.HasPrefix(pattern, "../") || strings.Contains(pattern, "/../") || strings.HasSuffix(pattern, "/.."):
		return fmt.Sprintf("pattern %q climbs with \"..\"; pass the directory to search in path instead", pattern)
	case !doublestar.ValidatePattern(pattern):
		return fmt.Sprintf("pattern %q is not a valid glob (check its [ ] and { } pairs); use *, **, ?, [abc] and {a,b}", pattern)
	}
	return ""
}

// Spec implements Tool.
func (Glob) Spec() Spec {
	return Spec{
		Name:        "glob",
		PathSubject: true,
		Description: fmt.Sprintf("Finds files and directories whose path (relative to path, default the workspace root) matches a glob pattern: "+
			"* and ? within one path element, ** across directories, [abc] and {a,b}. For example **/*_test.go or cmd/*/main.go. "+
			"Returns workspace-relative paths, sorted, directories ending in /, at most %d; .git and node_modules are skipped.", GlobMax),
		ReadOnly: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","minLength":1,"description":"The glob, relative to path, such as **/*.go."},` +
			`"path":{"type":"string","description":"The directory to search, relative to the workspace root (default: the root)."}` +
			`},"required":["pattern"],"additionalProperties":false}`),
	}
}

// Subject implements Subjecter: the directory searched, cleaned.
func (t Glob) Subject(args json.RawMessage) (string, error) {
	_, dir, err := t.args(args)
	if err != nil {
		return "", err
	}
	return cleanSubject(dir), nil
}

// SubjectIn implements WorkspaceSubjecter: the directory resolved in ws.
func (t Glob) SubjectIn(ws Workspace, args json.RawMessage) (string, error) {
	_, dir, err := t.args(args)
	if err != nil {
		return "", err
	}
	return resolvedSubject(ws, dir)
}

// Call implements Tool.
func (t Glob) Call(ctx context.Context, c Call) (Result, error) {
	pattern, dir, aerr := t.args(c.Args)
	if aerr != nil {
		return aerr.result(), nil
	}
	base, res := searchDir(c.Workspace, dir)
	if res != nil {
		return *res, nil
	}
	static, _ := doublestar.SplitPattern(pattern)
	start := filepath.Join(base, filepath.FromSlash(static))
	if _, err := c.Workspace.Resolve(start); err != nil {
		return fail("%s", err.Error()), nil // a symlink in the pattern's directories leads out
	}
	if _, err := os.Lstat(start); err != nil {
		return Result{Text: fmt.Sprintf("no paths match %s in %s", pattern, c.Workspace.Rel(base))}, nil
	}
	// Without **, a match is exactly as deep as the pattern.
	depth := -1
	if !strings.Contains(pattern, "**") {
		depth = strings.Count(pattern, "/") + 1
	}
	var matches []string
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable directory is left out
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if p == base {
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, base+string(filepath.Separator)))
		if base == string(filepath.Separator) {
			rel = filepath.ToSlash(strings.TrimPrefix(p, base))
		}
		if d.IsDir() && p != start && skipDir(d.Name()) {
			return fs.SkipDir
		}
		if doublestar.MatchUnvalidated(pattern, rel) {
			m := c.Workspace.Rel(p)
			if d.IsDir() {
				m += "/"
			}
			matches = append(matches, m)
		}
		if d.IsDir() && depth >= 0 && strings.Count(rel, "/")+1 >= depth {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("glob %s: %w", pattern, err)
	}
	if len(matches) == 0 {
		return Result{Text: fmt.Sprintf("no paths match %s in %s", pattern, c.Workspace.Rel(base))}, nil
	}
	sort.Strings(matches)
	var sb strings.Builder
	for i, m := range matches {
		if i == GlobMax {
			fmt.Fprintf(&sb, "(%d more matches not shown; narrow the pattern or the path)\n", len(matches)-i)
			break
		}
		sb.WriteString(m)
		sb.WriteByte('\n')
	}
	return Result{Text: sb.String()}, nil
}

// searchDir resolves the directory a search starts from. A failure is a
// Result to return.
func searchDir(ws Workspace, dir string) (string, *Result) {
	abs, err := ws.Resolve(dir)
	if err != nil {
		r := fail("%s", err.Error())
		return "", &r
	}
	fi, err := os.Stat(abs)
	if err != nil {
		r := statError(ws.Rel(abs), err)
		return "", &r
	}
	if !fi.IsDir() {
		r := fail("%s is a file, not a directory; pass its directory in path", ws.Rel(abs))
		return "", &r
	}
	return abs, nil
}

// Grep is the grep tool: the lines of text files under a path that match a
// Go regular expression.
type Grep struct{}

const grepUsage = `{"pattern": "regexp", "path"?: ".", "glob"?: "*.go", "ignore_case"?: false}`

type grepArgs struct {
	Pattern    *string `json:"pattern"`
	Path       *string `json:"path"`
	Glob       *string `json:"glob"`
	IgnoreCase *bool   `json:"ignore_case"`
}

// grepQuery is a checked grep call.
type grepQuery struct {
	re   *regexp.Regexp
	path string
	glob string
}

func (Grep) args(raw json.RawMessage) (grepQuery, *argsError) {
	var a grepArgs
	if err := decodeArgs("grep", grepUsage, raw, &a); err != nil {
		return grepQuery{}, err
	}
	if a.Pattern == nil {
		return grepQuery{}, missing("grep", grepUsage, "pattern")
	}
	if *a.Pattern == "" {
		return grepQuery{}, &argsError{"grep", grepUsage, "pattern is empty; pass the regular expression to look for"}
	}
	q := grepQuery{path: "."}
	if a.Path != nil && *a.Path != "" {
		q.path = *a.Path
	}
	if a.Glob != nil && *a.Glob != "" {
		if reason := checkPattern(*a.Glob); reason != "" {
			return grepQuery{}, &argsError{"grep", grepUsage, "glob " + strings.TrimPrefix(reason, "pattern ")}
		}
		q.glob = strings.TrimPrefix(*a.Glob, "./")
	}
	expr := *a.Pattern
	if a.IgnoreCase != nil && *a.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return grepQuery{}, &argsError{"grep", grepUsage, fmt.Sprintf("pattern is not a valid Go regular expression (%v); escape special characters such as ( [ . * with a backslash", err)}
	}
	q.re = re
	return q, nil
}

// Spec implements Tool.
func (Grep) Spec() Spec {
	return Spec{
		Name:        "grep",
		PathSubject: true,
		Description: fmt.Sprintf("Searches text files for lines matching a Go (RE2) regular expression and returns them as file:line: text. "+
			"path is a file or a directory searched recursively (default the workspace root); glob keeps only files whose name "+
			"(or, if it has a /, whose path under path) matches, such as *.go or src/**/*.ts. Binary files, .git and node_modules are skipped. "+
			"Returns at most %d matching lines.", GrepMax),
		ReadOnly: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","minLength":1,"description":"The regular expression (Go RE2 syntax)."},` +
			`"path":{"type":"string","description":"The file or directory to search, relative to the workspace root (default: the root)."},` +
			`"glob":{"type":"string","description":"Only search files matching this glob, such as *.go."},` +
			`"ignore_case":{"type":"boolean","description":"Match regardless of case (default false)."}` +
			`},"required":["pattern"],"additionalProperties":false}`),
	}
}

// Subject implements Subjecter: the path searched, cleaned.
func (t Grep) Subject(args json.RawMessage) (string, error) {
	q, err := t.args(args)
	if err != nil {
		return "", err
	}
	return cleanSubject(q.path), nil
}

// SubjectIn implements WorkspaceSubjecter: the path resolved in ws.
func (t Grep) SubjectIn(ws Workspace, args json.RawMessage) (string, error) {
	q, err := t.args(args)
	if err != nil {
		return "", err
	}
	return resolvedSubject(ws, q.path)
}

// errGrepFull stops the walk once GrepMax lines matched.
var errGrepFull = errors.New("grep: enough matches")

// Call implements Tool.
func (t Grep) Call(ctx context.Context, c Call) (Result, error) {
	q, aerr := t.args(c.Args)
	if aerr != nil {
		return aerr.result(), nil
	}
	abs, err := c.Workspace.Resolve(q.path)
	if err != nil {
		return fail("%s", err.Error()), nil
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return statError(c.Workspace.Rel(abs), err), nil
	}
	var sb strings.Builder
	n := 0
	search := func(p string) error {
		found, err := grepFile(p, c.Workspace.Rel(p), q.re, &sb, GrepMax-n)
		n += found
		if err == nil && n >= GrepMax {
			return errGrepFull
		}
		return err
	}
	if !fi.IsDir() {
		err = search(abs)
	} else {
		err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // an unreadable directory is left out
			}
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if d.IsDir() {
				if p != abs && skipDir(d.Name()) {
					return fs.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil // symlinks may lead outside the workspace
			}
			if q.glob != "" {
				name := d.Name()
				if strings.Contains(q.glob, "/") {
					name = filepath.ToSlash(strings.TrimPrefix(p, abs+string(filepath.Separator)))
				}
				if !doublestar.MatchUnvalidated(q.glob, name) {
					return nil
				}
			}
			return search(p)
		})
	}
	switch {
	case errors.Is(err, errGrepFull):
		fmt.Fprintf(&sb, "(stopped after %d matching lines; narrow the pattern, the path or the glob to see the rest)\n", GrepMax)
	case err != nil:
		return Result{}, fmt.Errorf("grep %s: %w", q.re, err)
	case n == 0:
		return Result{Text: fmt.Sprintf("no lines match %s in %s", q.re, c.Workspace.Rel(abs))}, nil
	}
	return Result{Text: sb.String()}, nil
}

// grepFile writes to sb the lines of the file at p (shown as rel) that re
// matches, at most max of them, and returns how many it wrote. A binary or
// unreadable file has none.
func grepFile(p, rel string, re *regexp.Regexp, sb *strings.Builder, max int) (int, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, nil
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	if head, _ := r.Peek(sniffBytes); isBinary(head) {
		return 0, nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), grepMaxScan)
	n := 0
	for line := 1; sc.Scan() && n < max; line++ {
		text := sc.Bytes()
		if !re.Match(text) {
			continue
		}
		s := strings.TrimSuffix(string(text), "\r")
		if len(s) > grepMaxLine {
			s = s[:completeUTF8([]byte(s[:grepMaxLine]))] + " …"
		}
		fmt.Fprintf(sb, "%s:%d: %s\n", path.Clean(rel), line, strings.ToValidUTF8(s, "\uFFFD"))
		n++
	}
	return n, nil
}
