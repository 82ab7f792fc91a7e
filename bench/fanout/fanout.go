// Package fanout is the load harness of the fan-out benchmarks: one
// publisher paced at a fixed rate, N subscribers reading it over loopback
// SSE or WebSocket, and the meters (delivered frames, publish-to-receive
// latency, server CPU, memory per idle subscriber).
//
// The same harness drives Orrery (bench/fanout_test.go), a bare stdlib
// server that is the physical ceiling (ceiling.go), and centrifuge
// (bench/centrifuge, its own module), so the receivers and the meters are
// identical and only the server differs. The subscribers run in a separate
// process, the subscriber program (bench/fanout/subscribers), so the CPU
// figures are the server process's own; the clients' CPU is reported
// apart. Each frame carries its publish time on the machine's wall clock,
// which both processes read, and the latency is the receive time less it.
// ORRERY_BENCH_INPROCESS=1 runs the subscribers in the server's process
// instead, as earlier figures were measured.
package fanout

import (
	"context"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"

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
	// TraceFile, when set (ORRERY_BENCH_TRACE), receives a runtime
	// execution trace of the window's first second (go tool trace).
	TraceFile string
	// InProcess (ORRERY_BENCH_INPROCESS=1) runs the subscribers in this
	// process rather than in the subscriber program: the CPU figures then
	// include the clients.
	InProcess bool
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
	c.TraceFile = os.Getenv("ORRERY_BENCH_TRACE")
	c.InProcess = os.Getenv("ORRERY_BENCH_INPROCESS") == "1"
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
	// Subscribers says how a subscriber attaches. Attaching returns once
	// the subscription is registered, so that every frame published
	// afterwards reaches it.
	Subscribers Subscribers
	// Publish publishes frame i (1, 2, ...), carrying a stamp (see Stamp)
	// taken just before handing it over.
	Publish func(i uint64)
	// Probe, if set, runs for the whole run and reports into rx each frame
	// as the server hands it to its subscribers (before any network), until
	// stop is closed; its latencies are reported apart, as publish-p50-ms
	// and publish-p99-ms.
	Probe func(rx *Receiver, stop <-chan struct{})
}

