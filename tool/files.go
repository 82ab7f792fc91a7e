package tool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// WorkspaceSubjecter is a Subjecter whose subject can be computed against
// the call's workspace: a file tool's path resolved (through "..", absolute
// paths and symlinks) and shown relative to Root. A consent gate that knows
// the workspace should match rules such as write_file(src/**) against
// SubjectIn rather than Subject, so no spelling of a path dodges a rule.
type WorkspaceSubjecter interface {
	Subjecter
	// SubjectIn returns the subject of a call with args in ws.
	SubjectIn(ws Workspace, args json.RawMessage) (string, error)
}

// Limits of the file tools.
const (
	// ReadFileMaxLines is the most lines one read_file call returns.
	ReadFileMaxLines = 2000
	// ReadFileMaxBytes is the most bytes of text one read_file call returns.
	ReadFileMaxBytes = 256 << 10
	// readFileMaxLine is where read_file cuts one long line.
	readFileMaxLine = 2000
	// ListFilesMax is the most entries list_files returns.
	ListFilesMax = 1000
	// sniffBytes is how much of a file is looked at to tell binary from text.
	sniffBytes = 8000
)

// Interface guards.
var (
	_ WorkspaceSubjecter = ReadFile{}
	_ WorkspaceSubjecter = WriteFile{}
	_ WorkspaceSubjecter = EditFile{}
	_ WorkspaceSubjecter = ListFiles{}
	_ WorkspaceSubjecter = Shell{}
)

// cleanSubject returns path cleaned, with forward slashes: the subject of a
// file tool when the workspace is not known.
func cleanSubject(path string) string {
	return filepath.ToSlash(filepath.Clean(path))
}

// resolvedSubject returns path resolved in ws and shown relative to Root.
func resolvedSubject(ws Workspace, path string) (string, error) {
	abs, err := ws.Resolve(path)
	if err != nil {
		return "", err
	}
	return ws.Rel(abs), nil
}

// fail returns a Result reporting a failure the model should read.
func fail(format string, args ...any) Result {
	return Result{Text: fmt.Sprintf(format, args...), Error: true}
}

// statError turns the error of stat-ing the file a model named into a
// sentence saying what to do.
func statError(rel string, err error) Result {
	if errors.Is(err, fs.ErrNotExist) {
		return fail("%s does not exist; check the path with list_files or glob", rel)
	}
	if errors.Is(err, fs.ErrPermission) {
		return fail("%s cannot be read: permission denied; pick a file the session may read", rel)
	}
	return fail("%s cannot be read (%v); check the path with list_files", rel, err)
}

// isBinary reports whether data, the start of a file, looks binary: it holds
// a NUL byte, as git decides.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), sniffBytes)], 0) >= 0
}

// ReadFile is the read_file tool: a text file's lines, numbered like cat -n.
type ReadFile struct{}

const readFileUsage = `{"path": "…", "offset"?: 1, "limit"?: 2000}`

type readFileArgs struct {
	Path   *string `json:"path"`
	Offset *int    `json:"offset"`
	Limit  *int    `json:"limit"`
}

func (ReadFile) args(raw json.RawMessage) (readFileArgs, *argsError) {
	var a readFileArgs
	if err := decodeArgs("read_file", readFileUsage, raw, &a); err != nil {
		return a, err
	}
	if a.Path == nil {
		return a, missing("read_file", readFileUsage, "path")
	}
	if *a.Path == "" {
		return a, emptyPath("read_file", readFileUsage)
	}
	if a.Offset != nil && *a.Offset < 1 {
		return a, &argsError{"read_file", readFileUsage, fmt.Sprintf("offset %d is not a line number; lines count from 1", *a.Offset)}
	}
	if a.Limit != nil && *a.Limit < 1 {
		return a, &argsError{"read_file", readFileUsage, fmt.Sprintf("limit %d is not a line count; pass 1 or more", *a.Limit)}
	}
	return a, nil
}

