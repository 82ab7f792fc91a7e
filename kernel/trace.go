package kernel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/getorrery/orrery/protocol"
)

// tracer makes the runs' spans. Until a program installs a tracer provider
// (cmd/orrery does when OTEL_EXPORTER_OTLP_ENDPOINT is set) it is OpenTelemetry's
// no-op one, whose spans cost next to nothing.
var tracer = otel.Tracer("github.com/getorrery/orrery/kernel")

// runSpanName is the span of a run, after the GenAI conventions'
// invoke_agent operation.
const runSpanName = "invoke_agent orrery"

// endSpan records how a run ended on its span: the outcome, and the
// RUN_ERROR's code and message as the span's error.
func endSpan(span trace.Span, terminal protocol.Event) {
	switch t := terminal.(type) {
	case *protocol.RunFinished:
		outcome := protocol.OutcomeSuccess
		if t.Outcome != nil && t.Outcome.Type != "" {
			outcome = t.Outcome.Type
		}
		span.SetAttributes(attribute.String("orrery.run.outcome", outcome))
	case *protocol.RunError:
		span.SetAttributes(attribute.String("orrery.run.outcome", "error"), attribute.String("error.type", t.Code))
		span.SetStatus(codes.Error, t.Message)
	}
}
