package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"syscall"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/internal/redact"
)

// Error codes of the *agent.Error values Stream returns.
const (
	// CodeAuth: the key is missing, wrong, or may not do this.
	CodeAuth = "provider_auth"
	// CodeBilling: the key's account cannot pay for the request.
	CodeBilling = "provider_billing"
	// CodeNotFound: the model (or the endpoint) does not exist.
	CodeNotFound = "provider_not_found"
	// CodeRateLimited: the API rate-limited the request, retries included.
	CodeRateLimited = "provider_rate_limited"
	// CodeUnavailable: the API or the server at the base URL failed, was
	// overloaded or could not be reached, retries included.
	CodeUnavailable = "provider_unavailable"
	// CodeError: anything else, such as a refused request or a broken stream.
	CodeError = "provider_error"
	// CodeCancelled: the caller's context ended the call.
	CodeCancelled = "cancelled"
)

// cancelled is the error for a call that ctx ended; errors.Is(err,
// context.Canceled) (or DeadlineExceeded) holds for it.
func cancelled(ctxErr error) error {
	msg := "the model call was cancelled before the answer was complete"
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		msg = "the model call ran out of time before the answer was complete: allow the run more time, or ask for a shorter answer"
	}
	return &agent.Error{Code: CodeCancelled, Message: msg, Err: ctxErr}
}

func (p *Provider) endpoint() string {
	if p.baseURL == "" {
		return DefaultBaseURL
	}
	return p.baseURL
}

// failure explains why a stream ended without its message_stop event: err
// is the stream's error, nil when it just ended. The SDK's and net/http's
// errors name the request's URL, so they are kept with its credentials
// masked.
func (p *Provider) failure(ctx context.Context, err error, st *streamState, resp *http.Response) error {
	if ctx.Err() != nil {
		return cancelled(ctx.Err())
	}
	err = redact.Error(err)
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		return p.apiFailure(apiErr, st.started)
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil && !st.started && resp != nil && !isEventStream(resp):
		return &agent.Error{Code: CodeError, Err: errors.New("stream ended without message_stop"),
			Message: fmt.Sprintf("the server at %s answered with Content-Type %q, not an event stream: check that the base URL points at an Anthropic Messages API", p.endpoint(), resp.Header.Get("Content-Type"))}
	case err == nil:
		return &agent.Error{Code: CodeError, Err: errors.New("stream ended without message_stop"),
			Message: "Anthropic's answer was cut off before its message_stop event (the stream ended early); try again"}
	case errors.As(err, &syntaxErr), errors.As(err, &typeErr):
		return &agent.Error{Code: CodeError, Err: err,
			Message: fmt.Sprintf("Anthropic sent a stream event that is not valid JSON (%v); try again, and if it repeats check what serves %s", err, p.endpoint())}
	case errors.Is(err, syscall.ECONNREFUSED) && p.baseURL != "":
		return &agent.Error{Code: CodeUnavailable, Err: err,
			Message: fmt.Sprintf("the server at %s is not answering (connection refused): start it or fix the base URL, or choose --model offline", p.baseURL)}
	case resp == nil:
		return &agent.Error{Code: CodeUnavailable, Err: err,
			Message: fmt.Sprintf("cannot reach %s (%v): check the network and the base URL, or choose --model offline", p.endpoint(), err)}
	default:
		return &agent.Error{Code: CodeUnavailable, Err: err,
			Message: fmt.Sprintf("the stream from %s broke mid-answer (%v); try again", p.endpoint(), err)}
	}
}

func isEventStream(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "text/event-stream"
}

// apiFailure explains an error the API reported: an HTTP error status
// (after the SDK's retries), or an error event mid-stream.
func (p *Provider) apiFailure(e *sdk.Error, midStream bool) error {
	typ := string(e.Type())
	status := e.StatusCode
	var what string
	if midStream {
		status = 0 // the stream's own status was 200
		what = "mid-answer"
		if typ != "" {
			what += ", " + typ
		}
	} else {
		what = fmt.Sprintf("%d", status)
		if typ != "" {
			what += " " + typ
		}
	}
	if e.Message != "" {
		what += ": " + redact.Text(e.Message)
	}
	retried := ""
	if !midStream && p.maxRetries > 0 {
		retried = fmt.Sprintf(", retried %d times", p.maxRetries)
	}
	fail := func(code, format string, args ...any) error {
		return &agent.Error{Code: code, Message: fmt.Sprintf(format, args...), Err: redact.Error(e)}
	}
	switch {
	case typ == "authentication_error" || status == http.StatusUnauthorized:
		return fail(CodeAuth, "Anthropic refused the API key (%s): set %s to a valid key, or choose --model offline, which needs no key", what, KeyEnv)
	case typ == "permission_error" || status == http.StatusForbidden:
		return fail(CodeAuth, "Anthropic does not let this key make the request (%s): check that the key in %s may use model %s, or choose --model offline", what, KeyEnv, p.model)
	case typ == "billing_error" || status == http.StatusPaymentRequired:
		return fail(CodeBilling, "Anthropic refused the request for billing (%s): check the plan and credit of the key's account, or choose --model offline", what)
	case typ == "not_found_error" || status == http.StatusNotFound:
		where := ""
		if p.baseURL != "" {
			where = fmt.Sprintf(" (or check that %s serves the Anthropic Messages API)", p.baseURL)
		}
		return fail(CodeNotFound, "Anthropic has no model %q (%s): choose another with --model anthropic:NAME, for example --model anthropic:%s%s", p.model, what, DefaultModel, where)
	case typ == "rate_limit_error" || status == http.StatusTooManyRequests:
		return fail(CodeRateLimited, "Anthropic rate-limited the request (%s%s): wait a minute and try again, or send fewer requests", what, retried)
	case typ == "overloaded_error" || status == 529:
		return fail(CodeUnavailable, "Anthropic is overloaded (%s%s): try again in a few minutes, or choose another model with --model", what, retried)
	case typ == "api_error" || typ == "timeout_error" || status >= 500:
		return fail(CodeUnavailable, "Anthropic failed to answer (%s%s): try again in a few minutes, or choose another model with --model", what, retried)
	case typ == "request_too_large" || status == http.StatusRequestEntityTooLarge:
		return fail(CodeError, "the request is too large for Anthropic (%s): start a new session, or leave out large attachments", what)
	case typ == "invalid_request_error" || status == http.StatusBadRequest:
		return fail(CodeError, "Anthropic refused the request (%s): if the conversation is too long, start a new session; otherwise report this with the message", what)
	default:
		return fail(CodeError, "Anthropic answered with an error (%s); try again, and if it repeats choose another model with --model", what)
	}
}
