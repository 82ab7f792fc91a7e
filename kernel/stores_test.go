package kernel_test

import (
	"path/filepath"
	"testing"

	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
)

// storeMode is one store.Log implementation the kernel's tests run on.
type storeMode struct {
	name string
	// open opens (creating when missing) the store kept in dir.
	open func(dir string) (store.Log, error)
}

// storeModes are the stores every kernel test runs on, each as its own
// subtest. The cluster work adds store/jetstream here.
var storeModes = []storeMode{
	{name: "sqlite", open: func(dir string) (store.Log, error) { return sqlite.Open(filepath.Join(dir, "orrery.db")) }},
}

// run runs f once on each store of modes (all of storeModes when none are
// given), as net/http's tests run one body on each of their modes.
func run(t *testing.T, f func(t *testing.T, m storeMode), modes ...storeMode) {
	t.Helper()
	if len(modes) == 0 {
		modes = storeModes
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { f(t, m) })
	}
}

// storeMode returns the mode named name, for a child process told its
// store by name.
func modeNamed(t *testing.T, name string) storeMode {
	for _, m := range storeModes {
		if m.name == name {
			return m
		}
	}
	t.Fatalf("no store mode %q", name)
	return storeMode{}
}
