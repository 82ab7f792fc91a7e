package ui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompilerLoadsNothing checks that the schema compiler never reads a
// file:// or network ref: only the embedded documents resolve.
func TestCompilerLoadsNothing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "evil.json")
	if err := os.WriteFile(file, []byte(`{"type": "string"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file://" + filepath.ToSlash(file), "https://example.com/evil.json", "evil.json"} {
		c := newCompiler()
		if err := c.AddResource(schemaBase+"probe.json", map[string]any{"$ref": ref}); err != nil {
			t.Fatal(err)
		}
		_, err := c.Compile(schemaBase + "probe.json")
		if err == nil || !strings.Contains(err.Error(), "no URLLoader set") {
			t.Errorf("Compile($ref %s) = %v, want a refusal to load", ref, err)
		}
	}
	if _, err := loadSchemas(); err != nil {
		t.Fatalf("loadSchemas() = %v", err)
	}
}
