package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/config"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		file    string // "" means no file
		env     map[string]string
		check   func(t *testing.T, c config.Config)
		wantErr string
	}{
		{
			name: "defaults",
			check: func(t *testing.T, c config.Config) {
				if c.Server.Listen != "127.0.0.1:7411" || c.Agent.Model != "" || c.Consent.Timeout.Duration != 5*time.Minute || c.Server.MaxBodyBytes != 4<<20 || c.Server.KeepAlive.Duration != 15*time.Second || c.Server.FlushInterval.Duration != 5*time.Millisecond {
					t.Errorf("Load() = %+v, want the built-in defaults", c)
				}
			},
		},
		{
			name: "file",
			file: "[server]\nlisten = \"127.0.0.1:9000\"\nkeepalive = \"2s\"\n[agent]\nmodel = \"script:/x.json\"\n[prices.\"openai:gpt-x\"]\ninput = 5\noutput = 7\n",
			check: func(t *testing.T, c config.Config) {
				if c.Server.Listen != "127.0.0.1:9000" || c.Server.KeepAlive.Duration != 2*time.Second || c.Agent.Model != "script:/x.json" {
					t.Errorf("Load() = %+v, want the file's values", c)
				}
				if p := c.Prices["openai:gpt-x"]; p.Input != 5 || p.Output != 7 {
					t.Errorf("Prices = %+v, want input 5, output 7", c.Prices)
				}
			},
		},
		{
			name: "agents and their processes",
			file: "[agents]\nidle_stop = \"2m\"\nmax_processes = 4\n[agents.gemini]\ncommand = \"gemini\"\nargs = [\"--acp\"]\nenv = { GEMINI_API_KEY = \"k\" }\n",
			check: func(t *testing.T, c config.Config) {
				if c.AgentProcesses.IdleStop.Duration != 2*time.Minute || c.AgentProcesses.MaxProcesses != 4 {
					t.Errorf("AgentProcesses = %+v, want 2m and 4", c.AgentProcesses)
				}
				g, ok := c.Agents["gemini"]
				if len(c.Agents) != 1 || !ok || g.Command != "gemini" || len(g.Args) != 1 || g.Args[0] != "--acp" || g.Env["GEMINI_API_KEY"] != "k" {
					t.Errorf("Agents = %+v, want gemini alone", c.Agents)
				}
			},
		},
		{
			name: "agent process defaults",
			check: func(t *testing.T, c config.Config) {
				if c.AgentProcesses.IdleStop.Duration != 5*time.Minute || c.AgentProcesses.MaxProcesses != 32 {
					t.Errorf("AgentProcesses = %+v, want 5m and 32", c.AgentProcesses)
				}
			},
		},
		{name: "a misspelt agent key", file: "[agents.gemini]\ncomand = \"gemini\"\n", wantErr: `unknown key "comand": an agent takes command, args and env`},
		{name: "an unknown [agents] key", file: "[agents]\nidle = \"2m\"\n", wantErr: "agents.idle is not a table"},
		{name: "a bad idle_stop", file: "[agents]\nidle_stop = \"soon\"\n", wantErr: "agents.idle_stop is soon: give a duration"},
		{name: "no agent processes", file: "[agents]\nmax_processes = 0\n", wantErr: "agents.max_processes is 0: set it to 1 or more"},
		{
			name: "env over file",
			file: "[server]\nlisten = \"127.0.0.1:9000\"\n",
			env:  map[string]string{"ORRERY_LISTEN": "127.0.0.1:9001", "ORRERY_DATA": "/d", "ORRERY_MODEL": "offline", "ORRERY_MAX_BODY_BYTES": "2048"},
			check: func(t *testing.T, c config.Config) {
				if c.Server.Listen != "127.0.0.1:9001" || c.Store.Data != "/d" || c.Server.MaxBodyBytes != 2048 {
					t.Errorf("Load() = %+v, want the environment's values", c)
				}
			},
		},
		{
			name: "permissions",
			file: "[permissions.\"ext:ci\"]\ndeny = [\"ui(pane.right)\"]\nallow = [\"ui(*)\"]\n",
			check: func(t *testing.T, c config.Config) {
				if r := c.Permissions.Owners["ext:ci"]; len(r.Deny) != 1 || r.Deny[0] != "ui(pane.right)" || len(r.Allow) != 1 {
					t.Errorf("Permissions = %+v, want the file's rules", c.Permissions)
				}
			},
		},
		{
			name: "ui placements",
			file: "[ui.placements.\"build-times\"]\nplacement = \"pane.left\"\n",
			check: func(t *testing.T, c config.Config) {
				if got := c.PlacementOverrides()["build-times"]; got != "pane.left" {
					t.Errorf("PlacementOverrides() = %v, want build-times in pane.left", c.PlacementOverrides())
				}
			},
		},
		{
			name: "limits",
			file: "[limits]\ncomponentBytes = 1024\ndataBytes = 4096\ndataUpdatesPerSec = 2.5\n",
			check: func(t *testing.T, c config.Config) {
				if l := c.Limits; l.ComponentBytes != 1024 || l.DataBytes != 4096 || l.DataUpdatesPerSec != 2.5 {
					t.Errorf("Limits = %+v, want the file's values", l)
				}
			},
		},
		{name: "negative limit", file: "[limits]\ndataBytes = -1\n", wantErr: "limits.dataBytes is -1"},
		{name: "bad configured placement", file: "[ui.placements.x]\nplacement = \"sidebar\"\n", wantErr: `ui.placements."x".placement`},
		{
			name: "tool permissions",
			file: "[permissions]\nallow = [\"shell(git status*)\", \"ui(band)\"]\ndeny = [\"write_file(src/gen/**)\"]\n[permissions.agent]\ndeny = [\"ui(pane.left)\"]\n",
			check: func(t *testing.T, c config.Config) {
				p := c.Permissions
				if len(p.Allow) != 2 || p.Allow[0] != "shell(git status*)" || len(p.Deny) != 1 {
					t.Errorf("Permissions = %+v, want the top-level lists", p)
				}
				if r := p.Owners["agent"]; len(r.Deny) != 1 {
					t.Errorf("Owners = %+v, want the agent's table", p.Owners)
				}
				if all := p.UI()["*"]; len(all.Allow) != 1 || all.Allow[0] != "ui(band)" {
					t.Errorf("UI()[*] = %+v, want the top-level ui rule", all)
				}
			},
		},
		{
			name: "model aliases",
			file: "[models.local]\nprovider = \"openai\"\nmodel = \"llama3.2\"\nbase_url = \"http://127.0.0.1:11434/v1\"\n",
			check: func(t *testing.T, c config.Config) {
				if a := c.Models["local"]; a.Provider != "openai" || a.Model != "llama3.2" || a.BaseURL == "" {
					t.Errorf("Models = %+v, want the local alias", c.Models)
				}
			},
		},
		{
			name: "shell hide_env",
			file: "[models.work]\nprovider = \"anthropic\"\nmodel = \"m\"\nkey_env = \"WORK_KEY\"\n[shell]\nhide_env = [\"GITHUB_TOKEN\", \"AWS_*\"]\n",
			check: func(t *testing.T, c config.Config) {
				want := []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "WORK_KEY", "GITHUB_TOKEN", "AWS_*"}
				if got := c.HiddenEnv(); !slices.Equal(got, want) {
					t.Errorf("HiddenEnv() = %q, want %q", got, want)
				}
			},
		},
		{name: "hide_env with a bad character", file: "[shell]\nhide_env = [\"AWS-*\"]\n", wantErr: "shell.hide_env[0]"},
		{name: "hide_env hiding PATH", file: "[shell]\nhide_env = [\"GITHUB_TOKEN\", \"*\"]\n", wantErr: "shell.hide_env[1]: \"*\" matches PATH"},
		{name: "unknown key lists [shell]", file: "[shell]\nhide = [\"X\"]\n", wantErr: "[shell] hide_env"},
		{name: "alias with an unknown provider", file: "[models.x]\nprovider = \"gemini\"\nmodel = \"m\"\n", wantErr: `models."x".provider`},
		{name: "alias without a model", file: "[models.x]\nprovider = \"openai\"\n", wantErr: `models."x".model`},
		{name: "short consent timeout", file: "[consent]\ntimeout = \"10ms\"\n", wantErr: "consent.timeout"},
		{name: "relative extra root", file: "[workspace]\nextra = [\"notes\"]\n", wantErr: "workspace.extra[0]"},
		{name: "bad tool rule", file: "[permissions]\nallow = [\"shell(git\"]\n", wantErr: "permissions.allow"},
		{name: "permissions list of numbers", file: "[permissions]\ndeny = [1]\n", wantErr: "permissions.deny"},
		{name: "bad permission rule", file: "[permissions.agent]\ndeny = [\"ui(sidebar)\"]\n", wantErr: "sidebar"},
		{name: "unknown key", file: "[server]\nlisen = \"x\"\n", wantErr: "unknown key server.lisen"},
		{name: "unknown key lists [kernel]", file: "[kernel]\nidle = \"1m\"\n", wantErr: "[kernel] idle_unload, checkpoint_every"},
		{name: "short idle_unload", file: "[kernel]\nidle_unload = \"10ms\"\n", wantErr: "kernel.idle_unload is 10ms"},
		{name: "negative idle_unload", file: "[kernel]\nidle_unload = \"-1m\"\n", wantErr: "kernel.idle_unload is -1m0s"},
		{name: "no checkpoints", file: "[kernel]\ncheckpoint_every = 0\n", wantErr: "kernel.checkpoint_every is 0"},
		{name: "empty store kind", file: "[store]\nkind = \"\"\n", wantErr: "store.kind is empty"},
		{
			name: "kernel and store defaults",
			check: func(t *testing.T, c config.Config) {
				if c.Kernel.IdleUnload.Duration != 10*time.Minute || c.Kernel.CheckpointEvery != 1024 || c.Store.Kind != "sqlite" {
					t.Errorf("Kernel = %+v, Store.Kind = %q; want idle_unload 10m, checkpoint_every 1024, kind sqlite", c.Kernel, c.Store.Kind)
				}
			},
		},
		{
			name: "idle_unload off",
			file: "[kernel]\nidle_unload = \"0s\"\n[store]\nkind = \"jetstream\"\n[nats]\nurls = [\"nats://a:4222\"]\n",
			check: func(t *testing.T, c config.Config) {
				if c.Kernel.IdleUnload.Duration != 0 || c.Store.Kind != "jetstream" {
					t.Errorf("Kernel = %+v, Store.Kind = %q; want idle_unload 0s, kind jetstream (checked when the store opens)", c.Kernel, c.Store.Kind)
				}
			},
		},
		{name: "bad duration", file: "[server]\nkeepalive = \"soon\"\n", wantErr: "not a duration"},
		{name: "long flush interval", file: "[server]\nflush_interval = \"2s\"\n", wantErr: "server.flush_interval is 2s"},
		{name: "negative flush interval", file: "[server]\nflush_interval = \"-1ms\"\n", wantErr: "server.flush_interval is -1ms"},
		{name: "small body limit", file: "[server]\nmax_body_bytes = 10\n", wantErr: "max_body_bytes is 10"},
		{name: "listen without a port", file: "[server]\nlisten = \"localhost\"\n", wantErr: `server.listen is "localhost", which is not host:port`},
		{name: "listen on no port", file: "[server]\nlisten = \"127.0.0.1:99999\"\n", wantErr: "port from 0 to 65535"},
		{
			name: "server limits and TLS",
			check: func(t *testing.T, c config.Config) {
				s := c.Server
				if s.ReadHeaderTimeout.Duration != 10*time.Second || s.ReadTimeout.Duration != time.Minute || s.IdleTimeout.Duration != 2*time.Minute ||
					s.HelloTimeout.Duration != 10*time.Second || s.MaxConns != 4096 || s.MaxConnsPerAddr != 16 || s.TLSCert != "" || s.TLSKey != "" {
					t.Errorf("Server = %+v, want the default limits and no TLS", s)
				}
			},
		},
		{
			name: "server limits from the file, TLS from the environment",
			file: "[server]\nread_header_timeout = \"5s\"\nread_timeout = \"30s\"\nidle_timeout = \"1m\"\nhello_timeout = \"3s\"\nmax_conns = 100\nmax_conns_per_addr = 4\ntls_cert = \"/file.pem\"\ntls_key = \"/file.key\"\n",
			env:  map[string]string{"ORRERY_TLS_CERT": "/env.pem", "ORRERY_TLS_KEY": "/env.key"},
			check: func(t *testing.T, c config.Config) {
				s := c.Server
				if s.ReadHeaderTimeout.Duration != 5*time.Second || s.ReadTimeout.Duration != 30*time.Second || s.IdleTimeout.Duration != time.Minute ||
					s.HelloTimeout.Duration != 3*time.Second || s.MaxConns != 100 || s.MaxConnsPerAddr != 4 || s.TLSCert != "/env.pem" || s.TLSKey != "/env.key" {
					t.Errorf("Server = %+v, want the file's limits and the environment's TLS files", s)
				}
			},
		},
		{name: "TLS cert without key", file: "[server]\ntls_cert = \"/c.pem\"\n", wantErr: "tls_cert and server.tls_key go together"},
		{name: "read timeout under the header timeout", file: "[server]\nread_timeout = \"1s\"\n", wantErr: "server.read_timeout is 1s"},
		{name: "zero idle timeout", file: "[server]\nidle_timeout = \"0s\"\n", wantErr: "server.idle_timeout is 0s"},
		{name: "short hello timeout", file: "[server]\nhello_timeout = \"1ms\"\n", wantErr: "server.hello_timeout is 1ms"},
		{name: "no connections", file: "[server]\nmax_conns = 0\n", wantErr: "server.max_conns is 0"},
		{name: "no connections per address", file: "[server]\nmax_conns_per_addr = -1\n", wantErr: "server.max_conns_per_addr is -1"},
		{name: "bad price name", file: "[prices.gpt]\ninput = 1\n", wantErr: "provider:model"},
		{name: "jetstream without NATS", file: "[store]\nkind = \"jetstream\"\n", wantErr: "set nats.urls (--nats URL)"},
		{name: "jetstream from the environment", env: map[string]string{"ORRERY_STORE": "jetstream"}, wantErr: "nats.embed (--nats-embed DIR)"},
		{name: "both NATS urls and embed", file: "[nats]\nurls = [\"nats://a\"]\nembed = \"/x\"\n", wantErr: "not both"},
		{name: "cluster without embed", file: "[nats]\ncluster = \"c\"\n", wantErr: "give --nats-embed DIR too"},
		{name: "cluster without a route address", file: "[nats]\nembed = \"/x\"\ncluster = \"c\"\n", wantErr: "--nats-cluster-listen"},
		{name: "embedded NATS open to the network", file: "[nats]\nembed = \"/x\"\nlisten = \"0.0.0.0:4222\"\n", wantErr: "asks its clients for no credentials"},
		{name: "route port open to the network without a secret", file: "[nats]\nembed = \"/x\"\ncluster = \"c\"\ncluster_listen = \"0.0.0.0:6222\"\n", wantErr: "--nats-cluster-secret FILE"},
		{name: "too many replicas", file: "[nats]\nreplicas = 7\n", wantErr: "nats.replicas is 7"},
		{name: "creds and nkey", file: "[nats]\ncreds = \"a\"\nnkey = \"b\"\n", wantErr: "one way to authenticate"},
		{name: "unknown nats key", file: "[nats]\nurl = \"nats://a\"\n", wantErr: "[nats] urls, creds"},
		{
			name: "NATS from the environment",
			env:  map[string]string{"ORRERY_STORE": "jetstream", "ORRERY_NATS": "nats://a:4222, nats://b:4222", "ORRERY_NATS_CREDS": "/c.creds"},
			check: func(t *testing.T, c config.Config) {
				if c.Store.Kind != "jetstream" || len(c.NATS.URLs) != 2 || c.NATS.URLs[1] != "nats://b:4222" || c.NATS.Creds != "/c.creds" {
					t.Errorf("Store.Kind %q, NATS %+v; want jetstream, two URLs and the creds file", c.Store.Kind, c.NATS)
				}
			},
		},
		{name: "bad env number", env: map[string]string{"ORRERY_MAX_BODY_BYTES": "lots"}, wantErr: "ORRERY_MAX_BODY_BYTES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			env := map[string]string{"ORRERY_CONFIG": filepath.Join(dir, "absent.toml"), "HOME": dir}
			path := ""
			if tt.file != "" {
				path = filepath.Join(dir, "config.toml")
				if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for k, v := range tt.env {
				env[k] = v
			}
			if path == "" {
				env["ORRERY_CONFIG"] = ""
			}
			c, err := config.Load(path, func(k string) string { return env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() = %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestMissingNamedFile(t *testing.T) {
	_, err := config.Load(filepath.Join(t.TempDir(), "nope.toml"), func(string) string { return "" })
	if err == nil {
		t.Fatal("Load(missing file) = nil, want an error")
	}
}
