package component_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/getorrery/orrery/ui/component"
)

// TestDocsStructures checks that every structure example in
// docs/bindings.md parses, and that the refusal it quotes for a number in a
// table cell is the one Bind gives.
func TestDocsStructures(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "bindings.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)\n```").FindAllSubmatch(doc, -1)
	n := 0
	for _, b := range blocks {
		for _, part := range strings.Split(string(b[1]), "\n\n") {
			if !strings.HasPrefix(part, `{"type"`) {
				continue
			}
			n++
			if _, err := component.Parse(json.RawMessage(part), component.Limits{}); err != nil {
				t.Errorf("docs example %s: Parse() error: %v", part, err)
			}
		}
	}
	if n < 2 {
		t.Errorf("found %d structure examples in docs/bindings.md, want at least 2", n)
	}
	s := component.MustParse(`{"type":"table","columns":["Run","n"],"rows":"${/rows}"}`)
	_, err = s.Bind(json.RawMessage(`{"rows": [["lint", 3]]}`))
	quoted := "the data at /rows/0/1, bound to structure\n  /rows, does not fit: expected string, got number; …"
	if err == nil || !strings.Contains(string(doc), quoted) || !strings.HasPrefix(err.Error(), strings.ReplaceAll(strings.TrimSuffix(quoted, " …"), "\n  ", " ")) {
		t.Errorf("Bind() = %v; docs/bindings.md quotes %q", err, quoted)
	}
}
