package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// collector is an OTLP/HTTP receiver that decodes each export with the
// collector's own generated message, ExportTraceServiceRequest.
type collector struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []*coltrace.ExportTraceServiceRequest
	headers []http.Header
	// fail answers the first fail exports with 503.
	fail int
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.headers = append(c.headers, r.Header.Clone())
		if c.fail > 0 {
			c.fail--
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		req := &coltrace.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.reqs = append(c.reqs, req)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, r := range c.reqs {
		for _, rs := range r.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				out = append(out, ss.GetSpans()...)
			}
		}
	}
	return out
}

// record makes spans with a synchronous exporter to e: a remote parent's
// child with attributes of every kind, an event, a link and an error, and
// a client span under it.
func record(t *testing.T, e *Exporter) (parent trace.SpanContext) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(e))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	tr := tp.Tracer("test/scope", trace.WithInstrumentationVersion("1.2.3"))
	ctx, run := tr.Start(ctx, "invoke_agent orrery", trace.WithSpanKind(trace.SpanKindServer), trace.WithLinks(trace.Link{SpanContext: parent}))
	run.SetAttributes(
		attribute.String("s", "text"), attribute.Int64("i", -7), attribute.Float64("f", 0.5), attribute.Bool("b", true),
		attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 2}),
	)
	run.AddEvent("orrery.consent.check", trace.WithAttributes(attribute.String("tool", "shell")))
	_, call := tr.Start(ctx, "chat offline", trace.WithSpanKind(trace.SpanKindClient))
	call.End()
	run.SetStatus(codes.Error, "boom")
	run.End()
	return parent
}

// TestExportDecodesAsTheCollectorReadsIt sends spans through the exporter
// to a receiver that decodes them with the collector's generated message:
// every field the SDK holds arrives, in OTLP's numbering.
func TestExportDecodesAsTheCollectorReadsIt(t *testing.T) {
	col := newCollector(t)
	e, err := NewExporter(Config{Endpoint: col.URL + tracesPath, Headers: map[string]string{"api-key": "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	parent := record(t, e)
	spans := col.spans()
	if len(spans) != 2 {
		t.Fatalf("the collector got %d spans, want 2", len(spans))
	}
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		byName[s.GetName()] = s
	}
	run, call := byName["invoke_agent orrery"], byName["chat offline"]
	if run == nil || call == nil {
		t.Fatalf("spans %v", spans)
	}
	if got := hex.EncodeToString(run.GetTraceId()); got != parent.TraceID().String() {
		t.Errorf("trace id %s, want the parent's %s", got, parent.TraceID())
	}
	if got := hex.EncodeToString(run.GetParentSpanId()); got != parent.SpanID().String() {
		t.Errorf("parent span id %s, want %s", got, parent.SpanID())
	}
	if !bytes.Equal(call.GetParentSpanId(), run.GetSpanId()) {
		t.Error("the model call's span is not the run's child")
	}
	if run.GetKind() != tracepb.Span_SPAN_KIND_SERVER || call.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("kinds %v and %v, want server and client", run.GetKind(), call.GetKind())
	}
	if run.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR || run.GetStatus().GetMessage() != "boom" {
		t.Errorf("status %v, want error boom", run.GetStatus())
	}
	if call.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_UNSET {
		t.Errorf("the call's status is %v, want unset", call.GetStatus())
	}
	const remote = uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	if run.GetFlags()&remote != remote || run.GetFlags()&0xff != 1 {
		t.Errorf("the run's flags are %#x: want sampled, with a remote parent", run.GetFlags())
	}
	if call.GetFlags()&remote != uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK) {
		t.Errorf("the call's flags are %#x: its parent is local", call.GetFlags())
	}
	if run.GetStartTimeUnixNano() == 0 || run.GetEndTimeUnixNano() < run.GetStartTimeUnixNano() {
		t.Errorf("times %d … %d", run.GetStartTimeUnixNano(), run.GetEndTimeUnixNano())
	}
	got := map[string]any{}
	for _, kv := range run.GetAttributes() {
		switch v := kv.GetValue(); {
		case v.GetArrayValue() != nil:
			var xs []any
			for _, x := range v.GetArrayValue().GetValues() {
				if x.GetStringValue() != "" {
					xs = append(xs, x.GetStringValue())
				} else {
					xs = append(xs, x.GetIntValue())
				}
			}
			got[kv.GetKey()] = xs
		default:
			got[kv.GetKey()] = v.GetValue()
		}
	}
	want := map[string]any{"ss": []any{"a", "b"}, "is": []any{int64(1), int64(2)}}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("attribute %s = %v, want %v", k, got[k], w)
		}
	}
	for _, kv := range run.GetAttributes() {
		v := kv.GetValue()
		switch kv.GetKey() {
		case "s":
			if v.GetStringValue() != "text" {
				t.Errorf("s = %v", v)
			}
		case "i":
			if v.GetIntValue() != -7 {
				t.Errorf("i = %v", v)
			}
		case "f":
			if v.GetDoubleValue() != 0.5 {
				t.Errorf("f = %v", v)
			}
		case "b":
			if !v.GetBoolValue() {
				t.Errorf("b = %v", v)
			}
		}
	}
	if len(run.GetAttributes()) != 6 {
		t.Errorf("the run has %d attributes, want 6", len(run.GetAttributes()))
	}
	if ev := run.GetEvents(); len(ev) != 1 || ev[0].GetName() != "orrery.consent.check" || ev[0].GetAttributes()[0].GetValue().GetStringValue() != "shell" {
		t.Errorf("events %v", ev)
	}
	if l := run.GetLinks(); len(l) != 1 || !bytes.Equal(l[0].GetSpanId(), run.GetParentSpanId()) {
		t.Errorf("links %v", l)
	}
	col.mu.Lock()
	req := col.reqs[0]
	h := col.headers[0]
	col.mu.Unlock()
	if h.Get("Api-Key") != "s3cret" || h.Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("headers %v", h)
	}
	sc := req.GetResourceSpans()[0].GetScopeSpans()[0].GetScope()
	if sc.GetName() != "test/scope" || sc.GetVersion() != "1.2.3" {
		t.Errorf("scope %v", sc)
	}
}

