package ui_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/getorrery/orrery/ui"
)

// docExample is an example surface in docs/surfaces.md and the text form
// shown under it.
var docExample = regexp.MustCompile("(?s)```json\n(\\{\"kind\".*?)\n```\n\nText form:\n\n(?:````text\n(.*?)\n````|```text\n(.*?)\n```)\n")

// TestDocsExamples checks that every example in docs/surfaces.md is valid
// and shows the text form Text gives it.
func TestDocsExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "surfaces.md"))
	if err != nil {
		t.Fatal(err)
	}
	examples := docExample.FindAllSubmatch(doc, -1)
	if len(examples) < len(ui.Kinds())+len(ui.ChartKinds()) {
		t.Errorf("docs/surfaces.md has %d examples, want one per kind and chart kind at least", len(examples))
	}
	for _, m := range examples {
		got, err := ui.Text(json.RawMessage(m[1]))
		if err != nil {
			t.Errorf("docs example %s: Text() error: %v", m[1], err)
			continue
		}
		want := string(m[2]) + string(m[3]) // one of the two fences matched
		if got != want {
			t.Errorf("docs example %s: Text() =\n%s\nwant (as documented)\n%s", m[1], got, want)
		}
	}
}
