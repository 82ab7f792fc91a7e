package config_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/getorrery/orrery/config"
)

// TestReadmeExample keeps the README's configuration example true: it loads
// and validates as written.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Configuration.*?```toml\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```toml example under ## Configuration")
	}
	path := filepath.Join(t.TempDir(), "orrery.toml")
	if err := os.WriteFile(path, m[1], 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatalf("the README's example does not load: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the README's example does not validate: %v", err)
	}
	if len(cfg.Permissions.Allow) == 0 || cfg.MCP.Servers["github"].Command != "npx" || cfg.Models["local"].Provider != "openai" {
		t.Errorf("the README's example lost its tables: %+v", cfg)
	}
}
