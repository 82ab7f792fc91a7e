package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/datadir"
	"github.com/getorrery/orrery/server"
)

// serveCmd is `orrery serve`, and `orrery node` when node is set: the same
// kernel, but a node listens off loopback and will not start without a
// token to admit its clients.
type serveCmd struct {
	env     *env
	node    bool
	common  commonFlags
	nats    natsFlags
	listen  string
	pipe    string
	tlsCert string
	tlsKey  string
	// metricsListen serves GET /metrics alone, without a token, on a
	// private address a scraper reaches.
	metricsListen string
}

func (c *serveCmd) Synopsis() string {
	if c.node {
		return "run the kernel for other machines (0.0.0.0:7411, token required); node token create|list|revoke; node status"
	}
	return "run the kernel: HTTP on 127.0.0.1:7411, SQLite in the data dir"
}

func (c *serveCmd) name() string {
	if c.node {
		return "node"
	}
	return "serve"
}

func (c *serveCmd) Run(ctx context.Context, args []string) error {
	if c.node && len(args) > 0 && args[0] == "token" {
		return (&tokenCmd{env: c.env}).Run(ctx, args[1:])
	}
	if c.node && len(args) > 0 && args[0] == "status" {
		return (&statusCmd{env: c.env}).Run(ctx, args[1:])
	}
	usage := c.name() + " [--listen ADDR] [--pipe NAME|PATH] [--tls-cert FILE --tls-key FILE] [--metrics-listen ADDR] [--data DIR] [--model NAME] [--config FILE]\n       [--store jetstream (--nats URL[,URL…] | --nats-embed DIR [--nats-cluster NAME --nats-cluster-listen ADDR --nats-routes URL,…])]"
	if c.node {
		usage += "\n       orrery node token create|list|revoke …\n       orrery node status --store jetstream --nats URL [--json]"
	}
	fs := newFlagSet(c.env, c.name(), usage)
	c.common.register(fs, true)
	c.nats.register(fs)
	c.common.apply = c.nats.apply
	defaultListen := "$ORRERY_LISTEN, then 127.0.0.1:7411"
	if c.node {
		defaultListen = "0.0.0.0:7411"
	}
	fs.StringVar(&c.listen, "listen", "", "address to listen on (default "+defaultListen+"); port 0 picks a free one")
	fs.StringVar(&c.pipe, "pipe", "", "serve on one more Unix socket besides the data dir's DATA/orrery.sock: NAME makes DATA/NAME.sock, a path (with a /) is used as is")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM, the chain after it; default [server] tls_cert, $ORRERY_TLS_CERT)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the certificate's private key (PEM; default [server] tls_key, $ORRERY_TLS_KEY)")
	fs.StringVar(&c.metricsListen, "metrics-listen", "", "also serve GET /metrics alone on this address, with no token: give one only scrapers reach (the main listener serves it too, with a token off loopback)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	if c.metricsListen == "" {
		c.metricsListen = cfg.Telemetry.MetricsListen
	}
	switch {
	case c.listen != "":
		cfg.Server.Listen = c.listen
	case c.node:
		cfg.Server.Listen = "0.0.0.0:7411"
	}
	if c.tlsCert != "" || c.tlsKey != "" {
		if c.tlsCert == "" || c.tlsKey == "" {
			return &usageError{msg: "--tls-cert and --tls-key go together: give the certificate and its key to serve HTTPS"}
		}
		cfg.Server.TLSCert, cfg.Server.TLSKey = c.tlsCert, c.tlsKey
	}
	tlsConfig, err := loadTLS(cfg.Server)
	if err != nil {
		return err
	}
	log := newLogger(c.env, slog.LevelInfo)

	k, err := openOwn(ctx, func() (*embedded, error) { return openKernel(ctx, c.env, cfg, log, true) })
	var held *datadir.HeldError
	if errors.As(err, &held) {
		return heldRefusal(held, "this orrery "+c.name())
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil // interrupted while waiting for the data dir
		}
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := k.Close(closeCtx); err != nil {
			log.Error("close kernel", "err", err)
		}
	}()

	tokens, err := nodeTokens(cfg, k.store, log)
	if err != nil {
		return err
	}
	if c.node {
		n, err := tokens.Len()
		if err != nil {
			return err
		}
		if n == 0 && kernelCluster(k.store) != nil {
			// The nodes of a new cluster start together, and one of them
			// gives it the tokens of its data dir: wait for them.
			if err := awaitTokens(ctx, tokens, k.store, log); err != nil {
				return err
			}
		} else if n == 0 {
			return &exitCodeError{code: exitError, err: fmt.Errorf(
				"a node needs a token for its clients and %s has none: run orrery node token create --name NAME --data %s, then start the node again",
				tokens.Path(), cfg.Store.Data)}
		}
	}

	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick another address with --listen)", cfg.Server.Listen, err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		ln.Close()
		return fmt.Errorf("find the current directory, the default workspace root: %w", err)
	}
	sc, err := withBoundary(server.Config{
		ListenAddr:        ln.Addr().String(),
		Kernel:            k.kernel,
		Metrics:           k.metrics.Handler(),
		Ready:             readyChecks(k),
		Hub:               k.hub,
		Cluster:           serverCluster(k.store),
		MaxBodyBytes:      cfg.Server.MaxBodyBytes,
		KeepAlive:         cfg.Server.KeepAlive.Duration,
		FlushInterval:     flushInterval(cfg.Server.FlushInterval.Duration),
		Logger:            log,
		Tokens:            tokens,
		Models:            slices.Sorted(maps.Keys(cfg.Models)),
		SaveConfig:        saveConfig(c.env, c.common.configPath),
		Extensions:        k.extensions(),
		TLS:               tlsConfig,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout.Duration,
		ReadTimeout:       cfg.Server.ReadTimeout.Duration,
		IdleTimeout:       cfg.Server.IdleTimeout.Duration,
		HelloTimeout:      cfg.Server.HelloTimeout.Duration,
		MaxConns:          cfg.Server.MaxConns,
		MaxConnsPerAddr:   cfg.Server.MaxConnsPerAddr,
	}, cfg, cwd, log)
	if err != nil {
		ln.Close()
		return err
	}
	srv := server.New(sc)
	stopForwarded, err := serveForwarded(k.store, srv)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopForwarded()
	k.metrics.Gauge("orrery_subscribers", "Streams of sessions open, by transport (sse, ws, pipe).", "transport", srv.Subscribers)
	hs := srv.HTTPServer()

	// The data dir's pipe: the other orrery commands on the dir are this
	// kernel's clients through it.
	hp, err := serveHolderPipe(srv, cfg.Store.Data)
	if err != nil {
		ln.Close()
		return err
	}
	defer hp.Close()
	fmt.Fprintf(c.env.stdout, "pipe at %s\n", hp.path)
	pipeErr := make(chan error, 1)
	if c.pipe != "" && pipePath(cfg, c.pipe) != hp.path {
		path := pipePath(cfg, c.pipe)
		pl, err := server.ListenPipe(path)
		if err != nil {
			ln.Close()
			return err
		}
		go func() { pipeErr <- srv.ServePipeListener(ctx, pl) }()
		fmt.Fprintf(c.env.stdout, "pipe at %s\n", path)
	}

	log.Info("orrery ready", "model", cfg.Agent.Model, "data", cfg.Store.Data, "config", cfg.File)
	if c.common.modelWhy != "" {
		// Said on stdout too, so that a newcomer without a key knows at
		// once which model answers and how to get a real one.
		fmt.Fprintf(c.env.stdout, "model %s: %s\n", cfg.Agent.Model, c.common.modelWhy)
	}
	if !c.node && !config.LoopbackListen(cfg.Server.Listen) {
		if n, _ := tokens.Len(); n == 0 {
			log.Warn("listening off loopback with no token: only this machine can connect; make one with orrery node token create")
		}
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	} else if !config.LoopbackListen(cfg.Server.Listen) {
		const plain = "serving on a non-loopback address over plain HTTP: node tokens, and everything else, cross the network unencrypted; " +
			"serve HTTPS with --tls-cert and --tls-key ([server] tls_cert, tls_key), or put a TLS proxy in front"
		log.Warn(plain, "listen", cfg.Server.Listen)
		fmt.Fprintln(c.env.stderr, "warning: "+plain)
	}
	if err := k.lock.Update(func(o *datadir.Owner) {
		o.Command, o.Listen, o.Pipe, o.Roots = "orrery "+c.name(), scheme+"://"+dialAddr(ln.Addr().String()), hp.path, sc.Roots
	}); err != nil {
		log.Warn("say who holds the data dir", "err", err)
	}
	if err := announce(ctx, k.store, scheme+"://"+publicAddr(ln.Addr().String())); err != nil {
		log.Warn("say where this node serves to the cluster", "err", err)
	}
	errc := make(chan error, 1)
	// Said before "listening on", which tells a waiting program all is up.
	if c.metricsListen != "" {
		ml, err := net.Listen("tcp", c.metricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("listen for metrics on %s: %w (pick another address with --metrics-listen or [telemetry] metrics_listen)", c.metricsListen, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", k.metrics.Handler())
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		defer ms.Close()
		go func() {
			if err := ms.Serve(ml); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics: %w", err)
			}
		}()
		fmt.Fprintf(c.env.stdout, "metrics on http://%s/metrics\n", ml.Addr())
	}
	fmt.Fprintf(c.env.stdout, "listening on %s://%s\n", scheme, ln.Addr())

	go func() { errc <- srv.Serve(hs, ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case err := <-pipeErr:
		if err != nil {
			return fmt.Errorf("serve pipe: %w", err)
		}
	case <-hp.Done():
		if err := hp.Close(); err != nil {
			return fmt.Errorf("serve the data dir's pipe: %w", err)
		}
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Close(shutCtx); err != nil {
		log.Warn("close streams", "err", err)
	}
	if err := hs.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown", "err", err)
	}
	return nil
}

// loadTLS reads the certificate and key of [server] tls_cert and tls_key;
// it returns nil when neither is set.
func loadTLS(sc config.ServerConfig) (*tls.Config, error) {
	if sc.TLSCert == "" && sc.TLSKey == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(sc.TLSCert, sc.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("load the TLS certificate %s and key %s: %w (give PEM files: the certificate, then its chain, and its private key)",
			sc.TLSCert, sc.TLSKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// publicAddr is listen as other machines dial it: an unspecified host
// (0.0.0.0, ::) is this machine's name.
func publicAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	}
	return net.JoinHostPort(host, port)
}

// tokensPath is where the node tokens of a data dir live.
func tokensPath(cfg config.Config) string { return filepath.Join(cfg.Store.Data, "tokens.json") }

// pipePath resolves --pipe: a bare name is a socket in the data dir.
func pipePath(cfg config.Config, name string) string {
	if strings.ContainsRune(name, filepath.Separator) {
		return name
	}
	return filepath.Join(cfg.Store.Data, strings.TrimSuffix(name, ".sock")+".sock")
}

// flushInterval maps server.flush_interval to server.Config, where 0 means
// the default and a negative interval turns pacing off.
func flushInterval(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
