package bench_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getorrery/orrery/bench/fanout"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

// The fan-out benchmarks are run by hand; each takes Warmup+Duration plus
// the time to attach every subscriber, whatever b.N is:
//
//	go test -run='^$' -bench=Fanout -benchtime=1x -timeout=30m ./bench/
//
// ORRERY_BENCH_SUBS (default 1000), ORRERY_BENCH_RATE (frames/s, default
// 1000), ORRERY_BENCH_SECONDS (window, default 10), ORRERY_BENCH_QUIET
// (seconds to wait for the machine's other processes to go idle) and
// ORRERY_BENCH_PROFILE (a directory for a CPU profile of each window) and
// ORRERY_BENCH_TRACE (a file for an execution trace of a window's first
// second) change the scenario. The subscribers run in the subscriber program
// (bench/fanout/subscribers, built on first use), a process of their own,
// so CPU figures are the server's; ORRERY_BENCH_INPROCESS=1 runs them in
// this process instead. See docs/PERFORMANCE.md.

// BenchmarkFanout streams one session's text deltas at cfg.Rate frames/s to
// cfg.Subs subscribers over SSE (GET /events?since=<head>) and WebSocket
// (GET /ws, session.attach with since: one object a message, and with a
// hello that asks for batches), beside the stdlib ceiling in the same run. Latency runs from the stamp in the delta's text, taken as the
// delta is handed to the provider (before the kernel sequences, encodes,
// commits and publishes it), to a subscriber reading its bytes.
func BenchmarkFanout(b *testing.B) {
	cfg := fanout.ConfigFromEnv()
	b.Run("orrery-sse", func(b *testing.B) { fanout.Run(b, cfg, orreryFanout(b, "sse")) })
	b.Run("orrery-ws", func(b *testing.B) { fanout.Run(b, cfg, orreryFanout(b, "ws")) })
	b.Run("orrery-ws-batch", func(b *testing.B) { fanout.Run(b, cfg, orreryFanout(b, "ws-batch")) })
	b.Run("ceiling-sse", func(b *testing.B) { fanout.Run(b, cfg, fanout.NewCeilingSSE(b).System()) })
	b.Run("ceiling-ws", func(b *testing.B) { fanout.Run(b, cfg, fanout.NewCeilingWS(b).System()) })
}

// BenchmarkFanoutMetrics is BenchmarkFanout's SSE leg without metrics and
// with them (the kernel's Observer and the store's commit observer, as
// orrery serve runs), in one run: the ratio is what metrics cost the
// fan-out. The WebSocket leg's write path is the same.
func BenchmarkFanoutMetrics(b *testing.B) {
	cfg := fanout.ConfigFromEnv()
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("metrics=%v", on), func(b *testing.B) {
			var opts []func(*kernel.Config)
			if on {
				opts = append(opts, withMetrics)
			}
			fanout.Run(b, cfg, orreryFanout(b, "sse", opts...))
		})
	}
}

// BenchmarkFanoutIdle attaches cfg.Subs subscribers to an idle session and
// reports heap+stack in use per subscriber: in all, the clients' share
// (the same clients against a server that only holds the connections), and
// the server's share, the difference.
func BenchmarkFanoutIdle(b *testing.B) {
	cfg := fanout.ConfigFromEnv()
	client := fanout.NewHTTPClient()
	b.Run("orrery-sse", func(b *testing.B) {
		r := newRig(b, &feed{})
		if _, err := r.k.CreateSession(context.Background(), kernel.SessionOptions{ID: "idle"}); err != nil {
			b.Fatal(err)
		}
		park := fanout.NewPark(b, false)
		fanout.ReportIdle(b, cfg, park.DialSSE(client), fanout.Subscribers{Transport: "sse", URL: r.http.URL + "/events?session=idle&since=0"})
	})
	b.Run("orrery-ws", func(b *testing.B) {
		r := newRig(b, &feed{})
		if _, err := r.k.CreateSession(context.Background(), kernel.SessionOptions{ID: "idle"}); err != nil {
			b.Fatal(err)
		}
		park := fanout.NewPark(b, true)
		hello := attachRequest("idle", 0)
		fanout.ReportIdle(b, cfg, park.DialWS(hello), wsSubscribers(r.http.URL, hello))
	})
	b.Run("ceiling-sse", func(b *testing.B) {
		c := fanout.NewCeilingSSE(b)
		park := fanout.NewPark(b, false)
		fanout.ReportIdle(b, cfg, park.DialSSE(client), c.System().Subscribers)
	})
	b.Run("ceiling-ws", func(b *testing.B) {
		c := fanout.NewCeilingWS(b)
		park := fanout.NewPark(b, true)
		fanout.ReportIdle(b, cfg, park.DialWS(nil), c.System().Subscribers)
	})
}

