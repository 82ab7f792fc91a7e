package a2ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Error is a refused A2UI message: the JSON path in the list that failed
// and what to do.
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string { return "a2ui " + e.Path + ": " + e.Msg }

func refuse(path, format string, args ...any) *Error {
	return &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// catalogProps are the properties each basic-catalog component takes, read
// from the official catalog schema.
var catalogProps = sync.OnceValues(func() (map[string][]string, error) {
	var cat, common map[string]any
	for file, dst := range map[string]*map[string]any{"basic_catalog.json": &cat, "common_types.json": &common} {
		raw, err := schemaFiles.ReadFile("schemas/v0_9/" + file)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return nil, err
		}
	}
	def := func(ref string) map[string]any {
		doc := cat
		if strings.HasPrefix(ref, schemaBase+"common_types.json") {
			doc = common
		}
		_, frag, _ := strings.Cut(ref, "#/$defs/")
		defs, _ := doc["$defs"].(map[string]any)
		d, _ := defs[frag].(map[string]any)
		return d
	}
	out := map[string][]string{}
	comps, _ := cat["components"].(map[string]any)
	for name, c := range comps {
		cm, _ := c.(map[string]any)
		all, _ := cm["allOf"].([]any)
		var props []string
		for _, part := range all {
			pm, _ := part.(map[string]any)
			if ref, ok := pm["$ref"].(string); ok {
				pm = def(ref)
			}
			ps, _ := pm["properties"].(map[string]any)
			for p := range ps {
				props = append(props, p)
			}
		}
		slices.Sort(props)
		out[name] = props
	}
	return out, nil
})

// childProps are the properties that name other components.
var childProps = []string{"child", "children", "trigger", "content"}

// tagPattern finds markup in a string.
var tagPattern = regexp.MustCompile(`</?[A-Za-z!][^>]*>`)

// dataImage is the one kind of data: URL an image may have.
var dataImage = regexp.MustCompile(`^data:image/(png|jpeg|gif|webp);base64,`)

// Validate checks a list of A2UI v0.9 messages from an agent or an
// extension (the a2ui form of ui.show) and returns them. It is strict: an
// unknown message, component, property, binding, reference, function or
// action is refused with an *Error naming its path, as is anything that
// carries markup, a script or a remote URL, or a catalog other than the
// basic one; every message must then pass the official schema.
func Validate(list json.RawMessage) ([]Message, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(list, &raw); err != nil {
		return nil, refuse("", "the a2ui form is a JSON array of A2UI v0.9 messages, such as [{\"version\":\"v0.9\",\"createSurface\":{…}}]")
	}
	if len(raw) == 0 {
		return nil, refuse("", "the a2ui form is empty: send at least createSurface and updateComponents")
	}
	props, err := catalogProps()
	if err != nil {
		return nil, err
	}
	ids := map[string]map[string]bool{} // surface → component ids
	type ref struct{ surface, id, path string }
	var refs []ref
	msgs := make([]Message, 0, len(raw))
	for i, r := range raw {
		at := "/" + strconv.Itoa(i)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r, &m); err != nil {
			return nil, refuse(at, "a message is a JSON object")
		}
		var ver string
		_ = json.Unmarshal(m["version"], &ver)
		if ver != Version {
			return nil, refuse(at+"/version", "version must be %q", Version)
		}
		var op string
		for k := range m {
			switch k {
			case "version":
			case "createSurface", "updateComponents", "updateDataModel", "deleteSurface":
				if op != "" {
					return nil, refuse(at, "a message holds one operation, not %s and %s: split it in two", op, k)
				}
				op = k
			default:
				return nil, refuse(at+"/"+k, "unknown message key %q: use createSurface, updateComponents, updateDataModel or deleteSurface", k)
			}
		}
		if op == "" {
			return nil, refuse(at, "the message has no operation: add createSurface, updateComponents, updateDataModel or deleteSurface")
		}
		var body map[string]any
		if err := decodeJSON(m[op], &body); err != nil {
			return nil, refuse(at+"/"+op, "%s is a JSON object", op)
		}
		surface, _ := body["surfaceId"].(string)
		if err := checkStrings(body, at+"/"+op); err != nil {
			return nil, err
		}
		switch op {
		case "createSurface":
			if c, _ := body["catalogId"].(string); c != BasicCatalogID {
				return nil, refuse(at+"/createSurface/catalogId", "catalog %q is not served: use the basic catalog %s", c, BasicCatalogID)
			}
			if th, ok := body["theme"].(map[string]any); ok {
				if _, ok := th["iconUrl"]; ok {
					return nil, refuse(at+"/createSurface/theme/iconUrl", "a remote icon is not taken: leave iconUrl out")
				}
			}
			if ids[surface] == nil {
				ids[surface] = map[string]bool{}
			}
		case "updateComponents":
			comps, _ := body["components"].([]any)
			if ids[surface] == nil {
				ids[surface] = map[string]bool{}
			}
			for j, c := range comps {
				cat := fmt.Sprintf("%s/updateComponents/components/%d", at, j)
				cm, ok := c.(map[string]any)
				if !ok {
					return nil, refuse(cat, "a component is a JSON object {\"id\", \"component\", …}")
				}
				name, _ := cm["component"].(string)
				allowed, ok := props[name]
				if !ok {
					return nil, refuse(cat+"/component", "unknown component %q: use one of the basic catalog's %s", name, strings.Join(catalogNames(props), ", "))
				}
				for k, v := range cm {
					if !slices.Contains(allowed, k) {
						return nil, refuse(cat+"/"+k, "%s has no property %q: it takes %s", name, k, strings.Join(allowed, ", "))
					}
					if slices.Contains(childProps, k) {
						switch x := v.(type) {
						case string:
							refs = append(refs, ref{surface, x, cat + "/" + k})
						case []any:
							for n, id := range x {
								s, _ := id.(string)
								refs = append(refs, ref{surface, s, fmt.Sprintf("%s/%s/%d", cat, k, n)})
							}
						case map[string]any:
							s, _ := x["componentId"].(string)
							refs = append(refs, ref{surface, s, cat + "/" + k + "/componentId"})
						}
					}
				}
				if tabs, ok := cm["tabs"].([]any); ok {
					for n, t := range tabs {
						tm, _ := t.(map[string]any)
						s, _ := tm["child"].(string)
						refs = append(refs, ref{surface, s, fmt.Sprintf("%s/tabs/%d/child", cat, n)})
					}
				}
				if url, ok := cm["url"].(string); ok && !dataImage.MatchString(url) && !strings.HasPrefix(url, "https://") {
					return nil, refuse(cat+"/url", "only https: URLs and data:image/(png|jpeg|gif|webp) are taken")
				}
				if err := checkDynamic(cm, cat); err != nil {
					return nil, err
				}
				id, _ := cm["id"].(string)
				ids[surface][id] = true
			}
		}
		if err := CheckSchema(r); err != nil {
			return nil, schemaRefusal(at, err)
		}
		var msg Message
		if err := json.Unmarshal(r, &msg); err != nil {
			return nil, refuse(at, "%v", err)
		}
		msgs = append(msgs, msg)
	}
	for _, r := range refs {
		if !ids[r.surface][r.id] {
			return nil, refuse(r.path, "no component %q in surface %q: add it to updateComponents, or name one that is there", r.id, r.surface)
		}
	}
	for s, set := range ids {
		if len(set) > 0 && !set["root"] {
			return nil, refuse("", "surface %q has no component with id \"root\": the renderer starts there", s)
		}
	}
	return msgs, nil
}

