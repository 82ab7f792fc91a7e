// Package a2ui is Orrery's A2UI v0.9 face. Out, it projects components
// (an orrery/1 structure and its data) and surfaces to A2UI messages
// (createSurface, updateComponents, updateDataModel, deleteSurface) over the
// basic catalog, carried as ACTIVITY_SNAPSHOT {activityType:
// "a2ui-surface"}. In, it validates A2UI messages strictly against the
// official v0.9 JSON Schemas (schemas/v0_9, from the npm package
// @a2ui/web_core 0.11.0) plus Orrery's rules. Back, it turns an A2UI action
// into a ui.intent. Every function here is pure.
package a2ui

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/getorrery/orrery/protocol"
)

// Version is the A2UI version of every message.
const Version = "v0.9"

// BasicCatalogID is the basic catalog's id as the A2UI renderers that speak
// v0.9 (@a2ui/lit, the A2UI React renderer) register it.
const BasicCatalogID = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"

// ActivityType is the AG-UI activity type that carries A2UI messages.
const ActivityType = "a2ui-surface"

// OperationsKey is the key of the messages in the activity's content.
const OperationsKey = "a2ui_operations"

//go:embed schemas/v0_9/*.json
var schemaFiles embed.FS

const schemaBase = "https://a2ui.org/specification/v0_9/"

type schemas struct {
	server, client *jsonschema.Schema
}

var loadSchemas = sync.OnceValues(func() (*schemas, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(nil) // only the embedded files: never the file system or the network
	for file, url := range map[string]string{
		"server_to_client.json": schemaBase + "server_to_client.json",
		"client_to_server.json": schemaBase + "client_to_server.json",
		"common_types.json":     schemaBase + "common_types.json",
		// server_to_client.json refers to the catalog as catalog.json:
		// the basic catalog is registered there.
		"basic_catalog.json": schemaBase + "catalog.json",
	} {
		raw, err := schemaFiles.ReadFile("schemas/v0_9/" + file)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("a2ui schema %s: %w", file, err)
		}
		if err := c.AddResource(url, doc); err != nil {
			return nil, fmt.Errorf("a2ui schema %s: %w", file, err)
		}
	}
	s := &schemas{}
	var err error
	if s.server, err = c.Compile(schemaBase + "server_to_client.json"); err != nil {
		return nil, fmt.Errorf("compile a2ui server_to_client: %w", err)
	}
	if s.client, err = c.Compile(schemaBase + "client_to_server.json"); err != nil {
		return nil, fmt.Errorf("compile a2ui client_to_server: %w", err)
	}
	return s, nil
})

// CheckSchema validates one server-to-client message against the official
// v0.9 schema with the basic catalog.
func CheckSchema(msg json.RawMessage) error {
	return check(msg, func(s *schemas) *jsonschema.Schema { return s.server })
}

// CheckClientSchema validates one client-to-server message (an action or an
// error) against the official v0.9 schema.
func CheckClientSchema(msg json.RawMessage) error {
	return check(msg, func(s *schemas) *jsonschema.Schema { return s.client })
}

func check(msg json.RawMessage, pick func(*schemas) *jsonschema.Schema) error {
	s, err := loadSchemas()
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(msg))
	if err != nil {
		return fmt.Errorf("the message is not JSON: %w", err)
	}
	return pick(s).Validate(doc)
}

// Message is one A2UI v0.9 server-to-client message: exactly one of its
// operations is set.
type Message struct {
	Version          string            `json:"version"`
	CreateSurface    *CreateSurface    `json:"createSurface,omitempty"`
	UpdateComponents *UpdateComponents `json:"updateComponents,omitempty"`
	UpdateDataModel  *UpdateDataModel  `json:"updateDataModel,omitempty"`
	DeleteSurface    *DeleteSurface    `json:"deleteSurface,omitempty"`
}

// CreateSurface starts a surface over a catalog.
type CreateSurface struct {
	SurfaceID string `json:"surfaceId"`
	CatalogID string `json:"catalogId"`
}

// UpdateComponents sets components of a surface, each whole.
type UpdateComponents struct {
	SurfaceID  string      `json:"surfaceId"`
	Components []Component `json:"components"`
}

// Component is one flat A2UI component: its id, its catalog type, and its
// properties.
type Component map[string]any

// UpdateDataModel sets the value at path (all of the model when empty).
type UpdateDataModel struct {
	SurfaceID string          `json:"surfaceId"`
	Path      string          `json:"path,omitempty"`
	Value     json.RawMessage `json:"value,omitempty"`
}

// DeleteSurface removes a surface.
type DeleteSurface struct {
	SurfaceID string `json:"surfaceId"`
}

// Delete returns the message that removes surface id.
func Delete(id string) Message {
	return Message{Version: Version, DeleteSurface: &DeleteSurface{SurfaceID: id}}
}

// Activity returns the AG-UI event that carries msgs for surface id, as the
// A2UI renderers for AG-UI read it: ACTIVITY_SNAPSHOT with messageId
// a2ui-surface-<id>, replace true, and content {a2ui_operations: msgs}.
// Each snapshot is whole: it replaces the last one of the surface.
func Activity(id string, msgs []Message) (*protocol.ActivitySnapshot, error) {
	content, err := json.Marshal(map[string]any{OperationsKey: msgs})
	if err != nil {
		return nil, fmt.Errorf("encode a2ui operations: %w", err)
	}
	replace := true
	ev := protocol.NewEvent(protocol.TypeActivitySnapshot).(*protocol.ActivitySnapshot)
	ev.MessageID = "a2ui-surface-" + id
	ev.ActivityType = ActivityType
	ev.Content = content
	ev.Replace = &replace
	return ev, nil
}
