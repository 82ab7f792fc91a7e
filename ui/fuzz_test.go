package ui_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/getorrery/orrery/ui"
)

// FuzzValidateText checks that Validate and Text never panic, that Text
// accepts exactly what Validate accepts (refusing with the same error), and
// that the text form is stable. Its seeds are every golden input and every
// refusal; the corpus it grew is kept in testdata/fuzz/FuzzValidateText.
func FuzzValidateText(f *testing.F) {
	for _, in := range goldenInputs(f) {
		raw, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, r := range refusals {
		if len(r.surface) < 1<<16 {
			f.Add([]byte(r.surface))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		verr := ui.Validate(json.RawMessage(raw))
		_ = ui.ValidateFallback(json.RawMessage(raw))
		text, terr := ui.Text(json.RawMessage(raw))
		if (verr == nil) != (terr == nil) {
			t.Fatalf("Validate() = %v but Text() = %v", verr, terr)
		}
		if verr != nil {
			if verr.Error() != terr.Error() {
				t.Fatalf("Validate() = %q but Text() = %q", verr, terr)
			}
			return
		}
		if again, _ := ui.Text(json.RawMessage(raw)); again != text {
			t.Fatalf("Text() = %q, then %q", text, again)
		}
	})
}