func catalogNames(props map[string][]string) []string {
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// checkStrings refuses markup in any string.
func checkStrings(v any, at string) error {
	switch x := v.(type) {
	case string:
		if tagPattern.MatchString(x) || strings.Contains(strings.ToLower(x), "javascript:") {
			return refuse(at, "markup and scripts are not taken: send plain text or simple Markdown")
		}
	case []any:
		for i, e := range x {
			if err := checkStrings(e, at+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	case map[string]any:
		for k, e := range x {
			if err := checkStrings(e, at+"/"+k); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkDynamic refuses bindings that are not JSON Pointers and actions that
// run functions: every action is an event the owner receives, and links
// open only through the host.
func checkDynamic(v any, at string) error {
	switch x := v.(type) {
	case []any:
		for i, e := range x {
			if err := checkDynamic(e, at+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	case map[string]any:
		if p, ok := x["path"]; ok && len(x) == 1 {
			s, _ := p.(string)
			if s == "" || strings.HasPrefix(s, "//") || strings.Contains(s, "~") && !validEscapes(s) {
				return refuse(at+"/path", "binding %q is not a JSON Pointer: bind to /a/b, or to a/b inside a list template", s)
			}
		}
		if _, ok := x["functionCall"]; ok {
			return refuse(at+"/functionCall", "function-call actions are not taken: send {\"event\": {\"name\": …}}; links open through the host")
		}
		if c, ok := x["call"].(string); ok && c == "openUrl" {
			return refuse(at+"/call", "openUrl is not taken: links open through the host")
		}
		for k, e := range x {
			if err := checkDynamic(e, at+"/"+k); err != nil {
				return err
			}
		}
	}
	return nil
}

func validEscapes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '~' && (i+1 >= len(s) || (s[i+1] != '0' && s[i+1] != '1')) {
			return false
		}
	}
	return true
}

// schemaRefusal names the deepest place the official schema refused.
func schemaRefusal(at string, err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return refuse(at, "%v", err)
	}
	leaf := deepest(ve)
	path := at
	for _, p := range leaf.InstanceLocation {
		path += "/" + p
	}
	return refuse(path, "does not fit the A2UI v0.9 schema: %s", strings.TrimSpace(leaf.Error()))
}

// deepest returns the leaf cause that reaches furthest into the message:
// of a oneOf's alternatives, the one that matched the most.
func deepest(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	best := ve
	for _, c := range ve.Causes {
		if d := deepest(c); len(d.InstanceLocation) > len(best.InstanceLocation) || best == ve {
			best = d
		}
	}
	return best
}
