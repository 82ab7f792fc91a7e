package main_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace endpoint (POST /v1/traces, protobuf),
// as a collector serves it, that keeps every span it is sent.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	// services are the service.name of each export's resources; keys
	// the api-key header of each export.
	services, keys []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			http.Error(w, "Content-Type is "+ct, http.StatusUnsupportedMediaType)
			return
		}
		all, err := decodeExport(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.keys = append(rc.keys, r.Header.Get("api-key"))
		for _, rs := range all {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					rc.services = append(rc.services, kv.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				rc.spans = append(rc.spans, ss.GetSpans()...)
			}
		}
		rc.mu.Unlock()
		// An empty ExportTraceServiceResponse: every span accepted.
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(rc.Close)
	return rc
}

// decodeExport reads an ExportTraceServiceRequest as the OTLP spec defines
// it (field 1, repeated ResourceSpans), without the collector's generated
// package and the gRPC it brings.
func decodeExport(b []byte) ([]*tracepb.ResourceSpans, error) {
	var out []*tracepb.ResourceSpans
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		rs := &tracepb.ResourceSpans{}
		if err := proto.Unmarshal(v, rs); err != nil {
			return nil, err
		}
		out = append(out, rs)
	}
	return out, nil
}

// trace returns the spans received of the trace id.
func (rc *otlpReceiver) trace(id []byte) []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range rc.spans {
		if bytes.Equal(s.GetTraceId(), id) {
			out = append(out, s)
		}
	}
	return out
}

// attrs is a span's attributes as strings.
func attrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.GetAttributes() {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			m[kv.GetKey()] = v.GetStringValue()
		default:
			b, _ := json.Marshal(v.GetIntValue())
			m[kv.GetKey()] = string(b)
		}
	}
	return m
}

// testTraces runs orrery serve with OTEL_EXPORTER_OTLP_ENDPOINT at an
// OTLP receiver the test serves, and sends run.send with a traceparent:
// the receiver gets the run's span as a child of the caller's, and under
// it a span for each model call and for the clock tool's call, with the
// OpenTelemetry GenAI attributes and the consent decision as events.
func testTraces(t *testing.T, bin string) {
	rc := newOTLPReceiver(t)
	env := append(environ(t), "OTEL_EXPORTER_OTLP_ENDPOINT="+rc.URL, "OTEL_BSP_SCHEDULE_DELAY=50")
	s := serveIn(t, bin, env, t.TempDir(), "--data", filepath.Join(t.TempDir(), "data"), "--model", "offline")
	var created struct {
		Session string `json:"session"`
	}
	s.control(map[string]any{"t": "session.new", "id": "n"}, &created)

	traceID, parentID := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body, _ := json.Marshal(map[string]any{"t": "run.send", "id": "s", "session": created.Session, "input": map[string]any{"text": "what time is it"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/control", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("run.send = %d", resp.StatusCode)
	}

	want, _ := hex.DecodeString(traceID)
	var spans []*tracepb.Span
	var byName map[string]*tracepb.Span
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(20 * time.Millisecond) {
		spans = rc.trace(want)
		byName = map[string]*tracepb.Span{}
		for _, sp := range spans {
			byName[sp.GetName()] = sp
		}
		if byName["invoke_agent orrery"] != nil && byName["execute_tool clock"] != nil && byName["chat offline"] != nil {
			break
		}
		if time.Now().After(deadline) {
			var names []string
			for _, sp := range spans {
				names = append(names, sp.GetName())
			}
			t.Fatalf("the receiver has spans %q of the trace, want invoke_agent orrery, chat offline and execute_tool clock", names)
		}
	}
	run := byName["invoke_agent orrery"]
	if got := hex.EncodeToString(run.GetParentSpanId()); got != parentID {
		t.Errorf("the run's span has parent %s, want the caller's span %s", got, parentID)
	}
	if a := attrs(run); a["gen_ai.operation.name"] != "invoke_agent" || a["gen_ai.conversation.id"] != created.Session {
		t.Errorf("the run's span has attributes %v", a)
	}
	for _, name := range []string{"chat offline", "execute_tool clock"} {
		if sp := byName[name]; !bytes.Equal(sp.GetParentSpanId(), run.GetSpanId()) {
			t.Errorf("%s is not a child of the run's span", name)
		}
	}
	appends := 0
	for _, sp := range spans {
		if sp.GetName() == "store.append" && bytes.Equal(sp.GetParentSpanId(), run.GetSpanId()) {
			appends++
		}
	}
	if appends == 0 {
		t.Error("no store.append span is a child of the run's span")
	}
	if a := attrs(byName["chat offline"]); a["gen_ai.operation.name"] != "chat" || a["gen_ai.provider.name"] != "offline" || a["gen_ai.request.model"] != "offline" || a["gen_ai.usage.input_tokens"] == "" {
		t.Errorf("the model call's span has attributes %v", a)
	}
	tool := byName["execute_tool clock"]
	if a := attrs(tool); a["gen_ai.operation.name"] != "execute_tool" || a["gen_ai.tool.name"] != "clock" || !strings.HasPrefix(a["gen_ai.tool.call.id"], "call_") || a["orrery.tool.outcome"] != "ok" {
		t.Errorf("the tool call's span has attributes %v", a)
	}
	var events []string
	for _, ev := range tool.GetEvents() {
		events = append(events, ev.GetName())
	}
	if strings.Join(events, ",") != "orrery.consent.check,orrery.consent.decided" {
		t.Errorf("the tool call's span has events %q, want the consent check and its decision", events)
	}
}

// testTracesFromConfig runs orrery run (a kernel of its own, no server)
// with the collector in [telemetry]: the run's spans reach it before the
// command exits, with the table's headers and service name.
func testTracesFromConfig(t *testing.T, bin string) {
	rc := newOTLPReceiver(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "orrery.toml")
	body := "[telemetry]\notlp_endpoint = \"" + rc.URL + "\"\nservice_name = \"team-orrery\"\notlp_headers = { api-key = \"s3cret\" }\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := orrery(t, bin, environ(t), "run", "--config", cfg, "--data", filepath.Join(dir, "data"), "--model", "offline", "-p", "what time is it")
	if r.code != 0 {
		t.Fatalf("orrery run exited %d: %s", r.code, r.stderr)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var names []string
	for _, sp := range rc.spans {
		names = append(names, sp.GetName())
	}
	if !slices.Contains(names, "invoke_agent orrery") || !slices.Contains(names, "execute_tool clock") {
		t.Fatalf("when orrery run exited the collector had spans %q, want the run's and the clock call's", names)
	}
	for i := range rc.keys {
		if rc.keys[i] != "s3cret" {
			t.Errorf("export %d had api-key %q, want the [telemetry] otlp_headers one", i, rc.keys[i])
		}
	}
	for _, s := range rc.services {
		if s != "team-orrery" {
			t.Errorf("service.name %q, want [telemetry] service_name", s)
		}
	}
}
