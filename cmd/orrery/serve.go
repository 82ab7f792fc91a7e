package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/getorrery/orrery/server"
)

type serveCmd struct {
	env    *env
	common commonFlags
	listen string
}

func (c *serveCmd) Synopsis() string {
	return "run the kernel: HTTP on 127.0.0.1:7411, SQLite in the data dir"
}

func (c *serveCmd) Run(ctx context.Context, args []string) error {
	fs := newFlagSet(c.env, "serve", "serve [--listen ADDR] [--data DIR] [--model NAME] [--config FILE]")
	c.common.register(fs, true)
	fs.StringVar(&c.listen, "listen", "", "address to listen on (default $ORRERY_LISTEN, then 127.0.0.1:7411); port 0 picks a free one")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	if c.listen != "" {
		cfg.Server.Listen = c.listen
	}
	log := newLogger(c.env, slog.LevelInfo)

	k, err := openKernel(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := k.Close(closeCtx); err != nil {
			log.Error("close kernel", "err", err)
		}
	}()

	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick another address with --listen)", cfg.Server.Listen, err)
	}
	srv := server.New(server.Config{
		Kernel:       k.kernel,
		MaxBodyBytes: cfg.Server.MaxBodyBytes,
		KeepAlive:    cfg.Server.KeepAlive.Duration,
		Logger:       log,
	})
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}

	modelNote := cfg.Agent.Model
	if modelNote == "offline" {
		modelNote = "offline (the built-in model: no API key is configured)"
	}
	log.Info("orrery ready", "model", modelNote, "data", cfg.Store.Data, "config", cfg.File)
	fmt.Fprintf(c.env.stdout, "listening on http://%s\n", ln.Addr())

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
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
