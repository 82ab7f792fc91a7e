// Package orrery is the root of the Orrery agent kernel. It holds only the
// build's version; the parts live in the packages below it (see
// docs/ARCHITECTURE.md).
package orrery

// Version is the build's version, set at link time with
// -ldflags "-X github.com/getorrery/orrery.Version=…".
var Version = "0.1.0-dev"
