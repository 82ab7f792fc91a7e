package models_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/getorrery/orrery/agent/models"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestResolve(t *testing.T) {
	aliases := map[string]models.Alias{
		"local":  {Provider: "openai", Model: "llama3.2", BaseURL: "http://127.0.0.1:11434/v1"},
		"work":   {Provider: "anthropic", Model: "claude-haiku-4-5", KeyEnv: "WORK_KEY"},
		"broken": {Provider: "gemini", Model: "x"},
	}
	tests := []struct {
		spec, provider, model string
		env                   func(string) string
		wantErr               string
	}{
		{spec: "offline", provider: "offline", model: "offline"},
		{spec: "", provider: "offline", model: "offline"},
		{spec: "openai:gpt-4.1", env: env("OPENAI_API_KEY", "sk-x"), provider: "openai", model: "gpt-4.1"},
		{spec: "openai:gpt-4.1", wantErr: "OPENAI_API_KEY"},
		{spec: "openai:llama3.2", env: env("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"), provider: "openai", model: "llama3.2"},
		{spec: "anthropic:claude-sonnet-4-5", env: env("ANTHROPIC_API_KEY", "k"), provider: "anthropic", model: "claude-sonnet-4-5"},
		{spec: "anthropic:claude-sonnet-4-5", wantErr: "ANTHROPIC_API_KEY"},
		{spec: "anthropic:", wantErr: "names no model"},
		{spec: "local", provider: "openai", model: "llama3.2"},
		{spec: "work", env: env("WORK_KEY", "k"), provider: "anthropic", model: "claude-haiku-4-5"},
		{spec: "work", wantErr: "model work"},
		{spec: "broken", wantErr: `provider "gemini" is unknown`},
		{spec: "gpt-5", wantErr: "alias from config (broken, local, work)"},
		{spec: "script:", wantErr: "script needs a path"},
	}
	for _, tt := range tests {
		t.Run(tt.spec+"/"+tt.wantErr, func(t *testing.T) {
			getenv := tt.env
			if getenv == nil {
				getenv = env()
			}
			r := &models.Resolver{Aliases: aliases, Getenv: getenv}
			p, err := r.Resolve(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve(%q) = %v, want an error naming %q", tt.spec, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q) = %v", tt.spec, err)
			}
			if p.Name() != tt.provider || p.Model() != tt.model {
				t.Errorf("Resolve(%q) = %s:%s, want %s:%s", tt.spec, p.Name(), p.Model(), tt.provider, tt.model)
			}
		})
	}
}

func TestAuto(t *testing.T) {
	tests := []struct {
		env  func(string) string
		want string
	}{
		{env(), "offline"},
		{env("OPENAI_API_KEY", "k"), models.DefaultOpenAI},
		{env("ANTHROPIC_API_KEY", "k"), models.DefaultAnthropic},
		{env("ANTHROPIC_API_KEY", "k", "OPENAI_API_KEY", "k"), models.DefaultAnthropic},
	}
	for _, tt := range tests {
		spec, why := models.Auto(tt.env)
		if spec != tt.want || why == "" {
			t.Errorf("Auto() = %q, %q; want %q and a reason", spec, why, tt.want)
		}
	}
}

func TestKeyEnvs(t *testing.T) {
	got := models.KeyEnvs(map[string]models.Alias{
		"work":  {Provider: "anthropic", Model: "m", KeyEnv: "WORK_KEY"},
		"other": {Provider: "openai", Model: "m", KeyEnv: "OPENAI_API_KEY"},
		"local": {Provider: "openai", Model: "m"},
	})
	if want := []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "WORK_KEY"}; !slices.Equal(got, want) {
		t.Errorf("KeyEnvs() = %q, want %q", got, want)
	}
}

// TestResolveMasksBaseURL: an alias whose base_url cannot be used is
// refused naming the URL with its credentials masked.
func TestResolveMasksBaseURL(t *testing.T) {
	for _, provider := range []string{"openai", "anthropic"} {
		r := &models.Resolver{Aliases: map[string]models.Alias{
			"proxy": {Provider: provider, Model: "m", BaseURL: "ftp://alice:pw-canary@proxy.example/v1?key=qk-canary"},
		}, Getenv: env()}
		_, err := r.Resolve("proxy")
		if err == nil {
			t.Fatalf("Resolve(proxy) with %s = nil error, want one", provider)
		}
		if s := err.Error(); strings.Contains(s, "canary") || !strings.Contains(s, "proxy.example") {
			t.Errorf("Resolve(proxy) with %s = %q, want the URL named with its credentials masked", provider, s)
		}
	}
}
