// Package component holds the rules of components: a structure over the
// catalog orrery/1 plus one JSON object of data that the structure reads
// through ${/json/pointer} bindings. Everything here is a pure function or a
// value its owner drives: nothing starts a goroutine or holds a session.
//
// A structure is a tree of nodes, each {"type": "<type>", <props>…,
// "on"?: {<event>: "<action>"}, "when"?: "${…}"}. The types are the surface
// kinds (ui.Kinds) and button; a node's props are its kind's fields, and a
// stack's children are nodes. A button with an href is a link. Parse checks
// a structure against the catalog and limits.componentBytes; Catalog lists
// the types for the search answer of ui.show.
//
// A string prop is a Template: literal text with ${…} bindings that read,
// compare and format the data and run no code (\${ is a literal ${). A prop
// that is exactly one binding keeps the JSON type of what it reads; any
// other template is text. Structure.Bind binds data into a plain surface
// tree that ui.Validate accepts, whose text form (ui.Text) is the
// component's; a refusal names the data path and the prop it is bound to.
//
// Data holds one instance's last good data and checks each update all or
// none: Set diffs a whole object into the smallest RFC 6902 change, Patch
// applies RFC 6902 operations in order; both refuse non-objects, data over
// limits.dataBytes, data a declared component's Schema refuses (its defaults
// filled first) and data that does not bind. Coalescer paces publishing to
// limits.dataUpdatesPerSec with an injected Clock: the last value wins at
// the next allowed moment and nothing is dropped. CheckHref decides what a
// link may open: an http(s) URL or a relative path inside the workspace.
//
// docs/bindings.md describes the structure, the binding grammar and the
// conversion rules for client authors.
package component
