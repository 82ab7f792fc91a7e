package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/getorrery/orrery"
	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/datadir"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
)

type sessionsCmd struct {
	env    *env
	common commonFlags
	json   bool
}

func (c *sessionsCmd) Synopsis() string { return "list the sessions in the data dir" }

func (c *sessionsCmd) Run(ctx context.Context, args []string) error {
	flags := newFlagSet(c.env, "sessions", "sessions [--json] [--data DIR]")
	c.common.register(flags, false)
	flags.BoolVar(&c.json, "json", false, "print the list as JSON, as the session.list request answers it")
	if err := parse(flags, args); err != nil {
		return err
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	// Listing makes nothing: a data dir that is not there has no sessions,
	// and one named on the command line that is not there is most likely
	// a typo, which making an empty store would hide.
	if _, err := os.Stat(cfg.Store.Data); errors.Is(err, fs.ErrNotExist) {
		if c.common.data != "" {
			return &exitCodeError{code: exitError, err: fmt.Errorf("no data dir at %s: check --data (orrery run or orrery serve makes one)", cfg.Store.Data)}
		}
		if c.json {
			return json.NewEncoder(c.env.stdout).Encode(map[string]any{"sessions": []protocol.SessionSummary{}})
		}
		fmt.Fprintf(c.env.stderr, "no sessions in %s yet: start one with orrery run -p \"hello\"\n", cfg.Store.Data)
		return nil
	}
	// The data dir's holder lists its sessions; when the dir is free this
	// process holds it for as long as it reads the list.
	log := newLogger(c.env, slog.LevelWarn)
	j, err := embedOrJoin(ctx, cfg, client.Options{Client: "orrery-sessions", Logger: log}, func() (*embedded, error) {
		return openKernel(ctx, c.env, cfg, log, false)
	}, nil)
	if err != nil {
		return err
	}
	var list []protocol.SessionSummary
	if j.k != nil {
		defer j.k.Close(context.Background())
		_ = j.k.lock.Update(func(o *datadir.Owner) { o.Command = "orrery sessions" })
		list, err = j.k.kernel.Sessions(ctx)
	} else {
		defer j.cl.Close()
		list, err = j.cl.Sessions(ctx)
	}
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
		fmt.Fprintf(tw, "%s\t%s\t%d\t$%.6f\t%s\t%s\n", termtext.VisibleLine(s.ID), termtext.VisibleLine(s.Created), s.Head, float64(s.MicroUSD)/1e6, state, termtext.VisibleLine(s.Title))
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
	env     *env
	common  commonFlags
	project bool
}

func (c *configCmd) Synopsis() string {
	return "check the configuration (config validate), or read and write keys (config get|set)"
}

func (c *configCmd) Run(ctx context.Context, args []string) error {
	usage := "config validate | get KEY | set KEY VALUE   [--config FILE] [--project]"
	fs := newFlagSet(c.env, "config", usage)
	c.common.register(fs, true)
	fs.BoolVar(&c.project, "project", false, "set: write the project's .orrery/orrery.toml instead of your own config file")
	if len(args) == 0 {
		return &usageError{msg: "config needs a subcommand: orrery " + usage}
	}
	sub, rest := args[0], args[1:]
	var operands []string
	for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		operands, rest = append(operands, rest[0]), rest[1:]
	}
	switch sub {
	case "-h", "--help", "help":
		fs.Usage()
		return nil
	case "validate", "get", "set":
	default:
		if strings.HasPrefix(sub, "-") {
			return subcommandFirst("config", sub, "validate|get KEY|set KEY VALUE")
		}
		return &usageError{msg: fmt.Sprintf("unknown config subcommand %q: use validate, get or set", sub)}
	}
	if err := parse(fs, rest); err != nil {
		return err
	}
	want := map[string]int{"validate": 0, "get": 1, "set": 2}[sub]
	if len(operands) != want {
		return &usageError{msg: fmt.Sprintf("config %s takes %d argument(s): orrery %s", sub, want, usage)}
	}
	switch sub {
	case "set":
		path := c.common.configPath
		switch {
		case c.project:
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			path = filepath.Join(wd, ".orrery", "orrery.toml")
		case path == "":
			path = c.env.getenv("ORRERY_CONFIG")
		}
		if path == "" {
			path = config.DefaultFile()
		}
		if err := config.Set(path, operands[0], operands[1]); err != nil {
			return err
		}
		fmt.Fprintf(c.env.stderr, "set %s in %s\n", operands[0], path)
		return nil
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	if sub == "get" {
		v, err := config.Get(cfg, operands[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(c.env.stdout, v)
		return nil
	}
	// What only the commands would find: the default model (or agent),
	// and the store kind.
	resolver := &models.Resolver{Aliases: cfg.Models, Getenv: c.env.getenv, Logger: newLogger(c.env, slog.LevelError)}
	var warnings []string
	if _, err := newACPAgents(cfg, resolver.Logger, resolver.Resolve).resolve(cfg.Agent.Model); errors.Is(err, agent.ErrNoAPIKey) {
		// A right spec whose key this shell lacks: the server's may have it.
		warnings = append(warnings, fmt.Sprintf("agent.model %q: %v", cfg.Agent.Model, err))
	} else if err != nil {
		return &exitCodeError{code: exitError, err: fmt.Errorf("agent.model %q: %w", cfg.Agent.Model, err)}
	}
	if !slices.Contains(storeKinds.Names(), cfg.Store.Kind) {
		return &exitCodeError{code: exitError, err: fmt.Errorf("store.kind %q is not a store this build has: use one of %s", cfg.Store.Kind, strings.Join(storeKinds.Names(), ", "))}
	}
	src := cfg.File
	if src == "" {
		src = "built-in defaults (no config file)"
	}
	fmt.Fprintf(c.env.stdout, "config OK: %s\n", src)
	for _, w := range warnings {
		fmt.Fprintf(c.env.stderr, "warning: %s\n", w)
	}
	for _, v := range config.Env {
		if val := c.env.getenv(v.Name); val != "" {
			fmt.Fprintf(c.env.stdout, "  %s=%s sets %s\n", v.Name, val, v.Sets)
		}
	}
	return nil
}