// Spec implements Tool.
func (ReadFile) Spec() Spec {
	return Spec{
		Name:        "read_file",
		PathSubject: true,
		Description: fmt.Sprintf("Reads a text file in the workspace and returns its lines numbered from 1, like cat -n. "+
			"Returns at most %d lines or %d KiB per call; pass offset (the first line to show) and limit to read further. "+
			"Refuses directories (use list_files) and binary files.", ReadFileMaxLines, ReadFileMaxBytes>>10),
		ReadOnly: true,
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"path":{"type":"string","minLength":1,"description":"The file, relative to the workspace root (or absolute inside it)."},`+
			`"offset":{"type":"integer","minimum":1,"description":"The first line to return, counting from 1 (default 1)."},`+
			`"limit":{"type":"integer","minimum":1,"description":"How many lines to return (default and most %d)."}`+
			`},"required":["path"],"additionalProperties":false}`, ReadFileMaxLines)),
	}
}

// Subject implements Subjecter: the path, cleaned.
func (t ReadFile) Subject(args json.RawMessage) (string, error) {
	a, err := t.args(args)
	if err != nil {
		return "", err
	}
	return cleanSubject(*a.Path), nil
}

// SubjectIn implements WorkspaceSubjecter: the path resolved in ws.
func (t ReadFile) SubjectIn(ws Workspace, args json.RawMessage) (string, error) {
	a, err := t.args(args)
	if err != nil {
		return "", err
	}
	return resolvedSubject(ws, *a.Path)
}

// Call implements Tool.
func (t ReadFile) Call(ctx context.Context, c Call) (Result, error) {
	a, aerr := t.args(c.Args)
	if aerr != nil {
		return aerr.result(), nil
	}
	abs, err := c.Workspace.Resolve(*a.Path)
	if err != nil {
		return fail("%s", err.Error()), nil
	}
	rel := c.Workspace.Rel(abs)
	fi, err := os.Stat(abs)
	if err != nil {
		return statError(rel, err), nil
	}
	if fi.IsDir() {
		return fail("%s is a directory; list its entries with list_files, or read a file inside it", rel), nil
	}
	if !fi.Mode().IsRegular() {
		return fail("%s is not a regular file (it is a %s); read_file reads regular text files only", rel, fileKind(fi.Mode())), nil
	}
	f, err := os.Open(abs)
	if err != nil {
		return statError(rel, err), nil
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	if head, _ := r.Peek(sniffBytes); isBinary(head) {
		return fail("%s is a binary file; read_file shows text only, so inspect it with the shell tool (for example: xxd %s | head)", rel, rel), nil
	}
	offset, limit := 1, ReadFileMaxLines
	if a.Offset != nil {
		offset = *a.Offset
	}
	if a.Limit != nil {
		limit = min(*a.Limit, ReadFileMaxLines)
	}

	var sb strings.Builder
	lineNo, last, full := 0, 0, false
	for {
		if lineNo%4096 == 0 && ctx.Err() != nil {
			return Result{}, fmt.Errorf("read_file %s: %w", rel, ctx.Err())
		}
		line, cut, err := readLine(r, readFileMaxLine)
		if len(line) == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fail("%s could not be read (%v); try again or check the file with the shell tool", rel, err), nil
		}
		lineNo++
		if lineNo < offset || full {
			continue
		}
		if lineNo >= offset+limit {
			full = true
			continue
		}
		text := strings.ToValidUTF8(strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), "\uFFFD")
		entry := fmt.Sprintf("%6d\t%s", lineNo, text)
		if cut {
			entry += fmt.Sprintf(" … (line cut at %d bytes)", readFileMaxLine)
		}
		if sb.Len()+len(entry)+1 > ReadFileMaxBytes {
			full = true
			continue
		}
		sb.WriteString(entry)
		sb.WriteByte('\n')
		last = lineNo
	}
	total := lineNo
	switch {
	case total == 0:
		return Result{Text: fmt.Sprintf("(%s is empty)", rel)}, nil
	case offset > total:
		return fail("offset %d is past the end of %s, which has %d lines; pass an offset from 1 to %d", offset, rel, total, total), nil
	case last < total:
		fmt.Fprintf(&sb, "(lines %d–%d of %d; to read further, call read_file with offset %d)", offset, last, total, last+1)
	}
	return Result{Text: sb.String()}, nil
}

// readLine reads one line (with its "\n") from r, keeping at most max bytes
// of its text: the rest of a longer line is read and dropped, and cut
// reports it.
func readLine(r *bufio.Reader, max int) (line string, cut bool, err error) {
	var buf []byte
	n := 0
	for {
		frag, err := r.ReadSlice('\n')
		if room := max - len(buf); room > 0 {
			buf = append(buf, frag[:min(room, len(frag))]...)
		}
		n += len(frag)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if bytes.HasSuffix(frag, []byte("\n")) {
			n--
		}
		if n > max {
			return string(buf[:completeUTF8(buf)]), true, err
		}
		return string(buf), false, err
	}
}

// fileKind names what a non-regular file is.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	default:
		return "special file"
	}
}

// ListFiles is the list_files tool: a directory's entries.
type ListFiles struct{}

const listFilesUsage = `{"path"?: "."}`

type listFilesArgs struct {
	Path *string `json:"path"`
}

func (ListFiles) args(raw json.RawMessage) (string, *argsError) {
	var a listFilesArgs
	if err := decodeArgs("list_files", listFilesUsage, raw, &a); err != nil {
		return "", err
	}
	if a.Path == nil || *a.Path == "" {
		return ".", nil
	}
	return *a.Path, nil
}

// Spec implements Tool.
func (ListFiles) Spec() Spec {
	return Spec{
		Name:        "list_files",
		PathSubject: true,
		Description: fmt.Sprintf("Lists a directory's entries, sorted by name, directories marked with a trailing /. "+
			"path defaults to the workspace root. Shows at most %d entries; use glob to find files deeper down.", ListFilesMax),
		ReadOnly: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"The directory, relative to the workspace root (default: the root)."}` +
			`},"additionalProperties":false}`),
	}
}

