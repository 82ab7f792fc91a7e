// Package fanout is the load harness of the fan-out benchmarks: one
// publisher paced at a fixed rate, N subscribers reading it over loopback
// SSE or WebSocket in this process, and the meters (delivered frames,
// publish-to-receive latency, process CPU, memory per idle subscriber).
//
// The same harness drives Orrery (bench/fanout_test.go), a bare stdlib
// server that is the physical ceiling (ceiling.go), and centrifuge
// (bench/centrifuge, its own module), so the receivers and the meters are
// identical and only the server differs. The receivers run in the same
// process and compete with the server for the machine's cores: the CPU
// figures are the whole process, clients included.
package fanout

import (
	"context"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Config is one fan-out scenario. The zero value is not usable: start from
// ConfigFromEnv.
type Config struct {
	Subs     int           // subscribers (ORRERY_BENCH_SUBS, default 1000)
	Rate     int           // frames published per second (ORRERY_BENCH_RATE, default 1000)
	Duration time.Duration // measured window (ORRERY_BENCH_SECONDS, default 10)
	Warmup   time.Duration // publishing before the window opens (ORRERY_BENCH_WARMUP, default 2s)
	// Quiet, when set (ORRERY_BENCH_QUIET, seconds), is how long a run may
	// wait, before it attaches anyone, for the machine's other processes to
	// leave it idle: on a shared machine their load skews every figure.
	Quiet time.Duration
	// ProfileDir, when set (ORRERY_BENCH_PROFILE), receives a CPU profile of
	// each measured window, named after the benchmark.
	ProfileDir string
}

// ConfigFromEnv returns the scenario the environment asks for.
func ConfigFromEnv() Config {
	c := Config{Subs: 1000, Rate: 1000, Duration: 10 * time.Second, Warmup: 2 * time.Second}
	if n, err := strconv.Atoi(os.Getenv("ORRERY_BENCH_SUBS")); err == nil && n > 0 {
		c.Subs = n
	}
	if n, err := strconv.Atoi(os.Getenv("ORRERY_BENCH_RATE")); err == nil && n > 0 {
		c.Rate = n
	}
	if f, err := strconv.ParseFloat(os.Getenv("ORRERY_BENCH_SECONDS"), 64); err == nil && f > 0 {
		c.Duration = time.Duration(f * float64(time.Second))
	}
	if f, err := strconv.ParseFloat(os.Getenv("ORRERY_BENCH_WARMUP"), 64); err == nil && f >= 0 {
		c.Warmup = time.Duration(f * float64(time.Second))
	}
	if f, err := strconv.ParseFloat(os.Getenv("ORRERY_BENCH_QUIET"), 64); err == nil && f > 0 {
		c.Quiet = time.Duration(f * float64(time.Second))
	}
	c.ProfileDir = os.Getenv("ORRERY_BENCH_PROFILE")
	return c
}

// Conn is one subscriber's connection, attached and ready: Run reads its
// frames into rx until the connection ends; Close ends it.
type Conn interface {
	Run(rx *Receiver) error
	Close()
}

// System is a server under test.
type System struct {
	// Dial attaches subscriber i. It returns once the subscription is
	// registered, so that every frame published afterwards reaches it.
	Dial func(ctx context.Context, i int) (Conn, error)
	// Publish publishes frame i (1, 2, ...), calling stamp with the seq the
	// receivers will see for it just before handing it over.
	Publish func(i uint64, stamp func(seq uint64))
	// Probe, if set, runs for the whole run and reports into rx each frame
	// as the server hands it to its subscribers (before any network), until
	// stop is closed; its latencies are reported apart, as publish-p50-ms
	// and publish-p99-ms.
	Probe func(rx *Receiver, stop <-chan struct{})
}

// Run measures sys: it attaches cfg.Subs subscribers, publishes cfg.Rate
// frames per second, and after cfg.Warmup measures cfg.Duration. It reports
// the figures with b.ReportMetric; b.N is ignored (run with -benchtime=1x).
func Run(b *testing.B, cfg Config, sys System) Result {
	b.Helper()
	waitQuiet(b, cfg.Quiet)
	m := newMeter(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	t0 := time.Now()
	conns := dialAll(b, ctx, cfg.Subs, sys.Dial)
	attach := time.Since(t0)
	var closing atomic.Bool
	var wg sync.WaitGroup
	var dropped atomic.Int64
	for _, c := range conns {
		rx := m.receiver()
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Run(rx)
			if !closing.Load() {
				dropped.Add(1)
				rx.err = err
			}
		}()
	}

	stopProbe := make(chan struct{})
	probeDone := make(chan struct{})
	if sys.Probe != nil {
		go func() { defer close(probeDone); sys.Probe(m.probe, stopProbe) }()
	} else {
		close(probeDone)
	}

	pctx, stopPacer := context.WithCancel(ctx)
	paced := make(chan uint64, 1)
	go func() {
		paced <- Pace(pctx, cfg.Rate, func(i uint64) {
			sys.Publish(i, m.stamps.mark)
			m.published.Add(1)
		})
	}()
	time.Sleep(cfg.Warmup)
	stopProfile := m.profile(b, cfg.ProfileDir)
	m.begin()
	time.Sleep(cfg.Duration)
	m.end()
	stopProfile()
	dumpGoroutines(b, cfg.ProfileDir) // still under load, outside the window
	stopPacer()
	<-paced

	close(stopProbe)
	<-probeDone
	closing.Store(true)
	for _, c := range conns {
		c.Close()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		b.Errorf("subscribers still reading 30s after their connections were closed")
	}
	res := m.result()
	res.Attach = attach
	res.Dropped = int(dropped.Load())
	for _, rx := range m.rx {
		if rx.err != nil {
			b.Logf("subscriber ended early: %v", rx.err)
			break
		}
	}
	res.Report(b)
	b.Logf("%s: %s", b.Name(), res)
	return res
}

// waitQuiet waits, up to limit, for a second in which the machine's other
// processes use less than a tenth of a core.
func waitQuiet(b *testing.B, limit time.Duration) {
	if limit <= 0 {
		return
	}
	deadline := time.Now().Add(limit)
	for {
		m0, p0 := machineCPU(), processCPU()
		time.Sleep(time.Second)
		others := (machineCPU() - m0) - (processCPU() - p0)
		if others < 100*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			b.Logf("the machine is still busy (others used %.2f cores) after %v: measuring anyway", others.Seconds(), limit)
			return
		}
	}
}

