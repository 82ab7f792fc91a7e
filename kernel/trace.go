package kernel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/getorrery/orrery/protocol"
)

// tracer makes the runs' spans. Until a program installs a tracer provider
// (cmd/orrery does when OTEL_EXPORTER_OTLP_ENDPOINT is set) it is OpenTelemetry's
// no-op one, whose spans cost next to nothing.
//
// It is looked up at each use, not once, so that the provider installed
// last is the one used (a benchmark compares tracing on and off in one
// process this way).
func tracer() trace.Tracer { return otel.Tracer("github.com/getorrery/orrery/kernel") }

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

// commitSpan records one Append of a run's frames as a child of the run's
// span (parent): "store.append", from start to now, with the frames' seqs
// and the store's error.
func commitSpan(parent trace.SpanContext, start time.Time, frames []Frame, err error) {
	attrs := []attribute.KeyValue{attribute.Int("orrery.store.frames", len(frames))}
	if len(frames) > 0 {
		attrs = append(attrs, attribute.Int64("orrery.store.first_seq", int64(frames[0].Seq)), attribute.Int64("orrery.store.last_seq", int64(frames[len(frames)-1].Seq)))
	}
	_, span := tracer().Start(trace.ContextWithSpanContext(context.Background(), parent), commitSpanName,
		trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	if err != nil {
		span.SetAttributes(attribute.String("error.type", "store_failed"))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// commitSpanName is the span of one Append of a run's frames.
const commitSpanName = "store.append"

// traceCommits makes the session's Appends children of r's span while a
// tracer records it, up to r's terminal frame. Runs on the actor, before
// r's first frame is queued.
func (s *Session) traceCommits(r *run) {
	if !r.span.IsRecording() {
		return
	}
	sc := r.span.SpanContext()
	r.trace = &sc
	s.commits.trace.Store(r.trace)
}

// untraceCommits ends what traceCommits began once every frame queued so
// far is appended; a later run's span is left alone. Runs on the actor.
func (s *Session) untraceCommits(r *run, now bool) {
	if r.trace == nil {
		return
	}
	if now {
		s.commits.trace.CompareAndSwap(r.trace, nil)
		return
	}
	s.commits.push(commitItem{then: func() { s.commits.trace.CompareAndSwap(r.trace, nil) }})
}
