package main

import (
	"fmt"

	"github.com/getorrery/orrery"
	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/telemetry"
)

// startTracing exports the process's spans (each run, model call, tool
// call and extension call) over OTLP/HTTP to [telemetry] otlp_endpoint,
// or to OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT), with
// OpenTelemetry's other standard variables applied over the table
// (telemetry.FromEnv). With neither it does nothing and the spans are
// OpenTelemetry's no-op ones. It starts tracing once a process; run
// flushes what is left before the process exits.
func (e *env) startTracing(tc config.TelemetryConfig) error {
	if e.stopTracing != nil {
		return nil
	}
	c := telemetry.Config{Headers: map[string]string{}, ServiceName: tc.ServiceName}
	if tc.OTLPEndpoint != "" {
		c.Endpoint = telemetry.BaseEndpoint(tc.OTLPEndpoint)
	}
	for k, v := range tc.OTLPHeaders {
		c.Headers[k] = v
	}
	c, err := telemetry.FromEnv(c, e.getenv)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	stop, err := telemetry.Start(c, orrery.Version)
	if err != nil {
		return fmt.Errorf("tracing: %w (fix [telemetry] otlp_endpoint or OTEL_EXPORTER_OTLP_ENDPOINT, or unset it)", err)
	}
	e.stopTracing = stop
	return nil
}