// dialAll attaches n subscribers, a few at a time.
func dialAll(b *testing.B, ctx context.Context, n int, dial func(context.Context, int) (Conn, error)) []Conn {
	b.Helper()
	conns := make([]Conn, n)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				c, err := dial(ctx, i)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("attach subscriber %d: %w", i, err)
					}
					mu.Unlock()
					next.Store(int64(n))
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	if first != nil {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		b.Fatal(first)
	}
	return conns
}

// Pace calls publish(1), publish(2), ... at rate per second until ctx ends,
// catching up when a tick comes late, and returns how many it published.
func Pace(ctx context.Context, rate int, publish func(i uint64)) uint64 {
	period := time.Second / time.Duration(rate)
	tick := time.NewTicker(max(period, 100*time.Microsecond))
	defer tick.Stop()
	start := time.Now()
	var n uint64
	for {
		select {
		case <-ctx.Done():
			return n
		case now := <-tick.C:
			due := uint64(now.Sub(start) / period)
			for n < due && ctx.Err() == nil {
				n++
				publish(n)
			}
		}
	}
}

// stamps holds each seq's publish time, in ns since the meter started.
type stamps struct {
	t0 time.Time
	ns []atomic.Int64
}

func (s *stamps) now() int64 { return int64(time.Since(s.t0)) }

func (s *stamps) mark(seq uint64) {
	if seq < uint64(len(s.ns)) {
		s.ns[seq].Store(s.now())
	}
}

func (s *stamps) at(seq uint64) int64 {
	if seq < uint64(len(s.ns)) {
		return s.ns[seq].Load()
	}
	return 0
}

// Receiver is one subscriber's tally. Only its connection's goroutine
// calls Frame.
type Receiver struct {
	m      *meter
	frames atomic.Int64
	bytes  atomic.Int64
	last   uint64
	gaps   int64
	hist   hist
	err    error
}

// Now is the receive time to pass to Frame: take it right after the read
// that brought the frame in.
func (r *Receiver) Now() int64 { return r.m.stamps.now() }

// Frame counts a received frame with seq, received at now.
func (r *Receiver) Frame(seq uint64, now int64) {
	r.frames.Add(1)
	if r.last != 0 && seq != r.last+1 {
		r.gaps++
	}
	r.last = seq
	if r.m.measuring.Load() {
		if t := r.m.stamps.at(seq); t != 0 {
			r.hist.add(now - t)
		}
	}
}

// Bytes counts n bytes read from the wire.
func (r *Receiver) Bytes(n int) { r.bytes.Add(int64(n)) }

// meter is one run's instruments.
type meter struct {
	cfg       Config
	stamps    *stamps
	measuring atomic.Bool
	published atomic.Int64

	mu    sync.Mutex // guards rx
	rx    []*Receiver
	probe *Receiver // System.Probe's, not counted in deliveries

	// The measured window.
	start            time.Time
	cpu0             time.Duration
	frames0, bytes0  int64
	pub0             int64
	elapsed, cpu     time.Duration
	machine0         time.Duration
	machine          time.Duration
	frames, bytesWin int64
	pub              int64
}

