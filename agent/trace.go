package agent

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// InjectTrace writes the span of ctx into h (a W3C traceparent, with the
// propagator the program installed, none by default), so that a model
// provider Orrery calls can continue the run's trace.
func InjectTrace(ctx context.Context, h http.Header) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
}

// TraceMeta is the trace context of ctx's span as a JSON-RPC call's _meta
// carries it ({"traceparent": …}, with the propagator the program
// installed), or nil when there is none: what MCP servers and extensions
// get with each call.
func TraceMeta(ctx context.Context) map[string]string {
	c := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// tracer makes the loop's spans: one per model call and one per tool call,
// children of the run's span in ctx, with the OpenTelemetry GenAI
// conventions' attributes. With no tracer provider installed it is the
// no-op one.
//
// It is looked up at each use, not once, so that the provider installed
// last is the one used (a benchmark compares tracing on and off in one
// process this way).
func tracer() trace.Tracer { return otel.Tracer("github.com/getorrery/orrery/agent") }

// ModelCall is one call of a model, as Loop.OnModelCall is told of it.
type ModelCall struct {
	Provider, Model string
	Usage           Usage
	// FirstToken is how long the first delta of the answer took (0 when
	// none came); Took how long the whole call did.
	FirstToken, Took time.Duration
	// Err is the call's error, nil when it answered; Code is its code (an
	// *Error's, else "error"), "" when it answered.
	Err  error
	Code string
}

// modelSpan is the span of one model call.
type modelSpan struct {
	span            trace.Span
	provider, model string
	start           time.Time
	first           sync.Once
	firstAt         time.Duration
}

// startModelSpan opens the span of a call to p ("chat MODEL").
func startModelSpan(ctx context.Context, p Provider) (context.Context, *modelSpan) {
	model := p.Model()
	ctx, span := tracer().Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", p.Name()),
		attribute.String("gen_ai.request.model", model),
	))
	return ctx, &modelSpan{span: span, provider: p.Name(), model: model, start: time.Now()}
}

// delta notes the first delta of the answer: the time to first token.
func (m *modelSpan) delta() {
	m.first.Do(func() {
		m.firstAt = time.Since(m.start)
		m.span.AddEvent("gen_ai.first_token", trace.WithAttributes(
			attribute.Float64("gen_ai.server.time_to_first_token", m.firstAt.Seconds())))
	})
}

// end closes the span with the call's usage and error, and returns the
// call's record.
func (m *modelSpan) end(u Usage, err error) ModelCall {
	m.span.SetAttributes(
		attribute.Int64("gen_ai.usage.input_tokens", u.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", u.OutputTokens),
	)
	code := ""
	if err != nil {
		code = "error"
		var ae *Error
		if errors.As(err, &ae) && ae.Code != "" {
			code = ae.Code
		}
		m.span.SetAttributes(attribute.String("error.type", code))
		m.span.SetStatus(codes.Error, err.Error())
	}
	m.span.End()
	return ModelCall{Provider: m.provider, Model: m.model, Usage: u, FirstToken: m.firstAt, Took: time.Since(m.start), Err: err, Code: code}
}

// startToolSpan opens the span of one tool call ("execute_tool NAME").
func startToolSpan(ctx context.Context, name, callID string) (context.Context, trace.Span) {
	return tracer().Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", name),
		attribute.String("gen_ai.tool.call.id", callID),
	))
}
