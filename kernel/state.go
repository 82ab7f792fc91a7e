package kernel

import (
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/getorrery/orrery/protocol"
)

// initialState is a new session's shared state document.
const initialState = `{"ui":{"nodes":{},"components":{}},"surfaces":{}}`

// stateDoc is a session's shared state, the JSON document clients rebuild
// from STATE_SNAPSHOT and STATE_DELTA. It is owned by the session actor and
// changes only through events the actor sequences, all-or-none.
type stateDoc struct {
	doc []byte
}

func newStateDoc() stateDoc { return stateDoc{doc: []byte(initialState)} }

// JSON returns the document. The caller must not modify it.
func (s *stateDoc) JSON() json.RawMessage { return s.doc }

var patchOptions = func() *jsonpatch.ApplyOptions {
	o := jsonpatch.NewApplyOptions()
	o.SupportNegativeIndices = false
	return o
}()

// check returns the document ev would leave, or an error naming what
// failed; it changes nothing.
func (s *stateDoc) check(ev protocol.Event) ([]byte, error) {
	switch e := ev.(type) {
	case *protocol.StateSnapshot:
		if !json.Valid(e.Snapshot) {
			return nil, fmt.Errorf("state snapshot is not valid JSON")
		}
		return e.Snapshot, nil
	case *protocol.StateDelta:
		ops, err := json.Marshal(e.Delta)
		if err != nil {
			return nil, fmt.Errorf("encode state delta: %w", err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			return nil, fmt.Errorf("state delta: %w", err)
		}
		next, err := patch.ApplyWithOptions(s.doc, patchOptions)
		if err != nil {
			return nil, fmt.Errorf("state delta does not apply (the state keeps its last good value): %w", err)
		}
		return next, nil
	}
	return nil, nil
}

// orreryKeys are the top-level keys of the shared state Orrery owns; the
// others are the application's (a client's RunAgentInput.state).
var orreryKeys = map[string]bool{"ui": true, "surfaces": true, "data": true}

// newTurn returns the snapshot a run starts with: the UI as it stands, no
// surfaces, since surfaces belong to one turn, and, when client is a JSON
// object, its application keys in place of the document's. It also
// returns the application keys the snapshot holds, as an object (nil when
// there are none).
func (s *stateDoc) newTurn(client json.RawMessage) (json.RawMessage, json.RawMessage, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(s.doc, &doc); err != nil {
		return nil, nil, fmt.Errorf("read state: %w", err)
	}
	doc["surfaces"] = json.RawMessage(`{}`)
	var state map[string]json.RawMessage
	if len(client) > 0 && json.Unmarshal(client, &state) == nil && state != nil {
		for k := range doc {
			if !orreryKeys[k] {
				delete(doc, k)
			}
		}
		for k, v := range state {
			if !orreryKeys[k] {
				doc[k] = v
			}
		}
	}
	app := map[string]json.RawMessage{}
	for k, v := range doc {
		if !orreryKeys[k] {
			app[k] = v
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("encode state: %w", err)
	}
	var appJSON json.RawMessage
	if len(app) > 0 {
		appJSON, _ = json.Marshal(app)
	}
	return out, appJSON, nil
}