func newMeter(cfg Config) *meter {
	// Room for every seq published, with slack for the seqs a system spent
	// before the run (Orrery's run starts at a few).
	n := cfg.Rate*int((cfg.Warmup+cfg.Duration)/time.Second+120) + 1024
	m := &meter{cfg: cfg, stamps: &stamps{t0: time.Now(), ns: make([]atomic.Int64, n)}}
	m.probe = &Receiver{m: m}
	return m
}

func (m *meter) receiver() *Receiver {
	r := &Receiver{m: m}
	m.mu.Lock()
	m.rx = append(m.rx, r)
	m.mu.Unlock()
	return r
}

func (m *meter) totals() (frames, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.rx {
		frames += r.frames.Load()
		bytes += r.bytes.Load()
	}
	return
}

func (m *meter) begin() {
	m.frames0, m.bytes0 = m.totals()
	m.pub0 = m.published.Load()
	m.cpu0 = processCPU()
	m.machine0 = machineCPU()
	m.start = time.Now()
	m.measuring.Store(true)
}

func (m *meter) end() {
	m.measuring.Store(false)
	m.elapsed = time.Since(m.start)
	m.cpu = processCPU() - m.cpu0
	m.machine = machineCPU() - m.machine0
	f, by := m.totals()
	m.frames, m.bytesWin = f-m.frames0, by-m.bytes0
	m.pub = m.published.Load() - m.pub0
}

