package ui

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinels a caller can test a refusal against with errors.Is.
var (
	// ErrUnknownKind is a surface whose t is not a surface kind.
	ErrUnknownKind = errors.New("ui: unknown surface kind")
	// ErrNotCore is a fallback that uses a kind outside the core kinds.
	ErrNotCore = errors.New("ui: a fallback uses a non-core kind")
	// ErrLimit is a surface over a limit: a raster over 64 × 32 cells, an
	// image over 5 MB, stacks or trees nested too deep.
	ErrLimit = errors.New("ui: a surface is over a limit")
	// ErrUnknownPlacement is a placement that is not one of Placements.
	ErrUnknownPlacement = errors.New("ui: unknown placement")
	// ErrDefaultPlacement is a manifest default placement other than band,
	// pane.left, pane.right or footer.
	ErrDefaultPlacement = errors.New("ui: not a default placement")
	// ErrHostID is an attempt to place under input, consent or trust.
	ErrHostID = errors.New("ui: a host-only id")
	// ErrBadID is a placement id that is not well formed.
	ErrBadID = errors.New("ui: bad placement id")
	// ErrBadOwner is an owner that is not ext:<id>, agent or config.
	ErrBadOwner = errors.New("ui: bad owner")
	// ErrForeignOwner is an owner changing what another owner placed.
	ErrForeignOwner = errors.New("ui: another owner's placement")
	// ErrBadNodeID is a node id that is not placed:<owner>:<id>.
	ErrBadNodeID = errors.New("ui: bad node id")
)

// Error is a refused surface. Its message reads
// "<root> <path>: <reason>", where root is "surface" or "fallback", path is
// the JSON Pointer into the surface of the value that failed (empty for the
// whole surface) and reason says what is wrong and what to do instead.
type Error struct {
	// Root is "surface", or "fallback" when the surface was checked as a
	// fallback.
	Root string
	// Path is the JSON Pointer (RFC 6901) of the value that failed, such as
	// "/kind/rows/2/1"; empty means the whole surface.
	Path string
	// Reason says what is wrong and the fix.
	Reason string

	sentinel error
}

// Error returns the refusal as one sentence.
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Root + ": " + e.Reason
	}
	return e.Root + " " + e.Path + ": " + e.Reason
}

// Unwrap returns the sentinel the refusal stands for (ErrUnknownKind,
// ErrNotCore or ErrLimit), or nil for a schema or consistency failure.
func (e *Error) Unwrap() error { return e.sentinel }

// refusal is an error with an exact message that also matches a sentinel.
type refusal struct {
	msg      string
	sentinel error
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.sentinel }

// pointer joins reference tokens into a JSON Pointer, escaping each.
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

func escapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	t = strings.ReplaceAll(t, "~", "~0")
	return strings.ReplaceAll(t, "/", "~1")
}

// at appends tokens to a pointer.
func at(p string, tokens ...any) string {
	for _, t := range tokens {
		switch t := t.(type) {
		case int:
			p += "/" + strconv.Itoa(t)
		case string:
			p += "/" + escapeToken(t)
		}
	}
	return p
}

// splitPointer splits a JSON Pointer into unescaped tokens.
func splitPointer(p string) []string {
	if p == "" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, t := range toks {
		t = strings.ReplaceAll(t, "~1", "/")
		toks[i] = strings.ReplaceAll(t, "~0", "~")
	}
	return toks
}
