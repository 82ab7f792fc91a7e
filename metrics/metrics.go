// Package metrics exports what a kernel does in the Prometheus text format:
// counters fed by the kernel's Observer hook on every append, and gauges
// read from the kernel and the server at each scrape.
//
// No label holds a session, run or call id, so the number of series is
// bounded by what is configured (frame types, tools, models), never by the
// work done. The hook decodes only the frames it counts by content (run
// ends, tool results, consent answers); every other frame costs a counter
// increment.
package metrics

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
)

// Metrics is a kernel's metrics. Create it with New, give it to the kernel
// as kernel.Config.Observer, then Watch the kernel it observes.
type Metrics struct {
	reg *prometheus.Registry

	frames      prometheus.Counter
	appends     *prometheus.CounterVec
	appendTime  prometheus.Histogram
	appendSize  prometheus.Histogram
	runs        *prometheus.CounterVec
	tokens      *prometheus.CounterVec
	cost        *prometheus.CounterVec
	modelRuns   *prometheus.CounterVec
	toolCalls   *prometheus.CounterVec
	consent     *prometheus.CounterVec
	asked       prometheus.Counter
	storeErrors prometheus.Counter
	commitTime  prometheus.Histogram
	commitSize  prometheus.Histogram
	commitReqs  prometheus.Histogram
	resumes     prometheus.Counter
	backlog     prometheus.Histogram
	slow        prometheus.Counter
	calls       *prometheus.CounterVec
	firstToken  *prometheus.HistogramVec
	outputRate  *prometheus.HistogramVec

	mu    sync.Mutex        // guards names
	names map[string]string // a tool call's tool, by session and call id, until its result
}

// maxOpenCalls bounds the tool calls remembered between their start and
// result; past it the memory starts over (their results count as tool "").
const maxOpenCalls = 16384

// New returns metrics with nothing counted yet, and Go's and the process's
// own collectors registered.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), names: map[string]string{}}
	f := factory{m.reg}
	m.frames = f.counter("orrery_frames_appended_total", "Frames appended to session logs.")
	m.appends = f.counterVec("orrery_appends_total", "Appends of a session's frames to the store, by result (ok or error).", "result")
	m.appendTime = f.histogram("orrery_append_seconds", "Time the store took to take one append of a session's frames, waiting for its group commit included.",
		prometheus.ExponentialBuckets(0.0005, 2, 14))
	m.appendSize = f.histogram("orrery_append_frames", "Frames in one append of a session's frames (what a session's committer gathered while the store was busy).",
		prometheus.ExponentialBuckets(1, 4, 9))
	m.runs = f.counterVec("orrery_runs_total", "Runs ended, by outcome: success, cancelled, interrupted, or the RUN_ERROR code.", "outcome")
	m.tokens = f.counterVec("orrery_model_tokens_total", "Model tokens of ended runs, by provider, model and direction (input or output).", "provider", "model", "direction")
	m.modelRuns = f.counterVec("orrery_model_runs_total", "Ended runs that used a model, by provider and model.", "provider", "model")
	m.cost = f.counterVec("orrery_cost_micro_usd_total", "Cost of ended runs in micro-USD.", "currency")
	m.toolCalls = f.counterVec("orrery_tool_calls_total", "Tool call results logged, by tool and outcome (ok, error, denied, cancelled, interrupted …).", "tool", "outcome")
	m.asked = f.counter("orrery_consent_requests_total", "Consent requests asked of a person (the gate's ask).")
	m.consent = f.counterVec("orrery_consent_answers_total", "Consent requests answered, by outcome (allowed, denied …).", "outcome")
	m.storeErrors = f.counter("orrery_store_errors_total", "Appends the store refused (a full disk, an I/O error, a read-only dir).")
	m.commitTime = f.histogram("orrery_store_commit_seconds", "Time one store transaction (a group commit of many sessions' appends) took.",
		prometheus.ExponentialBuckets(0.0001, 2, 16))
	m.commitSize = f.histogram("orrery_store_commit_frames", "Frames one store transaction committed (group-commit batch size).",
		prometheus.ExponentialBuckets(1, 4, 9))
	m.commitReqs = f.histogram("orrery_store_commit_appends", "Appends one store transaction gathered, each a session's batch.",
		prometheus.ExponentialBuckets(1, 2, 13))
	m.resumes = f.counter("orrery_resumes_total", "Subscriptions that resumed from a seq.")
	m.backlog = f.histogram("orrery_resume_backlog_frames", "Frames a resumed subscription had to catch up (its seq to the head).",
		prometheus.ExponentialBuckets(1, 4, 11))
	m.slow = f.counter("orrery_subscribers_dropped_slow_total", "Subscribers dropped because they fell too far behind (they resume from their last seq).")
	m.calls = f.counterVec("orrery_model_requests_total", "Model calls of the built-in agent loop, by provider, model and status (ok, or the error's code).", "provider", "model", "status")
	m.firstToken = f.histogramVec("orrery_model_time_to_first_token_seconds", "Time from a model call to the first delta of its answer, by provider and model.",
		prometheus.ExponentialBuckets(0.01, 2, 13), "provider", "model")
	m.outputRate = f.histogramVec("orrery_model_output_tokens_per_second", "Output tokens a second of a model call after its first token, by provider and model.",
		prometheus.ExponentialBuckets(1, 2, 12), "provider", "model")
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Watch adds gauges read from k at each scrape: sessions loaded, runs in
// flight, and sessions whose store refuses appends.
func (m *Metrics) Watch(k *kernel.Kernel) {
	m.reg.MustRegister(&kernelCollector{k: k,
		loaded:  prometheus.NewDesc("orrery_sessions_loaded", "Sessions in memory.", nil, nil),
		running: prometheus.NewDesc("orrery_runs_in_flight", "Sessions with a run in flight.", nil, nil),
		broken:  prometheus.NewDesc("orrery_sessions_broken", "Sessions refusing writes since their store failed.", nil, nil),
	})
}

