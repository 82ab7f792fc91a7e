package centrifuge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/centrifugal/centrifuge"

	"github.com/getorrery/orrery/bench/fanout"
)

// The peer fan-out benchmarks, run by hand from this directory:
//
//	go test -run='^$' -bench=Fanout -benchtime=1x -timeout=30m .
//
// with the same ORRERY_BENCH_* variables as ../fanout_test.go. The ceiling
// runs again here, in this binary, so each figure has its baseline from the
// same run.

const channel = "fanout"

// BenchmarkFanout streams one channel at cfg.Rate publications/s to
// cfg.Subs subscribers over centrifuge's SSE (emulation) and WebSocket
// transports, beside the stdlib ceiling. Each publication's data is a frame
// shaped like Orrery's streamed text delta. Latency runs from just before
// Node.Publish (the stamp in the frame) to a subscriber reading the bytes.
func BenchmarkFanout(b *testing.B) {
	cfg := fanout.ConfigFromEnv()
	b.Run("centrifuge-sse", func(b *testing.B) { fanout.Run(b, cfg, centrifugeFanout(b, "sse")) })
	b.Run("centrifuge-ws", func(b *testing.B) { fanout.Run(b, cfg, centrifugeFanout(b, "ws")) })
	b.Run("ceiling-sse", func(b *testing.B) { fanout.Run(b, cfg, fanout.NewCeilingSSE(b).System()) })
	b.Run("ceiling-ws", func(b *testing.B) { fanout.Run(b, cfg, fanout.NewCeilingWS(b).System()) })
}

// BenchmarkFanoutIdle reports heap+stack in use per idle subscriber, in all
// and the server's share (see ../fanout_test.go).
func BenchmarkFanoutIdle(b *testing.B) {
	cfg := fanout.ConfigFromEnv()
	client := fanout.NewHTTPClient()
	b.Run("centrifuge-sse", func(b *testing.B) {
		srv := newNode(b)
		park := fanout.NewPark(b, false)
		fanout.ReportIdle(b, cfg, park.DialSSE(client), srv.sseSubscribers())
	})
	b.Run("centrifuge-ws", func(b *testing.B) {
		srv := newNode(b)
		park := fanout.NewPark(b, true)
		fanout.ReportIdle(b, cfg, park.DialWS(connectCommand), srv.wsSubscribers())
	})
}

// server is a centrifuge node with the memory broker, serving SSE at
// /connection/sse and WebSocket at /connection/websocket. Every connection
// is subscribed on the server side to the channel, with recovery on.
type server struct {
	node *centrifuge.Node
	http *httptest.Server
}

func newNode(b *testing.B) *server {
	b.Helper()
	node, err := centrifuge.New(centrifuge.Config{LogLevel: centrifuge.LogLevelError})
	if err != nil {
		b.Fatal(err)
	}
	node.OnConnecting(func(ctx context.Context, e centrifuge.ConnectEvent) (centrifuge.ConnectReply, error) {
		return centrifuge.ConnectReply{
			Credentials:   &centrifuge.Credentials{UserID: "bench"},
			Subscriptions: map[string]centrifuge.SubscribeOptions{channel: {EnableRecovery: true}},
		}, nil
	})
	node.OnConnect(func(*centrifuge.Client) {})
	if err := node.Run(); err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	// The SSE client cannot answer pings (that takes a second request over
	// the emulation endpoint), so pongs are not awaited there; pings are
	// still sent, every 25s.
	mux.Handle("/connection/sse", centrifuge.NewSSEHandler(node, centrifuge.SSEConfig{
		PingPongConfig: centrifuge.PingPongConfig{PongTimeout: -1},
	}))
	mux.Handle("/connection/websocket", centrifuge.NewWebsocketHandler(node, centrifuge.WebsocketConfig{}))
	s := &server{node: node, http: httptest.NewServer(mux)}
	b.Cleanup(func() {
		s.http.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		node.Shutdown(ctx)
	})
	return s
}

// connectCommand is the client's connect in centrifuge's JSON protocol;
// the reply carries the server-side subscriptions.
var connectCommand = []byte(`{"id":1,"connect":{"name":"bench"}}`)

// The reply to connectCommand starts {"id":1, and holds "connect" (an
// error reply holds "error" instead); it carries the server-side
// subscriptions, so the subscriber is subscribed once it is in.
const (
	connectReply   = `{"id":1,`
	connectReplyOK = `"connect":`
)

func (s *server) sseSubscribers() fanout.Subscribers {
	return fanout.Subscribers{Transport: "sse", URL: s.http.URL + "/connection/sse?cf_connect=" + url.QueryEscape(string(connectCommand)),
		Ready: connectReply, ReadyOK: connectReplyOK}
}

func (s *server) wsSubscribers() fanout.Subscribers {
	return fanout.Subscribers{Transport: "ws", URL: "ws" + strings.TrimPrefix(s.http.URL, "http") + "/connection/websocket",
		Hello: connectCommand, Ready: connectReply, ReadyOK: connectReplyOK, Pong: []byte("{}"), Subprotocols: []string{"centrifuge-json"}}
}

// centrifugeFanout starts a node and returns it as a system under test.
// History is on: each publication is kept (1000 of them, 5 minutes) for
// recovery, as a resumable stream needs.
func centrifugeFanout(b *testing.B, transport string) fanout.System {
	s := newNode(b)
	var warned atomic.Bool
	sys := fanout.System{
		Publish: func(i uint64) {
			res, err := s.node.Publish(channel, fanout.Frame(i, ""), centrifuge.WithHistory(1000, 5*time.Minute))
			if (err != nil || res.Offset != i) && !warned.Swap(true) {
				b.Errorf("Publish %d: offset %d, %v: latencies are mismatched", i, res.Offset, err)
			}
		},
	}
	if transport == "ws" {
		sys.Subscribers = s.wsSubscribers()
	} else {
		sys.Subscribers = s.sseSubscribers()
	}
	return sys
}
