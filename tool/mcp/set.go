package mcp

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"

	"github.com/getorrery/orrery/tool"
)

// Set is the MCP servers that connected out of those a config names. The
// zero Set holds none; a nil *Set holds none too.
type Set struct {
	servers []*Server // sorted by name
}

// ConnectAll connects every server in servers at once. A server that fails
// to connect, or whose name or config is invalid, is logged and left out:
// the others still connect. ConnectAll always returns a Set (holding the
// servers that connected) and, when some failed, an error joining one
// error per failed server, in name order, each saying what to fix. As with
// Connect, ctx should carry a deadline: ConnectAll waits for the slowest
// server.
func ConnectAll(ctx context.Context, servers map[string]ServerConfig, logger *slog.Logger) (*Set, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)

	connected := make([]*Server, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			s, err := Connect(ctx, name, servers[name], logger)
			if err != nil {
				logger.Warn("mcp server left out", "mcp_server", name, "error", err)
				errs[i] = err
				return
			}
			connected[i] = s
		})
	}
	wg.Wait()

	set := &Set{}
	for _, s := range connected {
		if s != nil {
			set.servers = append(set.servers, s)
		}
	}
	return set, errors.Join(errs...)
}

// Servers returns the connected servers, sorted by name.
func (s *Set) Servers() []*Server {
	if s == nil {
		return nil
	}
	return append([]*Server(nil), s.servers...)
}

// Tools returns every connected server's tools, server by server in name
// order. Their names are unique: a server's name holds no '.'.
func (s *Set) Tools() []tool.Tool {
	if s == nil {
		return nil
	}
	var out []tool.Tool
	for _, srv := range s.servers {
		out = append(out, srv.Tools()...)
	}
	return out
}

// Close closes every server at once and returns their errors joined.
func (s *Set) Close() error {
	if s == nil {
		return nil
	}
	errs := make([]error, len(s.servers))
	var wg sync.WaitGroup
	for i, srv := range s.servers {
		wg.Go(func() { errs[i] = srv.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