// Gauge adds a gauge read at each scrape, with one label: the server's
// subscribers by transport, say.
func (m *Metrics) Gauge(name, help, label string, read func() map[string]int) {
	m.reg.MustRegister(&funcCollector{desc: prometheus.NewDesc(name, help, []string{label}, nil), read: read, kind: prometheus.GaugeValue})
}

// Counter adds a counter read at each scrape, with one label, for counts
// kept elsewhere (an ACP agent's process starts, say). read must never
// return less for a label than it did before.
func (m *Metrics) Counter(name, help, label string, read func() map[string]int) {
	m.reg.MustRegister(&funcCollector{desc: prometheus.NewDesc(name, help, []string{label}, nil), read: read, kind: prometheus.CounterValue})
}

var _ kernel.Observer = (*Metrics)(nil)

// Appended implements kernel.Observer.
func (m *Metrics) Appended(session string, frames []kernel.Frame, took time.Duration, err error) {
	if err != nil {
		m.appends.WithLabelValues("error").Inc()
		m.storeErrors.Inc()
		return
	}
	m.appends.WithLabelValues("ok").Inc()
	m.appendTime.Observe(took.Seconds())
	m.appendSize.Observe(float64(len(frames)))
	m.frames.Add(float64(len(frames)))
	for _, f := range frames {
		switch protocol.EventType(f.Type) {
		case protocol.TypeToolCallStart:
			m.callStarted(session, f.Data)
		case protocol.TypeToolCallResult:
			m.callEnded(session, f.Data)
		case protocol.TypeRunFinished, protocol.TypeRunError:
			m.runEnded(f.Type, f.Data)
		case protocol.TypeCustom:
			m.custom(f.Data)
		}
	}
}

// Resumed implements kernel.Observer.
func (m *Metrics) Resumed(backlog uint64) {
	m.resumes.Inc()
	m.backlog.Observe(float64(backlog))
}

// DroppedSlow implements kernel.Observer.
func (m *Metrics) DroppedSlow() { m.slow.Inc() }

// Committed counts one store transaction: give it to a store that tells of
// its commits (store.CommitObserver).
func (m *Metrics) Committed(c store.Commit) {
	if c.Err != nil {
		return // counted per append, as orrery_store_errors_total
	}
	m.commitTime.Observe(c.Took.Seconds())
	m.commitSize.Observe(float64(c.Frames))
	m.commitReqs.Observe(float64(c.Appends))
}

// ModelCalled implements kernel.Observer.
func (m *Metrics) ModelCalled(session string, c agent.ModelCall) {
	status := c.Code
	if status == "" {
		status = "ok"
	}
	m.calls.WithLabelValues(c.Provider, c.Model, status).Inc()
	if c.FirstToken > 0 {
		m.firstToken.WithLabelValues(c.Provider, c.Model).Observe(c.FirstToken.Seconds())
		if gen := c.Took - c.FirstToken; gen > 0 && c.Usage.OutputTokens > 0 {
			m.outputRate.WithLabelValues(c.Provider, c.Model).Observe(float64(c.Usage.OutputTokens) / gen.Seconds())
		}
	}
}

