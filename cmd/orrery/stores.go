package main

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
)

// storeKinds is every store implementation [store] kind may name: the one
// table from a kind to its constructor. A kind registered twice panics as
// the program starts.
var storeKinds = func() *store.Kinds {
	k := &store.Kinds{}
	k.Register("sqlite", func(_ context.Context, c store.OpenConfig) (store.Log, error) {
		return sqlite.Open(filepath.Join(c.Dir, "orrery.db"))
	})
	return k
}()

// openStore opens the log [store] kind names in the data dir. An unknown
// kind is a usage error naming the known ones.
func openStore(ctx context.Context, cfg config.Config) (store.Log, error) {
	st, err := storeKinds.Open(ctx, cfg.Store.Kind, store.OpenConfig{Dir: cfg.Store.Data})
	if errors.Is(err, store.ErrUnknownKind) {
		return nil, &usageError{msg: err.Error()}
	}
	if err != nil {
		return nil, storeOpenError(cfg, err)
	}
	return st, nil
}
