package component

// The default limits, as the config keys limits.componentBytes,
// limits.dataBytes and limits.dataUpdatesPerSec set them.
const (
	// DefaultComponentBytes is the most bytes a structure may have: 64 KiB.
	DefaultComponentBytes = 64 << 10
	// DefaultDataBytes is the most bytes one instance's data may have:
	// 256 KiB.
	DefaultDataBytes = 256 << 10
	// DefaultDataUpdatesPerSec is how many data updates a second are
	// published before the rest are coalesced.
	DefaultDataUpdatesPerSec = 10
)

// Limits bound what a component may hold. Sizes are counted on the compact
// JSON encoding, so whitespace never counts. A zero field means its default;
// DefaultLimits returns every default.
type Limits struct {
	// ComponentBytes is the most bytes a structure may have
	// (limits.componentBytes).
	ComponentBytes int
	// DataBytes is the most bytes one instance's data may have, after the
	// schema's defaults are filled (limits.dataBytes).
	DataBytes int
	// DataUpdatesPerSec is how many updates a second are published; more
	// are coalesced (limits.dataUpdatesPerSec).
	DataUpdatesPerSec float64
}

// DefaultLimits returns the default limits: 64 KiB structures, 256 KiB data
// and 10 updates a second.
func DefaultLimits() Limits {
	return Limits{
		ComponentBytes:    DefaultComponentBytes,
		DataBytes:         DefaultDataBytes,
		DataUpdatesPerSec: DefaultDataUpdatesPerSec,
	}
}

// withDefaults returns l with every zero field set to its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.ComponentBytes <= 0 {
		l.ComponentBytes = d.ComponentBytes
	}
	if l.DataBytes <= 0 {
		l.DataBytes = d.DataBytes
	}
	if l.DataUpdatesPerSec <= 0 {
		l.DataUpdatesPerSec = d.DataUpdatesPerSec
	}
	return l
}
