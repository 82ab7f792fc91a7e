package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/config"
)

func TestSet(t *testing.T) {
	const start = `# my settings
[agent]
model = "offline" # the default

[server]
listen = "127.0.0.1:7411"
`
	tests := []struct {
		name, key, value string
		want             string // the whole file after
		wantErr          string
	}{
		{"replace keeps comments", "agent.model", "script:/x.json",
			"# my settings\n[agent]\nmodel = \"script:/x.json\"\n\n[server]\nlisten = \"127.0.0.1:7411\"\n", ""},
		{"add to a table", "agent.max_steps", "9",
			"# my settings\n[agent]\nmodel = \"offline\" # the default\nmax_steps = 9\n\n[server]\nlisten = \"127.0.0.1:7411\"\n", ""},
		{"new quoted table", `ui.placements."build-times".placement`, "pane.left",
			start + "\n[ui.placements.build-times]\nplacement = \"pane.left\"\n", ""},
		{"invalid value", "server.max_body_bytes", "12", "", "max_body_bytes is 12"},
		{"unknown key", "agent.colour", "blue", "", "not a configuration key"},
		{"bad placement", `ui.placements."x".placement`, "sidebar", "", "sidebar"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "orrery.toml")
			if err := os.WriteFile(path, []byte(start), 0o600); err != nil {
				t.Fatal(err)
			}
			err := config.Set(path, tt.key, tt.value)
			got, _ := os.ReadFile(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Set() = %v, want an error containing %q", err, tt.wantErr)
				}
				if string(got) != start {
					t.Errorf("file after a refused Set =\n%s\nwant it unchanged", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Set() = %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("file =\n%s\nwant\n%s", got, tt.want)
			}
			cfg, err := config.Load(path, func(string) string { return "" })
			if err != nil {
				t.Fatalf("Load() after Set = %v", err)
			}
			if v, err := config.Get(cfg, tt.key); err != nil || !strings.Contains(v, strings.Trim(tt.value, `"`)) {
				t.Errorf("Get(%s) = %q, %v, want %s", tt.key, v, err, tt.value)
			}
		})
	}
}

func TestSetMakesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "orrery.toml")
	if err := config.Set(path, "agent.model", "offline"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != "[agent]\nmodel = \"offline\"\n" {
		t.Errorf("new file = %q", got)
	}
}

func TestParseKey(t *testing.T) {
	for _, tt := range []struct{ key, want, err string }{
		{`ui.placements."build.times".placement`, "ui|placements|build.times|placement", ""},
		{"agent.model", "agent|model", ""},
		{"agent.", "", "ends with a dot"},
		{`ui."open`, "", "not closed"},
		{"a b.c", "", "must be quoted"},
	} {
		parts, err := config.ParseKey(tt.key)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseKey(%s) = %v, want an error containing %q", tt.key, err, tt.err)
			}
			continue
		}
		if err != nil || strings.Join(parts, "|") != tt.want {
			t.Errorf("ParseKey(%s) = %q, %v, want %s", tt.key, parts, err, tt.want)
		}
	}
}

// TestGetMasksURLCredentials: Get names a base_url with its password and
// key masked, whether asked for the key or for its table.
func TestGetMasksURLCredentials(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orrery.toml")
	file := "[models.proxy]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = \"https://alice:pw-canary@proxy.example/v1?api_key=qk-canary&v=2\"\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"models.proxy.base_url", "models.proxy", "models"} {
		v, err := config.Get(cfg, key)
		if err != nil || strings.Contains(v, "canary") || !strings.Contains(v, "https://***@proxy.example/v1?api_key=***&v=2") {
			t.Errorf("Get(%s) = %q, %v; want the URL with its credentials masked", key, v, err)
		}
	}
	if cfg.Models["proxy"].BaseURL != "https://alice:pw-canary@proxy.example/v1?api_key=qk-canary&v=2" {
		t.Errorf("after Get, BaseURL = %q, want it unchanged", cfg.Models["proxy"].BaseURL)
	}
}
