package ext

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// API is the manifest API this host speaks: [extension] api.
const API = "orrery-ext/1"

// ManifestFile is the manifest's name inside an extension's directory.
const ManifestFile = "orrery.toml"

// The runtimes an extension may declare. RuntimeNone has no process: it
// only declares placements, components and actions.
const (
	RuntimeGo     = "go"
	RuntimeNode   = "node"
	RuntimePython = "python"
	RuntimeBinary = "binary"
	RuntimeNone   = "none"
)

var runtimes = []string{RuntimeGo, RuntimeNode, RuntimePython, RuntimeBinary, RuntimeNone}

// Manifest is an extension's orrery.toml.
type Manifest struct {
	Extension Info     `toml:"extension"`
	Provides  Provides `toml:"provides"`
	Subscribe struct {
		// Events are the session events the extension receives as
		// session/event notifications: AG-UI types (RUN_FINISHED …) or
		// Orrery's custom names (orrery.user.message …), or "*".
		Events []string `toml:"events"`
	} `toml:"subscribe"`

	// Dir is the directory the manifest was read from; a relative command
	// runs from it.
	Dir string `toml:"-"`
}

// Info is the manifest's [extension] table.
type Info struct {
	API     string  `toml:"api"`
	Name    string  `toml:"name"`
	Version string  `toml:"version"`
	Runtime string  `toml:"runtime"`
	Command Command `toml:"command"`
	// Resident keeps the process for the whole session; otherwise it parks
	// after a quiet spell and starts again when needed.
	Resident bool `toml:"resident"`
	// Renderers does nothing: an extension never draws. It is accepted so
	// that older manifests stay valid.
	Renderers any `toml:"renderers"`
}

// Command is the program and its arguments: a TOML string (the program
// alone) or an array of strings.
type Command []string

// UnmarshalTOML implements toml.Unmarshaler.
func (c *Command) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case string:
		*c = Command{x}
		return nil
	case []any:
		out := make(Command, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return errors.New("command must be a string or an array of strings")
			}
			out = append(out, s)
		}
		*c = out
		return nil
	}
	return errors.New("command must be a string or an array of strings")
}

// Provides is the manifest's [provides] table.
type Provides struct {
	Placements []PlacementDecl       `toml:"placements"`
	Components []ComponentDecl       `toml:"components"`
	Actions    map[string]ActionDecl `toml:"actions"`
	Tools      []ToolDecl            `toml:"tools"`
}

// PlacementDecl is one [[provides.placements]]: a surface drawn at once, in
// its loading state, that the extension fills after ext/load. With
// Component it is drawn at once as that declared component with Data (the
// schema's defaults fill what Data lacks): the only way a runtime "none"
// extension's component is shown.
type PlacementDecl struct {
	ID        string  `toml:"id" json:"id"`
	Placement string  `toml:"placement" json:"placement"`
	Title     string  `toml:"title" json:"title"`
	Component string  `toml:"component" json:"component,omitempty"`
	Data      JSONDoc `toml:"data" json:"data,omitempty"`
}

// ComponentDecl is one [[provides.components]]: a named structure and the
// JSON Schema of its data. Each may be written as a TOML table or as a
// string of JSON.
type ComponentDecl struct {
	Name      string  `toml:"name"`
	Structure JSONDoc `toml:"structure"`
	Schema    JSONDoc `toml:"schema"`
}

// ActionDecl is one [provides.actions.<name>]: what a committed action on a
// runtime "none" extension's component runs. Command runs in the session's
// workspace with a minimal environment; the action's value is on its stdin
// and in ORRERY_VALUE.
type ActionDecl struct {
	Description string  `toml:"description"`
	Command     Command `toml:"command"`
}

// ToolDecl is one [[provides.tools]]: a tool the model may call, which
// reaches the extension as tools/call after the consent gate.
type ToolDecl struct {
	Name        string  `toml:"name" json:"name"`
	Description string  `toml:"description" json:"description"`
	Parameters  JSONDoc `toml:"parameters" json:"parameters,omitempty"`
	// ReadOnly tools are allowed by the consent gate by default; others are
	// asked about.
	ReadOnly bool `toml:"read_only" json:"read_only,omitempty"`
}

// JSONDoc is a JSON document written in TOML as a table or as a string of
// JSON. It holds the compact JSON; empty means absent.
type JSONDoc json.RawMessage

// UnmarshalTOML implements toml.Unmarshaler.
func (d *JSONDoc) UnmarshalTOML(v any) error {
	if s, ok := v.(string); ok {
		if !json.Valid([]byte(s)) {
			return errors.New("it is a string but not valid JSON: write a JSON object in the string, or a TOML table")
		}
		*d = JSONDoc(s)
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("it cannot be read as JSON: %w", err)
	}
	*d = JSONDoc(b)
	return nil
}