// TestExportRetriesABusyCollector: a collector that answers 503 twice gets
// the spans on the third try; one that refuses (400) is not tried again.
func TestExportRetriesABusyCollector(t *testing.T) {
	col := newCollector(t)
	col.fail = 2
	e, err := NewExporter(Config{Endpoint: col.URL + tracesPath, Gzip: true})
	if err != nil {
		t.Fatal(err)
	}
	record(t, e)
	if n := len(col.spans()); n != 2 {
		t.Fatalf("the collector got %d spans after two 503s, want 2", n)
	}
	col.mu.Lock()
	tries := len(col.headers)
	col.mu.Unlock()
	if tries != 4 { // the call's span: 503, 503, 200; the run's: 200
		t.Errorf("%d POSTs, want 4", tries)
	}

	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad spans", http.StatusBadRequest)
	}))
	defer refuse.Close()
	e2, _ := NewExporter(Config{Endpoint: refuse.URL + tracesPath, Timeout: time.Minute})
	tp := sdktrace.NewTracerProvider()
	_, s := tp.Tracer("t").Start(context.Background(), "x")
	s.End()
	err = e2.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{s.(sdktrace.ReadOnlySpan)})
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "bad spans") {
		t.Errorf("a refused export's error is %v, want the 400 and what the collector said", err)
	}
}

// TestFromEnv reads OpenTelemetry's variables over a config, and names the
// variable and the fix when one is wrong.
func TestFromEnv(t *testing.T) {
	base := Config{Endpoint: "http://config:4318/v1/traces", Headers: map[string]string{"from": "config"}}
	tests := []struct {
		name string
		env  map[string]string
		want Config
		err  string
	}{
		{"nothing set keeps the config", nil, base, ""},
		{"a base endpoint gets the traces path", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://col:4318/"},
			Config{Endpoint: "http://col:4318/v1/traces", Headers: base.Headers}, ""},
		{"the traces endpoint is taken as it is, before the base", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b/otlp/traces"},
			Config{Endpoint: "https://b/otlp/traces", Headers: base.Headers}, ""},
		{"headers add to the config's, URL-decoded", map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, x-team=core"},
			Config{Endpoint: base.Endpoint, Headers: map[string]string{"from": "config", "api-key": "a b", "x-team": "core"}}, ""},
		{"timeout, gzip, CA and service", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/ca.pem", "OTEL_SERVICE_NAME": "edge", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=prod"},
			Config{Endpoint: base.Endpoint, Headers: base.Headers, Timeout: 2500 * time.Millisecond, Gzip: true, CAFile: "/ca.pem", ServiceName: "edge", Resource: map[string]string{"deployment.environment.name": "prod"}}, ""},
		{"grpc is refused", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, Config{}, "OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\": orrery exports OTLP over HTTP"},
		{"a header without =", map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key"}, Config{}, "OTEL_EXPORTER_OTLP_HEADERS: \"api-key\" is not key=value"},
		{"a timeout that is not milliseconds", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, Config{}, "OTEL_EXPORTER_OTLP_TIMEOUT=\"10s\" is not a positive whole number of milliseconds"},
		{"an unknown compression", map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, Config{}, "give gzip or none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := base
			b.Headers = map[string]string{"from": "config"}
			got, err := FromEnv(b, func(k string) string { return tt.env[k] })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to say %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FromEnv = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestNewExporterRefusesWhatIsNotHTTP names the URL and what to give.
func TestNewExporterRefusesWhatIsNotHTTP(t *testing.T) {
	for _, ep := range []string{"localhost:4318", "grpc://col:4317", "http://", "file:///tmp/x"} {
		if _, err := NewExporter(Config{Endpoint: ep}); err == nil || !strings.Contains(err.Error(), "http://localhost:4318") {
			t.Errorf("NewExporter(%q) = %v, want a refusal that shows a URL to give", ep, err)
		}
	}
}
