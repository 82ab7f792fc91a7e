// Package natstest starts real NATS servers with JetStream for tests: one
// alone, or several routed into a cluster, each shut down when its test
// ends.
package natstest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/getorrery/orrery/cluster/embed"
	"github.com/nats-io/nats.go"
)

// Server starts one JetStream server listening on a free loopback port.
func Server(t testing.TB) *embed.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := embed.Start(ctx, embed.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Cluster starts n JetStream servers routed into one cluster and waits
// until JetStream has a meta leader.
func Cluster(t testing.TB, n int) []*embed.Server {
	t.Helper()
	ports := FreePorts(t, n)
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srvs := make([]*embed.Server, n)
	errs := make(chan error, n)
	for i := range n {
		cfg := ClusterMember(t.TempDir(), i, ports[i], routes)
		go func() {
			s, err := embed.Start(ctx, cfg)
			srvs[i] = s
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	for _, s := range srvs {
		if s != nil {
			t.Cleanup(s.Stop)
		}
	}
	if first != nil {
		t.Fatal(first)
	}
	return srvs
}

// ClusterMember is the config of member i of a test cluster whose members
// route to routes.
func ClusterMember(dir string, i, routePort int, routes []string) embed.Config {
	return embed.Config{
		Dir: dir, Name: fmt.Sprintf("n%d", i+1), Listen: "127.0.0.1:0",
		Cluster: "test", ClusterListen: "127.0.0.1:" + strconv.Itoa(routePort), Routes: routes,
		// A client given one server's URL stays with it, so a test can
		// cut a client off by stopping that server.
		NoAdvertise: true,
	}
}

// FreePorts returns n loopback ports free a moment ago.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	ls := make([]net.Listener, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// URLs joins the servers' client URLs, as nats.Connect takes them.
func URLs(srvs ...*embed.Server) string {
	var s string
	for i, srv := range srvs {
		if i > 0 {
			s += ","
		}
		s += srv.ClientURL()
	}
	return s
}

// Connect connects to the servers, closed when t ends.
func Connect(t testing.TB, srvs ...*embed.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(URLs(srvs...), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
