package ui

import (
	"fmt"
	"github.com/getorrery/orrery/internal/prose"
	"slices"
	"strings"
)

// Placement is where a placed surface goes on a client's screen. The zero
// value is no placement and is valid nowhere.
type Placement string

// The placements.
const (
	// Band is the strip of rows above the thread (at most 3 rows, then
	// "+N more").
	Band Placement = "band"
	// PaneLeft is the pane left of the thread.
	PaneLeft Placement = "pane.left"
	// PaneRight is the pane right of the thread.
	PaneRight Placement = "pane.right"
	// Footer is the row under the input.
	Footer Placement = "footer"
	// Inline is in the thread, where it was shown.
	Inline Placement = "inline"
	// Hidden is placed but not drawn.
	Hidden Placement = "hidden"
)

var placements = []Placement{Band, PaneLeft, PaneRight, Footer, Inline, Hidden}

var defaultPlacements = []Placement{Band, PaneLeft, PaneRight, Footer}

// hostIDs are the ids only the host places under.
var hostIDs = []string{"input", "consent", "trust"}

// Placements returns every placement: band, pane.left, pane.right, footer,
// inline and hidden.
func Placements() []Placement { return slices.Clone(placements) }

// DefaultPlacements returns the placements a manifest may declare as a
// default: band, pane.left, pane.right and footer.
func DefaultPlacements() []Placement { return slices.Clone(defaultPlacements) }

// HostIDs returns the ids that are the host's alone: input, consent and
// trust. Nobody else may place under them.
func HostIDs() []string { return slices.Clone(hostIDs) }

func placementList(ps []Placement, conj string) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = string(p)
	}
	return kindList(names, conj)
}

// ParsePlacement returns the placement s names, or an error, matching
// ErrUnknownPlacement, that lists the placements.
func ParsePlacement(s string) (Placement, error) {
	p := Placement(s)
	if slices.Contains(placements, p) {
		return p, nil
	}
	if isHostID(s) {
		return "", &refusal{fmt.Sprintf("placement %s: %s is the host's own, not a placement; use %s",
			prose.Quote(s), strings.ToLower(s), placementList(placements, "or")), ErrUnknownPlacement}
	}
	return "", &refusal{fmt.Sprintf("placement %s is unknown; use %s", prose.Quote(s), placementList(placements, "or")), ErrUnknownPlacement}
}

// CheckDefaultPlacement checks a default placement a manifest declares in
// [[provides.placements]]: only band, pane.left, pane.right or footer. Inline
// and hidden are refused naming the fix, matching ErrDefaultPlacement; an
// unknown name matches ErrUnknownPlacement.
func CheckDefaultPlacement(s string) error {
	p, err := ParsePlacement(s)
	if err != nil {
		return err
	}
	switch p {
	case Inline:
		return &refusal{fmt.Sprintf("manifest placement %q: inline cannot be a default placement, since a default is drawn before anything runs; declare band, pane.left, pane.right or footer, and show inline surfaces with ui.show when they happen", s), ErrDefaultPlacement}
	case Hidden:
		return &refusal{fmt.Sprintf("manifest placement %q: hidden cannot be a default placement, since a default is drawn at once; declare band, pane.left, pane.right or footer, or leave the surface out of [[provides.placements]] and show it with ui.show", s), ErrDefaultPlacement}
	}
	return nil
}

// maxIDLen is the longest placement or extension id.
const maxIDLen = 64

