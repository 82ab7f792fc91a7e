// Package config loads Orrery's configuration: built-in defaults, then a
// TOML file, then environment variables, each overriding the one before.
// Command-line flags override all three in cmd/orrery. With no file and no
// environment the defaults run a complete kernel.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/tool/mcp"
	"github.com/getorrery/orrery/ui"
)

// Config is the whole configuration.
type Config struct {
	Server ServerConfig     `toml:"server"`
	Kernel KernelConfig     `toml:"kernel"`
	Store  StoreConfig      `toml:"store"`
	Agent  AgentConfig      `toml:"agent"`
	Prices agent.PriceTable `toml:"prices"`
	// Models are [models.<alias>] tables: named models such as a local
	// server, usable wherever a model spec is.
	Models map[string]models.Alias `toml:"models"`
	// UI holds [ui.placements."<id>"] placement = …: where the person wants
	// a surface that some owner places under that id.
	UI UIConfig `toml:"ui"`
	// Permissions are [permissions] allow, ask and deny for tool calls,
	// and the placement rules per owner, [permissions."<owner>"], such as
	// deny = ["ui(pane.right)"].
	Permissions Permissions `toml:"permissions"`
	// Consent is the [consent] table: how the gate asks.
	Consent ConsentConfig `toml:"consent"`
	// Workspace is the [workspace] table: where tools may reach.
	Workspace WorkspaceConfig `toml:"workspace"`
	// Shell is the [shell] table: what the shell tool's commands get.
	Shell ShellConfig `toml:"shell"`
	// MCP is the [mcp] table: [mcp.servers.<name>], the MCP servers whose
	// tools the agent may find and call (as mcp.<name>.<tool>).
	MCP MCPConfig `toml:"mcp"`
	// Limits is the [limits] table: what a component may hold.
	Limits LimitsConfig `toml:"limits"`
	// Agents are [agents.<name>] tables: external ACP agents (command,
	// args, env) a session can run instead of the built-in agent, chosen
	// with --agent NAME or session.new {agent}.
	Agents map[string]AgentDef `toml:"agents"`
	// AgentProcesses is what the [agents] table itself sets, beside its
	// agents: how long an idle agent process lives, and how many may run.
	AgentProcesses AgentProcessConfig `toml:"-"`
	// Telemetry is the [telemetry] table: where traces go and where
	// metrics are served.
	Telemetry TelemetryConfig `toml:"telemetry"`
	// NATS is the [nats] table: the NATS cluster a [store] kind =
	// "jetstream" log lives in, or the embedded server that joins one.
	NATS NATSConfig `toml:"nats"`

	// File is the file the configuration was read from, or "".
	File string `toml:"-"`
}

// ServerConfig is the [server] table.
type ServerConfig struct {
	Listen       string   `toml:"listen"`
	MaxBodyBytes int64    `toml:"max_body_bytes"`
	KeepAlive    Duration `toml:"keepalive"`
	// FlushInterval is the shortest time between two writes to one client:
	// frames published sooner go out together. 0 writes each at once.
	FlushInterval Duration `toml:"flush_interval"`
	// AllowedHosts are the names, besides localhost and this machine's IP
	// addresses, that a request's Host header may give: the names a reverse
	// proxy or DNS gives this server. "*.example.com" matches the names
	// below it; "*" any name (it gives up the defence against DNS
	// rebinding).
	AllowedHosts []string `toml:"allowed_hosts"`
	// AllowedOrigins are the browser origins (scheme://host[:port]),
	// besides the server's own, whose pages may call it. Their pages answer
	// consent only with a token. "*" admits every origin.
	AllowedOrigins []string `toml:"allowed_origins"`
	// AllowAgentCommands lets a request name an agent by its command line
	// (acp:COMMAND) or any other spec that starts a process; off, a request
	// may name only what config and the command line define.
	AllowAgentCommands bool `toml:"allow_agent_commands"`
	// TLSCert and TLSKey are the PEM files of the certificate (its chain)
	// and key the server serves HTTPS with; both or neither.
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// ReadHeaderTimeout bounds the reading of a request's headers,
	// ReadTimeout that of a whole request with its body (a stream is not
	// bound by it once its request is read), and IdleTimeout how long a
	// keep-alive connection waits for its next request.
	ReadHeaderTimeout Duration `toml:"read_header_timeout"`
	ReadTimeout       Duration `toml:"read_timeout"`
	IdleTimeout       Duration `toml:"idle_timeout"`
	// HelloTimeout is how long a WebSocket that needs a token may go
	// without a hello that gives one.
	HelloTimeout Duration `toml:"hello_timeout"`
	// MaxConns bounds the connections open at once; MaxConnsPerAddr
	// bounds those from one address off loopback that have not presented a
	// valid token.
	MaxConns        int `toml:"max_conns"`
	MaxConnsPerAddr int `toml:"max_conns_per_addr"`
}