// profile starts a CPU profile of the window when dir is set.
func (m *meter) profile(b *testing.B, dir string) func() {
	if dir == "" {
		return func() {}
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(b.Name()) + ".pprof"
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Logf("no window profile (is -cpuprofile set?): %v", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// dumpGoroutines writes every goroutine's stack, grouped, to dir when set:
// where the server waits when it does not keep up.
func dumpGoroutines(b *testing.B, dir string) {
	if dir == "" {
		return
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(b.Name()) + ".goroutines.txt"
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	pprof.Lookup("goroutine").WriteTo(f, 1)
}

// result merges the receivers' figures; call it once they have stopped.
func (m *meter) result() Result {
	var h hist
	var gaps int64
	for _, r := range m.rx {
		h.merge(&r.hist)
		gaps += r.gaps
	}
	res := Result{
		Subs:      len(m.rx),
		Published: m.pub,
		Delivered: m.frames,
		Elapsed:   m.elapsed,
		CPU:       m.cpu,
		Others:    max(m.machine-m.cpu, 0),
		P50:       h.quantile(0.50),
		P99:       h.quantile(0.99),
		Max:       h.quantile(1),
		Samples:   h.n,
		Gaps:      gaps,
	}
	if m.probe.hist.n > 0 {
		res.PublishP50 = m.probe.hist.quantile(0.50)
		res.PublishP99 = m.probe.hist.quantile(0.99)
	}
	if m.frames > 0 {
		res.BytesPerFrame = float64(m.bytesWin) / float64(m.frames)
	}
	return res
}

// Result is one run's figures over the measured window.
type Result struct {
	Subs          int
	Published     int64 // frames published in the window
	Delivered     int64 // frames received, all subscribers together
	Elapsed       time.Duration
	CPU           time.Duration // user+system CPU of the whole process
	Others        time.Duration // CPU the machine's other processes used meanwhile
	P50, P99, Max time.Duration // publish-to-receive latency
	// PublishP50 and PublishP99 are the latency to the server's hand-off
	// to its subscribers (System.Probe), when measured.
	PublishP50, PublishP99 time.Duration
	Samples                int64
	Gaps                   int64 // frames whose seq did not follow the previous one's
	Dropped                int   // subscribers whose connection ended before the run did
	BytesPerFrame          float64
	Attach                 time.Duration // attaching every subscriber
}

// DeliveredPerSec is frames received per second, all subscribers together.
func (r Result) DeliveredPerSec() float64 { return float64(r.Delivered) / r.Elapsed.Seconds() }

// PerCPU is frames received per CPU-second of the whole process.
func (r Result) PerCPU() float64 {
	if r.CPU <= 0 {
		return 0
	}
	return float64(r.Delivered) / r.CPU.Seconds()
}

// KeptUp is the share of the frames owed (published × subscribers) that
// arrived within the window.
func (r Result) KeptUp() float64 {
	if r.Published == 0 || r.Subs == 0 {
		return 0
	}
	return float64(r.Delivered) / float64(r.Published*int64(r.Subs))
}

// Report reports r on b.
func (r Result) Report(b *testing.B) {
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(r.DeliveredPerSec(), "delivered/s")
	b.ReportMetric(r.PerCPU(), "deliveries/cpu-s")
	b.ReportMetric(r.CPU.Seconds()/r.Elapsed.Seconds(), "cpu-s/s")
	b.ReportMetric(r.Others.Seconds()/r.Elapsed.Seconds(), "others-cpu-s/s")
	b.ReportMetric(float64(r.P50.Microseconds())/1e3, "p50-ms")
	b.ReportMetric(float64(r.P99.Microseconds())/1e3, "p99-ms")
	b.ReportMetric(float64(r.Max.Microseconds())/1e3, "max-ms")
	if r.PublishP50 > 0 {
		b.ReportMetric(float64(r.PublishP50.Microseconds())/1e3, "publish-p50-ms")
		b.ReportMetric(float64(r.PublishP99.Microseconds())/1e3, "publish-p99-ms")
	}
	b.ReportMetric(r.KeptUp(), "kept-up")
	b.ReportMetric(r.BytesPerFrame, "B/frame")
	b.ReportMetric(float64(r.Gaps), "gaps")
	b.ReportMetric(float64(r.Dropped), "dropped")
}

func (r Result) String() string {
	publish := ""
	if r.PublishP50 > 0 {
		publish = fmt.Sprintf("; to publish p50 %v p99 %v", r.PublishP50.Round(10*time.Microsecond), r.PublishP99.Round(10*time.Microsecond))
	}
	return fmt.Sprintf("%d subs, published %d in %.1fs, delivered %.0f/s (kept up %.3f), cpu %.2f s/s (others %.2f), %.0f deliveries/cpu-s, p50 %v p99 %v max %v (%d samples%s), %.0f B/frame, gaps %d, dropped %d, attach %v",
		r.Subs, r.Published, r.Elapsed.Seconds(), r.DeliveredPerSec(), r.KeptUp(), r.CPU.Seconds()/r.Elapsed.Seconds(), r.Others.Seconds()/r.Elapsed.Seconds(), r.PerCPU(),
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond), r.Samples, publish,
		r.BytesPerFrame, r.Gaps, r.Dropped, r.Attach.Round(time.Millisecond))
}

// hist is a log-linear latency histogram in microseconds: 16 buckets per
// power of two (about 6% resolution).
type hist struct {
	b [64 * 16]uint32
	n int64
}

func bucket(us uint64) int {
	if us < 16 {
		return int(us)
	}
	e := bits.Len64(us) - 5 // us>>e is in [16, 32)
	return (e+1)*16 + int(us>>e) - 16
}

// lower returns the smallest value in bucket i.
func lower(i int) uint64 {
	if i < 16 {
		return uint64(i)
	}
	e := i/16 - 1
	return uint64(16+i%16) << e
}

func (h *hist) add(ns int64) {
	if ns < 0 {
		ns = 0
	}
	i := bucket(uint64(ns / 1e3))
	if i >= len(h.b) {
		i = len(h.b) - 1
	}
	h.b[i]++
	h.n++
}

func (h *hist) merge(o *hist) {
	for i, c := range o.b {
		h.b[i] += c
	}
	h.n += o.n
}

// quantile returns the upper edge of the bucket holding quantile q.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n-1)) + 1
	var seen int64
	for i, c := range h.b {
		seen += int64(c)
		if seen >= rank {
			return time.Duration(lower(i+1)) * time.Microsecond
		}
	}
	return 0
}

// InUse returns the heap and stack memory in use after a full collection.
func InUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// Idle attaches n subscribers that then sit idle and returns the growth of
// heap and stack in use per subscriber, both sides of each connection
// included. The connections are closed before it returns.
func Idle(b *testing.B, n int, dial func(ctx context.Context, i int) (Conn, error)) float64 {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := newMeter(Config{Rate: 1})
	before := InUse()
	conns := dialAll(b, ctx, n, dial)
	var wg sync.WaitGroup
	for _, c := range conns {
		rx := m.receiver()
		wg.Add(1)
		go func() { defer wg.Done(); c.Run(rx) }()
	}
	time.Sleep(time.Second) // let every reader block
	after := InUse()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	return (float64(after) - float64(before)) / float64(n)
}

// ReportIdle measures the memory of n idle subscribers twice: against park,
// a server that accepts and then holds connections with no goroutine or
// buffer of its own (the clients' share), then against sys. It reports the
// total and the server's share per subscriber.
func ReportIdle(b *testing.B, n int, park, sys func(ctx context.Context, i int) (Conn, error)) {
	b.Helper()
	client := Idle(b, n, park)
	total := Idle(b, n, sys)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(total, "B/sub")
	b.ReportMetric(client, "client-B/sub")
	b.ReportMetric(total-client, "server-B/sub")
	b.Logf("%s: %d idle subscribers: %.0f B each in all, clients %.0f B, server %.0f B (%.1f KiB)", b.Name(), n, total, client, total-client, (total-client)/1024)
}
