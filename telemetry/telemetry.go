// Package telemetry exports Orrery's OpenTelemetry spans over OTLP/HTTP
// (protobuf), configured by the [telemetry] table and OpenTelemetry's
// standard environment variables.
//
// The spans themselves are made where the work is (package kernel for a
// run, package agent for model and tool calls, package ext for extension
// calls) through OpenTelemetry's global tracer provider. Until Start
// installs one, that provider is the no-op one and tracing costs nothing
// but a few no-op calls.
//
// The exporter here is written against the OTLP protobuf messages rather
// than taken from OpenTelemetry's otlptracehttp module, which would bring
// gRPC and its gateway (some 70 packages) into every build of the binary
// for an HTTP POST.
package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Config says where spans go. The zero Config exports nothing.
type Config struct {
	// Endpoint is the URL spans are POSTed to, the collector's traces
	// path included (http://localhost:4318/v1/traces). "" turns tracing
	// off.
	Endpoint string
	// Headers are sent with every export (an API key, say).
	Headers map[string]string
	// Timeout bounds one export, retries included (10 s when 0).
	Timeout time.Duration
	// Gzip compresses each export's body.
	Gzip bool
	// CAFile is a PEM file of the certificates that sign the collector's
	// (for an https Endpoint signed by a private CA).
	CAFile string
	// ServiceName is the service.name of the spans' resource (when "",
	// Resource's service.name, else "orrery").
	ServiceName string
	// Resource holds more attributes of the spans' resource
	// (deployment.environment.name, say).
	Resource map[string]string
}

// tracesPath is what OTLP/HTTP appends to a base endpoint.
const tracesPath = "/v1/traces"

// FromEnv returns c with OpenTelemetry's exporter variables applied over
// it, as every OpenTelemetry SDK reads them:
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the traces URL as it is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (a base, with /v1/traces appended),
// OTEL_EXPORTER_OTLP[_TRACES]_HEADERS (k=v,k2=v2, values URL-encoded),
// _TIMEOUT (milliseconds), _COMPRESSION (gzip or none), _CERTIFICATE,
// _PROTOCOL (only http/protobuf is spoken), and OTEL_SERVICE_NAME. Unset
// variables leave c as it is.
func FromEnv(c Config, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	pick := func(name string) (string, string) {
		if v := getenv("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
			return "OTEL_EXPORTER_OTLP_TRACES_" + name, v
		}
		return "OTEL_EXPORTER_OTLP_" + name, getenv("OTEL_EXPORTER_OTLP_" + name)
	}
	if v := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		c.Endpoint = v
	} else if v := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
		c.Endpoint = BaseEndpoint(v)
	}
	if name, v := pick("PROTOCOL"); v != "" && v != "http/protobuf" {
		return c, fmt.Errorf("%s=%q: orrery exports OTLP over HTTP with protobuf only; set it to http/protobuf and point the endpoint at the collector's HTTP port (4318)", name, v)
	}
	if name, v := pick("HEADERS"); v != "" {
		h, err := parseHeaders(v)
		if err != nil {
			return c, fmt.Errorf("%s: %w", name, err)
		}
		if c.Headers == nil {
			c.Headers = map[string]string{}
		}
		for k, v := range h {
			c.Headers[k] = v
		}
	}
	if name, v := pick("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return c, fmt.Errorf("%s=%q is not a positive whole number of milliseconds", name, v)
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	if name, v := pick("COMPRESSION"); v != "" {
		switch v {
		case "gzip":
			c.Gzip = true
		case "none":
			c.Gzip = false
		default:
			return c, fmt.Errorf("%s=%q: give gzip or none", name, v)
		}
	}
	if _, v := pick("CERTIFICATE"); v != "" {
		c.CAFile = v
	}
	if v := getenv("OTEL_SERVICE_NAME"); v != "" {
		c.ServiceName = v
	}
	if v := getenv("OTEL_RESOURCE_ATTRIBUTES"); v != "" {
		attrs, err := parseHeaders(v)
		if err != nil {
			return c, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
		}
		if c.Resource == nil {
			c.Resource = map[string]string{}
		}
		for k, v := range attrs {
			c.Resource[k] = v
		}
	}
	return c, nil
}

// BaseEndpoint turns a collector's base URL (http://host:4318) into its
// traces URL, as OTEL_EXPORTER_OTLP_ENDPOINT is read.
func BaseEndpoint(base string) string {
	return strings.TrimRight(base, "/") + tracesPath
}

// parseHeaders reads the W3C-baggage-like list OTEL_EXPORTER_OTLP_HEADERS
// holds: k=v pairs separated by commas, each value URL-encoded.
func parseHeaders(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value (give a comma-separated list such as api-key=SECRET,x-team=core)", pair)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("the value of %s is not URL-encoded: %w", k, err)
		}
		out[k] = val
	}
	return out, nil
}

// Start installs a tracer provider that batches spans to c.Endpoint, and
// the W3C trace-context propagator, so that incoming traceparent headers
// are continued and outgoing calls carry the run's. With no endpoint it
// installs nothing. version is the service.version of the spans. Call the
// returned function before exiting: it flushes what is still batched.
func Start(c Config, version string) (stop func(), err error) {
	if c.Endpoint == "" {
		return func() {}, nil
	}
	exp, err := NewExporter(c)
	if err != nil {
		return func() {}, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(c.resource(version)))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		slog.Warn("tracing", "err", err)
	}))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			slog.Warn("tracing: flush the last spans", "err", err)
		}
	}, nil
}

// resource is the spans' resource: c.Resource, with service.name and
// service.version set.
func (c Config) resource(version string) *resource.Resource {
	attrs := make([]attribute.KeyValue, 0, len(c.Resource)+2)
	name := cmp.Or(c.ServiceName, c.Resource["service.name"], "orrery")
	for k, v := range c.Resource {
		if k != "service.name" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	attrs = append(attrs, attribute.String("service.name", name), attribute.String("service.version", version))
	return resource.NewSchemaless(attrs...)
}
