package main_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// testMetrics scrapes GET /metrics of orrery serve after two runs of the
// offline model, one of which calls the clock, made by orrery run as a
// client of the server, and reads it with Prometheus's own text parser:
// the frames counted are the frames the log holds, and the runs, the tool
// call and the model's runs are counted as they happened.
func testMetrics(t *testing.T, bin string) {
	env := environ(t)
	data := filepath.Join(t.TempDir(), "data")
	ws := t.TempDir()
	srv := serveIn(t, bin, env, ws, "--data", data, "--model", "offline")
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
	code, body := httpGet(t, srv.url+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics = %d %s", code, body)
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
		{"orrery_store_errors_total", nil, 0},
		{"orrery_runs_in_flight", nil, 0},
		{"orrery_sessions_broken", nil, 0},
	} {
		got, ok := value(c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if got, _ := value("orrery_sessions_loaded", nil); got < 2 {
		t.Errorf("orrery_sessions_loaded = %v, want the 2 sessions the runs made", got)
	}
	if h := fams["orrery_append_seconds"]; h == nil || h.GetMetric()[0].GetHistogram().GetSampleCount() == 0 {
		t.Errorf("orrery_append_seconds observed no append")
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
