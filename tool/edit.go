package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// newFileMode is the mode of a file write_file creates.
const newFileMode fs.FileMode = 0o644

// WriteFile is the write_file tool: it writes a whole file, creating it and
// its parent directories when needed. The write is atomic (a temporary file
// renamed over the old one) and keeps the old file's mode. Its result's
// surface is the diff of the change.
type WriteFile struct{}

const writeFileUsage = `{"path": "…", "content": "…"}`

type writeFileArgs struct {
	Path    *string `json:"path"`
	Content *string `json:"content"`
}

func (WriteFile) args(raw json.RawMessage) (writeFileArgs, *argsError) {
	var a writeFileArgs
	if err := decodeArgs("write_file", writeFileUsage, raw, &a); err != nil {
		return a, err
	}
	if a.Path == nil {
		return a, missing("write_file", writeFileUsage, "path")
	}
	if *a.Path == "" {
		return a, emptyPath("write_file", writeFileUsage)
	}
	if a.Content == nil {
		return a, missing("write_file", writeFileUsage, "content")
	}
	return a, nil
}

// Spec implements Tool.
func (WriteFile) Spec() Spec {
	return Spec{
		Name:        "write_file",
		PathSubject: true,
		Description: "Writes content as the whole of a file in the workspace, creating the file and its parent directories if needed " +
			"and replacing what was there. To change part of an existing file, prefer edit_file.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","minLength":1,"description":"The file, relative to the workspace root (or absolute inside it)."},` +
			`"content":{"type":"string","description":"The file's complete new content."}` +
			`},"required":["path","content"],"additionalProperties":false}`),
	}
}

// Subject implements Subjecter: the path, cleaned.
func (t WriteFile) Subject(args json.RawMessage) (string, error) {
	a, err := t.args(args)
	if err != nil {
		return "", err
	}
	return cleanSubject(*a.Path), nil
}

// SubjectIn implements WorkspaceSubjecter: the path resolved in ws.
func (t WriteFile) SubjectIn(ws Workspace, args json.RawMessage) (string, error) {
	a, err := t.args(args)
	if err != nil {
		return "", err
	}
	return resolvedSubject(ws, *a.Path)
}

// Call implements Tool.
func (t WriteFile) Call(ctx context.Context, c Call) (Result, error) {
	a, aerr := t.args(c.Args)
	if aerr != nil {
		return aerr.result(), nil
	}
	abs, err := c.Workspace.Resolve(*a.Path)
	if err != nil {
		return fail("%s", err.Error()), nil
	}
	rel := c.Workspace.Rel(abs)
	old, mode, existed, res := readForWrite(abs, rel)
	if res != nil {
		return *res, nil
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("write_file %s: %w", rel, err)
	}
	if existed && old == *a.Content {
		return Result{Text: fmt.Sprintf("%s already has this content; nothing changed", rel)}, nil
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return fail("the directory of %s cannot be created (%v); write to a path whose parent can be created", rel, err), nil
	}
	if err := writeAtomic(abs, []byte(*a.Content), mode); err != nil {
		return fail("%s cannot be written (%v); check its directory's permissions or pick another path", rel, err), nil
	}
	oldName := "a/" + strings.TrimPrefix(rel, "/")
	verb := "wrote"
	if !existed {
		oldName, verb = "/dev/null", "created"
	}
	diff := Unified(oldName, "b/"+strings.TrimPrefix(rel, "/"), old, *a.Content)
	return Result{
		Text:    fmt.Sprintf("%s %s (%d bytes, %s)", verb, rel, len(*a.Content), diffStat(diff)),
		Surface: diffSurface(rel, diff),
	}, nil
}

// EditFile is the edit_file tool: it replaces an exact string in a file.
// old_string must occur exactly once unless replace_all is set. The write is
// atomic and keeps the file's mode; the result's surface is the diff.
type EditFile struct{}

const editFileUsage = `{"path": "…", "old_string": "…", "new_string": "…", "replace_all"?: false}`

type editFileArgs struct {
	Path       *string `json:"path"`
	OldString  *string `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll *bool   `json:"replace_all"`
}

func (EditFile) args(raw json.RawMessage) (editFileArgs, *argsError) {
	var a editFileArgs
	if err := decodeArgs("edit_file", editFileUsage, raw, &a); err != nil {
		return a, err
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"path", a.Path != nil}, {"old_string", a.OldString != nil}, {"new_string", a.NewString != nil}} {
		if !f.set {
			return a, missing("edit_file", editFileUsage, f.name)
		}
	}
	if *a.Path == "" {
		return a, emptyPath("edit_file", editFileUsage)
	}
	if *a.OldString == "" {
		return a, &argsError{"edit_file", editFileUsage, "old_string is empty; quote the exact text to replace (to write a whole file, use write_file)"}
	}
	if *a.OldString == *a.NewString {
		return a, &argsError{"edit_file", editFileUsage, "old_string and new_string are the same, so nothing would change; pass the replacement text in new_string"}
	}
	return a, nil
}