// TelemetryConfig is the [telemetry] table. OpenTelemetry's own
// variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_SERVICE_NAME …) override it, as they override every OpenTelemetry
// SDK's settings.
type TelemetryConfig struct {
	// OTLPEndpoint is the base URL of an OpenTelemetry collector's OTLP/HTTP
	// receiver (http://localhost:4318): the spans of every run, model call,
	// tool call and extension call go to its /v1/traces. "" exports no
	// spans.
	OTLPEndpoint string `toml:"otlp_endpoint"`
	// OTLPHeaders are sent with each export (a vendor's API key, say).
	OTLPHeaders map[string]string `toml:"otlp_headers"`
	// ServiceName is the spans' service.name ("orrery" when empty).
	ServiceName string `toml:"service_name"`
	// MetricsListen is an address (host:port) that serves GET /metrics
	// alone, with no token, as --metrics-listen does. Give one only
	// scrapers reach.
	MetricsListen string `toml:"metrics_listen"`
}

// KernelConfig is the [kernel] table.
type KernelConfig struct {
	// IdleUnload is how long a session with no run, no subscriber and no
	// extension process stays in memory; then it is unloaded, and loaded
	// again from its checkpoint on the next use. "0s" keeps every session
	// loaded.
	IdleUnload Duration `toml:"idle_unload"`
	// CheckpointEvery is how many frames a session logs between two
	// checkpoints of its state (it also checkpoints at each run's end).
	CheckpointEvery int `toml:"checkpoint_every"`
}

// StoreConfig is the [store] table.
type StoreConfig struct {
	// Data is the data directory; the SQLite log is Data/orrery.db.
	Data string `toml:"data"`
	// Kind is the store implementation: "sqlite" (the default).
	Kind string `toml:"kind"`
}

// NATSConfig is the [nats] table, read when [store] kind is "jetstream".
// A node either connects to a NATS cluster (URLs) or runs a NATS server
// inside itself (Embed) that may route to other nodes' (Cluster, Routes).
type NATSConfig struct {
	// URLs are the servers of an existing NATS cluster.
	URLs []string `toml:"urls"`
	// Creds is a NATS credentials file (a user JWT and its nkey seed).
	Creds string `toml:"creds"`
	// NKey is a file holding an nkey seed (SU…), for nkey authentication.
	NKey string `toml:"nkey"`
	// Embed is the directory of an embedded NATS server's JetStream files;
	// set, the node runs its own server instead of connecting to URLs.
	Embed string `toml:"embed"`
	// Listen is the embedded server's client address; empty serves only
	// the node itself (in-process).
	Listen string `toml:"listen"`
	// Cluster names the cluster the embedded server joins.
	Cluster string `toml:"cluster"`
	// ClusterListen is the embedded server's route address, which the
	// other members' Routes name.
	ClusterListen string `toml:"cluster_listen"`
	// Routes are the other members' route URLs (nats://host:6222).
	Routes []string `toml:"routes"`
	// ClusterSecret is a file holding the secret every member of an
	// embedded cluster shares: a route that does not present it is
	// refused. Required when the route address is off loopback.
	ClusterSecret string `toml:"cluster_secret"`
	// Name names the embedded server in its cluster.
	Name string `toml:"name"`
	// Replicas is how many servers hold each message: 1, or 3 in a
	// cluster of three or more.
	Replicas int `toml:"replicas"`
	// Prefix names the stream, buckets and subjects ("orrery"), so that
	// several Orrery clusters can share one NATS cluster.
	Prefix string `toml:"prefix"`
	// LeaseTTL is how long a node owns a session without renewing: a
	// dead node's sessions move to the others after it. 10s by default.
	LeaseTTL Duration `toml:"lease_ttl"`
}

// UIConfig is the [ui] table.
type UIConfig struct {
	Placements map[string]PlacementConfig `toml:"placements"`
}

// PlacementConfig is one [ui.placements."<id>"] table.
type PlacementConfig struct {
	Placement string `toml:"placement"`
}

