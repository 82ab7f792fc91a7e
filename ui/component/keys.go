package component

import (
	"maps"
	"slices"
)

// sortedKeys returns m's keys in order, for output that does not depend on
// map order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
