// Package models turns a model spec ("offline", "script:PATH") into an
// agent.Provider. It is the one place that knows every provider package.
package models

import (
	"fmt"
	"strings"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/provider/offline"
	"github.com/getorrery/orrery/agent/provider/script"
)

// Default is the model used when nothing else is configured.
const Default = "offline"

// Resolve returns the provider a spec names. A spec is "offline" or
// "script:PATH"; an unknown spec is refused with the list of known ones.
func Resolve(spec string) (agent.Provider, error) {
	name, arg, _ := strings.Cut(spec, ":")
	switch name {
	case "", "offline":
		return offline.New(), nil
	case "script":
		if arg == "" {
			return nil, fmt.Errorf("model %q: script needs a path, as script:PATH", spec)
		}
		return script.Load(arg)
	default:
		return nil, fmt.Errorf("model %q is unknown: use offline, or script:PATH for tests", spec)
	}
}
