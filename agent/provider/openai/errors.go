package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"

	oai "github.com/openai/openai-go/v3"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/internal/redact"
)

// Error codes of the *agent.Error values New and Stream return.
const (
	// CodeCancelled: the caller's context ended; the error wraps ctx.Err().
	CodeCancelled = "cancelled"
	// CodeAuth: the server refused the key.
	CodeAuth = "provider_auth"
	// CodeRateLimited: 429 after every retry, or no quota left.
	CodeRateLimited = "provider_rate_limited"
	// CodeUnavailable: 5xx after every retry, no connection, or a stream
	// cut off.
	CodeUnavailable = "provider_unavailable"
	// CodeModelNotFound: the server does not know the model (404).
	CodeModelNotFound = "provider_model_not_found"
	// CodeError: anything else the provider or the server got wrong.
	CodeError = "provider_error"
)

// requestError turns a failed request (after the SDK's retries) into an
// *agent.Error that says what to do. The SDK's and net/http's errors name
// the request's URL, so they are kept with its credentials masked.
func (p *Provider) requestError(ctx context.Context, err error) error {
	if isCancel(ctx) {
		return cancelled(ctx, err)
	}
	err = redact.Error(err)
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		return p.statusError(apiErr.StatusCode, apiErr.Code, apiErr.Message, err)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return &agent.Error{Code: CodeUnavailable, Err: err,
			Message: fmt.Sprintf("the server at %s is not answering (connection refused): start it or fix the base URL, or choose --model offline", p.base)}
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return &agent.Error{Code: CodeUnavailable, Err: err,
			Message: fmt.Sprintf("could not reach the server at %s (%v): check the network and the base URL, then try again", p.base, err)}
	}
	return &agent.Error{Code: CodeError, Err: err,
		Message: fmt.Sprintf("the call to %s failed (%v); try again, or choose another model with --model", p.base, err)}
}

// statusError explains an HTTP error status.
func (p *Provider) statusError(status int, code, detail string, err error) error {
	detail = redact.Text(strings.TrimSpace(detail))
	if detail == "" {
		detail = http.StatusText(status)
	}
	what := fmt.Sprintf("%d: %s", status, detail)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &agent.Error{Code: CodeAuth, Err: err,
			Message: fmt.Sprintf("the server at %s refused the API key (%s): check or set OPENAI_API_KEY, or choose --model offline, which needs no key", p.base, what)}
	case status == http.StatusNotFound:
		hint := ""
		if !p.openAI {
			hint = ", and check that the base URL is the API root (such as http://localhost:11434/v1)"
		}
		return &agent.Error{Code: CodeModelNotFound, Err: err,
			Message: fmt.Sprintf("the model %q was not found at %s (%s): pick another with --model openai:NAME%s", p.cfg.Model, p.base, what, hint)}
	case status == http.StatusTooManyRequests && code == "insufficient_quota":
		return &agent.Error{Code: CodeRateLimited, Err: err,
			Message: fmt.Sprintf("the account behind this key has no quota left (%s): add credit or check billing, or choose --model offline", what)}
	case status == http.StatusTooManyRequests:
		return &agent.Error{Code: CodeRateLimited, Err: err,
			Message: fmt.Sprintf("the server at %s is rate limiting these calls, still after %d retries (%s): wait a minute and try again, or choose another model", p.base, p.retries, what)}
	case status >= 500 || status == http.StatusRequestTimeout || status == http.StatusConflict:
		return &agent.Error{Code: CodeUnavailable, Err: err,
			Message: fmt.Sprintf("the server at %s failed, still after %d retries (%s): try again later, or choose another model", p.base, p.retries, what)}
	default:
		return &agent.Error{Code: CodeError, Err: err,
			Message: fmt.Sprintf("the server at %s refused the request (%s): the model may not take tools or streaming; choose another with --model openai:NAME", p.base, what)}
	}
}

// streamError explains an error object sent inside the stream, such as
// data: {"error": {"message": "…", "type": "server_error"}}.
func streamError(raw []byte, base string) error {
	var obj struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	msg := strings.TrimSpace(string(raw))
	if err := json.Unmarshal(raw, &obj); err == nil {
		if obj.Message != "" {
			msg = obj.Message
		}
	} else {
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			msg = s
		}
	}
	msg = redact.Text(msg)
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	kind := strings.ToLower(obj.Type + " " + string(obj.Code) + " " + msg)
	switch {
	case strings.Contains(kind, "rate_limit") || strings.Contains(kind, "rate limit") || strings.Contains(kind, "429"):
		return &agent.Error{Code: CodeRateLimited,
			Message: fmt.Sprintf("the server at %s stopped the answer: it is rate limiting these calls (%s); wait a minute and try again", base, msg)}
	case strings.Contains(kind, "overloaded") || strings.Contains(kind, "server_error") || strings.Contains(kind, "unavailable"):
		return &agent.Error{Code: CodeUnavailable,
			Message: fmt.Sprintf("the server at %s failed in the middle of the answer (%s); try again", base, msg)}
	default:
		return &agent.Error{Code: CodeError,
			Message: fmt.Sprintf("the server at %s reported an error in the middle of the answer (%s); try again, or choose another model", base, msg)}
	}
}
