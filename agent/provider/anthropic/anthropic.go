// Package anthropic is the Anthropic Messages model provider. It sends a
// conversation to POST /v1/messages with "stream": true through the official
// Go SDK and turns the streamed answer into agent.Deltas: text, visible
// reasoning (thinking blocks), and tool calls with their argument pieces.
//
// The package reads no environment variable and no config file: the caller
// (agent/models) resolves the key, the base URL and the model and passes them
// in a Config. The SDK's own environment lookups (ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL, profiles) are switched off, so a Provider does exactly
// what its Config says.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/internal/redact"
)

var _ agent.Provider = (*Provider)(nil)

// Defaults used when a Config leaves a field zero.
const (
	// DefaultModel is the model used when Config.Model is empty.
	DefaultModel = "claude-sonnet-4-5"
	// DefaultBaseURL is Anthropic's API endpoint.
	DefaultBaseURL = "https://api.anthropic.com"
	// DefaultMaxTokens is the answer's token limit (the API's required
	// max_tokens) when Config.MaxTokens is 0; a thinking budget is added to it.
	DefaultMaxTokens = 8192
	// DefaultMaxRetries is how often a failed attempt is retried when
	// Config.MaxRetries is 0.
	DefaultMaxRetries = 2
	// MinThinkingBudget is the smallest thinking budget the API accepts.
	MinThinkingBudget = 1024
)

// KeyEnv is the environment variable that conventionally holds the key. This
// package never reads it; it names it in its messages.
const KeyEnv = "ANTHROPIC_API_KEY"

// Config configures a Provider. The caller (agent/models) fills it from the
// environment and the config file; this package reads neither. The zero
// value is not usable: APIKey is required unless BaseURL names another
// server (a proxy that adds the key itself, or a test server).
type Config struct {
	// Model is the model's name, such as "claude-sonnet-4-5"; empty means
	// DefaultModel.
	Model string
	// BaseURL is the API's root, without /v1; empty means DefaultBaseURL.
	BaseURL string
	// APIKey is sent in the x-api-key header.
	APIKey string
	// HTTPClient sends the requests; nil means a client like
	// http.DefaultClient that gives up on a server that sends no response
	// headers for 10 minutes.
	HTTPClient *http.Client
	// MaxRetries is how often an attempt that failed with 408, 409, 429, a
	// 5xx (529 overloaded included) or a connection error is retried, with
	// exponential backoff (0.5 s doubling up to 8 s, or what the server's
	// retry-after header asks). 0 means DefaultMaxRetries; negative means
	// no retry.
	MaxRetries int
	// MaxTokens bounds the answer, thinking included; 0 means
	// DefaultMaxTokens plus ThinkingBudget.
	MaxTokens int64
	// ThinkingBudget, when positive, turns on extended thinking with that
	// many tokens (at least MinThinkingBudget, and less than MaxTokens).
	// The thinking streams as DeltaReasoning.
	ThinkingBudget int64
	// AdaptiveThinking turns on adaptive thinking, where the model decides
	// how much to think; it excludes ThinkingBudget.
	AdaptiveThinking bool
}

// Provider streams answers from the Anthropic Messages API. It is safe for
// concurrent use.
type Provider struct {
	client     sdk.Client
	model      string
	baseURL    string // as configured with its credentials masked, for messages; "" for DefaultBaseURL
	maxTokens  int64
	maxRetries int
	thinking   sdk.ThinkingConfigParamUnion

	mu      sync.Mutex // guards signed and order
	signed  map[string][]signedBlock
	order   []string
	maxKeep int
}

