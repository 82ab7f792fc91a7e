// Package cluster is what lets several orrery nodes share sessions over
// NATS: the connection to the cluster (or the NATS server a node runs
// inside itself), and the leases that give each session one owner.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/getorrery/orrery/cluster/embed"
	"github.com/nats-io/nats.go"
)

// DialConfig is how a node reaches NATS: URLs of a cluster to join, or an
// embedded server's settings.
type DialConfig struct {
	// URLs are an existing cluster's servers.
	URLs []string
	// Creds is a credentials file; NKey a file holding an nkey seed.
	Creds, NKey string
	// Embed, when set, runs a server inside the process instead.
	Embed embed.Config
	// Name names the connection, as the servers' monitoring shows it.
	Name string
	// Logger hears of disconnections and reconnections.
	Logger *slog.Logger
}

// Conn is a node's connection to NATS and, when it runs one, its embedded
// server.
type Conn struct {
	NC     *nats.Conn
	Server *embed.Server // nil when the node joined an existing cluster
}

// Dial connects as c says. It waits for an embedded server to be ready
// (in a cluster, to have a JetStream meta leader) within ctx.
func Dial(ctx context.Context, c DialConfig) (*Conn, error) {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS connection lost; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("NATS connection back", "server", nc.ConnectedUrlRedacted()) }),
	}
	switch {
	case c.Creds != "":
		opts = append(opts, nats.UserCredentials(c.Creds))
	case c.NKey != "":
		o, err := nats.NkeyOptionFromSeed(c.NKey)
		if err != nil {
			return nil, fmt.Errorf("nats nkey %s: %w", c.NKey, err)
		}
		opts = append(opts, o)
	}
	if c.Embed.Dir != "" {
		srv, err := embed.Start(ctx, c.Embed)
		if err != nil {
			return nil, err
		}
		nc, err := srv.Connect(opts...)
		if err != nil {
			srv.Stop()
			return nil, fmt.Errorf("connect to the embedded NATS server: %w", err)
		}
		return &Conn{NC: nc, Server: srv}, nil
	}
	if len(c.URLs) == 0 {
		return nil, errors.New("no NATS to connect to: give --nats URL[,URL…] or --nats-embed DIR")
	}
	nc, err := nats.Connect(strings.Join(c.URLs, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w (is the cluster up, and are the URLs and credentials right?)", strings.Join(c.URLs, ", "), err)
	}
	return &Conn{NC: nc}, nil
}

// Close closes the connection and stops the embedded server.
func (c *Conn) Close() {
	c.NC.Close()
	if c.Server != nil {
		c.Server.Stop()
	}
}