// validID reports whether id is 1 to 64 of A–Z, a–z, 0–9, ".", "_" or "-",
// starting with a letter or digit: so it needs no escaping in a JSON Pointer
// or a TOML key, and never holds the ":" that separates a node id's parts.
func validID(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

const idRule = `1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit`

func isHostID(id string) bool {
	return slices.Contains(hostIDs, strings.ToLower(id))
}

// CheckID checks the id owner places a surface under. It refuses an id that
// is not well formed (ErrBadID) and input, consent and trust, in any case,
// since those are the host's alone (ErrHostID).
func CheckID(owner Owner, id string) error {
	if !validID(id) {
		return &refusal{fmt.Sprintf("placement id %s is not valid; an id is %s", prose.Quote(id), idRule), ErrBadID}
	}
	if isHostID(id) {
		return &refusal{fmt.Sprintf("%s cannot place under %q: input, consent and trust are the host's own ids, and nobody else may place under them; choose another id", owner, id), ErrHostID}
	}
	return nil
}

// Owner is who placed a surface: "ext:<id>" for an extension, "agent" or
// "config" (the person, through config or /ui). The owner label always
// shows. The zero value is no owner and is valid nowhere.
type Owner string

// The owners that are not extensions.
const (
	// OwnerAgent is the session's agent, through its ui.show tool.
	OwnerAgent Owner = "agent"
	// OwnerConfig is the person, through config or /ui.
	OwnerConfig Owner = "config"
	// OwnerHost is the host itself, which alone places under input,
	// consent and trust. No request may name it as an owner.
	OwnerHost Owner = "host"
)

const extPrefix = "ext:"

// ExtOwner returns the owner of what extension id places, "ext:<id>", or an
// error matching ErrBadOwner when id is not a valid extension id.
func ExtOwner(id string) (Owner, error) {
	return ParseOwner(extPrefix + id)
}

// ParseOwner returns the owner s names, or an error matching ErrBadOwner
// that says what an owner is.
func ParseOwner(s string) (Owner, error) {
	switch o := Owner(s); {
	case o == OwnerAgent, o == OwnerConfig:
		return o, nil
	case strings.HasPrefix(s, extPrefix):
		id := s[len(extPrefix):]
		if validID(id) {
			return Owner(s), nil
		}
		return "", &refusal{fmt.Sprintf("owner %s: the extension id after \"ext:\" must be %s", prose.Quote(s), idRule), ErrBadOwner}
	}
	return "", &refusal{fmt.Sprintf("owner %s is not valid; an owner is ext:<id>, agent or config", prose.Quote(s)), ErrBadOwner}
}

// Ext returns the extension id of an ext:<id> owner, and whether o is one.
func (o Owner) Ext() (string, bool) {
	id, ok := strings.CutPrefix(string(o), extPrefix)
	return id, ok
}

// CheckOwner checks that actor may replace, change the data of, or remove
// (ui.hide) the surface that owner placed under id: an owner changes only
// what it placed. A refusal matches ErrForeignOwner.
func CheckOwner(actor, owner Owner, id string) error {
	if actor == owner {
		return nil
	}
	return &refusal{fmt.Sprintf("%s cannot change %q: %s placed it, and an owner changes only what it placed; choose an id of your own", actor, id, owner), ErrForeignOwner}
}

// CheckLayout checks that actor may move, hide or save the placement of
// what owner placed under id: its owner may, and so may the person (config,
// through config or /ui), whoever placed it. A refusal matches
// ErrForeignOwner.
func CheckLayout(actor, owner Owner, id string) error {
	if actor == owner || actor == OwnerConfig {
		return nil
	}
	return &refusal{fmt.Sprintf("%s cannot move or hide %q: %s placed it; only its owner or the person (with /ui or config) changes where it goes", actor, id, owner), ErrForeignOwner}
}

const nodePrefix = "placed:"

// NodeID returns the id of a placed surface's node in the shared state,
// "placed:<owner>:<id>", the key under /ui/nodes and the node of a
// ui.intent.
func NodeID(owner Owner, id string) string {
	return nodePrefix + string(owner) + ":" + id
}

// NodePath returns the JSON Pointer of a placed surface's node in the shared
// state, "/ui/nodes/placed:<owner>:<id>".
func NodePath(owner Owner, id string) string {
	return "/ui/nodes/" + escapeToken(NodeID(owner, id))
}

// ParseNodeID splits a node id "placed:<owner>:<id>" into its owner and id,
// or returns an error matching ErrBadNodeID.
func ParseNodeID(node string) (Owner, string, error) {
	bad := func() (Owner, string, error) {
		return "", "", &refusal{fmt.Sprintf("node %s is not a placed node; a node id is placed:<owner>:<id>, such as placed:ext:ci:build-times or placed:agent:todo", prose.Quote(node)), ErrBadNodeID}
	}
	rest, ok := strings.CutPrefix(node, nodePrefix)
	if !ok {
		return bad()
	}
	var owner string
	if ext, ok := strings.CutPrefix(rest, extPrefix); ok {
		name, id, ok := strings.Cut(ext, ":")
		if !ok {
			return bad()
		}
		owner, rest = extPrefix+name, id
	} else {
		var ok bool
		owner, rest, ok = strings.Cut(rest, ":")
		if !ok {
			return bad()
		}
	}
	o, err := ParseOwner(owner)
	if err != nil || !validID(rest) {
		return bad()
	}
	return o, rest, nil
}
