//go:build !race

// Package race tells a test whether the race detector is on, so that a
// test whose load makes the detector's cost matter (a NATS cluster in
// the test's own process) can size itself down under it.
package race

// Enabled reports whether the binary was built with -race.
const Enabled = false
