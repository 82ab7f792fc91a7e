package datadir

import "testing"

// SetPipeBase puts the pipes of deep data dirs under dir until the test
// ends.
func SetPipeBase(t *testing.T, dir string) {
	old := pipeBase
	pipeBase = dir
	t.Cleanup(func() { pipeBase = old })
}
