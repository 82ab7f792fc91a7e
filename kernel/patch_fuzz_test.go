package kernel

import (
	"encoding/json"
	"testing"

	"github.com/getorrery/orrery/ui/component"
)

// FuzzPatchData checks that a data patch, however malformed, never takes
// the session down, and that a refused one leaves the last good data as it
// was.
func FuzzPatchData(f *testing.F) {
	for _, s := range [][2]string{
		{`{"a":{"x":null}}`, `[{"op":"test","path":"/a","value":{"x":null}}]`},
		{`{"a":[null,{"b":null}]}`, `[{"op":"test","path":"/a","value":[null,{"b":null}]}]`},
		{`{"runs":[{"name":"lint"}],"failed":1}`, `[{"op":"add","path":"/runs/-","value":{"name":"x"}},{"op":"replace","path":"/failed","value":2}]`},
		{`{"a":1}`, `[{"op":"move","from":"/a","path":"/b"},{"op":"copy","from":"/b","path":"/c"},{"op":"remove","path":"/b"}]`},
		{`{"a":[1,2]}`, `[{"op":"remove","path":"/a/-1"}]`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, doc, ops string) {
		d, err := component.NewData(json.RawMessage(doc), component.Options{})
		if err != nil {
			return
		}
		before := string(d.JSON())
		if err := patchData(d, json.RawMessage(ops)); err != nil {
			if err.Error() == "" {
				t.Fatalf("patch %s refused with an empty error, want a sentence", ops)
			}
			if got := string(d.JSON()); got != before {
				t.Fatalf("refused patch %s changed the data %s to %s", ops, before, got)
			}
		}
	})
}
