package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/ui"
)

// watchSet is the shared state keys whose orrery.state.changed events one
// stream passes (state.watch, GET /events?watch=). The events are logged
// like any other; a stream that watches none of a change's key leaves it
// out, so its seqs skip that frame. The zero value watches nothing. It may
// change while the stream runs.
type watchSet struct {
	keys atomic.Pointer[[]string]
}

// set replaces the watched keys.
func (w *watchSet) set(keys []string) { w.keys.Store(&keys) }

// watched returns the watched keys.
func (w *watchSet) watched() []string {
	if p := w.keys.Load(); p != nil {
		return *p
	}
	return nil
}

var stateChangedName = []byte(`"` + kernel.StateChangedEvent + `"`)

// keep reports whether the stream passes f: every frame but an
// orrery.state.changed of a key it does not watch.
func (w *watchSet) keep(f kernel.Frame) bool {
	if f.Type != string(protocol.TypeCustom) || !bytes.Contains(f.Data, stateChangedName) {
		return true
	}
	var c struct {
		Name  string `json:"name"`
		Value struct {
			Key string `json:"key"`
		} `json:"value"`
	}
	if json.Unmarshal(f.Data, &c) != nil || c.Name != kernel.StateChangedEvent {
		return true
	}
	return watches(w.watched(), c.Value.Key)
}

// watches reports whether keys name key: exactly, or as "<owner>/*".
func watches(keys []string, key string) bool {
	for _, k := range keys {
		if k == key || strings.HasSuffix(k, "/*") && strings.HasPrefix(key, k[:len(k)-1]) {
			return true
		}
	}
	return false
}

// maxWatchKeys bounds one stream's watched keys.
const maxWatchKeys = 256

// checkWatch refuses a key that is not "<owner>/<key>" or "<owner>/*".
func checkWatch(keys []string) error {
	if len(keys) > maxWatchKeys {
		return &kernel.RequestError{Msg: fmt.Sprintf("%d keys are too many to watch: watch at most %d, or an owner's every key with \"<owner>/*\"", len(keys), maxWatchKeys)}
	}
	for _, k := range keys {
		owner, key, ok := strings.Cut(k, "/")
		if !ok || key == "" {
			return &kernel.RequestError{Msg: fmt.Sprintf("state key %q is not <owner>/<key>: watch a key such as \"ext:ci/failed\", or \"ext:ci/*\" for all of an owner's keys", k)}
		}
		if _, err := ui.ParseOwner(owner); err != nil {
			return &kernel.RequestError{Msg: fmt.Sprintf("state key %q: %v", k, err)}
		}
	}
	return nil
}