// PlacementOverrides returns the configured placement of each id.
func (c *Config) PlacementOverrides() map[string]string {
	out := make(map[string]string, len(c.UI.Placements))
	for id, p := range c.UI.Placements {
		out[id] = p.Placement
	}
	return out
}

// ConsentConfig is the [consent] table.
type ConsentConfig struct {
	// Timeout is how long a consent request waits for an answer before it
	// is denied.
	Timeout Duration `toml:"timeout"`
}

// WorkspaceConfig is the [workspace] table.
type WorkspaceConfig struct {
	// Extra are directories outside a session's cwd that its tools may
	// also read and write.
	Extra []string `toml:"extra"`
	// Roots are the directories a session's cwd may be in when a request
	// names it; empty means the directory the kernel was started in.
	Roots []string `toml:"roots"`
}

// ShellConfig is the [shell] table.
type ShellConfig struct {
	// HideEnv names more variables of Orrery's environment that the shell
	// tool's commands do not get, as names or patterns with * (GITHUB_TOKEN,
	// AWS_*). The models' keys (OPENAI_API_KEY, ANTHROPIC_API_KEY, every
	// [models.<alias>] key_env) and variables whose values are URLs with
	// credentials are hidden whatever it says.
	HideEnv []string `toml:"hide_env"`
}

// HiddenEnv is what the shell tool hides: the models' keys, then
// shell.hide_env.
func (c *Config) HiddenEnv() []string {
	return append(models.KeyEnvs(c.Models), c.Shell.HideEnv...)
}

// MCPConfig is the [mcp] table.
type MCPConfig struct {
	// Servers are the [mcp.servers.<name>] tables: command, args, env and
	// cwd for a stdio server, or url and headers for streamable HTTP.
	Servers map[string]mcp.ServerConfig `toml:"servers"`
	// ConnectTimeout bounds each server's start and handshake.
	ConnectTimeout Duration `toml:"connect_timeout"`
}

// LimitsConfig is the [limits] table. A key left out (0) means the
// default: 64 KiB structures, 256 KiB data, 10 data updates a second.
type LimitsConfig struct {
	// ComponentBytes is the most bytes a component's structure may have.
	ComponentBytes int `toml:"componentBytes"`
	// DataBytes is the most bytes one component's data may have.
	DataBytes int `toml:"dataBytes"`
	// DataUpdatesPerSec is how many data updates a second a component
	// publishes; faster ones are coalesced, the last value winning.
	DataUpdatesPerSec float64 `toml:"dataUpdatesPerSec"`
}

// AgentDef is one [agents.<name>] table: an ACP agent's command line and
// the variables added to Orrery's environment for it.
type AgentDef struct {
	Command string            `toml:"command"`
	Args    []string          `toml:"args"`
	Env     map[string]string `toml:"env"`

	// setting is a value [agents] holds that is not a table: one of
	// AgentProcessConfig's keys, which readFile takes out.
	setting any
}

// UnmarshalTOML reads one [agents.<name>] table, or a setting of [agents]
// itself (idle_stop = "5m"), which readFile moves to AgentProcesses.
func (d *AgentDef) UnmarshalTOML(v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		d.setting = v
		return nil
	}
	for k, val := range m {
		var bad bool
		switch k {
		case "command":
			s, ok := val.(string)
			d.Command, bad = s, !ok
		case "args":
			list, ok := val.([]any)
			bad = !ok
			for _, a := range list {
				s, ok := a.(string)
				bad = bad || !ok
				d.Args = append(d.Args, s)
			}
		case "env":
			env, ok := val.(map[string]any)
			bad = !ok
			d.Env = map[string]string{}
			for name, v := range env {
				s, ok := v.(string)
				bad = bad || !ok
				d.Env[name] = s
			}
		default:
			return fmt.Errorf("unknown key %q: an agent takes command, args and env", k)
		}
		if bad {
			return fmt.Errorf("%s has the wrong type: command is a string, args a list of strings, env a table of strings", k)
		}
	}
	return nil
}

// AgentProcessConfig is the [agents] table's own keys.
type AgentProcessConfig struct {
	// IdleStop is how long an ACP agent process whose session has no turn
	// in flight lives; the next prompt starts it again, resuming the
	// agent's session when it can. "0s" keeps them until the kernel stops.
	IdleStop Duration
	// MaxProcesses bounds the ACP agent processes running at once, over
	// every agent; past it a prompt that needs a new one is refused.
	MaxProcesses int
}

