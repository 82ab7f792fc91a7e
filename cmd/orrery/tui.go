package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tui"
)

// tuiCmd is bare `orrery`: the terminal UI, the host's own screen. With no
// --connect it starts a kernel on the data dir in this process, holding the
// dir and serving its pipe, and attaches to it over that pipe; on a data dir
// another process holds, it attaches to that process over the same pipe.
// With --connect it attaches to a running kernel.
type tuiCmd struct {
	env     *env
	common  commonFlags
	connect string
	token   string
	caCert  string
}

func (c *tuiCmd) Synopsis() string {
	return "the terminal UI (bare orrery): --connect URL|pipe:NAME, --token T, --resume [SESSION]"
}

// isTUIArgs reports whether args (after the program name) start the TUI:
// none, or only the TUI's flags.
func isTUIArgs(args []string) bool {
	if len(args) == 0 {
		return true
	}
	a := args[0]
	if a == "-h" || a == "--help" || a == "-help" {
		return false
	}
	return strings.HasPrefix(a, "-")
}

func (c *tuiCmd) Run(ctx context.Context, args []string) error {
	// --resume takes an optional session: pull it out before flag parsing.
	resume, session := false, ""
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--resume" || a == "-resume":
			resume = true
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				session = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "--resume="):
			resume, session = true, strings.TrimPrefix(a, "--resume=")
		default:
			rest = append(rest, a)
		}
	}
	fs := newFlagSet(c.env, "", "[--connect URL|pipe:NAME] [--token T] [--ca-cert FILE] [--resume [SESSION]] [--data DIR] [--model NAME] [--config FILE]")
	c.common.register(fs, true)
	fs.StringVar(&c.connect, "connect", "", "attach to a running kernel: http(s)://HOST:PORT, ws(s)://HOST:PORT or pipe:NAME (default: start one here on the data dir)")
	fs.StringVar(&c.token, "token", "", "node token, needed for a kernel off loopback")
	registerCACert(fs, &c.caCert)
	fs.Bool("resume", false, "open the session picker, or the session named after it, redrawn from its log")
	if err := parse(fs, rest); err != nil {
		return err
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.Store.Data, 0o700); err != nil {
		return fmt.Errorf("create the data dir %s: %w (choose another with --data or ORRERY_DATA)", cfg.Store.Data, err)
	}
	// The screen is the terminal's: logs go to a file in the data dir.
	logPath := filepath.Join(cfg.Store.Data, "tui.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open the log %s: %w (check the data dir's permissions)", logPath, err)
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))

	opts := tui.Options{Session: session, Resume: resume, Logger: log, Graphics: tui.DetectGraphics(c.env.getenv)}
	opts.Workspace, _ = os.Getwd()
	draws := []string{protocol.DrawThread, protocol.DrawTools, protocol.DrawReasoning, protocol.DrawSurfaces, protocol.DrawConsent}
	// Over http:// the TUI uses the WebSocket: one connection for requests
	// and frames, and its hello declares what the TUI draws for every
	// request (POST /control would not carry draws, so consent answers
	// would be refused).
	copts := client.Options{Token: c.token, Client: "orrery-tui", Draws: draws, DataDir: cfg.Store.Data, Logger: log, Transport: client.TransportWS}
	if copts.HTTPClient, err = httpClient(c.caCert); err != nil {
		return err
	}

	target := c.connect
	var h *holding
	var cl *client.Client
	if target == "" {
		// The data dir's kernel: this process's own when the dir is free,
		// else the holder's, over its pipe.
		opts.Model = c.common.model
		// This screen is the host's own: a link a person opens here goes to
		// the system opener (one argument, never a shell).
		j, err := embedOrJoin(ctx, cfg, copts, func() (*embedded, error) {
			return openKernel(ctx, c.env, cfg, log, true, func(kc *kernel.Config) { kc.Opener = kernel.SystemOpener{} })
		}, nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if j.k != nil {
			h, err = hold(c.env, cfg, c.common.configPath, j.k, "orrery (the terminal UI)", log)
			if err != nil {
				closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return errors.Join(err, j.k.Close(closeCtx))
			}
			defer func() {
				if err := h.Close(ctx, true, c.env.stderr); err != nil {
					log.Error("close kernel", "err", err)
				}
			}()
			opts.Host = true
			target = "pipe:" + h.pipe.path
			if c.common.modelWhy != "" {
				log.Info("model", "model", cfg.Agent.Model, "why", c.common.modelWhy)
			}
		} else {
			// Another process holds the data dir: this screen is its client,
			// on this machine.
			log.Info("the data dir is held by another process: attached to it", "holder", j.owner.String(), "pipe", j.owner.Pipe)
			opts.Local = true
			cl = j.cl
		}
	}
	if cl == nil {
		cl, err = client.Dial(ctx, target, copts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("attach to %s: %w (is the kernel running? start one with orrery serve)", target, err)
		}
	}
	// Closed before the holding: a holder waits for its other clients only.
	defer cl.Close()
	opts.Client = cl
	err = tui.Run(ctx, opts, c.env.stdin, c.env.stdout)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
