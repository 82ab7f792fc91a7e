package bench_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// discard is a span exporter that drops what it is given: the batch
// processor's work and the spans' recording are measured, not a network.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkTracing runs BenchmarkLoopStep's steps (a model call and a tool
// call each, five frames) with tracing off (OpenTelemetry's no-op
// provider, as orrery runs without an OTLP endpoint) and on (the SDK,
// every span recorded and batched to an exporter that drops them), in one
// run: the ratio on/off is what tracing costs a step.
func BenchmarkTracing(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("tracing=%v", on), func(b *testing.B) {
			if on {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
				otel.SetTracerProvider(tp)
				b.Cleanup(func() { tp.Shutdown(context.Background()) })
			} else {
				otel.SetTracerProvider(noop.NewTracerProvider())
			}
			b.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
			runSteps(b, &stepper{toolCalls: true})
		})
	}
}

// BenchmarkTracingOff is what tracing off leaves in one step: the calls
// a model call's span and a tool call's span make (start with their
// attributes, an event, end) through the no-op provider. Beside
// BenchmarkLoopStep's ns/step it is the off path's share of a step.
func BenchmarkTracingOff(b *testing.B) {
	otel.SetTracerProvider(noop.NewTracerProvider())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tr := otel.Tracer("github.com/getorrery/orrery/agent")
		mctx, model := tr.Start(ctx, "chat stepper", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "bench"), attribute.String("gen_ai.request.model", "stepper")))
		model.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", 1), attribute.Int64("gen_ai.usage.output_tokens", 1))
		model.End()
		_, tool := tr.Start(mctx, "execute_tool echo", trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "echo"), attribute.String("gen_ai.tool.call.id", "call_1")))
		tool.AddEvent("orrery.consent.check")
		tool.AddEvent("orrery.consent.decided")
		tool.SetAttributes(attribute.String("orrery.tool.outcome", "ok"))
		tool.End()
	}
}
