package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name, path, want, wantErr string
	}{
		{"good", write("good", "c2VjcmV0IHNoYXJlZCBieSB0aGUgdGhyZWU=\n", 0o600), "c2VjcmV0IHNoYXJlZCBieSB0aGUgdGhyZWU=", ""},
		{"missing", filepath.Join(dir, "none"), "", "--nats-cluster-secret"},
		{"readable by others", write("open", "c2VjcmV0IHNoYXJlZCBieSB0aGUgdGhyZWU=\n", 0o644), "", "chmod 600"},
		{"too short", write("short", "abc\n", 0o600), "", "at least 16 characters"},
		{"two lines", write("lines", "0123456789abcdef\n0123456789abcdef\n", 0o600), "", "one line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readSecret(tt.path)
			if tt.wantErr == "" && (err != nil || got != tt.want) {
				t.Fatalf("readSecret = %q, %v; want %q", got, err, tt.want)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("readSecret = %q, %v; want an error saying %q", got, err, tt.wantErr)
			}
		})
	}
}
