// Package models turns a model spec into an agent.Provider. It is the one
// place that knows every provider package, and the one that reads their
// keys from the environment.
//
// A spec is one of:
//   - "offline": the built-in model (no network, no key);
//   - "script:PATH": a JSON file of scripted turns, for tests;
//   - "openai:NAME": an OpenAI-compatible chat completions model, with the
//     key from OPENAI_API_KEY and the server from OPENAI_BASE_URL (OpenAI
//     when unset);
//   - "anthropic:NAME": an Anthropic Messages model, with the key from
//     ANTHROPIC_API_KEY;
//   - an alias from config, [models.<alias>] with provider, model,
//     base_url and key_env, such as a local Ollama server.
package models

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/provider/anthropic"
	"github.com/getorrery/orrery/agent/provider/offline"
	"github.com/getorrery/orrery/agent/provider/openai"
	"github.com/getorrery/orrery/agent/provider/script"
)

// Default is the model used when nothing else is configured and no key is
// in the environment.
const Default = "offline"

// The models chosen when only a provider's key is set.
const (
	DefaultAnthropic = "anthropic:claude-sonnet-4-5"
	DefaultOpenAI    = "openai:gpt-4.1"
)

// The environment variables the providers' keys and servers come from.
const (
	OpenAIKeyEnv     = "OPENAI_API_KEY"
	OpenAIBaseEnv    = "OPENAI_BASE_URL"
	AnthropicKeyEnv  = "ANTHROPIC_API_KEY"
	AnthropicBaseEnv = "ANTHROPIC_BASE_URL"
)

// KeyEnvs names the environment variables the models' keys come from:
// OPENAI_API_KEY, ANTHROPIC_API_KEY and each alias's key_env, sorted, each
// once. Their values are secrets, which no tool's output should carry.
func KeyEnvs(aliases map[string]Alias) []string {
	names := []string{OpenAIKeyEnv, AnthropicKeyEnv}
	for _, a := range aliases {
		if a.KeyEnv != "" {
			names = append(names, a.KeyEnv)
		}
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// Alias is one [models.<alias>] table of config.
type Alias struct {
	// Provider is openai, anthropic or offline.
	Provider string `toml:"provider" json:"provider"`
	// Model is the model's name at the provider.
	Model string `toml:"model" json:"model"`
	// BaseURL is the server's API root, such as http://localhost:11434/v1.
	BaseURL string `toml:"base_url" json:"base_url,omitempty"`
	// KeyEnv names the environment variable holding the key; empty means
	// the provider's usual one. A local server may need none.
	KeyEnv string `toml:"key_env" json:"key_env,omitempty"`
	// MaxTokens bounds each answer's output tokens; 0 is the provider's
	// default.
	MaxTokens int64 `toml:"max_tokens" json:"max_tokens,omitempty"`
}

// Resolver resolves specs with config's aliases and an environment.
type Resolver struct {
	// Aliases are the [models.<alias>] tables.
	Aliases map[string]Alias
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// HTTPClient, when set, makes the providers' requests.
	HTTPClient *http.Client
	// Logger receives the providers' notes; nil means slog.Default().
	Logger *slog.Logger
}

// Resolve returns the provider a spec names with no config: the offline
// and script models, and openai:NAME and anthropic:NAME with keys from the
// process environment.
func Resolve(spec string) (agent.Provider, error) { return (&Resolver{}).Resolve(spec) }

func (r *Resolver) getenv(k string) string {
	if r.Getenv == nil {
		return os.Getenv(k)
	}
	return r.Getenv(k)
}

// Auto returns the spec to use when none is configured: the default model
// of the provider whose key is set (Anthropic first), else offline; and a
// sentence saying why, for the start-up log.
func Auto(getenv func(string) string) (spec, why string) {
	switch {
	case getenv(AnthropicKeyEnv) != "":
		return DefaultAnthropic, AnthropicKeyEnv + " is set"
	case getenv(OpenAIKeyEnv) != "":
		return DefaultOpenAI, OpenAIKeyEnv + " is set"
	}
	return Default, "no model is configured and neither " + AnthropicKeyEnv + " nor " + OpenAIKeyEnv + " is set; pass --model provider:name or set a key for a real model"
}

// Resolve returns the provider spec names, or an error that lists what is
// known.
func (r *Resolver) Resolve(spec string) (agent.Provider, error) {
	if a, ok := r.Aliases[spec]; ok {
		return r.alias(spec, a)
	}
	name, arg, _ := strings.Cut(spec, ":")
	switch name {
	case "", "offline":
		return offline.New(), nil
	case "script":
		if arg == "" {
			return nil, fmt.Errorf("model %q: script needs a path, as script:PATH", spec)
		}
		return script.Load(arg)
	case "openai", "anthropic":
		if arg == "" {
			return nil, fmt.Errorf("model %q names no model: write %s:NAME, such as %s", spec, name, map[string]string{"openai": DefaultOpenAI, "anthropic": DefaultAnthropic}[name])
		}
		return r.alias(spec, Alias{Provider: name, Model: arg})
	}
	return nil, fmt.Errorf("model %q is unknown: use offline, openai:NAME, anthropic:NAME%s, or script:PATH for tests", spec, r.aliasList())
}

func (r *Resolver) aliasList() string {
	if len(r.Aliases) == 0 {
		return ", or an alias from [models.<alias>] in config"
	}
	names := make([]string, 0, len(r.Aliases))
	for n := range r.Aliases {
		names = append(names, n)
	}
	sort.Strings(names)
	return ", an alias from config (" + strings.Join(names, ", ") + ")"
}

// providerEnv names a provider's usual key and server variables.
var providerEnv = map[string]struct{ key, base string }{
	"openai":    {OpenAIKeyEnv, OpenAIBaseEnv},
	"anthropic": {AnthropicKeyEnv, AnthropicBaseEnv},
}

// alias builds the provider of one alias (or of provider:NAME).
func (r *Resolver) alias(spec string, a Alias) (agent.Provider, error) {
	if a.Provider == "offline" {
		return offline.New(), nil
	}
	names, ok := providerEnv[a.Provider]
	if !ok {
		return nil, fmt.Errorf("model %s: provider %q is unknown: set provider to openai, anthropic or offline in [models.%s]", spec, a.Provider, spec)
	}
	keyEnv, base := a.KeyEnv, a.BaseURL
	if keyEnv == "" {
		keyEnv = names.key
	}
	if base == "" {
		base = r.getenv(names.base)
	}
	var p agent.Provider
	var err error
	if a.Provider == "openai" {
		p, err = openai.New(openai.Config{
			Model: a.Model, BaseURL: base, APIKey: r.getenv(keyEnv),
			HTTPClient: r.HTTPClient, MaxTokens: a.MaxTokens, Logger: r.Logger,
		})
	} else {
		p, err = anthropic.New(anthropic.Config{
			Model: a.Model, BaseURL: base, APIKey: r.getenv(keyEnv),
			HTTPClient: r.HTTPClient, MaxTokens: a.MaxTokens,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", spec, err)
	}
	return p, nil
}
