package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/getorrery/orrery/agent/acp"
	"github.com/getorrery/orrery/datadir"
)

// acpCmd is `orrery acp`: Orrery's agent as an ACP agent on stdio, for
// editors that speak the Agent Client Protocol (Zed and others). Its
// sessions live in the data dir like any other; stdout carries only ACP. It
// holds the data dir, and serves the dir's pipe for the other commands on
// it.
type acpCmd struct {
	env    *env
	common commonFlags
}

func (c *acpCmd) Synopsis() string {
	return "be an ACP agent on stdio for editors (Zed …): Orrery's agent, tools and MCP servers"
}

func (c *acpCmd) Run(ctx context.Context, args []string) error {
	fs := newFlagSet(c.env, "acp", "acp [--model NAME | --agent NAME] [--data DIR] [--config FILE]")
	c.common.register(fs, true)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	log := newLogger(c.env, slog.LevelWarn)
	k, err := openOwn(ctx, func() (*embedded, error) { return openKernel(ctx, c.env, cfg, log, true) })
	var held *datadir.HeldError
	if errors.As(err, &held) {
		// An editor speaks ACP to a kernel of its own; it cannot be another
		// kernel's client.
		return heldRefusal(held, "orrery acp, which runs its sessions in a kernel of its own,")
	}
	if err != nil {
		return err
	}
	// The other orrery commands on the data dir are this kernel's clients.
	h, err := hold(c.env, cfg, c.common.configPath, k, "orrery acp", log)
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return errors.Join(err, k.Close(closeCtx))
	}
	defer func() {
		if err := h.Close(ctx, true, c.env.stderr); err != nil {
			log.Error("close kernel", "err", err)
		}
	}()
	return acp.Serve(ctx, c.env.stdin, c.env.stdout, acp.ServeConfig{Kernel: k.kernel, Logger: log})
}