// orreryFanout starts a kernel whose one session "fanout" has a run in
// flight, streaming a text message whose deltas the benchmark paces.
func orreryFanout(b *testing.B, transport string, opts ...func(*kernel.Config)) fanout.System {
	f := &feed{deltas: make(chan string, 4096)}
	r := newRig(b, f, opts...)
	ctx := context.Background()
	s, err := r.k.CreateSession(ctx, kernel.SessionOptions{ID: "fanout"})
	if err != nil {
		b.Fatal(err)
	}
	res, err := s.Send(ctx, kernel.SendInput{Text: "go", Subscribe: true})
	if err != nil {
		b.Fatal(err)
	}
	// The first delta also opens the message. Its seq is the base: delta i
	// after it gets base+i, since nothing else is logged during the run.
	f.deltas <- "tok "
	base := waitForDelta(b, res.Sub)
	res.Sub.Close()
	var sent atomic.Uint64
	b.Cleanup(func() {
		// Check the mapping held: the run logged nothing but the deltas.
		want := base + sent.Load()
		for deadline := time.Now().Add(5 * time.Second); s.Head() < want && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if head := s.Head(); head != want {
			b.Errorf("head = %d, want %d (base %d + %d deltas): latencies are mismatched", head, want, base, sent.Load())
		}
	})
	publish := func(uint64) {
		f.deltas <- fanout.Stamp()
		sent.Add(1)
	}
	// The probe is one more subscriber, in process: it sees each frame when
	// the hub publishes it, after the commit and before any network.
	probe := func(rx *fanout.Receiver, stop <-chan struct{}) {
		sub, err := s.Subscribe(ctx, &base)
		if err != nil {
			b.Error(err)
			return
		}
		defer sub.Close()
		var frames []kernel.Frame
		for {
			select {
			case <-sub.Ready():
			case <-stop:
				return
			}
			now := rx.Now()
			frames = sub.Take(frames[:0])
			for _, f := range frames {
				rx.Frame(f.Seq, fanout.FindStamp(f.Data), now)
			}
		}
	}
	sys := fanout.System{Publish: publish, Probe: probe}
	switch transport {
	case "ws":
		// One object a message, as a client that sends no hello gets.
		sys.Subscribers = wsSubscribers(r.http.URL, attachRequest("fanout", base))
	case "ws-batch":
		// A hello that asks for batches, as the Go client sends.
		hello := append([]byte(`{"t":"hello","id":"h","batch":true}`+"\n"), attachRequest("fanout", base)...)
		sys.Subscribers = wsSubscribers(r.http.URL, hello)
	default:
		// The handler subscribes before it answers: the headers mean the
		// subscription is live.
		sys.Subscribers = fanout.Subscribers{Transport: "sse", URL: r.http.URL + "/events?session=fanout&since=" + strconv.FormatUint(base, 10)}
	}
	return sys
}

// waitForDelta returns the seq of the first TEXT_MESSAGE_CONTENT sub gets.
func waitForDelta(b *testing.B, sub *kernel.Subscription) uint64 {
	b.Helper()
	timeout := time.After(10 * time.Second)
	var frames []kernel.Frame
	for {
		select {
		case <-sub.Ready():
		case <-timeout:
			b.Fatal("no TEXT_MESSAGE_CONTENT within 10s of the first delta")
		}
		frames = sub.Take(frames[:0])
		for _, f := range frames {
			if f.Type == string(protocol.TypeTextMessageContent) {
				return f.Seq
			}
		}
	}
}

func wsURL(httpURL string) string { return "ws" + strings.TrimPrefix(httpURL, "http") + "/ws" }

func attachRequest(session string, since uint64) []byte {
	return fmt.Appendf(nil, `{"t":"session.attach","id":"a","session":%q,"since":%d}`, session, since)
}

// wsSubscribers attaches over GET /ws with hello (an attachRequest), ready
// once its reply is in.
func wsSubscribers(httpURL string, hello []byte) fanout.Subscribers {
	return fanout.Subscribers{Transport: "ws", URL: wsURL(httpURL), Hello: hello, Ready: `"reqId":"a"`, ReadyOK: `"ok":true`}
}