// takeAgentSettings moves the [agents] table's own keys out of Agents.
func (c *Config) takeAgentSettings() error {
	for name, d := range c.Agents {
		if d.setting == nil {
			continue
		}
		delete(c.Agents, name)
		switch name {
		case "idle_stop":
			s, ok := d.setting.(string)
			dur, err := time.ParseDuration(s)
			if !ok || err != nil {
				return fmt.Errorf("agents.idle_stop is %v: give a duration such as \"5m\", or \"0s\" to keep idle agents running", d.setting)
			}
			c.AgentProcesses.IdleStop = Duration{dur}
		case "max_processes":
			n, ok := d.setting.(int64)
			if !ok {
				return fmt.Errorf("agents.max_processes is %v: give a whole number of processes", d.setting)
			}
			c.AgentProcesses.MaxProcesses = int(n)
		default:
			return fmt.Errorf("agents.%s is not a table: an agent is [agents.%s] with command, args and env; [agents] itself takes idle_stop and max_processes", name, name)
		}
	}
	return nil
}

// AgentConfig is the [agent] table.
type AgentConfig struct {
	// Model is the default model spec; empty chooses by the keys in the
	// environment (models.Auto), else offline.
	Model    string `toml:"model"`
	MaxSteps int    `toml:"max_steps"`
}

// Duration is a time.Duration written as "15s" in TOML.
type Duration struct{ time.Duration }

// UnmarshalText parses a duration such as "15s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration: write it as 15s, 500ms or 2m", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration as "15s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Default returns the built-in configuration.
func Default() Config {
	return Config{
		Server: ServerConfig{Listen: "127.0.0.1:7411", MaxBodyBytes: 4 << 20, KeepAlive: Duration{15 * time.Second}, FlushInterval: Duration{5 * time.Millisecond},
			ReadHeaderTimeout: Duration{10 * time.Second}, ReadTimeout: Duration{time.Minute}, IdleTimeout: Duration{2 * time.Minute},
			HelloTimeout: Duration{10 * time.Second}, MaxConns: 4096, MaxConnsPerAddr: 16},
		Kernel:         KernelConfig{IdleUnload: Duration{10 * time.Minute}, CheckpointEvery: 1024},
		Store:          StoreConfig{Data: DefaultDataDir(), Kind: "sqlite"},
		Agent:          AgentConfig{MaxSteps: agent.DefaultMaxSteps},
		AgentProcesses: AgentProcessConfig{IdleStop: Duration{5 * time.Minute}, MaxProcesses: 32},
		Prices:         agent.PriceTable{},
		Consent:        ConsentConfig{Timeout: Duration{5 * time.Minute}},
		MCP:            MCPConfig{ConnectTimeout: Duration{30 * time.Second}},
	}
}

// DefaultDataDir is the user's data directory for Orrery:
// $XDG_DATA_HOME/orrery or ~/.local/share/orrery on Unix,
// ~/Library/Application Support/orrery on macOS, %LocalAppData%\orrery on
// Windows.
func DefaultDataDir() string {
	switch runtime.GOOS {
	case "darwin", "windows":
		if dir, err := os.UserConfigDir(); err == nil {
			if runtime.GOOS == "windows" {
				if local := os.Getenv("LocalAppData"); local != "" {
					dir = local
				}
			}
			return filepath.Join(dir, "orrery")
		}
	}
	if xdg := os.Getenv("XDG_DATA_HOME"); xdg != "" {
		return filepath.Join(xdg, "orrery")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "orrery")
	}
	return filepath.Join(os.TempDir(), "orrery")
}

// DefaultFile is where the configuration is looked for when ORRERY_CONFIG
// and --config name none: orrery/orrery.toml in the user's config dir.
func DefaultFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "orrery", "orrery.toml")
}

