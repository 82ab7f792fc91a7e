package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/provider/anthropic"
)

// The credentials a base URL carries in these tests; none may reach an
// error.
const (
	urlPassword = "pw-canary-7f3a"
	urlQueryKey = "qk-canary-91bd"
)

// TestErrorsMaskBaseURLCredentials: whichever way a call fails, neither the
// error's message nor its wrapped cause names the base URL's password or
// key, and the message still names the server.
func TestErrorsMaskBaseURLCredentials(t *testing.T) {
	status := func(code int, msg string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":%q}}`, strings.ReplaceAll(msg, "URL", "http://"+r.Host+r.URL.String()))
		}
	}
	tests := []struct {
		name    string
		handler http.Handler // nil: nothing listens
		code    string
	}{
		{"refused key", status(http.StatusUnauthorized, "invalid x-api-key"), anthropic.CodeAuth},
		{"unknown model", status(http.StatusNotFound, "no such model"), anthropic.CodeNotFound},
		{"server error naming a URL", status(http.StatusBadGateway, "proxy could not reach https://bob:"+urlPassword+"@up/?key="+urlQueryKey), anthropic.CodeUnavailable},
		{"not an event stream", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html>login</html>")
		}), anthropic.CodeError},
		{"connection refused", nil, anthropic.CodeUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var host string
			if tt.handler == nil {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				host = "http://" + l.Addr().String()
				l.Close()
			} else {
				srv := httptest.NewServer(tt.handler)
				t.Cleanup(srv.Close)
				host = srv.URL
			}
			base := strings.Replace(host, "://", "://alice:"+urlPassword+"@", 1) + "?api_key=" + urlQueryKey
			p := newProvider(t, base, func(c *anthropic.Config) { c.MaxRetries = -1 })
			_, _, err := collect(context.Background(), p, agent.Request{Messages: hello()})
			var ae *agent.Error
			if !errors.As(err, &ae) {
				t.Fatalf("Stream() error = %v, want an *agent.Error", err)
			}
			if ae.Code != tt.code {
				t.Errorf("Stream() error code = %q, want %q (%s)", ae.Code, tt.code, ae.Message)
			}
			texts := map[string]string{"Message": ae.Message, "Error()": err.Error()}
			if ae.Err != nil {
				texts["Err.Error()"] = ae.Err.Error()
			}
			for what, s := range texts {
				if strings.Contains(s, urlPassword) || strings.Contains(s, urlQueryKey) {
					t.Errorf("Stream() error's %s = %q, names the base URL's credentials", what, s)
				}
			}
		})
	}
}

func TestNewMasksBaseURLCredentials(t *testing.T) {
	_, err := anthropic.New(anthropic.Config{BaseURL: "ftp://alice:" + urlPassword + "@host/?key=" + urlQueryKey})
	if err == nil {
		t.Fatal("New() with an ftp:// base URL = nil error, want one")
	}
	if s := err.Error(); strings.Contains(s, urlPassword) || strings.Contains(s, urlQueryKey) || !strings.Contains(s, "ftp://***@host/?key=***") {
		t.Errorf("New() error = %q, want it to name the URL with its credentials masked", s)
	}
}
