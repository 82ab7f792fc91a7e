package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/getorrery/orrery/auth"
	"github.com/getorrery/orrery/termtext"
)

// tokenCmd is `orrery node token create|list|revoke`.
type tokenCmd struct {
	env    *env
	common commonFlags
	nats   natsFlags
	name   string
	json   bool
}

func (c *tokenCmd) Run(ctx context.Context, args []string) error {
	usage := "node token create [--name NAME] | list | revoke ID|NAME   [--json] [--data DIR | --store jetstream --nats URL]"
	if len(args) == 0 {
		return &usageError{msg: "node token needs a subcommand: orrery " + usage}
	}
	sub, rest := args[0], args[1:]
	fs := newFlagSet(c.env, "node token "+sub, usage)
	c.common.register(fs, false)
	c.nats.registerClient(fs)
	c.common.apply = c.nats.apply
	fs.BoolVar(&c.json, "json", false, "print JSON for programs")
	if sub == "create" {
		fs.StringVar(&c.name, "name", "", "a name to recognise the token by (a machine, a person)")
	}
	var key string
	if sub == "revoke" && len(rest) > 0 && rest[0] != "" && rest[0][0] != '-' {
		key, rest = rest[0], rest[1:]
	}
	switch sub {
	case "create", "list", "revoke":
	case "-h", "--help", "help":
		fs.Usage()
		return nil
	default:
		return &usageError{msg: fmt.Sprintf("unknown token subcommand %q: use create, list or revoke", sub)}
	}
	if err := parse(fs, rest); err != nil {
		return err
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	// A cluster's nodes share their tokens in NATS; a node of its own
	// keeps them in its data dir.
	var store *auth.Store
	if cfg.Store.Kind == "jetstream" {
		s, closeTokens, err := clusterTokens(ctx, cfg)
		if err != nil {
			return err
		}
		defer closeTokens()
		store = s
	} else if store, err = auth.Open(tokensPath(cfg)); err != nil {
		return err
	}
	switch sub {
	case "create":
		secret, t, err := store.Create(c.name)
		if err != nil {
			return err
		}
		if c.json {
			return json.NewEncoder(c.env.stdout).Encode(map[string]any{"token": secret, "id": t.ID, "name": t.Name, "created": t.Created})
		}
		fmt.Fprintln(c.env.stdout, secret)
		fmt.Fprintf(c.env.stderr, "token %s created; it is shown only now. Clients send it as Authorization: Bearer <token>, ?token=, or token in hello.\n", t.ID)
		return nil
	case "list":
		list, err := store.List()
		if err != nil {
			return err
		}
		if c.json {
			type row struct {
				ID      string    `json:"id"`
				Name    string    `json:"name"`
				Created time.Time `json:"created"`
			}
			rows := make([]row, len(list))
			for i, t := range list {
				rows[i] = row{t.ID, t.Name, t.Created}
			}
			return json.NewEncoder(c.env.stdout).Encode(map[string]any{"tokens": rows})
		}
		if len(list) == 0 {
			fmt.Fprintf(c.env.stderr, "no tokens in %s: make one with orrery node token create --name NAME\n", store.Path())
			return nil
		}
		tw := tabwriter.NewWriter(c.env.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tCREATED")
		for _, t := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", termtext.VisibleLine(t.ID), termtext.VisibleLine(t.Name), t.Created.Format(time.RFC3339))
		}
		return tw.Flush()
	default: // revoke
		if key == "" {
			return &usageError{msg: "node token revoke needs the token's id or name: see orrery node token list"}
		}
		t, err := store.Revoke(key)
		if err != nil {
			return err
		}
		if c.json {
			return json.NewEncoder(c.env.stdout).Encode(map[string]any{"revoked": t.ID})
		}
		fmt.Fprintf(c.env.stderr, "token %s revoked: it no longer admits anyone, and its connections end, even on running nodes\n", t.ID)
		return nil
	}
}