// MarshalJSON writes the document itself (null when empty).
func (d JSONDoc) MarshalJSON() ([]byte, error) {
	if len(d) == 0 {
		return []byte("null"), nil
	}
	return []byte(d), nil
}

// UnmarshalJSON keeps the document as it is written (ext/register's
// parameters).
func (d *JSONDoc) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = nil
		return nil
	}
	*d = JSONDoc(bytes.Clone(b))
	return nil
}

// ManifestError is a manifest refused: Field names the key that failed
// (such as provides.placements[0].placement) and Msg says how to fix it.
type ManifestError struct {
	Path  string
	Field string
	Msg   string
}

func (e *ManifestError) Error() string {
	where := e.Path
	if where == "" {
		where = ManifestFile
	}
	if e.Field == "" {
		return where + ": " + e.Msg
	}
	return where + ": " + e.Field + ": " + e.Msg
}

var (
	namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	toolPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// LoadManifest reads and checks dir/orrery.toml.
func LoadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read extension manifest: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("read extension manifest: %w", err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		var me *ManifestError
		if errors.As(err, &me) {
			me.Path = path
		}
		return nil, err
	}
	m.Dir = abs
	return m, nil
}

// ParseManifest decodes and checks a manifest. A refusal is a
// *ManifestError naming the field and the fix.
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	md, err := toml.Decode(string(data), &m)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return nil, &ManifestError{Msg: fmt.Sprintf("not valid TOML at line %d: %s; fix the syntax", perr.Position.Line, perr.Message)}
		}
		return nil, &ManifestError{Msg: err.Error() + "; fix the value's type"}
	}
	for _, key := range md.Undecoded() {
		k := key.String()
		if strings.HasPrefix(k, "extension.renderers") || strings.HasPrefix(k, "provides.components") && (strings.Contains(k, ".structure") || strings.Contains(k, ".schema")) ||
			strings.HasPrefix(k, "provides.tools") && strings.Contains(k, ".parameters") ||
			strings.HasPrefix(k, "provides.placements") && strings.Contains(k, ".data") {
			continue
		}
		return nil, &ManifestError{Field: k, Msg: "this key is unknown; remove it (the keys are [extension] api, name, version, runtime, command, resident; [[provides.placements]] id, placement, title, component, data; [[provides.components]], [provides.actions.<name>], [[provides.tools]]; [subscribe] events)"}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the manifest; it is what ParseManifest runs after
// decoding.
func (m *Manifest) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ManifestError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	x := m.Extension
	switch {
	case x.API == "":
		return bad("extension.api", "missing; set api = %q", API)
	case x.API != API:
		return bad("extension.api", "%q is not an API this host speaks; set api = %q", x.API, API)
	case x.Name == "":
		return bad("extension.name", "missing; name the extension, such as name = \"build-times\"")
	case !namePattern.MatchString(x.Name):
		return bad("extension.name", "%q is not a valid name; use 1 to 64 lowercase letters, digits, \"-\" or \"_\", starting with a letter or digit", x.Name)
	case x.Version == "":
		return bad("extension.version", "missing; set version = \"0.1.0\"")
	case !slices.Contains(runtimes, x.Runtime):
		return bad("extension.runtime", "%q is not a runtime; use one of %s", x.Runtime, strings.Join(runtimes, ", "))
	case x.Runtime == RuntimeNone && len(x.Command) > 0:
		return bad("extension.command", "runtime \"none\" has no process; remove command, or set the runtime the command needs")
	case x.Runtime != RuntimeNone && (len(x.Command) == 0 || x.Command[0] == ""):
		return bad("extension.command", "missing; set the program to start, such as command = [\"python3\", \"main.py\"] (a relative path runs from the extension's directory)")
	case x.Runtime == RuntimeNone && x.Resident:
		return bad("extension.resident", "runtime \"none\" has no process to keep; remove resident")
	}
	owner, _ := ui.ExtOwner(x.Name)
	seen := map[string]bool{}
	for i, p := range m.Provides.Placements {
		field := fmt.Sprintf("provides.placements[%d]", i)
		if err := ui.CheckID(owner, p.ID); err != nil {
			return bad(field+".id", "%v", err)
		}
		if seen[p.ID] {
			return bad(field+".id", "%q is declared twice; give each placement its own id", p.ID)
		}
		seen[p.ID] = true
		if p.Placement == "" {
			return bad(field+".placement", "missing; set placement = \"pane.right\" (band, pane.left, pane.right or footer)")
		}
		if err := ui.CheckDefaultPlacement(p.Placement); err != nil {
			return bad(field+".placement", "%v", err)
		}
	}
	names := map[string]bool{}
	for _, c := range m.Provides.Components {
		names[c.Name] = false
	}
	for i, p := range m.Provides.Placements {
		field := fmt.Sprintf("provides.placements[%d]", i)
		if _, ok := names[p.Component]; p.Component != "" && !ok {
			return bad(field+".component", "%q is not declared; declare it under [[provides.components]] or remove component", p.Component)
		}
		if len(p.Data) > 0 && p.Component == "" {
			return bad(field+".data", "data goes with a component; set component to one declared under [[provides.components]], or remove data")
		}
		if len(p.Data) > 0 && p.Data[0] != '{' {
			return bad(field+".data", "must be a table (a JSON object), such as data = {failed = 0}")
		}
	}
	clear(names)
	for i, c := range m.Provides.Components {
		field := fmt.Sprintf("provides.components[%d]", i)
		if !namePattern.MatchString(c.Name) {
			return bad(field+".name", "%q is not a valid component name; use lowercase letters, digits, \"-\" or \"_\"", c.Name)
		}
		if names[c.Name] {
			return bad(field+".name", "%q is declared twice; give each component its own name", c.Name)
		}
		names[c.Name] = true
		if len(c.Structure) == 0 {
			return bad(field+".structure", "missing; give the component's structure over the catalog orrery/1, such as structure = {type = \"text\", value = \"${/failed} failed\"}")
		}
		if _, err := component.Parse(json.RawMessage(c.Structure), component.DefaultLimits()); err != nil {
			return bad(field+".structure", "%v", err)
		}
		if len(c.Schema) == 0 {
			return bad(field+".schema", "missing; give the JSON Schema of the component's data, such as schema = {type = \"object\"}")
		}
		if err := component.NewSchema(c.Name, json.RawMessage(c.Schema)).Err(); err != nil {
			return bad(field+".schema", "%v", err)
		}
	}
	for _, name := range sortedKeys(m.Provides.Actions) {
		a := m.Provides.Actions[name]
		field := "provides.actions." + name
		if !toolPattern.MatchString(name) {
			return bad(field, "%q is not a valid action id; use letters, digits, \"-\" or \"_\"", name)
		}
		if x.Runtime == RuntimeNone && len(a.Command) == 0 {
			return bad(field+".command", "missing; an extension with runtime \"none\" runs a command for each action, such as command = [\"make\", \"test\"]")
		}
	}
	tools := map[string]bool{}
	for i, t := range m.Provides.Tools {
		field := fmt.Sprintf("provides.tools[%d]", i)
		if x.Runtime == RuntimeNone {
			return bad(field, "runtime \"none\" has no process to call; remove the tool or give the extension a runtime and command")
		}
		if !toolPattern.MatchString(t.Name) {
			return bad(field+".name", "%q is not a valid tool name; use 1 to 64 letters, digits, \"-\" or \"_\"", t.Name)
		}
		if tools[t.Name] {
			return bad(field+".name", "%q is declared twice; give each tool its own name", t.Name)
		}
		tools[t.Name] = true
		if strings.TrimSpace(t.Description) == "" {
			return bad(field+".description", "missing; say in one sentence what the tool does, for the model")
		}
		if len(t.Parameters) > 0 {
			var obj map[string]any
			if json.Unmarshal(t.Parameters, &obj) != nil || obj["type"] != "object" {
				return bad(field+".parameters", "must be a JSON Schema with type = \"object\", such as parameters = {type = \"object\", properties = {path = {type = \"string\"}}}")
			}
		}
	}
	for i, ev := range m.Subscribe.Events {
		if ev == "*" || strings.HasPrefix(ev, "orrery.") && len(ev) > len("orrery.") {
			continue
		}
		if slices.Contains(protocol.EventTypes(), protocol.EventType(ev)) {
			continue
		}
		return bad(fmt.Sprintf("subscribe.events[%d]", i), "%q is not a session event; use an AG-UI type such as RUN_FINISHED, an orrery.* name such as orrery.user.message, or \"*\"", ev)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Owner is the owner of what the extension places: ext:<name>.
func (m *Manifest) Owner() ui.Owner { return ui.Owner("ext:" + m.Extension.Name) }

// StartsWithSession reports whether the extension starts with each
// session: it declares placements or subscribes to events.
func (m *Manifest) StartsWithSession() bool {
	return m.Extension.Runtime != RuntimeNone && (len(m.Provides.Placements) > 0 || len(m.Subscribe.Events) > 0)
}

// Subscribes reports whether the extension receives events of type t (an
// AG-UI type, or for CUSTOM events their name).
func (m *Manifest) Subscribes(t string) bool {
	return slices.Contains(m.Subscribe.Events, "*") || slices.Contains(m.Subscribe.Events, t)
}
