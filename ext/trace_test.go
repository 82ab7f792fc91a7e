package ext_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/ext"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// TestCallsAreTraced installs a recording tracer provider (OpenTelemetry's
// SDK with its in-memory exporter) and runs a tool call that an extension
// process serves: its tools/call is a client span under the tool call's,
// the process gets that span as _meta.traceparent, ext/load has its span,
// and the run's appends to the store are spans under the run's. It is the
// only test of the package that installs a provider, which is global.
func TestCallsAreTraced(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		tp.Shutdown(context.Background())
	})

	model := script(t,
		map[string]any{"tool_calls": []map[string]any{{"name": "rogue_echo", "args": map[string]any{"x": 1}}}},
		map[string]any{"text": []string{"ok"}},
	)
	m := rogue(t, "plain", "[[provides.tools]]\nname = \"rogue_echo\"\ndescription = \"echoes\"\n")
	w := newWorld(t, model, ext.Config{Extensions: []*ext.Manifest{m}}, func(c *kernel.Config) {
		c.Consent = consent.Rules{Allow: []string{"rogue_echo"}}
	})
	if _, err := w.s.Send(context.Background(), kernel.SendInput{Text: "echo"}); err != nil {
		t.Fatal(err)
	}
	res := toolResult(w.w)
	// A frame is published after its append, whose span has ended by then.
	w.w.until(func(ev protocol.Event) bool { return ev.EventType() == protocol.TypeRunFinished })

	// The run's span ends when its loop's goroutine returns, just after.
	var spans tracetest.SpanStubs
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		spans = mem.GetSpans()
		if slices.Contains(names(spans), "invoke_agent orrery") || time.Now().After(deadline) {
			break
		}
	}
	find := func(name string) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	runs, tools, calls, loads := find("invoke_agent orrery"), find("execute_tool rogue_echo"), find("tools/call"), find("ext/load")
	if len(runs) != 1 || len(tools) != 1 || len(calls) != 1 || len(loads) != 1 {
		t.Fatalf("spans %v: want one run, one execute_tool rogue_echo, one tools/call and one ext/load", names(spans))
	}
	call := calls[0]
	if call.Parent.SpanID() != tools[0].SpanContext.SpanID() {
		t.Error("tools/call is not a child of the tool call's span")
	}
	attrs := map[string]string{}
	for _, kv := range call.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["rpc.system"] != "jsonrpc" || attrs["rpc.method"] != "tools/call" || attrs["orrery.extension.name"] != "rogue" {
		t.Errorf("tools/call's attributes are %v", attrs)
	}
	want := fmt.Sprintf("traceparent 00-%s-%s-01", call.SpanContext.TraceID(), call.SpanContext.SpanID())
	if got := res.Content.String(); !strings.HasSuffix(got, want) {
		t.Errorf("the extension answered %q: want it to have got its call's span (%s)", got, want)
	}

	var appends, frames int
	for _, s := range find("store.append") {
		if s.Parent.SpanID() != runs[0].SpanContext.SpanID() {
			continue
		}
		appends++
		for _, kv := range s.Attributes {
			if kv.Key == "orrery.store.frames" {
				frames += int(kv.Value.AsInt64())
			}
		}
	}
	if appends == 0 {
		t.Fatalf("no store.append span under the run: spans %v", names(spans))
	}
	inRun, started := 0, false
	for _, ev := range w.w.all {
		started = started || ev.EventType() == protocol.TypeRunStarted
		if started {
			inRun++
		}
	}
	if inRun < 5 || frames < inRun {
		t.Errorf("the run's store.append spans hold %d frames, want at least its %d (RUN_STARTED … RUN_FINISHED)", frames, inRun)
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}
