package main

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/getorrery/orrery"
)

// startTracing exports the process's spans (each run, model call and tool
// call) over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, configured by OpenTelemetry's
// standard variables (OTEL_EXPORTER_OTLP_HEADERS, OTEL_BSP_SCHEDULE_DELAY
// …). Unset, it does nothing and the spans are OpenTelemetry's no-op ones.
// The returned function flushes what is left; call it before exiting.
func startTracing(e *env) (stop func(), err error) {
	if e.getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && e.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return func() {}, nil
	}
	exp, err := otlptracehttp.New(context.Background())
	if err != nil {
		return func() {}, fmt.Errorf("export traces to OTEL_EXPORTER_OTLP_ENDPOINT: %w (check its URL, or unset it)", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "orrery"), attribute.String("service.version", orrery.Version))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx) // flushes the batch; a collector that is gone loses it
	}, nil
}
