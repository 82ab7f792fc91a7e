package telemetry

import (
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// encodeRequest is the body of an OTLP/HTTP trace export of spans: an
// ExportTraceServiceRequest in protobuf. That message is one repeated
// field (1, resource_spans), so it is written here field by field rather
// than through the collector's generated package, which would bring gRPC
// into the binary.
func encodeRequest(spans []sdktrace.ReadOnlySpan) ([]byte, error) {
	var body []byte
	for _, rs := range resourceSpans(spans) {
		b, err := proto.Marshal(rs)
		if err != nil {
			return nil, err
		}
		body = protowire.AppendTag(body, 1, protowire.BytesType)
		body = protowire.AppendBytes(body, b)
	}
	return body, nil
}

// resourceSpans groups spans by their resource, then by their
// instrumentation scope, in the order each was first seen.
func resourceSpans(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	var out []*tracepb.ResourceSpans
	byRes := map[attribute.Distinct]*tracepb.ResourceSpans{}
	byScope := map[scopeKey]*tracepb.ScopeSpans{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		res := s.Resource()
		rk := res.Equivalent()
		rs := byRes[rk]
		if rs == nil {
			rs = &tracepb.ResourceSpans{Resource: &resourcepb.Resource{Attributes: keyValues(res.Attributes())}, SchemaUrl: res.SchemaURL()}
			byRes[rk] = rs
			out = append(out, rs)
		}
		sc := s.InstrumentationScope()
		sk := scopeKey{rk, sc}
		ss := byScope[sk]
		if ss == nil {
			ss = &tracepb.ScopeSpans{SchemaUrl: sc.SchemaURL}
			if sc != (instrumentation.Scope{}) {
				ss.Scope = &commonpb.InstrumentationScope{Name: sc.Name, Version: sc.Version, Attributes: keyValues(sc.Attributes.ToSlice())}
			}
			byScope[sk] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, span(s))
	}
	return out
}

// span is one span in OTLP's form.
func span(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	st := s.Status()
	out := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Name:                   s.Name(),
		Kind:                   tracepb.Span_SpanKind(kind(s.SpanKind())),
		StartTimeUnixNano:      unixNano(s.StartTime().UnixNano()),
		EndTimeUnixNano:        unixNano(s.EndTime().UnixNano()),
		Attributes:             keyValues(s.Attributes()),
		DroppedAttributesCount: count(s.DroppedAttributes()),
		DroppedEventsCount:     count(s.DroppedEvents()),
		DroppedLinksCount:      count(s.DroppedLinks()),
		Status:                 &tracepb.Status{Code: statusCode(st.Code), Message: st.Description},
		Flags:                  flags(sc.TraceFlags(), s.Parent().IsRemote()),
	}
	if p := s.Parent().SpanID(); p.IsValid() {
		out.ParentSpanId = p[:]
	}
	for _, e := range s.Events() {
		out.Events = append(out.Events, &tracepb.Span_Event{
			Name:                   e.Name,
			TimeUnixNano:           unixNano(e.Time.UnixNano()),
			Attributes:             keyValues(e.Attributes),
			DroppedAttributesCount: count(e.DroppedAttributeCount),
		})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		out.Links = append(out.Links, &tracepb.Span_Link{
			TraceId:                ltid[:],
			SpanId:                 lsid[:],
			TraceState:             l.SpanContext.TraceState().String(),
			Attributes:             keyValues(l.Attributes),
			DroppedAttributesCount: count(l.DroppedAttributeCount),
			Flags:                  flags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()),
		})
	}
	return out
}

// kind maps a span kind to OTLP's number for it, which OpenTelemetry's
// numbering (internal 1 … consumer 5) already matches; anything else is
// unspecified (0).
func kind(k trace.SpanKind) int32 {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return 0
	}
	return int32(k)
}

// statusCode maps a span status: the SDK numbers error 1 and ok 2, OTLP
// the other way round.
func statusCode(c codes.Code) tracepb.Status_StatusCode {
	switch c {
	case codes.Ok:
		return tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		return tracepb.Status_STATUS_CODE_ERROR
	}
	return tracepb.Status_STATUS_CODE_UNSET
}

// flags is a span's OTLP flags: the W3C trace flags in the low byte, and
// whether its parent is remote, which is always known here.
func flags(tf trace.TraceFlags, remote bool) uint32 {
	f := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if remote {
		f |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return f
}

func unixNano(ns int64) uint64 { return uint64(max(0, ns)) }

func count(n int) uint32 { return uint32(min(max(0, n), 1<<32-1)) }

// keyValues is attributes in OTLP's form.
func keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = &commonpb.KeyValue{Key: string(kv.Key), Value: value(kv.Value)}
	}
	return out
}

// value is one attribute value in OTLP's form; a slice becomes an array
// of values, a map a key-value list.
func value(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return array(v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap())}}}
	}
	return &commonpb.AnyValue{}
}

func array[T any](xs []T, wrap func(T) attribute.Value) *commonpb.AnyValue {
	vals := make([]*commonpb.AnyValue, len(xs))
	for i, x := range xs {
		vals[i] = value(wrap(x))
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
}
