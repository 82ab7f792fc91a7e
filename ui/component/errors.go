package component

import "errors"

// Sentinels a caller can test a refusal against with errors.Is. Every
// refusal is an *Error whose message names the JSON path and the fix.
var (
	// ErrUnknownType is a structure node whose type is not in the catalog
	// orrery/1.
	ErrUnknownType = errors.New("component: unknown node type")
	// ErrStructure is a structure that breaks a rule of the catalog other
	// than an unknown type: an unknown prop, a missing prop, a bad event,
	// a binding that does not parse.
	ErrStructure = errors.New("component: bad structure")
	// ErrTooLarge is a structure over limits.componentBytes or data over
	// limits.dataBytes.
	ErrTooLarge = errors.New("component: over a size limit")
	// ErrNotObject is data that is not one JSON object.
	ErrNotObject = errors.New("component: data is not an object")
	// ErrDataSchema is data that does not match its component's schema.
	ErrDataSchema = errors.New("component: data does not match the schema")
	// ErrBadSchema is a declared component whose schema is not valid JSON
	// Schema; every show and update of it is refused.
	ErrBadSchema = errors.New("component: the component's schema is not valid")
	// ErrEmptyKey is data with an empty object key, which the JSON Patch
	// libraries clients apply updates with cannot address reliably.
	ErrEmptyKey = errors.New("component: data has an empty key")
	// ErrPatch is a patch that does not apply; nothing of it was applied.
	ErrPatch = errors.New("component: the patch does not apply")
	// ErrBind is data that does not bind into a valid surface tree.
	ErrBind = errors.New("component: the data does not bind")
	// ErrUndeclaredAction is an action no node of the structure declares.
	ErrUndeclaredAction = errors.New("component: undeclared action")
	// ErrLink is a link to something a link may not name.
	ErrLink = errors.New("component: forbidden link")
)

// Error is a refusal. Its message is one sentence that names what failed,
// where (a JSON Pointer into the structure, the data or the patch) and what
// to do instead, such as
// "the data at /runs/0/name does not match the component's schema: …".
type Error struct {
	// Path is the JSON Pointer (RFC 6901) of the value that failed: into
	// the structure for a structure refusal, into the data for a data
	// refusal, into the patch for a patch refusal. Empty means the whole.
	Path string
	// DataPath is, for a binding that failed, the pointer into the data of
	// the value that did not fit; otherwise empty.
	DataPath string

	msg      string
	sentinel error
}

// Error returns the refusal as one sentence.
func (e *Error) Error() string { return e.msg }

// Unwrap returns the sentinel the refusal stands for.
func (e *Error) Unwrap() error { return e.sentinel }

func refuse(sentinel error, path, msg string) *Error {
	return &Error{Path: path, msg: msg, sentinel: sentinel}
}
