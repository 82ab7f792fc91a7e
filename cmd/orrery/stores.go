package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/getorrery/orrery/auth"
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
func openStore(ctx context.Context, cfg config.Config, log *slog.Logger) (store.Log, error) {
	st, err := storeKinds.Open(ctx, cfg.Store.Kind, store.OpenConfig{Dir: cfg.Store.Data, Options: cfg.NATS, Logger: log})
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
	tokens *cluster.Tokens
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
	l.tokens.Close()
	l.member.Stop()
	err := l.OwnedLog.Close()
	l.conn.Close()
	return err
}

// dialConfig is how the [nats] table reaches NATS.
func dialConfig(n config.NATSConfig, log *slog.Logger) cluster.DialConfig {
	host, _ := os.Hostname()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return cluster.DialConfig{
		URLs: n.URLs, Creds: n.Creds, NKey: n.NKey, Name: "orrery " + host, Logger: log,
		Embed: embed.Config{Dir: n.Embed, Name: n.Name, Listen: n.Listen, Cluster: n.Cluster, ClusterListen: n.ClusterListen, Routes: n.Routes,
			Logs: embed.SlogLogs(log)},
	}
}

func openJetStream(ctx context.Context, c store.OpenConfig) (store.Log, error) {
	n, _ := c.Options.(config.NATSConfig)
	dc := dialConfig(n, c.Logger)
	if n.ClusterSecret != "" {
		secret, err := readSecret(n.ClusterSecret)
		if err != nil {
			return nil, err
		}
		dc.Embed.RouteSecret = secret
	}
	conn, err := cluster.Dial(ctx, dc)
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
	prefix := natsPrefix(n)
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
	tokens, err := cluster.OpenTokens(ctx, js, prefix+"_tokens", n.Replicas)
	if err != nil {
		leases.Close(ctx)
		l.Close()
		conn.Close()
		return nil, fmt.Errorf("open the node tokens in NATS JetStream: %w", err)
	}
	member := &cluster.Member{NC: conn.NC, Log: l, Leases: leases}
	if err := member.Start(); err != nil {
		tokens.Close()
		leases.Close(ctx)
		l.Close()
		conn.Close()
		return nil, fmt.Errorf("join the cluster: %w", err)
	}
	return natsLog{OwnedLog: &cluster.OwnedLog{Log: l, Leases: leases}, conn: conn, member: member, tokens: tokens}, nil
}

// readSecret reads the cluster's route secret from path: one line, at
// least 16 characters, in a file only its owner can read.
func readSecret(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("the cluster secret: %w (give every member the same file with --nats-cluster-secret)", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("the cluster secret %s can be read by others (mode %04o): chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("the cluster secret: %w", err)
	}
	secret := string(bytes.TrimSpace(data))
	if len(secret) < 16 || strings.ContainsAny(secret, "\r\n") {
		return "", fmt.Errorf("the cluster secret %s is not one line of at least 16 characters: make it with head -c 32 /dev/urandom | base64 > %s", path, path)
	}
	return secret, nil
}

// natsPrefix is the [nats] prefix, "orrery" when unset.
func natsPrefix(n config.NATSConfig) string {
	if n.Prefix == "" {
		return "orrery"
	}
	return n.Prefix
}

// nodeTokens is the token store a kernel on st admits clients with: the
// cluster's, shared by every node, on a JetStream store; the data dir's
// tokens.json on any other. A cluster that has never had tokens takes the
// data dir's (the first node to start with some gives them), so that nodes
// whose embedded NATS serves no client port can be given tokens: make them
// with orrery node token create --data DIR before the first start. After
// that the file is not read, and a node says so when it has tokens.
func nodeTokens(cfg config.Config, st store.Log, log *slog.Logger) (*auth.Store, error) {
	l, ok := st.(natsLog)
	if !ok {
		return auth.Open(tokensPath(cfg))
	}
	local, err := auth.Open(tokensPath(cfg))
	if err != nil {
		return nil, err
	}
	mine, err := local.List()
	if err != nil {
		return nil, err
	}
	if data, ver, _ := l.tokens.Load(); data == nil && ver == 0 && len(mine) > 0 {
		raw, err := json.MarshalIndent(mine, "", "  ")
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = jetstream.UntilAnswered(ctx, func(context.Context) (struct{}, error) {
			return struct{}{}, l.tokens.Save(append(raw, '\n'), 0)
		})
		cancel()
		switch {
		case err == nil:
			log.Info("the cluster had no tokens: it takes this data dir's", "file", tokensPath(cfg), "tokens", len(mine))
			return auth.OpenBackend(l.tokens)
		case !errors.Is(err, auth.ErrConflict):
			return nil, fmt.Errorf("give the cluster this data dir's tokens: %w", err)
		}
		if err := l.tokens.Refresh(); err != nil {
			return nil, err
		}
	}
	if len(mine) > 0 {
		log.Warn("the tokens in the data dir are not used: the nodes of a cluster admit the cluster's tokens; manage them with orrery node token create|list|revoke --store jetstream --nats URL",
			"file", tokensPath(cfg), "tokens", len(mine))
	}
	return auth.OpenBackend(l.tokens)
}

// awaitTokens waits, on a clustered store, until the cluster has a token,
// saying what to do meanwhile; it returns ctx's error if it ends first.
func awaitTokens(ctx context.Context, tokens *auth.Store, st store.Log, log *slog.Logger) error {
	l := st.(natsLog)
	log.Warn("the cluster has no node token yet: waiting for one (another node gives its data dir's as it starts; or make one with orrery node token create --name NAME --store jetstream --nats URL)",
		"bucket", l.tokens.String())
	for {
		if n, err := tokens.Len(); err != nil {
			return err
		} else if n > 0 {
			log.Info("the cluster has a node token: starting")
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.tokens.Changed():
		case <-time.After(2 * time.Second):
		}
	}
}

// dialCluster connects a CLI command to the cluster [nats] names: its
// URLs, or the client address of a node's embedded server.
func dialCluster(ctx context.Context, cfg config.Config, what string) (*cluster.Conn, natsjs.JetStream, error) {
	n := cfg.NATS
	dc := dialConfig(n, nil)
	dc.Embed = embed.Config{}
	if len(dc.URLs) == 0 {
		if n.Embed == "" || n.Listen == "" {
			return nil, nil, &usageError{msg: what + " live in NATS: give --nats URL[,URL…] (a node with --nats-embed is reached at its --nats-listen address)"}
		}
		dc.URLs = []string{"nats://" + n.Listen}
	}
	conn, err := cluster.Dial(ctx, dc)
	if err != nil {
		return nil, nil, err
	}
	js, err := natsjs.New(conn.NC)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, js, nil
}

// clusterTokens opens the cluster's token store for the CLI. The returned
// func closes the connection.
func clusterTokens(ctx context.Context, cfg config.Config) (*auth.Store, func(), error) {
	conn, js, err := dialCluster(ctx, cfg, "the cluster's tokens")
	if err != nil {
		return nil, nil, err
	}
	t, err := cluster.OpenTokens(ctx, js, natsPrefix(cfg.NATS)+"_tokens", cfg.NATS.Replicas)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	s, err := auth.OpenBackend(t)
	if err != nil {
		t.Close()
		conn.Close()
		return nil, nil, err
	}
	return s, func() { t.Close(); conn.Close() }, nil
}

// announce says, on a clustered store, where this node serves clients.
func announce(ctx context.Context, st store.Log, addr string) error {
	if l, ok := st.(natsLog); ok {
		return l.member.Leases.SetAddr(ctx, addr)
	}
	return nil
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
