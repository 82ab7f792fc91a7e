package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/getorrery/orrery/config"
)

// TestOpenStore: [store] kind chooses the store through the one table; an
// unknown kind is a usage error that names the known ones.
func TestOpenStore(t *testing.T) {
	cfg := config.Default()
	cfg.Store.Data = t.TempDir()
	st, err := openStore(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("openStore(kind sqlite) = %v, want nil", err)
	}
	st.Close()
	cfg.Store.Kind = "nats"
	_, err = openStore(context.Background(), cfg, nil)
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `"nats"`) || !strings.Contains(err.Error(), "one of jetstream, sqlite") {
		t.Errorf("openStore(kind nats) = %v, want a usage error naming sqlite", err)
	}
	if got := strings.Join(storeKinds.Names(), ","); got != "jetstream,sqlite" {
		t.Errorf("storeKinds.Names() = %s, want jetstream,sqlite", got)
	}
}
