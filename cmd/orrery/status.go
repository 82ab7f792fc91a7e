package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/getorrery/orrery/cluster"
	"github.com/getorrery/orrery/termtext"
)

// statusCmd is `orrery node status`: the cluster's nodes, who owns which
// sessions, and the health of the streams that keep the log. It exits 1
// when a stream has no leader or a replica is not current, so a script
// can wait on it.
type statusCmd struct {
	env    *env
	common commonFlags
	nats   natsFlags
	json   bool
	all    bool
}

func (c *statusCmd) Run(ctx context.Context, args []string) error {
	fs := newFlagSet(c.env, "node status", "node status [--store jetstream] --nats URL[,URL…] [--nats-creds FILE | --nats-nkey FILE] [--sessions] [--json]")
	c.common.register(fs, false)
	c.nats.registerClient(fs)
	c.common.apply = c.nats.apply
	fs.BoolVar(&c.json, "json", false, "print JSON for programs (it lists every lease)")
	fs.BoolVar(&c.all, "sessions", false, "list each session's owner, not only how many each node owns")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	if cfg.Store.Kind != "jetstream" && len(cfg.NATS.URLs) == 0 {
		return &usageError{msg: "node status shows a cluster on NATS JetStream: give --store jetstream --nats URL (a node of its own answers /readyz instead)"}
	}
	conn, js, err := dialCluster(ctx, cfg, "the cluster's nodes and leases")
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := cluster.ReadStatus(ctx, js, cfg.NATS.Prefix)
	if err != nil {
		return err
	}
	if c.json {
		if err := json.NewEncoder(c.env.stdout).Encode(map[string]any{"status": st, "healthy": st.Healthy()}); err != nil {
			return err
		}
	} else if err := c.print(st); err != nil {
		return err
	}
	if !st.Healthy() {
		return &exitCodeError{code: exitError, err: fmt.Errorf("the cluster is not healthy: %s", problems(st))}
	}
	return nil
}

// problems names each unhealthy stream and what is wrong with it.
func problems(st cluster.Status) string {
	var out []string
	for _, s := range st.Streams {
		if s.Problem != "" {
			out = append(out, s.Name+": "+s.Problem)
		}
	}
	return strings.Join(out, "; ")
}

func (c *statusCmd) print(st cluster.Status) error {
	v := termtext.VisibleLine
	now := time.Now()
	fmt.Fprintf(c.env.stdout, "cluster %s: %d %s, %d %s owned\n\n", v(st.Prefix), len(st.Nodes), plural(int64(len(st.Nodes)), "node", "nodes"), len(st.Leases), plural(int64(len(st.Leases)), "session", "sessions"))
	tw := tabwriter.NewWriter(c.env.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tID\tSERVES\tSEEN\tSESSIONS")
	for _, n := range st.Nodes {
		addr := n.Addr
		if addr == "" {
			addr = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\t%d\n", v(n.Name), v(n.ID), v(addr), now.Sub(n.Seen).Round(100*time.Millisecond), n.Sessions)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c.all && len(st.Leases) > 0 {
		fmt.Fprintln(c.env.stdout)
		tw = tabwriter.NewWriter(c.env.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tOWNER\tRENEWED")
		for _, l := range st.Leases {
			fmt.Fprintf(tw, "%s\t%s\t%s ago\n", v(l.Session), v(l.Node.Name), now.Sub(l.Renewed).Round(100*time.Millisecond))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(c.env.stdout)
	tw = tabwriter.NewWriter(c.env.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tREPLICAS\tLEADER\tMESSAGES\tBYTES\tHEALTH")
	for _, s := range st.Streams {
		health := "ok"
		if s.Problem != "" {
			health = s.Problem
		}
		leader := s.Leader
		if leader == "" {
			leader = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\n", v(s.Name), s.Replicas, v(leader), s.Messages, s.Bytes, v(health))
	}
	return tw.Flush()
}
