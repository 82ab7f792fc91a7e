package metrics_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/metrics"
)

// fixture reads a recorded session log of protocol/fixtures as frames.
func fixture(t *testing.T, name string) []kernel.Frame {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "protocol", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []kernel.Frame
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var h struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			t.Fatal(err)
		}
		out = append(out, kernel.Frame{Seq: uint64(len(out) + 1), Type: h.Type, Data: append([]byte(nil), sc.Bytes()...)})
	}
	return out
}

// TestCountsRecordedLogs feeds recorded logs to the observer, as a
// session's committer does, and compares the counters with what the logs
// hold: every frame, each run's end by outcome, each tool result by tool
// and outcome, the models' tokens; a refused append counts as a store
// error and counts no frame.
func TestCountsRecordedLogs(t *testing.T) {
	m := metrics.New()
	var frames int
	for _, name := range []string{"server-tool.jsonl", "cancel.jsonl", "provider-error.jsonl"} {
		fs := fixture(t, name)
		frames += len(fs)
		m.Appended("ses_"+name, fs[:len(fs)/2], time.Millisecond, nil)
		m.Appended("ses_"+name, fs[len(fs)/2:], time.Millisecond, nil)
	}
	m.Appended("ses_x", []kernel.Frame{{Seq: 1, Type: "TEXT_MESSAGE_CONTENT"}}, time.Millisecond, errors.New("disk full"))
	body := scrape(t, m)
	for _, want := range []string{
		"orrery_frames_appended_total " + itoa(frames),
		`orrery_runs_total{outcome="success"} 1`,
		`orrery_runs_total{outcome="cancelled"} 1`,
		`orrery_runs_total{outcome="provider_error"} 1`,
		`orrery_tool_calls_total{outcome="ok",tool="echo"} 1`,
		`orrery_appends_total{result="error"} 1`,
		"orrery_store_errors_total 1",
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("the metrics lack %q:\n%s", want, grep(body, "orrery_"))
		}
	}
}

// TestOpenCallsAreBounded: calls that start and never end are forgotten
// past a bound, so a session that leaves calls open cannot grow the
// observer's memory; a result then counts under the tool "".
func TestOpenCallsAreBounded(t *testing.T) {
	m := metrics.New()
	for i := range 20000 {
		id := "call_" + itoa(i)
		m.Appended("ses_1", []kernel.Frame{{Type: "TOOL_CALL_START", Data: []byte(`{"type":"TOOL_CALL_START","toolCallId":"` + id + `","toolCallName":"shell"}`)}}, 0, nil)
	}
	m.Appended("ses_1", []kernel.Frame{{Type: "TOOL_CALL_RESULT", Data: []byte(`{"type":"TOOL_CALL_RESULT","toolCallId":"call_19999","content":"x"}`)}}, 0, nil)
	m.Appended("ses_1", []kernel.Frame{{Type: "TOOL_CALL_RESULT", Data: []byte(`{"type":"TOOL_CALL_RESULT","toolCallId":"call_0","content":"x"}`)}}, 0, nil)
	body := scrape(t, m)
	for _, want := range []string{`orrery_tool_calls_total{outcome="ok",tool="shell"} 1`, `orrery_tool_calls_total{outcome="ok",tool=""} 1`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("the metrics lack %q:\n%s", want, grep(body, "orrery_tool"))
		}
	}
}

// scrape reads the metrics as a scraper does, in the text format.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics = %d", rec.Code)
	}
	return rec.Body.String()
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func grep(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestConsentCounts counts each request asked of a person and each answer
// by outcome, from the frames the kernel logs for them.
func TestConsentCounts(t *testing.T) {
	m := metrics.New()
	custom := func(name, value string) kernel.Frame {
		return kernel.Frame{Type: "CUSTOM", Data: []byte(`{"type":"CUSTOM","name":"` + name + `","value":` + value + `}`)}
	}
	m.Appended("ses_1", []kernel.Frame{
		custom("orrery.consent.requested", `{"request":"q1","tool":"shell"}`),
		custom("orrery.consent.resolved", `{"request":"q1","outcome":"`+kernel.ConsentAllowed+`"}`),
		custom("orrery.consent.requested", `{"request":"q2","tool":"shell"}`),
		custom("orrery.consent.resolved", `{"request":"q2","outcome":"`+kernel.ConsentDenied+`"}`),
		custom("orrery.user.message", `{"id":"u1"}`),
	}, 0, nil)
	body := scrape(t, m)
	for _, want := range []string{"orrery_consent_requests_total 2", `orrery_consent_answers_total{outcome="allowed"} 1`, `orrery_consent_answers_total{outcome="denied"} 1`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("the metrics lack %q:\n%s", want, grep(body, "orrery_consent"))
		}
	}
}

// TestReadAtScrape: a gauge and a counter read from elsewhere show each
// label's value of the moment, typed for Prometheus.
func TestReadAtScrape(t *testing.T) {
	m := metrics.New()
	n := 0
	m.Gauge("orrery_test_running", "Running.", "agent", func() map[string]int { return map[string]int{"gemini": n} })
	m.Counter("orrery_test_starts_total", "Starts.", "agent", func() map[string]int { return map[string]int{"gemini": 2 * n} })
	for _, n = range []int{1, 3} {
		body := scrape(t, m)
		for _, want := range []string{
			"# TYPE orrery_test_running gauge", `orrery_test_running{agent="gemini"} ` + itoa(n),
			"# TYPE orrery_test_starts_total counter", `orrery_test_starts_total{agent="gemini"} ` + itoa(2*n),
		} {
			if !strings.Contains(body, want+"\n") {
				t.Errorf("the metrics lack %q:\n%s", want, grep(body, "orrery_test"))
			}
		}
	}
}
