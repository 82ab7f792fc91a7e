package embed_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/cluster/embed"
	"github.com/getorrery/orrery/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
)

// Members that share the route secret make a cluster; a fourth server
// that routes to them with another secret is refused, so it never joins:
// it finds no JetStream meta leader, and no member has a route to it.
func TestRouteSecret(t *testing.T) {
	t.Parallel()
	ports := natstest.FreePorts(t, 4)
	routes := make([]string, 4)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	member := func(i int, secret string) embed.Config {
		return embed.Config{Dir: t.TempDir(), Name: fmt.Sprintf("m%d", i), Cluster: "c",
			ClusterListen: fmt.Sprintf("127.0.0.1:%d", ports[i]), Routes: routes[:3], RouteSecret: secret}
	}
	const secret = "s3cret/with+chars=and-more-than-16"
	var wg sync.WaitGroup
	srvs := make([]*embed.Server, 3)
	errs := make([]error, 3)
	for i := range srvs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			srvs[i], errs[i] = embed.Start(ctx, member(i, secret))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d with the secret: %v", i, err)
		}
		t.Cleanup(srvs[i].Stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	intruder := member(3, "another-secret-of-16-chars")
	intruder.Routes = routes
	if s, err := embed.Start(ctx, intruder); err == nil {
		s.Stop()
		t.Fatal("a server with another secret joined the cluster")
	}
	for i, s := range srvs {
		rz, err := s.Routez(&server.RoutezOptions{})
		if err != nil {
			t.Fatal(err)
		}
		others := map[string]bool{}
		for _, r := range rz.Routes {
			others[r.RemoteName] = true
		}
		if others["m3"] {
			t.Errorf("member %d has a route to m3, which has another secret", i)
		}
		if len(others) != 2 {
			t.Errorf("member %d has routes to %v, want the other two members", i, others)
		}
	}
}
