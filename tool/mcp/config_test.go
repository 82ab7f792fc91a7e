package mcp_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	orrerymcp "github.com/getorrery/orrery/tool/mcp"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  orrerymcp.ServerConfig
		want string // in the error; "" for valid
	}{
		{"command", orrerymcp.ServerConfig{Command: "npx", Args: []string{"-y", "server"}, Env: map[string]string{"TOKEN": "x"}, Cwd: "/tmp"}, ""},
		{"url", orrerymcp.ServerConfig{URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer x"}}, ""},
		{"url over http", orrerymcp.ServerConfig{URL: "http://127.0.0.1:8931/mcp"}, ""},
		{"neither", orrerymcp.ServerConfig{}, "set command"},
		{"neither, with args", orrerymcp.ServerConfig{Args: []string{"x"}}, "set command"},
		{"both", orrerymcp.ServerConfig{Command: "x", URL: "http://h/mcp"}, "not both"},
		{"headers on a command", orrerymcp.ServerConfig{Command: "x", Headers: map[string]string{"A": "b"}}, "headers apply only to a url server"},
		{"args on a url", orrerymcp.ServerConfig{URL: "http://h/mcp", Args: []string{"x"}}, "apply only to a command server"},
		{"env on a url", orrerymcp.ServerConfig{URL: "http://h/mcp", Env: map[string]string{"A": "b"}}, "apply only to a command server"},
		{"cwd on a url", orrerymcp.ServerConfig{URL: "http://h/mcp", Cwd: "/"}, "apply only to a command server"},
		{"not a url", orrerymcp.ServerConfig{URL: "localhost:8931"}, "write it as http://host:port/path"},
		{"ws url", orrerymcp.ServerConfig{URL: "ws://h/mcp"}, "not an http or https URL"},
		{"no host", orrerymcp.ServerConfig{URL: "http:///mcp"}, "not an http or https URL"},
		{"ws url with credentials", orrerymcp.ServerConfig{URL: "ws://u:pw@h/mcp?token=t"}, `"ws://***@h/mcp?token=***" is not an http or https URL`},
		{"bad env name", orrerymcp.ServerConfig{Command: "x", Env: map[string]string{"A=B": "c"}}, "invalid variable name"},
		{"bad header name", orrerymcp.ServerConfig{URL: "http://h/mcp", Headers: map[string]string{"Bad Name": "c"}}, "invalid header name"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tt.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

func TestValidateName(t *testing.T) {
	for _, name := range []string{"fs", "my-server", "server_2", "GitHub"} {
		if err := orrerymcp.ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"", "a.b", "a b", "ä", "a/b", "x\n"} {
		err := orrerymcp.ValidateName(name)
		if err == nil || !strings.Contains(err.Error(), "rename [mcp.servers.") {
			t.Errorf("ValidateName(%q) = %v, want an error that says to rename it", name, err)
		}
	}
}

func TestConfigFromTOML(t *testing.T) {
	const doc = `
[mcp.servers.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]
env = { NODE_ENV = "production" }
cwd = "/srv"

[mcp.servers.web]
url = "http://127.0.0.1:8931/mcp"
headers = { Authorization = "Bearer t" }
`
	var cfg struct {
		MCP struct {
			Servers map[string]orrerymcp.ServerConfig `toml:"servers"`
		} `toml:"mcp"`
	}
	md, err := toml.Decode(doc, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Errorf("Undecoded() = %v, want none", und)
	}
	want := map[string]orrerymcp.ServerConfig{
		"fs": {
			Command: "npx",
			Args:    []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv"},
			Env:     map[string]string{"NODE_ENV": "production"},
			Cwd:     "/srv",
		},
		"web": {URL: "http://127.0.0.1:8931/mcp", Headers: map[string]string{"Authorization": "Bearer t"}},
	}
	if !reflect.DeepEqual(cfg.MCP.Servers, want) {
		t.Errorf("decoded %+v, want %+v", cfg.MCP.Servers, want)
	}
	for name, c := range cfg.MCP.Servers {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: Validate() = %v", name, err)
		}
	}
}