// New returns a Provider for cfg, or an error that says what to set.
func New(cfg Config) (*Provider, error) {
	if cfg.APIKey == "" && cfg.BaseURL == "" {
		return nil, &agent.Error{Code: CodeAuth, Err: agent.ErrNoAPIKey,
			Message: fmt.Sprintf("the anthropic model needs an API key: set %s, or choose --model offline, which works without a key", KeyEnv)}
	}
	p := &Provider{
		model:      cfg.Model,
		baseURL:    redact.URL(cfg.BaseURL),
		maxTokens:  cfg.MaxTokens,
		maxRetries: cfg.MaxRetries,
		signed:     make(map[string][]signedBlock),
		maxKeep:    256,
	}
	if p.model == "" {
		p.model = DefaultModel
	}
	switch {
	case p.maxRetries == 0:
		p.maxRetries = DefaultMaxRetries
	case p.maxRetries < 0:
		p.maxRetries = 0
	}
	switch {
	case cfg.ThinkingBudget < 0:
		return nil, fmt.Errorf("the anthropic thinking budget is %d: use a positive number of tokens (at least %d), or 0 for no extended thinking", cfg.ThinkingBudget, MinThinkingBudget)
	case cfg.ThinkingBudget > 0 && cfg.AdaptiveThinking:
		return nil, errors.New("the anthropic model has both a thinking budget and adaptive thinking: choose one")
	case cfg.ThinkingBudget > 0 && cfg.ThinkingBudget < MinThinkingBudget:
		return nil, fmt.Errorf("the anthropic thinking budget is %d tokens, below the API's minimum: use at least %d", cfg.ThinkingBudget, MinThinkingBudget)
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("the anthropic max_tokens is %d: use a positive number, or 0 for the default %d", cfg.MaxTokens, DefaultMaxTokens)
	}
	if p.maxTokens == 0 {
		p.maxTokens = DefaultMaxTokens + cfg.ThinkingBudget
	}
	if cfg.ThinkingBudget > 0 {
		if cfg.ThinkingBudget >= p.maxTokens {
			return nil, fmt.Errorf("the anthropic thinking budget (%d tokens) must be less than max_tokens (%d): raise max_tokens or lower the budget", cfg.ThinkingBudget, p.maxTokens)
		}
		p.thinking = sdk.ThinkingConfigParamOfEnabled(cfg.ThinkingBudget)
	}
	if cfg.AdaptiveThinking {
		p.thinking = sdk.ThinkingConfigParamUnion{OfAdaptive: &sdk.ThinkingConfigAdaptiveParam{}}
	}

	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithMaxRetries(p.maxRetries),
	}
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("the anthropic base URL %q is not an http(s) URL: use one like %s", p.baseURL, DefaultBaseURL)
		}
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		// The API reference authenticates with x-api-key; the SDK's
		// WithAPIKey would send an Authorization: Bearer header instead.
		opts = append(opts, option.WithHeader("x-api-key", cfg.APIKey))
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient()
	}
	opts = append(opts, option.WithHTTPClient(hc), option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		agent.InjectTrace(req.Context(), req.Header) // the model call's span
		return next(req)
	}))
	p.client = sdk.NewClient(opts...)
	return p, nil
}

// defaultHTTPClient is http.DefaultTransport's settings with a bound on the
// wait for response headers (a stream's body may take as long as it needs).
func defaultHTTPClient() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = 10 * time.Minute
		return &http.Client{Transport: t}
	}
	return &http.Client{}
}

// Name implements agent.Provider.
func (*Provider) Name() string { return "anthropic" }

// Model implements agent.Provider.
func (p *Provider) Model() string { return p.model }

// Stream implements agent.Provider: it sends req as one streaming Messages
// request and emits the answer's deltas in order. A failure is an
// *agent.Error whose Message says what to do; a cancelled ctx gives one that
// wraps ctx.Err(); an error from emit is returned as it is. The usage is the
// call's, as far as the stream reported it, also on failure.
func (p *Provider) Stream(ctx context.Context, req agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	params, names, err := p.request(req)
	if err != nil {
		return agent.Usage{}, err
	}
	var resp *http.Response
	stream := p.client.Messages.NewStreaming(ctx, params, option.WithResponseInto(&resp))
	defer stream.Close()

	st := &streamState{ctx: ctx, names: names, emit: emit, keepSigned: p.keepsThinking()}
	for !st.stopped && stream.Next() {
		if err := st.handle(stream.Current()); err != nil {
			var ee *emitError
			if errors.As(err, &ee) {
				return st.usage, ee.err
			}
			return st.usage, err
		}
	}
	if !st.stopped {
		return st.usage, p.failure(ctx, stream.Err(), st, resp)
	}
	p.remember(st)
	return st.usage, nil
}
