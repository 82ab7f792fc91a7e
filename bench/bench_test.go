package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/metrics"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// feed is a provider whose deltas come from a channel: the benchmark decides
// when each token "arrives from the model". A nil-text delta ends the step.
type feed struct {
	deltas chan string
}

func (f *feed) Name() string  { return "bench" }
func (f *feed) Model() string { return "feed" }
func (f *feed) Stream(ctx context.Context, _ agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	for {
		select {
		case <-ctx.Done():
			return agent.Usage{}, ctx.Err()
		case d, ok := <-f.deltas:
			if !ok || d == "" {
				return agent.Usage{}, nil
			}
			if err := emit(agent.Delta{Kind: agent.DeltaText, Text: d}); err != nil {
				return agent.Usage{}, err
			}
		}
	}
}

type rig struct {
	store *sqlite.Log
	k     *kernel.Kernel
	srv   *server.Server
	http  *httptest.Server
}

func newRig(b *testing.B, p agent.Provider, opts ...func(*kernel.Config)) *rig {
	b.Helper()
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "orrery.db"))
	if err != nil {
		b.Fatal(err)
	}
	kc := kernel.Config{
		Store:        st,
		Models:       func(string) (agent.Provider, error) { return p, nil },
		DefaultModel: "bench",
		Tools:        tool.Builtins(),
		QueueFrames:  1 << 20,
		Logger:       quiet,
	}
	for _, o := range opts {
		o(&kc)
	}
	k := kernel.New(kc)
	if err := k.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	srv := server.New(server.Config{Kernel: k, Logger: quiet})
	r := &rig{store: st, k: k, srv: srv, http: httptest.NewServer(srv)}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Close(ctx)
		r.http.Close()
		k.Close(ctx)
		st.Close()
	})
	return r
}

// sseReader reads SSE events and returns each data line's seq.
type sseReader struct {
	br *bufio.Reader
}

func openEvents(b *testing.B, base, session, since string) (*sseReader, func()) {
	b.Helper()
	url := base + "/events?session=" + session
	if since != "" {
		url += "&since=" + since
	}
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		b.Fatalf("GET /events: %d %s", resp.StatusCode, body)
	}
	return &sseReader{br: bufio.NewReaderSize(resp.Body, 256<<10)}, func() { resp.Body.Close() }
}

// next returns the next event's id (0 when it has none).
func (r *sseReader) next() (uint64, error) {
	var id uint64
	for {
		line, err := r.br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			id, _ = strconv.ParseUint(string(bytes.TrimSpace(line[4:])), 10, 64)
		case len(line) == 1: // blank line ends an event
			return id, nil
		}
	}
}

// BenchmarkAppend measures the kernel's write path: a model streaming text
// as fast as it can, each delta sequenced, encoded, group-committed to
// SQLite and published. One op is one frame.
func BenchmarkAppend(b *testing.B) {
	// With metrics (as orrery serve runs) and without, in one run: the
	// ratio of the two is the metrics' cost on the write path.
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("metrics=%v", on), func(b *testing.B) {
			var opts []func(*kernel.Config)
			if on {
				opts = append(opts, withMetrics)
			}
			benchAppend(b, opts...)
		})
	}
}

// withMetrics counts the kernel's work as orrery serve does: its Observer,
// and the store's commits.
func withMetrics(c *kernel.Config) {
	m := metrics.New()
	c.Observer = m
	if co, ok := c.Store.(store.CommitObserver); ok {
		co.OnCommit(m.Committed)
	}
}