func (m *Metrics) callStarted(session string, data []byte) {
	var e struct {
		ID   string `json:"toolCallId"`
		Name string `json:"toolCallName"`
	}
	if json.Unmarshal(data, &e) != nil || e.ID == "" {
		return
	}
	m.mu.Lock()
	if len(m.names) >= maxOpenCalls {
		m.names = map[string]string{}
	}
	m.names[session+"\x00"+e.ID] = e.Name
	m.mu.Unlock()
}

func (m *Metrics) callEnded(session string, data []byte) {
	var e struct {
		ID       string `json:"toolCallId"`
		Metadata struct {
			Orrery struct {
				Outcome struct {
					Status string `json:"status"`
				} `json:"outcome"`
			} `json:"orrery"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &e) != nil {
		return
	}
	m.mu.Lock()
	key := session + "\x00" + e.ID
	name := m.names[key]
	delete(m.names, key)
	m.mu.Unlock()
	outcome := e.Metadata.Orrery.Outcome.Status
	if outcome == "" {
		outcome = "ok"
	}
	m.toolCalls.WithLabelValues(name, outcome).Inc()
}

func (m *Metrics) runEnded(typ string, data []byte) {
	var e struct {
		Code    string                `json:"code"`
		Outcome *protocol.Outcome     `json:"outcome"`
		Result  *protocol.RunResult   `json:"result"`
		Usage   []protocol.TokenUsage `json:"usage"`
		Meta    struct {
			Orrery struct {
				Result *protocol.RunResult `json:"result"`
			} `json:"orrery"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &e) != nil {
		return
	}
	outcome := "success"
	switch {
	case typ == string(protocol.TypeRunError):
		outcome = e.Code
		if outcome == "" {
			outcome = "error"
		}
	case e.Outcome != nil && e.Outcome.Type != "":
		outcome = e.Outcome.Type
	}
	m.runs.WithLabelValues(outcome).Inc()
	res := e.Result
	if res == nil {
		res = e.Meta.Orrery.Result
	}
	if res != nil && res.MicroUSD > 0 {
		m.cost.WithLabelValues("USD").Add(float64(res.MicroUSD))
	}
	for _, u := range e.Usage {
		m.modelRuns.WithLabelValues(u.Provider, u.Model).Inc()
		if u.InputTokens > 0 {
			m.tokens.WithLabelValues(u.Provider, u.Model, "input").Add(float64(u.InputTokens))
		}
		if u.OutputTokens > 0 {
			m.tokens.WithLabelValues(u.Provider, u.Model, "output").Add(float64(u.OutputTokens))
		}
	}
}

func (m *Metrics) custom(data []byte) {
	var e struct {
		Name  string `json:"name"`
		Value struct {
			Outcome string `json:"outcome"`
		} `json:"value"`
	}
	if json.Unmarshal(data, &e) != nil {
		return
	}
	switch e.Name {
	case "orrery.consent.requested":
		m.asked.Inc()
	case "orrery.consent.resolved":
		m.consent.WithLabelValues(e.Value.Outcome).Inc()
	}
}

// factory registers what it makes.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

// kernelCollector reads a kernel's gauges at each scrape.
type kernelCollector struct {
	k                       *kernel.Kernel
	loaded, running, broken *prometheus.Desc
}

func (c *kernelCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.loaded
	ch <- c.running
	ch <- c.broken
}

func (c *kernelCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.k.Stats()
	ch <- prometheus.MustNewConstMetric(c.loaded, prometheus.GaugeValue, float64(st.Loaded))
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(st.Running))
	ch <- prometheus.MustNewConstMetric(c.broken, prometheus.GaugeValue, float64(st.Broken))
}

// funcCollector is a labelled gauge or counter read at each scrape.
type funcCollector struct {
	desc *prometheus.Desc
	read func() map[string]int
	kind prometheus.ValueType
}

func (c *funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *funcCollector) Collect(ch chan<- prometheus.Metric) {
	for label, v := range c.read() {
		ch <- prometheus.MustNewConstMetric(c.desc, c.kind, float64(v), label)
	}
}