// ProjectFile returns the project's .orrery/orrery.toml, looked for in dir
// and its parents, or "" when there is none.
func ProjectFile(dir string) string {
	for dir != "" {
		path := filepath.Join(dir, ".orrery", "orrery.toml")
		if st, err := os.Stat(path); err == nil && !st.IsDir() {
			return path
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	return ""
}

// Load builds the configuration. path names the file; "" means
// $ORRERY_CONFIG, then DefaultFile if it exists. A named file that is
// missing is an error; getenv reads the environment (os.Getenv when nil).
func Load(path string, getenv func(string) string) (Config, error) {
	cfg, err := Read(path, getenv)
	if err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// Read is Load without the final Validate, for a caller that applies its
// own flags over the result and validates after.
func Read(path string, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg := Default()
	explicit := path != ""
	if path == "" {
		path = getenv("ORRERY_CONFIG")
		explicit = path != ""
	}
	if path == "" {
		path = DefaultFile()
	}
	if path != "" {
		if err := cfg.readFile(path); err != nil {
			if explicit || !errors.Is(err, fs.ErrNotExist) {
				return cfg, err
			}
		}
	}
	// The project's own file, when there is one, goes over the user's.
	if wd, err := os.Getwd(); err == nil && !explicit {
		if project := ProjectFile(wd); project != "" {
			if err := cfg.readFile(project); err != nil {
				return cfg, err
			}
		}
	}
	if err := cfg.applyEnv(getenv); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func (c *Config) readFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	md, err := toml.Decode(string(data), c)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if err := c.takeAgentSettings(); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		sort.Strings(keys)
		return fmt.Errorf("config %s: unknown key %s: the tables are [server] listen, max_body_bytes, keepalive, flush_interval, allowed_hosts, allowed_origins, allow_agent_commands, tls_cert, tls_key, read_header_timeout, read_timeout, idle_timeout, hello_timeout, max_conns, max_conns_per_addr; [workspace] roots, extra; [kernel] idle_unload, checkpoint_every; [store] data, kind; [nats] urls, creds, nkey, embed, listen, cluster, cluster_listen, routes, cluster_secret, name, replicas, prefix, lease_ttl; [agent] model, max_steps; [prices.\"provider:model\"] input, output, cached_input; [ui.placements.\"id\"] placement; [permissions.\"owner\"] allow, ask, deny; [shell] hide_env; [agents] idle_stop, max_processes; [agents.name] command, args, env",
			path, strings.Join(keys, ", "))
	}
	c.File = path
	return nil
}

// Env lists the environment variables Load reads, and what each sets.
var Env = []struct{ Name, Sets string }{
	{"ORRERY_CONFIG", "the config file"},
	{"ORRERY_LISTEN", "server.listen"},
	{"ORRERY_DATA", "store.data"},
	{"ORRERY_MODEL", "agent.model"},
	{"ORRERY_MAX_BODY_BYTES", "server.max_body_bytes"},
	{"ORRERY_ALLOWED_HOSTS", "server.allowed_hosts (comma-separated)"},
	{"ORRERY_ALLOWED_ORIGINS", "server.allowed_origins (comma-separated)"},
	{"ORRERY_TLS_CERT", "server.tls_cert"},
	{"ORRERY_TLS_KEY", "server.tls_key"},
	{"ORRERY_METRICS_LISTEN", "telemetry.metrics_listen"},
	{"ORRERY_STORE", "store.kind"},
	{"ORRERY_NATS", "nats.urls (comma-separated)"},
	{"ORRERY_NATS_CREDS", "nats.creds"},
	{"ORRERY_NATS_NKEY", "nats.nkey"},
}

func (c *Config) applyEnv(getenv func(string) string) error {
	if v := getenv("ORRERY_LISTEN"); v != "" {
		c.Server.Listen = v
	}
	if v := getenv("ORRERY_DATA"); v != "" {
		c.Store.Data = v
	}
	if v := getenv("ORRERY_MODEL"); v != "" {
		c.Agent.Model = v
	}
	if v := getenv("ORRERY_ALLOWED_HOSTS"); v != "" {
		c.Server.AllowedHosts = SplitList(v)
	}
	if v := getenv("ORRERY_ALLOWED_ORIGINS"); v != "" {
		c.Server.AllowedOrigins = SplitList(v)
	}
	if v := getenv("ORRERY_TLS_CERT"); v != "" {
		c.Server.TLSCert = v
	}
	if v := getenv("ORRERY_TLS_KEY"); v != "" {
		c.Server.TLSKey = v
	}
	if v := getenv("ORRERY_METRICS_LISTEN"); v != "" {
		c.Telemetry.MetricsListen = v
	}
	if v := getenv("ORRERY_STORE"); v != "" {
		c.Store.Kind = v
	}
	if v := getenv("ORRERY_NATS"); v != "" {
		c.NATS.URLs = SplitList(v)
	}
	if v := getenv("ORRERY_NATS_CREDS"); v != "" {
		c.NATS.Creds = v
	}
	if v := getenv("ORRERY_NATS_NKEY"); v != "" {
		c.NATS.NKey = v
	}
	if v := getenv("ORRERY_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("ORRERY_MAX_BODY_BYTES=%q is not a whole number of bytes", v)
		}
		c.Server.MaxBodyBytes = n
	}
	return nil
}

// Validate checks the values, naming the key and the fix.
func (c *Config) Validate() error {
	switch {
	case c.Server.Listen == "":
		return errors.New("server.listen is empty: set it to host:port, e.g. 127.0.0.1:7411")
	case !validListen(c.Server.Listen):
		return fmt.Errorf("server.listen is %q, which is not host:port: set it to an address and a port from 0 to 65535, e.g. 127.0.0.1:7411", c.Server.Listen)
	case c.Server.MaxBodyBytes < 1024:
		return fmt.Errorf("server.max_body_bytes is %d: set it to at least 1024", c.Server.MaxBodyBytes)
	case c.Server.KeepAlive.Duration < 100*time.Millisecond:
		return fmt.Errorf("server.keepalive is %s: set it to at least 100ms", c.Server.KeepAlive)
	case c.Server.FlushInterval.Duration < 0 || c.Server.FlushInterval.Duration > time.Second:
		return fmt.Errorf("server.flush_interval is %s: set it between 0s (write each frame at once) and 1s; the default is 5ms", c.Server.FlushInterval)
	case (c.Server.TLSCert == "") != (c.Server.TLSKey == ""):
		return errors.New("server.tls_cert and server.tls_key go together: set both (the certificate and its key, PEM files) to serve HTTPS, or neither")
	case c.Server.ReadHeaderTimeout.Duration < 100*time.Millisecond:
		return fmt.Errorf("server.read_header_timeout is %s: set it to at least 100ms; the default is 10s", c.Server.ReadHeaderTimeout)
	case c.Server.ReadTimeout.Duration < c.Server.ReadHeaderTimeout.Duration:
		return fmt.Errorf("server.read_timeout is %s: it covers the headers too, so set it to at least server.read_header_timeout (%s); the default is 1m", c.Server.ReadTimeout, c.Server.ReadHeaderTimeout)
	case c.Server.IdleTimeout.Duration < time.Second:
		return fmt.Errorf("server.idle_timeout is %s: set it to at least 1s; the default is 2m", c.Server.IdleTimeout)
	case c.Server.HelloTimeout.Duration < 100*time.Millisecond:
		return fmt.Errorf("server.hello_timeout is %s: set it to at least 100ms; the default is 10s", c.Server.HelloTimeout)
	case c.Server.MaxConns < 1:
		return fmt.Errorf("server.max_conns is %d: set it to 1 or more; the default is 4096", c.Server.MaxConns)
	case c.Server.MaxConnsPerAddr < 1:
		return fmt.Errorf("server.max_conns_per_addr is %d: set it to 1 or more; the default is 16", c.Server.MaxConnsPerAddr)
	case c.Store.Data == "":
		return errors.New("store.data is empty: set it to a directory, or set ORRERY_DATA")
	case c.Store.Kind == "":
		return errors.New("store.kind is empty: set it to sqlite or jetstream, or leave it out")
	case c.Store.Kind == "jetstream" && len(c.NATS.URLs) == 0 && c.NATS.Embed == "":
		return errors.New("store.kind is jetstream but there is no NATS to keep it in: set nats.urls (--nats URL) to join a cluster, or nats.embed (--nats-embed DIR) to run a server in the node")
	case len(c.NATS.URLs) > 0 && c.NATS.Embed != "":
		return errors.New("nats.urls and nats.embed are both set: a node either connects to a NATS cluster (urls) or runs its own server (embed), not both")
	case c.NATS.Cluster != "" && c.NATS.Embed == "":
		return errors.New("nats.cluster is set without nats.embed: only an embedded server joins a cluster; give --nats-embed DIR too")
	case c.NATS.Cluster != "" && c.NATS.ClusterListen == "":
		return errors.New("nats.cluster is set without nats.cluster_listen: give the address the other members route to, e.g. --nats-cluster-listen 0.0.0.0:6222")
	case c.NATS.ClusterListen != "" && !validListen(c.NATS.ClusterListen):
		return fmt.Errorf("nats.cluster_listen is %q, which is not host:port, e.g. 0.0.0.0:6222", c.NATS.ClusterListen)
	case c.NATS.ClusterListen != "" && !LoopbackListen(c.NATS.ClusterListen) && c.NATS.ClusterSecret == "":
		return fmt.Errorf("nats.cluster_listen is %q, off loopback, and a route port without a secret admits any NATS server that reaches it as a member: give every member the same secret file with --nats-cluster-secret FILE ([nats] cluster_secret), made once with e.g. head -c 32 /dev/urandom | base64 > cluster.secret", c.NATS.ClusterListen)
	case c.NATS.Listen != "" && !validListen(c.NATS.Listen):
		return fmt.Errorf("nats.listen is %q, which is not host:port, e.g. 127.0.0.1:4222", c.NATS.Listen)
	case c.NATS.Listen != "" && !LoopbackListen(c.NATS.Listen):
		return fmt.Errorf("nats.listen is %q, but the embedded NATS server asks its clients for no credentials, and a client of it can act as any node: listen on loopback (127.0.0.1:4222), or run a NATS cluster with authentication and join it with --nats", c.NATS.Listen)
	case c.NATS.Replicas < 0 || c.NATS.Replicas > 5:
		return fmt.Errorf("nats.replicas is %d: set it from 1 to 5 (3 in a three-server cluster)", c.NATS.Replicas)
	case c.NATS.LeaseTTL.Duration != 0 && (c.NATS.LeaseTTL.Duration < time.Second || c.NATS.LeaseTTL.Duration > 5*time.Minute):
		return fmt.Errorf("nats.lease_ttl is %s: set it from 1s to 5m; the default is 10s", c.NATS.LeaseTTL)
	case c.NATS.Creds != "" && c.NATS.NKey != "":
		return errors.New("nats.creds and nats.nkey are both set: give one way to authenticate")
	case c.Kernel.IdleUnload.Duration < 0 || c.Kernel.IdleUnload.Duration > 0 && c.Kernel.IdleUnload.Duration < time.Second:
		return fmt.Errorf("kernel.idle_unload is %s: set it to 1s or more, or 0s to keep every session loaded; the default is 10m", c.Kernel.IdleUnload)
	case c.Kernel.CheckpointEvery < 1:
		return fmt.Errorf("kernel.checkpoint_every is %d: set it to 1 or more frames; the default is 1024", c.Kernel.CheckpointEvery)
	case c.Agent.MaxSteps < 1:
		return fmt.Errorf("agent.max_steps is %d: set it to 1 or more", c.Agent.MaxSteps)
	case c.Consent.Timeout.Duration < time.Second:
		return fmt.Errorf("consent.timeout is %s: set it to at least 1s", c.Consent.Timeout)
	case c.Limits.ComponentBytes < 0:
		return fmt.Errorf("limits.componentBytes is %d: set it to a size in bytes, or leave it out for 65536", c.Limits.ComponentBytes)
	case c.Limits.DataBytes < 0:
		return fmt.Errorf("limits.dataBytes is %d: set it to a size in bytes, or leave it out for 262144", c.Limits.DataBytes)
	case c.Limits.DataUpdatesPerSec < 0:
		return fmt.Errorf("limits.dataUpdatesPerSec is %g: set it to more than 0, or leave it out for 10", c.Limits.DataUpdatesPerSec)
	case c.AgentProcesses.IdleStop.Duration < 0 || c.AgentProcesses.IdleStop.Duration > 0 && c.AgentProcesses.IdleStop.Duration < time.Second:
		return fmt.Errorf("agents.idle_stop is %s: set it to 1s or more, or 0s to keep idle agents running; the default is 5m", c.AgentProcesses.IdleStop)
	case c.AgentProcesses.MaxProcesses < 1:
		return fmt.Errorf("agents.max_processes is %d: set it to 1 or more; the default is 32", c.AgentProcesses.MaxProcesses)
	case c.Telemetry.MetricsListen != "" && !validListen(c.Telemetry.MetricsListen):
		return fmt.Errorf("telemetry.metrics_listen is %q, which is not host:port: set it to an address only scrapers reach, e.g. 127.0.0.1:9464", c.Telemetry.MetricsListen)
	}
	if e := c.Telemetry.OTLPEndpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("telemetry.otlp_endpoint is %q, which is not an http(s) URL: give the collector's OTLP/HTTP receiver, e.g. http://localhost:4318", e)
		}
	}
	for i, p := range c.Shell.HideEnv {
		if err := tool.CheckEnvPattern(p); err != nil {
			return fmt.Errorf("shell.hide_env[%d]: %w", i, err)
		}
	}
	for i, dir := range c.Workspace.Extra {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("workspace.extra[%d] is %q: write an absolute path", i, dir)
		}
	}
	for i, dir := range c.Workspace.Roots {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("workspace.roots[%d] is %q: write an absolute path", i, dir)
		}
		if filepath.Clean(dir) == "/" {
			return fmt.Errorf("workspace.roots[%d] is \"/\": a root is where a request may put a session, so name the directories that hold your projects, not the whole machine", i)
		}
	}
	for i, h := range c.Server.AllowedHosts {
		if err := checkAllowedHost(h); err != nil {
			return fmt.Errorf("server.allowed_hosts[%d] is %q: %w", i, h, err)
		}
	}
	for i, o := range c.Server.AllowedOrigins {
		if err := checkAllowedOrigin(o); err != nil {
			return fmt.Errorf("server.allowed_origins[%d] is %q: %w", i, o, err)
		}
	}
	if err := c.Permissions.Validate(); err != nil {
		return err
	}
	for id, p := range c.UI.Placements {
		if _, err := ui.ParsePlacement(p.Placement); err != nil {
			return fmt.Errorf("ui.placements.%q.placement: %w", id, err)
		}
	}
	for name, srv := range c.MCP.Servers {
		if err := mcp.ValidateName(name); err != nil {
			return err
		}
		if err := srv.Validate(); err != nil {
			return fmt.Errorf("mcp.servers.%s: %w", name, err)
		}
	}
	for name, a := range c.Agents {
		switch {
		case a.Command == "":
			return fmt.Errorf("agents.%q.command is empty: name the program that speaks ACP on stdio, such as gemini (with args = [\"--acp\"])", name)
		case name == "" || strings.ContainsAny(name, ": "):
			return fmt.Errorf("agents.%q: an agent's name has no colon or space, so --agent NAME is never read as acp:COMMAND", name)
		}
	}
	for name, a := range c.Models {
		switch {
		case a.Provider != "openai" && a.Provider != "anthropic" && a.Provider != "offline":
			return fmt.Errorf("models.%q.provider is %q: set it to openai, anthropic or offline", name, a.Provider)
		case a.Model == "" && a.Provider != "offline":
			return fmt.Errorf("models.%q.model is empty: name the model at the provider, such as llama3.2", name)
		case strings.Contains(name, ":"):
			return fmt.Errorf("models.%q: an alias has no colon, so it is never read as provider:name", name)
		}
	}
	for name, p := range c.Prices {
		if !strings.Contains(name, ":") {
			return fmt.Errorf("prices.%q: name prices as \"provider:model\" or \"provider:*\"", name)
		}
		if p.Input < 0 || p.Output < 0 || p.CachedInput < 0 {
			return fmt.Errorf("prices.%q: prices cannot be negative", name)
		}
	}
	return nil
}

