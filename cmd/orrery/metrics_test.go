package main_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/cluster/embed"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// testMetrics scrapes GET /metrics of orrery serve (and of its
// --metrics-listen) after two runs of the
// offline model, one of which calls the clock, made by orrery run as a
// client of the server, and reads it with Prometheus's own text parser:
// the frames counted are the frames the log holds, and the runs, the tool
// call and the model's runs are counted as they happened.
func testMetrics(t *testing.T, bin string) {
	env := environ(t)
	data := filepath.Join(t.TempDir(), "data")
	ws := t.TempDir()
	srv := serveIn(t, bin, env, ws, "--data", data, "--model", "offline", "--metrics-listen", "127.0.0.1:0")
	waitOwner(t, data)
	for _, p := range []string{"hello", "what time is it"} {
		if r := orreryIn(t, bin, env, ws, "run", "--data", data, "-p", p); r.code != 0 {
			t.Fatalf("orrery run -p %q = %d, stderr %q", p, r.code, r.stderr)
		}
	}
	cl := dialPipe(t, data)
	list, err := cl.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var logged uint64
	for _, s := range list {
		r, err := cl.Read(context.Background(), s.ID, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		logged += r.Head
	}
	// One SSE stream stays open while the metrics are read.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.url+"/events?session="+list[0].ID+"&since=0", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	code, body := httpGet(t, srv.url+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics = %d %s", code, body)
	}
	// --metrics-listen serves the same metrics on its own address.
	if srv.metrics == "" {
		t.Fatal("orrery serve --metrics-listen did not say where the metrics are")
	}
	if code, own := httpGet(t, srv.metrics); code != 200 || !strings.Contains(own, "orrery_frames_appended_total") {
		t.Errorf("GET %s = %d; want the metrics", srv.metrics, code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the Prometheus parser refuses /metrics: %v\n%s", err, body)
	}
	value := func(name string, labels map[string]string) (float64, bool) {
		f, ok := fams[name]
		if !ok {
			return 0, false
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			}
		}
		return 0, false
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"orrery_frames_appended_total", nil, float64(logged)},
		{"orrery_runs_total", map[string]string{"outcome": "success"}, 2},
		{"orrery_tool_calls_total", map[string]string{"tool": "clock", "outcome": "ok"}, 1},
		{"orrery_model_runs_total", map[string]string{"provider": "offline"}, 2},
		// hello is one model call; the clock's run is two, around the call.
		{"orrery_model_requests_total", map[string]string{"provider": "offline", "model": "offline", "status": "ok"}, 3},
		{"orrery_store_errors_total", nil, 0},
		{"orrery_runs_in_flight", nil, 0},
		{"orrery_sessions_broken", nil, 0},
		{"orrery_subscribers", map[string]string{"transport": "sse"}, 1},
	} {
		got, ok := value(c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if got, _ := value("orrery_sessions_loaded", nil); got < 2 {
		t.Errorf("orrery_sessions_loaded = %v, want the 2 sessions the runs made", got)
	}
	for _, name := range []string{"orrery_append_seconds", "orrery_model_time_to_first_token_seconds", "orrery_store_commit_seconds", "orrery_store_commit_frames"} {
		if h := fams[name]; h == nil || h.GetMetric()[0].GetHistogram().GetSampleCount() == 0 {
			t.Errorf("%s observed nothing", name)
		}
	}
	if h := fams["orrery_store_commit_frames"]; h != nil && h.GetMetric()[0].GetHistogram().GetSampleSum() != float64(logged) {
		t.Errorf("the store's commits hold %v frames, want the %d the log holds", h.GetMetric()[0].GetHistogram().GetSampleSum(), logged)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.HasPrefix(l.GetValue(), "ses_") || strings.HasPrefix(l.GetValue(), "run_") || strings.HasPrefix(l.GetValue(), "call_") {
					t.Errorf("%s has a label holding an id (%s=%q): series would grow with the work", f.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// hasLabels reports whether m has every label of want.
func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// testReadyzLostLock moves the data dir away from under orrery serve:
// /readyz turns 503 and says the lock file is gone and what to do, and
// turns 200 again once the dir is back.
func testReadyzLostLock(t *testing.T, bin string) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	srv := serveIn(t, bin, environ(t), t.TempDir(), "--data", data, "--model", "offline")
	if code, body := httpGet(t, srv.url+"/readyz"); code != http.StatusOK {
		t.Fatalf("GET /readyz = %d %s; want 200", code, body)
	}
	if err := os.Rename(data, data+".moved"); err != nil {
		t.Fatal(err)
	}
	if code, body := httpGet(t, srv.url+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "is gone") || !strings.Contains(body, "start it again") {
		t.Errorf("GET /readyz with the data dir moved away = %d %s; want 503 saying the lock file is gone and what to do", code, body)
	}
	if err := os.Rename(data+".moved", data); err != nil {
		t.Fatal(err)
	}
	if code, body := httpGet(t, srv.url+"/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz with the dir back = %d %s; want 200", code, body)
	}
}

// testReadyzNoLeases: a node on a NATS cluster it cannot reach could own
// no session, so /readyz takes it out of a load balancer, naming the
// leases, and puts it back once NATS answers again.
func testReadyzNoLeases(t *testing.T, bin string) {
	dir := t.TempDir()
	start := func(listen string) *embed.Server {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		s, err := embed.Start(ctx, embed.Config{Dir: dir, Listen: listen})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		return s
	}
	ns := start("127.0.0.1:0")
	addr := strings.TrimPrefix(ns.ClientURL(), "nats://")
	srv := serveIn(t, bin, environ(t), t.TempDir(), "--data", t.TempDir(), "--model", "offline", "--store", "jetstream", "--nats", ns.ClientURL())
	if code, body := httpGet(t, srv.url+"/readyz"); code != http.StatusOK {
		t.Fatalf("GET /readyz = %d %s; want 200", code, body)
	}
	ns.Stop()
	code, body := httpGet(t, srv.url+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "session leases") {
		t.Errorf("GET /readyz with NATS down = %d %s; want 503 naming the session leases", code, body)
	}
	start(addr)
	deadline := time.Now().Add(waitLimit)
	for {
		code, body = httpGet(t, srv.url+"/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /readyz with NATS back = %d %s; want 200", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
