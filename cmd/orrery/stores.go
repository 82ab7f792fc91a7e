package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/getorrery/orrery/cluster"
	"github.com/getorrery/orrery/cluster/embed"
	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/jetstream"
	"github.com/getorrery/orrery/store/sqlite"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// storeKinds is every store implementation [store] kind may name: the one
// table from a kind to its constructor. A kind registered twice panics as
// the program starts.
var storeKinds = func() *store.Kinds {
	k := &store.Kinds{}
	k.Register("sqlite", func(_ context.Context, c store.OpenConfig) (store.Log, error) {
		return sqlite.Open(filepath.Join(c.Dir, "orrery.db"))
	})
	k.Register("jetstream", openJetStream)
	return k
}()

// openStore opens the log [store] kind names in the data dir. An unknown
// kind is a usage error naming the known ones.
func openStore(ctx context.Context, cfg config.Config) (store.Log, error) {
	st, err := storeKinds.Open(ctx, cfg.Store.Kind, store.OpenConfig{Dir: cfg.Store.Data, Options: cfg.NATS})
	if errors.Is(err, store.ErrUnknownKind) {
		return nil, &usageError{msg: err.Error()}
	}
	if err != nil {
		return nil, storeOpenError(cfg, err)
	}
	return st, nil
}

// natsLog is the JetStream log, written only under the node's session
// leases, with the connection (and embedded server) it lives on, which it
// closes after itself.
type natsLog struct {
	*cluster.OwnedLog
	conn   *cluster.Conn
	member *cluster.Member
}

// kernelCluster is the kernel's view of the cluster st is shared in, or
// nil on a store of one node's own.
func kernelCluster(st store.Log) kernel.Cluster {
	if l, ok := st.(natsLog); ok {
		return l.member
	}
	return nil
}

// serverCluster is kernelCluster for the server: where it forwards the
// requests for sessions other nodes own.
func serverCluster(st store.Log) server.Forwarder {
	if l, ok := st.(natsLog); ok {
		return l.member
	}
	return nil
}

// serveForwarded answers the requests other nodes forward to this one,
// when st is shared; the returned func stops.
func serveForwarded(st store.Log, srv *server.Server) (func(), error) {
	l, ok := st.(natsLog)
	if !ok {
		return func() {}, nil
	}
	return l.member.Serve(srv.HandleForwarded)
}

func (l natsLog) Close() error {
	l.member.Stop()
	err := l.OwnedLog.Close()
	l.conn.Close()
	return err
}

// dialConfig is how the [nats] table reaches NATS.
func dialConfig(n config.NATSConfig) cluster.DialConfig {
	host, _ := os.Hostname()
	return cluster.DialConfig{
		URLs: n.URLs, Creds: n.Creds, NKey: n.NKey, Name: "orrery " + host,
		Embed: embed.Config{Dir: n.Embed, Name: n.Name, Listen: n.Listen, Cluster: n.Cluster, ClusterListen: n.ClusterListen, Routes: n.Routes},
	}
}

func openJetStream(ctx context.Context, c store.OpenConfig) (store.Log, error) {
	n, _ := c.Options.(config.NATSConfig)
	conn, err := cluster.Dial(ctx, dialConfig(n))
	if err != nil {
		return nil, err
	}
	l, err := jetstream.Open(ctx, conn.NC, jetstream.Config{Prefix: n.Prefix, Replicas: n.Replicas})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("open the log in NATS JetStream: %w", err)
	}
	js, err := natsjs.New(conn.NC)
	if err != nil {
		conn.Close()
		return nil, err
	}
	host, _ := os.Hostname()
	name := n.Name
	if name == "" {
		name = host
	}
	prefix := n.Prefix
	if prefix == "" {
		prefix = "orrery"
	}
	id, err := nodeID(c.Dir)
	if err != nil {
		l.Close()
		conn.Close()
		return nil, err
	}
	leases, err := cluster.OpenLeases(ctx, js, cluster.Node{ID: id, Name: name},
		cluster.LeaseConfig{Bucket: prefix + "_leases", TTL: n.LeaseTTL.Duration, Replicas: n.Replicas})
	if err != nil {
		l.Close()
		conn.Close()
		return nil, fmt.Errorf("open the session leases in NATS JetStream: %w", err)
	}
	member := &cluster.Member{NC: conn.NC, Log: l, Leases: leases}
	if err := member.Start(); err != nil {
		leases.Close(ctx)
		l.Close()
		conn.Close()
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	return natsLog{OwnedLog: &cluster.OwnedLog{Log: l, Leases: leases}, conn: conn, member: member}, nil
}

// readyChecks are what /readyz asks: that the process still holds its data
// dir, and, on a store that has its own (the JetStream log's leases), the
// store's.
func readyChecks(k *embedded) []func() error {
	checks := []func() error{k.lock.Check}
	if r, ok := k.store.(interface{ Ready() error }); ok {
		checks = append(checks, r.Ready)
	}
	return checks
}

// nodeID is the node's id in its leases: made once and kept in the data
// dir, so that a node restarted on its dir takes its own leases back at
// once (the dir's lock means no other process can be that node).
func nodeID(dir string) (string, error) {
	path := filepath.Join(dir, "node-id")
	data, err := os.ReadFile(path)
	if err == nil && len(bytes.TrimSpace(data)) > 0 {
		return string(bytes.TrimSpace(data)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read the node id: %w", err)
	}
	id := nuid.Next()
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the node id: %w", err)
	}
	return id, nil
}
