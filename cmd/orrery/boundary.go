package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/server"
)

// specPolicy is what a request (and a model's task call) may name as a
// model or agent: what config and the command line define.
func specPolicy(cfg config.Config) models.RequestPolicy {
	return models.RequestPolicy{
		Aliases:       slices.Sorted(maps.Keys(cfg.Models)),
		Agents:        slices.Sorted(maps.Keys(cfg.Agents)),
		Defined:       []string{cfg.Agent.Model},
		AllowCommands: cfg.Server.AllowAgentCommands,
	}
}

// workspaceRoots are the directories a request's session cwd may be in:
// [workspace] roots, else the directory the kernel started in.
func workspaceRoots(cfg config.Config, cwd string) []string {
	if len(cfg.Workspace.Roots) > 0 {
		return cfg.Workspace.Roots
	}
	return []string{cwd}
}

// withBoundary fills in the trust boundary of a server's config: the
// names and origins it answers to, the web client's cookie secret, what a
// request may name as its model, and where its cwd may be. It warns about
// settings that give the boundary up.
func withBoundary(sc server.Config, cfg config.Config, cwd string, log *slog.Logger) (server.Config, error) {
	secret, err := pageSecret(cfg)
	if err != nil {
		return sc, err
	}
	sc.AllowedHosts = cfg.Server.AllowedHosts
	sc.AllowedOrigins = cfg.Server.AllowedOrigins
	sc.PageSecret = secret
	sc.CheckSpec = specPolicy(cfg).Check
	local := specPolicy(cfg)
	local.AllowCommands = true
	sc.CheckPipeSpec = local.Check
	sc.Roots = workspaceRoots(cfg, cwd)
	if slices.Contains(cfg.Server.AllowedHosts, "*") {
		log.Warn(`server.allowed_hosts holds "*": any name is accepted as this server's, so a page whose DNS name is rebound to this machine can call it; list the names instead`)
	}
	if slices.Contains(cfg.Server.AllowedOrigins, "*") {
		log.Warn(`server.allowed_origins holds "*": a page on any site can call this server (never answer consent without a token); list the origins instead`)
	}
	if cfg.Server.AllowAgentCommands {
		log.Warn("server.allow_agent_commands is on: any client that reaches this server can start a command as you by naming acp:COMMAND")
	}
	return sc, nil
}

// pageSecret returns the data dir's web client secret, making it on first
// use. It is kept (mode 0600) so that a web client's page stays the
// kernel's own across a restart.
func pageSecret(cfg config.Config) (string, error) {
	path := filepath.Join(cfg.Store.Data, "web.secret")
	data, err := os.ReadFile(path)
	if err == nil {
		if s := strings.TrimSpace(string(data)); len(s) >= 32 {
			return s, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read the web client's secret %s: %w (check the data dir's permissions)", path, err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make the web client's secret: %w", err)
	}
	secret := hex.EncodeToString(b[:])
	if err := os.MkdirAll(cfg.Store.Data, 0o700); err != nil {
		return "", fmt.Errorf("create the data dir %s: %w", cfg.Store.Data, err)
	}
	// CreateTemp makes the file 0600 whatever the umask; the rename makes
	// a whole secret appear at once.
	tmp, err := os.CreateTemp(cfg.Store.Data, "web.secret.*")
	if err != nil {
		return "", fmt.Errorf("save the web client's secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(secret + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("save the web client's secret %s: %w", path, err)
	}
	return secret, nil
}
