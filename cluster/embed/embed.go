// Package embed runs a NATS server with JetStream inside the orrery
// process, alone or as one member of a cluster of such servers, so that
// three `orrery node` processes make a cluster with nothing else
// installed.
package embed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Config is one embedded server.
type Config struct {
	// Dir keeps JetStream's files (Dir/jetstream). Required.
	Dir string
	// Name names the server in its cluster; it must differ from the
	// other members' and stay the same across restarts. Empty: the
	// host name and the client port.
	Name string
	// Listen is the client address, host:port; port 0 picks one, and ""
	// serves in-process connections only (a cluster member then listens
	// on a loopback port of its choosing).
	Listen string
	// Cluster names the cluster; empty runs a server of its own.
	Cluster string
	// ClusterListen is the address the other members route to.
	ClusterListen string
	// Routes are the other members' route URLs (nats://host:port).
	Routes []string
	// RouteSecret, when set, is the password every member's routes
	// present and take: a server without it cannot join.
	RouteSecret string
	// NoAdvertise keeps the server from telling its clients the other
	// members' client addresses, so a client reconnects only to the
	// servers it was given.
	NoAdvertise bool
	// MaxPayload is the largest message, 8 MiB when zero.
	MaxPayload int32
	// Logs, when set, gets the server's own log lines.
	Logs server.Logger
}

// routeUser is the user name routes present with the cluster's secret.
const routeUser = "orrery"

// Server is a running embedded server.
type Server struct {
	*server.Server
	inProcess bool
}

// Start starts the server and waits until it takes connections and, in a
// cluster, until JetStream has a meta leader. ctx bounds the wait.
func Start(ctx context.Context, c Config) (*Server, error) {
	if c.Dir == "" {
		return nil, errors.New("embedded NATS: no directory for its JetStream files: give --nats-embed DIR")
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	opts := &server.Options{
		ServerName: c.Name,
		JetStream:  true,
		StoreDir:   filepath.Join(c.Dir, "jetstream"),
		MaxPayload: c.MaxPayload,
		NoSigs:     true,
		NoLog:      c.Logs == nil,
	}
	if opts.MaxPayload == 0 {
		opts.MaxPayload = 8 << 20
	}
	listen := c.Listen
	if listen == "" && c.Cluster != "" {
		// nats-server does not finish starting a cluster member that
		// takes no client connections: such a member listens on a port
		// of the loopback interface that nobody is told of.
		listen = "127.0.0.1:0"
	}
	if listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := splitHostPort(listen)
		if err != nil {
			return nil, fmt.Errorf("embedded NATS: listen address %q: %w", listen, err)
		}
		opts.Host, opts.Port = host, port
		if port == 0 {
			opts.Port = server.RANDOM_PORT
		}
	}
	if c.Cluster != "" {
		if c.ClusterListen == "" {
			return nil, errors.New("embedded NATS: a cluster member needs a route address (--nats-cluster-listen host:port)")
		}
		host, port, err := splitHostPort(c.ClusterListen)
		if err != nil {
			return nil, fmt.Errorf("embedded NATS: cluster address %q: %w", c.ClusterListen, err)
		}
		opts.Cluster.Name, opts.Cluster.Host, opts.Cluster.Port = c.Cluster, host, port
		opts.Cluster.NoAdvertise = c.NoAdvertise
		opts.Routes = server.RoutesFromStr(strings.Join(c.Routes, ","))
		if c.RouteSecret != "" {
			opts.Cluster.Username, opts.Cluster.Password = routeUser, c.RouteSecret
			for _, u := range opts.Routes {
				u.User = url.UserPassword(routeUser, c.RouteSecret)
			}
		}
		if opts.ServerName == "" {
			h, _ := os.Hostname()
			opts.ServerName = h + "-" + strconv.Itoa(port)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	if c.Logs != nil {
		srv.SetLoggerV2(c.Logs, false, false, false)
	}
	srv.Start()
	s := &Server{Server: srv, inProcess: opts.DontListen}
	if err := s.wait(ctx, c.Cluster != ""); err != nil {
		srv.Shutdown()
		return nil, err
	}
	return s, nil
}

func (s *Server) wait(ctx context.Context, clustered bool) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	if !s.ReadyForConnections(time.Until(deadline)) {
		return errors.New("embedded NATS: the server did not start taking connections")
	}
	if !clustered {
		return nil
	}
	// A cluster has JetStream once its members have elected a meta
	// leader, which needs a majority of them up.
	for !s.JetStreamIsCurrent() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded NATS: JetStream has no meta leader (is a majority of the cluster's servers up and routed?): %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("embedded NATS: JetStream has no meta leader: is a majority of the cluster's servers up and routed?")
		}
	}
	return nil
}

// Connect returns a client connection to the server: in-process when it
// does not listen.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	if s.inProcess {
		return nats.Connect("", append(opts, nats.InProcessServer(s.Server))...)
	}
	return nats.Connect(s.ClientURL(), opts...)
}

// RouteURL is the URL the other cluster members route to.
func (s *Server) RouteURL() string {
	a := s.ClusterAddr()
	if a == nil {
		return ""
	}
	return "nats://" + net.JoinHostPort(a.IP.String(), strconv.Itoa(a.Port))
}

// Stop shuts the server down and waits until it has.
func (s *Server) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 0 to 65535", p)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}