func benchAppend(b *testing.B, opts ...func(*kernel.Config)) {
	f := &feed{deltas: make(chan string, 1024)}
	r := newRig(b, f, opts...)
	ctx := context.Background()
	s, err := r.k.CreateSession(ctx, kernel.SessionOptions{ID: "append"})
	if err != nil {
		b.Fatal(err)
	}
	res, err := s.Send(ctx, kernel.SendInput{Text: "go", Subscribe: true})
	if err != nil {
		b.Fatal(err)
	}
	sub := res.Sub
	defer sub.Close()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() {
		for i := 0; i < b.N; i++ {
			f.deltas <- "tok "
		}
		f.deltas <- ""
	}()
	// Wait until the run's terminal frame is published (so durable).
	var frames []kernel.Frame
	for done := false; !done; {
		<-sub.Ready()
		frames = sub.Take(frames[:0])
		for _, fr := range frames {
			if protocol.EventType(fr.Type).Terminal() {
				done = true
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkAppendBaseline inserts the same number of rows straight into a
// SQLite table with the same pragmas, 1000 rows per transaction: the best a
// writer could do with this driver, for the ratio.
func BenchmarkAppendBaseline(b *testing.B) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "raw.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE frames (sid INTEGER, seq INTEGER, type TEXT, run TEXT, data BLOB, PRIMARY KEY (sid, seq)) WITHOUT ROWID`); err != nil {
		b.Fatal(err)
	}
	data := []byte(`{"type":"TEXT_MESSAGE_CONTENT","timestamp":1796008138744,"metadata":{"orrery":{"seq":12}},"messageId":"msg_yuksvctb2u4akie4","delta":"tok "}`)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; {
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		st, err := tx.Prepare(`INSERT INTO frames VALUES (?, ?, ?, ?, ?)`)
		if err != nil {
			b.Fatal(err)
		}
		for j := 0; j < 1000 && i < b.N; j, i = j+1, i+1 {
			if _, err := st.Exec(1, i+1, "TEXT_MESSAGE_CONTENT", "r", data); err != nil {
				b.Fatal(err)
			}
		}
		st.Close()
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// quiet drops logs, so benchmark output stays readable.
var quiet = slog.New(slog.DiscardHandler)

const replayFrames = 100_000

var replayOnce sync.Once
var replayDir string

// replayFixture writes a 100,000-frame session once per process.
func replayFixture(b *testing.B) string {
	replayOnce.Do(func() {
		dir, err := osMkdirTemp()
		if err != nil {
			b.Fatal(err)
		}
		st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if err := st.CreateSession(ctx, store.Session{ID: "replay"}); err != nil {
			b.Fatal(err)
		}
		batch := make([]store.Frame, 0, 1000)
		for seq := uint64(1); seq <= replayFrames; seq++ {
			data := fmt.Appendf(nil, `{"type":"TEXT_MESSAGE_CONTENT","timestamp":1796008138744,"metadata":{"orrery":{"seq":%d}},"messageId":"msg_yuksvctb2u4akie4","delta":"token "}`, seq)
			typ := "TEXT_MESSAGE_CONTENT"
			batch = append(batch, store.Frame{Seq: seq, Type: typ, Data: data})
			if len(batch) == cap(batch) {
				if err := st.Append(ctx, store.Batch{Session: "replay", Frames: batch}); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		st.Close()
		replayDir = dir
	})
	return replayDir
}

// BenchmarkReplay measures a client catching up: GET /events?since=0 of a
// 100,000-frame session, read from SQLite, framed as SSE, sent over
// loopback HTTP and parsed by the client. One op is one frame.
func BenchmarkReplay(b *testing.B) {
	dir := replayFixture(b)
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	k := kernel.New(kernel.Config{Store: st, Logger: quiet, Models: func(string) (agent.Provider, error) { return &feed{}, nil }, DefaultModel: "bench"})
	if err := k.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer k.Close(context.Background())
	srv := server.New(server.Config{Kernel: k, Logger: quiet})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close(context.Background())
	// Load the session once outside the timer.
	if _, err := k.Session(context.Background(), "replay"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	read := 0
	for read < b.N {
		r, closeBody := openEvents(b, hs.URL, "replay", "0")
		for n := 0; n < replayFrames && read < b.N; n++ {
			id, err := r.next()
			if err != nil {
				b.Fatal(err)
			}
			if id != uint64(n+1) {
				b.Fatalf("frame %d has id %d", n+1, id)
			}
			read++
		}
		closeBody()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "frames/s")
}

// BenchmarkReplayBaseline reads the same rows with a bare SELECT and writes
// them to io.Discard: the floor the replay path is compared with.
func BenchmarkReplayBaseline(b *testing.B) {
	dir := replayFixture(b)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "orrery.db")+"?_pragma=journal_mode(WAL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	read := 0
	for read < b.N {
		rows, err := db.Query(`SELECT data FROM frames ORDER BY sid, seq`)
		if err != nil {
			b.Fatal(err)
		}
		var data sql.RawBytes
		for rows.Next() && read < b.N {
			if err := rows.Scan(&data); err != nil {
				b.Fatal(err)
			}
			io.Discard.Write(data)
			read++
		}
		rows.Close()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "frames/s")
}

// BenchmarkTokenToWire measures the latency from a provider's delta to its
// SSE bytes reaching a client on loopback: sequencing, encoding, the SQLite
// commit, publishing, the SSE write and the client's read. One token is in
// flight at a time, so this is the latency of a session that is not
// saturated. It reports p50 and p99 in microseconds.
func BenchmarkTokenToWire(b *testing.B) {
	f := &feed{deltas: make(chan string)}
	r := newRig(b, f)
	ctx := context.Background()
	s, err := r.k.CreateSession(ctx, kernel.SessionOptions{ID: "latency"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Send(ctx, kernel.SendInput{Text: "go"}); err != nil {
		b.Fatal(err)
	}
	// Let the run reach its first model call, then attach after its head.
	time.Sleep(50 * time.Millisecond)
	events, closeBody := openEvents(b, r.http.URL, "latency", strconv.FormatUint(s.Head(), 10))
	defer closeBody()
	first := true
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		f.deltas <- "tok "
		// The first delta also opens the text message: two frames.
		frames := 1
		if first {
			frames, first = 2, false
		}
		for j := 0; j < frames; j++ {
			if _, err := events.next(); err != nil {
				b.Fatal(err)
			}
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	close(f.deltas)
	reportPercentiles(b, lat)
}

// BenchmarkTokenToWireBaseline is the same client reading the same frame
// from a bare handler that writes and flushes it when told to: the cost of
// loopback HTTP, a flush and a goroutine hand-off, for the ratio.
func BenchmarkTokenToWireBaseline(b *testing.B) {
	signal := make(chan struct{})
	frame := []byte("id: 12\ndata: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"timestamp\":1796008138744,\"metadata\":{\"orrery\":{\"seq\":12}},\"messageId\":\"msg_yuksvctb2u4akie4\",\"delta\":\"tok \"}\n\n")
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case _, ok := <-signal:
				if !ok {
					return
				}
				w.Write(frame)
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer hs.Close()
	resp, err := http.Get(hs.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	events := &sseReader{br: bufio.NewReader(resp.Body)}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		signal <- struct{}{}
		if _, err := events.next(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	close(signal)
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	at := func(p float64) float64 {
		i := int(p * float64(len(lat)-1))
		return float64(lat[i].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
