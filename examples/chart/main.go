// Command chart is an example Orrery extension in Go: a live chart pane.
// It draws a line chart in the right pane at ext/load, adds a point every
// second (the host turns each replacement into a small STATE_DELTA), and
// gives the model a tool, chart_add, that adds a point it chooses.
//
// Build it with "go build -o chart ." in this directory, then add the
// directory with "orrery ext add examples/chart".
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/getorrery/orrery/ext/sdk"
)

// chart holds the series; the ticker and the tool both add to it.
type chart struct {
	mu     sync.Mutex // guards values and labels
	values []float64
	labels []string
}

func (c *chart) add(v float64) json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.values = append(c.values, v)
	c.labels = append(c.labels, fmt.Sprint(len(c.values)))
	if len(c.values) > 20 {
		c.values, c.labels = c.values[1:], c.labels[1:]
	}
	b, _ := json.Marshal(map[string]any{"kind": map[string]any{
		"t": "chart", "kind": "line", "unit": "ms", "labels": c.labels,
		"series": []map[string]any{{"label": "latency", "values": c.values}},
	}})
	return b
}

func (c *chart) show(ctx context.Context, h *sdk.Host, surface json.RawMessage) error {
	return h.UI().Show(ctx, sdk.Show{ID: "latency", Placement: "pane.right", Title: "Latency", Surface: surface})
}

func main() {
	c := &chart{}
	sdk.Main(sdk.Extension{
		OnLoad: func(ctx context.Context, h *sdk.Host) error {
			if err := c.show(ctx, h, c.add(10)); err != nil {
				return err
			}
			go func() {
				for i := 1; ; i++ {
					time.Sleep(time.Second)
					if c.show(ctx, h, c.add(10+5*math.Sin(float64(i)/2))) != nil {
						return
					}
				}
			}()
			return nil
		},
		Tools: map[string]sdk.ToolFunc{
			"chart_add": func(ctx context.Context, h *sdk.Host, args json.RawMessage) (sdk.ToolResult, error) {
				var a struct {
					Value float64 `json:"value"`
				}
				if err := json.Unmarshal(args, &a); err != nil {
					return sdk.ToolResult{Text: "chart_add needs {\"value\": number}", Error: true}, nil
				}
				if err := c.show(ctx, h, c.add(a.Value)); err != nil {
					return sdk.ToolResult{}, err
				}
				return sdk.ToolResult{Text: fmt.Sprintf("added %g to the latency chart", a.Value)}, nil
			},
		},
	})
}
