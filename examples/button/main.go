// Command button is an example Orrery extension in Go: a declared component
// with a button. Each press reaches the extension as ui/event; it counts
// the presses and sends only the new data (ui/data set), and keeps the
// count in its shared state key "presses".
package main

import (
	"context"

	"github.com/getorrery/orrery/ext/sdk"
)

func main() {
	presses := 0
	sdk.Main(sdk.Extension{
		OnLoad: func(ctx context.Context, h *sdk.Host) error {
			h.UI().OnEvent("counter", func(ctx context.Context, e sdk.Event) {
				if e.Action != "press" {
					return
				}
				presses++
				_ = h.UI().Data("counter").Set(ctx, map[string]int{"presses": presses})
				_ = h.State().Set(ctx, "presses", presses)
			})
			return h.UI().Show(ctx, sdk.Show{ID: "counter", Placement: "footer", Title: "Counter",
				Component: "counter", Data: map[string]int{"presses": 0}})
		},
	})
}
