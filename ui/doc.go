// Package ui holds the rules of Orrery's shared UI state that need no
// session: the surface kinds and their JSON Schemas, validation, the text
// form of every surface, and the placement rules.
//
// A surface is {"kind": {"t": "<kind>", …}}, where t is one of Kinds. Each
// kind has a JSON Schema (draft 2020-12) embedded in the package (Schema),
// compiled without any loader, so no schema ever reads a file or the
// network. Validate refuses a surface that fails its schema, a limit or a
// consistency rule with an *Error that names the JSON path and the fix;
// ValidateFallback also refuses any kind outside CoreKinds. Text returns the
// deterministic text form a client shows when it cannot draw a surface.
//
// Placements (band, pane.left, pane.right, footer, inline, hidden), owners
// (ext:<id>, agent, config), the host-only ids (input, consent, trust) and
// node ids (placed:<owner>:<id>) are checked by pure functions: nothing here
// holds state.
//
// docs/surfaces.md describes each kind for client authors.
package ui
