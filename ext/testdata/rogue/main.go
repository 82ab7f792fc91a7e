// Command rogue is an extension for the host's tests: its first argument
// chooses how it behaves, well or badly.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/getorrery/orrery/ext/jsonrpc"
	"github.com/getorrery/orrery/ext/sdk"
)

func raw(s string) { _, _ = os.Stdout.WriteString(s) }

func frame(body string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) }

func main() {
	mode := os.Args[1]
	text := func(s string) json.RawMessage { return sdk.Text(s) }
	sdk.Main(sdk.Extension{
		OnLoad: func(ctx context.Context, h *sdk.Host) error {
			switch mode {
			case "crash-once":
				if _, err := os.Stat("crashed"); err != nil {
					_ = os.WriteFile("crashed", nil, 0o600)
					go func() { time.Sleep(200 * time.Millisecond); os.Exit(2) }()
				}
				return h.UI().Show(ctx, sdk.Show{ID: "main", Placement: "pane.left", Title: "Rogue", Surface: text("up")})
			case "hang":
				go func() {
					time.Sleep(100 * time.Millisecond)
					// Stop reading and answering: a hang.
					select {}
				}()
				_ = h.UI().Show(ctx, sdk.Show{ID: "main", Placement: "pane.left", Surface: text("up")})
				// Block the process's stdin reader by never returning from a
				// handler is not possible here; instead freeze the whole
				// process once loaded.
				go func() {
					time.Sleep(200 * time.Millisecond)
					p, _ := os.FindProcess(os.Getpid())
					_ = p.Signal(stopSignal)
				}()
				return nil
			case "held":
				// The bad call first: it is surely held, so its refusal
				// can only come back as a notice.
				pend := []*jsonrpc.Pending{h.Go("ui/show", sdk.Show{ID: "bad", Placement: "nowhere", Surface: text("x")})}
				for i := range 300 {
					pend = append(pend, h.Go("ui/show", sdk.Show{ID: fmt.Sprintf("h%d", i), Placement: "band", Surface: text(fmt.Sprint(i))}))
				}
				ok, refused := 0, 0
				for _, p := range pend {
					if p.Wait(ctx, nil) == nil {
						ok++
					} else {
						refused++
					}
				}
				fmt.Fprintf(os.Stderr, "held: %d answered {}, %d refused\n", ok, refused)
				go func() { _ = h.State().Set(context.Background(), "held", map[string]int{"ok": ok, "refused": refused}) }()
				return nil
			case "order":
				go func() {
					var pend []*jsonrpc.Pending
					st := json.RawMessage(`{"type":"text","value":"n=${/n}"}`)
					for i := range 100 {
						id := fmt.Sprintf("o%d", i)
						pend = append(pend, h.Go("ui/show", sdk.Show{ID: id, Placement: "band", Structure: st, Data: map[string]int{"n": 0}}))
						pend = append(pend, h.Go("ui/data", map[string]any{"id": id, "set": map[string]int{"n": i}}))
					}
					failed := 0
					for _, p := range pend {
						if err := p.Wait(context.Background(), nil); err != nil {
							failed++
							fmt.Fprintln(os.Stderr, "order:", err)
						}
					}
					_ = h.State().Set(context.Background(), "failed", failed)
				}()
				return nil
			case "bench":
				// On each ui/event, send ui/data with the time it was sent.
				h.UI().OnEvent("b", func(ctx context.Context, e sdk.Event) {
					_ = h.UI().Data("b").Set(ctx, map[string]string{"t": fmt.Sprint(time.Now().UnixNano())})
				})
				return h.UI().Show(ctx, sdk.Show{ID: "b", Placement: "band", Structure: json.RawMessage(`{"type":"text","value":"${/t}"}`), Data: map[string]string{"t": "0"}})
			case "api":
				// Each ui/event on "api" makes one call and reports its
				// outcome in the state key named for the action.
				h.UI().OnEvent("api", func(ctx context.Context, e sdk.Event) {
					var res any
					var err error
					switch e.Action {
					case "hide":
						err = h.Tools().Hide(ctx, "rogue_echo")
					case "show":
						err = h.Tools().Show(ctx, "rogue_echo")
					case "register":
						err = h.Tools().Register(ctx, sdk.Tool{Name: "rogue_extra", Description: "an extra tool", ReadOnly: true, Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)})
					case "unregister":
						err = h.Tools().Unregister(ctx, "rogue_extra")
					case "append":
						err = h.Append(ctx, "the build is green")
					case "read":
						var r json.RawMessage
						err = h.Call(ctx, "session/read", map[string]any{"since": 0}, &r)
						res = r
					case "complete":
						res, err = h.Complete(ctx, "", "summarize the build")
					}
					if err != nil {
						res = "error: " + err.Error()
					} else if res == nil {
						res = "ok"
					}
					_ = h.State().Set(ctx, e.Action, res)
				})
				return h.UI().Show(ctx, sdk.Show{ID: "main", Placement: "pane.left", Title: "Rogue", Surface: text("up")})
			case "hub":
				go func() {
					err := h.Call(context.Background(), "hub/subscribe", map[string]string{"topic": "builds"}, nil)
					_ = h.State().Set(context.Background(), "subscribed", fmt.Sprint(err))
				}()
				return nil
			case "badheader":
				go func() { time.Sleep(100 * time.Millisecond); raw("Content-Length 12\r\n\r\n{}") }()
			case "lie":
				go func() { time.Sleep(100 * time.Millisecond); raw("Content-Length: 1\r\n\r\n{\"jsonrpc\":\"2.0\"}") }()
			case "big":
				go func() { time.Sleep(100 * time.Millisecond); raw("Content-Length: 99999999\r\n\r\n") }()
			case "badjson":
				go func() {
					time.Sleep(100 * time.Millisecond)
					raw(frame(`{"jsonrpc":"2.0","id":9,"method":`))
					_ = h.UI().Show(context.Background(), sdk.Show{ID: "after", Placement: "band", Surface: text("still here")})
				}()
			case "unknown":
				go func() {
					err := h.Call(context.Background(), "ui/explode", nil, nil)
					_ = h.State().Set(context.Background(), "unknown", fmt.Sprint(err))
				}()
			case "other":
				go func() {
					time.Sleep(200 * time.Millisecond) // after ext/load: a call answered when applied
					err := h.UI().Hide(context.Background(), "foreign")
					_ = h.State().Set(context.Background(), "other", fmt.Sprint(err))
				}()
			case "flood":
				go func() {
					for range 100000 {
						h.Go("ui/hide", map[string]string{"id": "nothing"})
					}
				}()
			}
			return nil
		},
		OnHubMessage: func(ctx context.Context, h *sdk.Host, m sdk.HubMessage) {
			if m.ExpectsReply {
				go h.Call(ctx, "hub/reply", map[string]any{"correlationId": m.CorrelationID, "payload": "pong"}, nil)
				return
			}
			// A relay on a topic is posted back to its sender.
			go h.Call(ctx, "hub/post", map[string]any{"to": m.From, "payload": map[string]any{"got": m.Payload, "topic": m.Topic}}, nil)
		},
		Tools: map[string]sdk.ToolFunc{
			"rogue_echo": func(ctx context.Context, h *sdk.Host, args json.RawMessage) (sdk.ToolResult, error) {
				text := "rogue got " + string(args)
				if tp := sdk.Traceparent(ctx); tp != "" {
					text += " traceparent " + tp
				}
				return sdk.ToolResult{Text: text}, nil
			},
			"rogue_extra": func(ctx context.Context, h *sdk.Host, args json.RawMessage) (sdk.ToolResult, error) {
				return sdk.ToolResult{Text: "extra ran"}, nil
			},
		},
	})
}