// Spec implements Tool.
func (EditFile) Spec() Spec {
	return Spec{
		Name:        "edit_file",
		PathSubject: true,
		Description: "Edits a file in the workspace by replacing old_string with new_string, both exact text including whitespace and indentation. " +
			"old_string must occur exactly once in the file (include enough surrounding lines to make it unique), " +
			"unless replace_all is true, which replaces every occurrence. Read the file first to copy the text exactly.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","minLength":1,"description":"The file, relative to the workspace root (or absolute inside it)."},` +
			`"old_string":{"type":"string","minLength":1,"description":"The exact text to replace."},` +
			`"new_string":{"type":"string","description":"The text to put in its place (different from old_string)."},` +
			`"replace_all":{"type":"boolean","description":"Replace every occurrence instead of exactly one (default false)."}` +
			`},"required":["path","old_string","new_string"],"additionalProperties":false}`),
	}
}

// Subject implements Subjecter: the path, cleaned.
func (t EditFile) Subject(args json.RawMessage) (string, error) {
	a, err := t.args(args)
	if err != nil {
		return "", err
	}
	return cleanSubject(*a.Path), nil
}

// SubjectIn implements WorkspaceSubjecter: the path resolved in ws.
func (t EditFile) SubjectIn(ws Workspace, args json.RawMessage) (string, error) {
	a, err := t.args(args)
	if err != nil {
		return "", err
	}
	return resolvedSubject(ws, *a.Path)
}

// Call implements Tool.
func (t EditFile) Call(ctx context.Context, c Call) (Result, error) {
	a, aerr := t.args(c.Args)
	if aerr != nil {
		return aerr.result(), nil
	}
	abs, err := c.Workspace.Resolve(*a.Path)
	if err != nil {
		return fail("%s", err.Error()), nil
	}
	rel := c.Workspace.Rel(abs)
	old, mode, existed, res := readForWrite(abs, rel)
	if res != nil {
		return *res, nil
	}
	if !existed {
		return fail("%s does not exist; create it with write_file, or check the path with glob", rel), nil
	}
	if isBinary([]byte(old)) {
		return fail("%s is a binary file; edit_file edits text only", rel), nil
	}
	replaceAll := a.ReplaceAll != nil && *a.ReplaceAll
	n := strings.Count(old, *a.OldString)
	switch {
	case n == 0:
		return fail("old_string was not found in %s; read the file with read_file and copy the text exactly, including whitespace and indentation", rel), nil
	case n > 1 && !replaceAll:
		return fail("old_string occurs %d times in %s; include more surrounding lines to make it unique, or pass replace_all: true to replace all %d", n, rel, n), nil
	}
	times := 1
	if replaceAll {
		times = -1
	}
	content := strings.Replace(old, *a.OldString, *a.NewString, times)
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("edit_file %s: %w", rel, err)
	}
	if err := writeAtomic(abs, []byte(content), mode); err != nil {
		return fail("%s cannot be written (%v); check its permissions", rel, err), nil
	}
	name := strings.TrimPrefix(rel, "/")
	diff := Unified("a/"+name, "b/"+name, old, content)
	what := "1 occurrence"
	if n > 1 {
		what = fmt.Sprintf("%d occurrences", n)
	}
	return Result{
		Text:    fmt.Sprintf("replaced %s in %s (%s)", what, rel, diffStat(diff)),
		Surface: diffSurface(rel, diff),
	}, nil
}

// readForWrite reads the file a write is about to replace: its content and
// mode, or, when it does not exist yet, newFileMode and existed false. A path
// that cannot be written as a file is a Result to return.
func readForWrite(abs, rel string) (content string, mode fs.FileMode, existed bool, res *Result) {
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", newFileMode, false, nil
	case err != nil:
		r := statError(rel, err)
		return "", 0, false, &r
	case fi.IsDir():
		r := fail("%s is a directory; write to a file path, such as %s/name", rel, rel)
		return "", 0, false, &r
	case !fi.Mode().IsRegular():
		r := fail("%s is not a regular file (it is a %s); write to a regular file", rel, fileKind(fi.Mode()))
		return "", 0, false, &r
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		r := statError(rel, err)
		return "", 0, false, &r
	}
	return string(data), fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), true, nil
}

// writeAtomic replaces path with data: it writes a temporary file beside
// it, syncs it, gives it mode and renames it over path, so a reader sees
// either the old or the new content, never a mix.
func writeAtomic(path string, data []byte, mode fs.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".orrery-*")
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write temporary file: %w", err)
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("set mode: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync temporary file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close temporary file: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename into place: %w", err)
	}
	return nil
}

// diffSurface returns the diff surface of a change to the file shown as
// rel, or nil when nothing changed.
func diffSurface(rel, diff string) json.RawMessage {
	if diff == "" {
		return nil
	}
	type kind struct {
		T     string `json:"t"`
		Path  string `json:"path"`
		Value string `json:"value"`
	}
	data, err := json.Marshal(struct {
		Kind kind `json:"kind"`
	}{kind{"diff", rel, diff}})
	if err != nil {
		return nil // cannot happen: strings always marshal
	}
	return data
}

// diffStat summarises a unified diff as "+a -r lines".
func diffStat(diff string) string {
	add, del := 0, 0
	lines := strings.Split(diff, "\n")
	if len(lines) > 2 {
		lines = lines[2:] // the --- and +++ headers
	}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "+"):
			add++
		case strings.HasPrefix(l, "-"):
			del++
		}
	}
	return fmt.Sprintf("+%d -%d lines", add, del)
}
