package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Exporter sends spans to an OTLP/HTTP collector, one POST of protobuf
// per batch. It implements the SDK's SpanExporter; give it to a batching
// span processor (Start does).
type Exporter struct {
	c       Config
	client  *http.Client
	stopped atomic.Bool
}

var _ sdktrace.SpanExporter = (*Exporter)(nil)

// NewExporter returns an exporter to c.Endpoint, which must be an http or
// https URL.
func NewExporter(c Config) (*Exporter, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("export traces to %q: not an http(s) URL (give the collector's, such as http://localhost:4318)", c.Endpoint)
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the collector's CA certificates: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", c.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &Exporter{c: c, client: &http.Client{Transport: tr}}, nil
}

// ExportSpans implements sdktrace.SpanExporter: it POSTs spans, retrying
// while the collector answers 429, 502, 503 or 504 (after its
// Retry-After, if it gives one) or cannot be reached, until the timeout.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Load() || len(spans) == 0 {
		return nil
	}
	body, err := encodeRequest(spans)
	if err != nil {
		return fmt.Errorf("encode %d spans: %w", len(spans), err)
	}
	if e.c.Gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(body)
		zw.Close()
		body = buf.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.c.Timeout)
	defer cancel()
	wait := 100 * time.Millisecond
	for {
		retry, after, err := e.post(ctx, body)
		if err == nil || !retry {
			return err
		}
		if after > 0 {
			wait = after
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("export %d spans to %s: %w (gave up: %w)", len(spans), e.c.Endpoint, err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// post sends one export; retry says whether it is worth sending again,
// after the collector's Retry-After when it gave one.
func (e *Exporter) post(ctx context.Context, body []byte) (retry bool, after time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.c.Endpoint, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.c.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	for k, v := range e.c.Headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return ctx.Err() == nil, 0, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 == 2 {
		return false, 0, nil
	}
	err = fmt.Errorf("the collector at %s answered %s: %q", e.c.Endpoint, resp.Status, bytes.TrimSpace(msg))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			after = time.Duration(s) * time.Second
		}
		return true, after, err
	}
	return false, 0, err
}

// Shutdown implements sdktrace.SpanExporter: later exports do nothing.
func (e *Exporter) Shutdown(ctx context.Context) error {
	if e.stopped.Swap(true) {
		return errors.New("the trace exporter is already shut down")
	}
	e.client.CloseIdleConnections()
	return ctx.Err()
}
