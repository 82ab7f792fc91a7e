// Package openai is the model provider for OpenAI-compatible chat
// completions: OpenAI itself, and local servers that speak the same API
// (Ollama, vLLM, llama.cpp). It talks to them through the official Go SDK,
// github.com/openai/openai-go/v3, and streams every answer.
//
// The provider reads no environment variables and no config files: the
// caller (agent/models) resolves OPENAI_API_KEY, the base URL and the rest,
// and passes them in a Config.
package openai

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/internal/redact"
)

var _ agent.Provider = (*Provider)(nil)

// DefaultBaseURL is OpenAI's API, used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1/"

// DefaultMaxRetries is how many times a call is retried after a 429, a 5xx
// or a failed connection when Config.MaxRetries is 0.
const DefaultMaxRetries = 2

// Config configures a Provider. Model is required; every other field has a
// working zero value.
type Config struct {
	// Model is the model's name on the server, such as "gpt-4.1" or, on
	// Ollama, "llama3.2".
	Model string
	// BaseURL is the API root, such as "http://localhost:11434/v1" for
	// Ollama. Empty means OpenAI (DefaultBaseURL).
	BaseURL string
	// APIKey is sent as a bearer token. It is required for OpenAI; a server
	// at another BaseURL may need none, and then no Authorization header is
	// sent. The caller reads it from OPENAI_API_KEY or config; this package
	// never looks at the environment.
	APIKey string
	// HTTPClient, when set, makes the requests; nil means
	// http.DefaultClient.
	HTTPClient *http.Client
	// MaxRetries bounds the retries of one call after a 429, a 5xx or a
	// failed connection, with exponential backoff (or the server's
	// Retry-After). 0 means DefaultMaxRetries; a negative value means none.
	MaxRetries int
	// MaxRetryDelay caps the wait between retries, the server's Retry-After
	// included (a server asking for a longer wait gets no retry). 0 means
	// the SDK's default: backoff capped at 8 s, Retry-After up to 2 min.
	MaxRetryDelay time.Duration
	// MaxTokens bounds each answer's output tokens; 0 leaves it to the
	// server. It is sent as max_completion_tokens to OpenAI and as
	// max_tokens to other servers, which often know only the older name.
	MaxTokens int64
	// Logger receives debug notes (a skipped message, an answer cut by
	// its length limit); nil means slog.Default().
	Logger *slog.Logger
}

// Provider streams answers from an OpenAI-compatible chat completions
// endpoint. It is safe for concurrent use.
type Provider struct {
	cfg     Config
	base    string // the API root with its credentials masked, for messages
	openAI  bool   // the endpoint is OpenAI's own API
	retries int
	svc     oai.ChatCompletionService
	log     *slog.Logger
}

// New returns a Provider for cfg. It refuses an empty model, a base URL it
// cannot parse and, for OpenAI's own API, an empty key.
func New(cfg Config) (*Provider, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, &agent.Error{Code: CodeError,
			Message: "no OpenAI model was named: pass one as --model openai:NAME (for example openai:gpt-4.1), or choose --model offline"}
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &agent.Error{Code: CodeError, Err: redact.Error(err),
			Message: fmt.Sprintf("the OpenAI base URL %q is not an http(s) URL: give the API root, such as http://localhost:11434/v1", redact.URL(cfg.BaseURL))}
	}
	openAI := strings.EqualFold(u.Hostname(), "api.openai.com")
	if openAI && cfg.APIKey == "" {
		return nil, &agent.Error{Code: CodeAuth, Err: agent.ErrNoAPIKey,
			Message: "no OpenAI API key is set: set OPENAI_API_KEY, or choose --model offline, which works without a key"}
	}
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(retries),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			agent.InjectTrace(req.Context(), req.Header) // the model call's span
			return next(req)
		}),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	if cfg.MaxRetryDelay > 0 {
		opts = append(opts, option.WithMaxRetryDelay(cfg.MaxRetryDelay))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Provider{
		cfg:     cfg,
		base:    redact.URL(strings.TrimSuffix(base, "/")),
		openAI:  openAI,
		retries: retries,
		// A service built directly, not through oai.NewClient, reads no
		// environment variables: the caller owns configuration.
		svc: oai.NewChatCompletionService(opts...),
		log: log.With("provider", "openai", "model", cfg.Model),
	}, nil
}

// Name implements agent.Provider: it is "openai".
func (*Provider) Name() string { return "openai" }

// Model implements agent.Provider: it is Config.Model.
func (p *Provider) Model() string { return p.cfg.Model }

// Stream implements agent.Provider. It sends req as one streaming chat
// completion and emits the answer's reasoning, text and tool calls in order,
// returning the call's usage. A failure is an *agent.Error whose message
// says what to do; when ctx ends, the error wraps ctx.Err(); when emit
// fails, Stream returns emit's error unchanged.
func (p *Provider) Stream(ctx context.Context, req agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	names := newToolNames()
	params, err := p.params(req, names)
	if err != nil {
		return agent.Usage{}, err
	}
	var res *http.Response
	_, err = p.svc.New(ctx, params,
		option.WithJSONSet("stream", true),
		// The raw response, so the stream's [DONE] is seen: the SDK's
		// ssestream.Stream ends the same way on [DONE] and on a cut.
		option.WithResponseBodyInto(&res),
		option.WithHeader("Accept", "text/event-stream"),
	)
	if err != nil {
		return agent.Usage{}, p.requestError(ctx, err)
	}
	if res == nil || res.Body == nil {
		return agent.Usage{}, &agent.Error{Code: CodeError,
			Message: fmt.Sprintf("the server at %s answered with no body; check that it serves the OpenAI chat completions API", p.base)}
	}
	defer func() { _ = res.Body.Close() }()
	st := &streamState{emit: emit, names: names, base: p.base}
	if ct := res.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		return agent.Usage{}, &agent.Error{Code: CodeError,
			Message: fmt.Sprintf("the server at %s answered with one JSON object instead of a stream; it must support \"stream\": true", p.base)}
	}
	err = st.read(ctx, res)
	if st.finish == "length" {
		p.log.DebugContext(ctx, "answer cut at its length limit", "max_tokens", p.cfg.MaxTokens)
	}
	return st.usage, err
}

// isCancel reports whether a failure comes from ctx ending. A deadline of
// the HTTP client's own (http.Client.Timeout) is not one: the server was too
// slow, and the caller did not give up.
func isCancel(ctx context.Context) bool { return ctx.Err() != nil }

// cancelled returns the error for a call that ctx ended.
func cancelled(ctx context.Context, err error) error {
	cause := ctx.Err()
	if cause == nil {
		cause = err
	}
	return &agent.Error{Code: CodeCancelled, Message: "the model call was cancelled before it finished", Err: cause}
}