// DBPath is the SQLite log's path inside the data dir.
func (c *Config) DBPath() string { return filepath.Join(c.Store.Data, "orrery.db") }

// SplitList splits a comma-separated list, dropping blanks and the spaces
// around each item.
func SplitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// checkAllowedHost checks one server.allowed_hosts entry: a host name, an
// IP address, "*.name" or "*"; no scheme, port or path.
func checkAllowedHost(h string) error {
	name := strings.TrimPrefix(h, "*.")
	switch {
	case h == "*":
		return nil
	case name == "":
		return errors.New("write a host name such as orrery.example.com")
	case strings.Contains(h, "://"):
		return errors.New("write the host name alone, without a scheme (that goes in allowed_origins)")
	case strings.ContainsAny(name, "/*?#@ ") || (strings.Contains(name, ":") && net.ParseIP(strings.Trim(name, "[]")) == nil):
		return errors.New("write the host name alone, without a port or path, such as orrery.example.com")
	}
	return nil
}

// checkAllowedOrigin checks one server.allowed_origins entry: an origin
// scheme://host[:port] with an http or https scheme, or "*".
func checkAllowedOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("write an origin as scheme://host[:port], such as https://app.example.com or http://localhost:3000")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("an origin has no path, query or user: write scheme://host[:port] only")
	}
	return nil
}

// LoopbackListen reports whether the listen address addr (host:port)
// listens on loopback only.
func LoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validListen reports whether addr is host:port with a port from 0 to
// 65535 (the host may be empty: every address).
func validListen(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535
}