// Run measures sys: it attaches cfg.Subs subscribers (in the subscriber
// program, or in this process when cfg.InProcess), publishes cfg.Rate
// frames per second, and after cfg.Warmup measures cfg.Duration. It reports
// the figures with b.ReportMetric; b.N is ignored (run with -benchtime=1x).
func Run(b *testing.B, cfg Config, sys System) Result {
	b.Helper()
	waitQuiet(b, cfg.Quiet)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The subscribers' side: a crowd in this process, or the program.
	var (
		local *crowd
		rem   *remote
		err   error
	)
	if cfg.InProcess {
		local, err = attach(ctx, cfg.Subs, sys.Subscribers.Dialer())
	} else {
		rem, err = startRemote(cfg.Subs, sys.Subscribers)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if rem != nil && rem.cmd.ProcessState == nil {
			rem.kill()
		}
	}()
	var probe tally
	probeRx := probe.receiver()
	stopProbe := make(chan struct{})
	probeDone := make(chan struct{})
	if sys.Probe != nil {
		go func() { defer close(probeDone); sys.Probe(probeRx, stopProbe) }()
	} else {
		close(probeDone)
	}

	var published atomic.Int64
	pctx, stopPacer := context.WithCancel(ctx)
	paced := make(chan uint64, 1)
	go func() {
		paced <- Pace(pctx, cfg.Rate, func(i uint64) {
			sys.Publish(i)
			published.Add(1)
		})
	}()
	time.Sleep(cfg.Warmup)
	stopProfile := profile(b, cfg.ProfileDir)
	traceWindow(b, cfg.TraceFile)

	pub0, cpu0, machine0 := published.Load(), processCPU(), machineCPU()
	start := time.Now()
	probe.begin()
	if local != nil {
		local.t.begin()
	} else if err := rem.send("begin"); err != nil {
		b.Fatal(err)
	}
	time.Sleep(cfg.Duration)
	if local != nil {
		local.t.end()
	} else if err := rem.send("end"); err != nil {
		b.Fatal(err)
	}
	probe.end()
	elapsed := time.Since(start)
	cpu, machine, pub := processCPU()-cpu0, machineCPU()-machine0, published.Load()-pub0

	stopProfile()
	dumpGoroutines(b, cfg.ProfileDir) // still under load, outside the window
	stopPacer()
	<-paced
	close(stopProbe)
	<-probeDone

	var sum Summary
	if local != nil {
		sum, err = local.close()
	} else {
		sum, err = rem.stop()
	}
	if err != nil {
		b.Fatal(err)
	}
	if sum.Err != "" {
		b.Logf("subscriber ended early: %s", sum.Err)
	}
	h := sum.histogram()
	res := Result{
		Subs:      sum.Subs,
		InProcess: cfg.InProcess,
		Published: pub,
		Delivered: sum.Frames,
		Elapsed:   elapsed,
		CPU:       cpu,
		P50:       h.quantile(0.50),
		P99:       h.quantile(0.99),
		Max:       h.quantile(1),
		Samples:   h.n,
		Gaps:      sum.Gaps,
		Dropped:   sum.Dropped,
		Attach:    sum.Attach,
	}
	if !cfg.InProcess {
		res.ClientCPU = sum.CPU
	}
	res.Others = max(machine-res.CPU-res.ClientCPU, 0)
	if probeRx.hist.n > 0 {
		res.PublishP50 = probeRx.hist.quantile(0.50)
		res.PublishP99 = probeRx.hist.quantile(0.99)
	}
	if sum.Frames > 0 {
		res.BytesPerFrame = float64(sum.Bytes) / float64(sum.Frames)
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

// profile starts a CPU profile of the window when dir is set.
func profile(b *testing.B, dir string) func() {
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

// traceWindow writes an execution trace of the next second to path when
// it is set.
func traceWindow(b *testing.B, path string) {
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		b.Logf("no window trace: %v", err)
		return
	}
	time.AfterFunc(time.Second, func() {
		trace.Stop()
		f.Close()
	})
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

// Result is one run's figures over the measured window.
type Result struct {
	Subs      int
	InProcess bool  // the subscribers ran in the server's process
	Published int64 // frames published in the window
	Delivered int64 // frames received, all subscribers together
	Elapsed   time.Duration
	// CPU is the user+system CPU of the server's process (the subscribers'
	// too when InProcess); ClientCPU is the subscriber program's.
	CPU, ClientCPU time.Duration
	Others         time.Duration // CPU the machine's other processes used meanwhile
	P50, P99, Max  time.Duration // publish-to-receive latency
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

// PerCPU is frames received per CPU-second of the server's process.
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
	if !r.InProcess {
		b.ReportMetric(r.ClientCPU.Seconds()/r.Elapsed.Seconds(), "client-cpu-s/s")
	}
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
	where := "clients %.2f s/s"
	if r.InProcess {
		where = "clients in process%.0s"
	}
	return fmt.Sprintf("%d subs, published %d in %.1fs, delivered %.0f/s (kept up %.3f), server cpu %.2f s/s ("+where+", others %.2f), %.0f deliveries/cpu-s, p50 %v p99 %v max %v (%d samples%s), %.0f B/frame, gaps %d, dropped %d, attach %v",
		r.Subs, r.Published, r.Elapsed.Seconds(), r.DeliveredPerSec(), r.KeptUp(), r.CPU.Seconds()/r.Elapsed.Seconds(), r.ClientCPU.Seconds()/r.Elapsed.Seconds(), r.Others.Seconds()/r.Elapsed.Seconds(), r.PerCPU(),
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

// Idle attaches n subscribers in this process that then sit idle and
// returns the growth of heap and stack in use per subscriber, both sides of
// each connection included. The connections are closed before it returns.
func Idle(b *testing.B, n int, dial func(ctx context.Context, i int) (Conn, error)) float64 {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := InUse()
	c, err := attach(ctx, n, dial)
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second) // let every reader block
	after := InUse()
	if _, err := c.close(); err != nil {
		b.Fatal(err)
	}
	return (float64(after) - float64(before)) / float64(n)
}

// ReportIdle measures the server's memory per idle subscriber. By default
// the n subscribers run in the subscriber program, and the growth of this
// process is the server's share. With cfg.InProcess they run here, twice:
// against park, a server that accepts and then holds connections with no
// goroutine or buffer of its own (the clients' share), then against the
// system; the server's share is the difference.
func ReportIdle(b *testing.B, cfg Config, park func(ctx context.Context, i int) (Conn, error), sys Subscribers) {
	b.Helper()
	b.ReportMetric(0, "ns/op")
	if !cfg.InProcess {
		server, err := IdleRemote(cfg.Subs, sys)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(server, "server-B/sub")
		b.Logf("%s: %d idle subscribers in another process: server %.0f B (%.1f KiB) each", b.Name(), cfg.Subs, server, server/1024)
		return
	}
	n := cfg.Subs
	client := Idle(b, n, park)
	total := Idle(b, n, sys.Dialer())
	b.ReportMetric(total, "B/sub")
	b.ReportMetric(client, "client-B/sub")
	b.ReportMetric(total-client, "server-B/sub")
	b.Logf("%s: %d idle subscribers: %.0f B each in all, clients %.0f B, server %.0f B (%.1f KiB)", b.Name(), n, total, client, total-client, (total-client)/1024)
}
