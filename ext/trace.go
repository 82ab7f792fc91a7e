package ext

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/ext/jsonrpc"
)

// tracer makes a span of each call the host makes of an extension
// (ext/load, tools/call, ui/event), a child of the span in the caller's
// context (a tool call's, under its run's). With no tracer provider
// installed it is OpenTelemetry's no-op one.
//
// It is looked up at each use, not once, so that the provider installed
// last is the one used (a benchmark compares tracing on and off in one
// process this way).
func tracer() trace.Tracer { return otel.Tracer("github.com/getorrery/orrery/ext") }

// call sends method to the process as a traced JSON-RPC call. The span
// follows OpenTelemetry's RPC conventions (its name is the method,
// rpc.system jsonrpc), and a recorded span's trace context goes to the
// extension in params._meta.traceparent, where MCP puts it too, so that
// an extension that traces can continue the run's trace.
func (in *Instance) call(ctx context.Context, p *process, method string, params map[string]any, result any) error {
	ctx, span := in.startSpan(ctx, method, params)
	err := p.conn.Call(ctx, method, params, result)
	endSpan(span, err)
	return err
}

// notify sends method to the process as a traced notification.
func (in *Instance) notify(ctx context.Context, p *process, method string, params map[string]any) error {
	_, span := in.startSpan(ctx, method, params)
	err := p.conn.Notify(method, params)
	endSpan(span, err)
	return err
}

func (in *Instance) startSpan(ctx context.Context, method string, params map[string]any) (context.Context, trace.Span) {
	ctx, span := tracer().Start(ctx, method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("rpc.system", "jsonrpc"),
		attribute.String("rpc.method", method),
		attribute.String("rpc.jsonrpc.version", "2.0"),
		attribute.String("orrery.extension.name", in.m.Extension.Name),
	))
	if span.IsRecording() {
		if meta := agent.TraceMeta(ctx); meta != nil {
			params["_meta"] = meta
		}
	}
	return ctx, span
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		var rerr *jsonrpc.Error
		if errors.As(err, &rerr) {
			span.SetAttributes(attribute.Int("rpc.jsonrpc.error_code", rerr.Code))
		}
		span.SetAttributes(attribute.String("error.type", "extension_error"))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
