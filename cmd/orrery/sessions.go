package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"text/tabwriter"

	"github.com/getorrery/orrery"
	"github.com/getorrery/orrery/config"
)

type sessionsCmd struct {
	env    *env
	common commonFlags
	json   bool
}

func (c *sessionsCmd) Synopsis() string { return "list the sessions in the data dir" }

func (c *sessionsCmd) Run(ctx context.Context, args []string) error {
	fs := newFlagSet(c.env, "sessions", "sessions [--json] [--data DIR]")
	c.common.register(fs, false)
	fs.BoolVar(&c.json, "json", false, "print the list as JSON, as the session.list request answers it")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	k, err := openKernel(ctx, cfg, newLogger(c.env, slog.LevelWarn))
	if err != nil {
		return err
	}
	defer k.Close(context.Background())
	list, err := k.kernel.Sessions(ctx)
	if err != nil {
		return err
	}
	if c.json {
		enc := json.NewEncoder(c.env.stdout)
		return enc.Encode(map[string]any{"sessions": list})
	}
	if len(list) == 0 {
		fmt.Fprintf(c.env.stderr, "no sessions in %s yet: start one with orrery run -p \"hello\"\n", cfg.Store.Data)
		return nil
	}
	tw := tabwriter.NewWriter(c.env.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCREATED\tHEAD\tCOST\tSTATE\tTITLE")
	for _, s := range list {
		state := "idle"
		if s.Running {
			state = "running"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t$%.6f\t%s\t%s\n", s.ID, s.Created, s.Head, float64(s.MicroUSD)/1e6, state, s.Title)
	}
	return tw.Flush()
}

type versionCmd struct{ env *env }

func (c *versionCmd) Synopsis() string { return "print the version" }

func (c *versionCmd) Run(ctx context.Context, args []string) error {
	fs := newFlagSet(c.env, "version", "version")
	if err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(c.env.stdout, "orrery %s\n", orrery.Version)
	return nil
}

type configCmd struct {
	env    *env
	common commonFlags
}

func (c *configCmd) Synopsis() string {
	return "check the configuration (config validate) without starting anything"
}

func (c *configCmd) Run(ctx context.Context, args []string) error {
	fs := newFlagSet(c.env, "config", "config validate [--config FILE]")
	c.common.register(fs, true)
	if len(args) == 0 || args[0] != "validate" {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
			fs.Usage()
			return nil
		}
		return &usageError{msg: "config needs a subcommand: orrery config validate"}
	}
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	src := cfg.File
	if src == "" {
		src = "built-in defaults (no config file)"
	}
	fmt.Fprintf(c.env.stdout, "config OK: %s\n", src)
	for _, v := range config.Env {
		if val := c.env.getenv(v.Name); val != "" {
			fmt.Fprintf(c.env.stdout, "  %s=%s sets %s\n", v.Name, val, v.Sets)
		}
	}
	return nil
}