// Subject implements Subjecter: the directory, cleaned.
func (t ListFiles) Subject(args json.RawMessage) (string, error) {
	p, err := t.args(args)
	if err != nil {
		return "", err
	}
	return cleanSubject(p), nil
}

// SubjectIn implements WorkspaceSubjecter: the directory resolved in ws.
func (t ListFiles) SubjectIn(ws Workspace, args json.RawMessage) (string, error) {
	p, err := t.args(args)
	if err != nil {
		return "", err
	}
	return resolvedSubject(ws, p)
}

// Call implements Tool.
func (t ListFiles) Call(ctx context.Context, c Call) (Result, error) {
	p, aerr := t.args(c.Args)
	if aerr != nil {
		return aerr.result(), nil
	}
	abs, err := c.Workspace.Resolve(p)
	if err != nil {
		return fail("%s", err.Error()), nil
	}
	rel := c.Workspace.Rel(abs)
	fi, err := os.Stat(abs)
	if err != nil {
		return statError(rel, err), nil
	}
	if !fi.IsDir() {
		return fail("%s is a file, not a directory; read it with read_file, or list its directory", rel), nil
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return statError(rel, err), nil
	}
	if len(entries) == 0 {
		return Result{Text: fmt.Sprintf("(the directory %s is empty)", rel)}, nil
	}
	var sb strings.Builder
	for i, e := range entries {
		if i == ListFilesMax {
			fmt.Fprintf(&sb, "(%d more entries not shown; use glob with a pattern to narrow the listing)\n", len(entries)-i)
			break
		}
		sb.WriteString(e.Name())
		if e.IsDir() {
			sb.WriteByte('/')
		} else if e.Type()&fs.ModeSymlink != 0 {
			if st, err := os.Stat(filepath.Join(abs, e.Name())); err == nil && st.IsDir() {
				sb.WriteByte('/')
			}
		}
		sb.WriteByte('\n')
	}
	return Result{Text: sb.String()}, nil
}
