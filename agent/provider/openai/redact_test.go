package openai_test

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
	"github.com/getorrery/orrery/agent/provider/openai"
)

// The credentials a base URL carries in these tests; none may reach an
// error.
const (
	urlPassword = "pw-canary-7f3a"
	urlQueryKey = "qk-canary-91bd"
)

// withCredentials returns base (http://host:port) with a userinfo and a key
// query parameter, as a proxy's URL may carry them.
func withCredentials(base string) string {
	return strings.Replace(base, "://", "://alice:"+urlPassword+"@", 1) + "/v1?api_key=" + urlQueryKey
}

// TestErrorsMaskBaseURLCredentials: whichever way a call fails, neither the
// error's message nor its wrapped cause names the base URL's password or
// key, and the message still names the server.
func TestErrorsMaskBaseURLCredentials(t *testing.T) {
	echo := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprint(w, strings.ReplaceAll(body, "URL", "http://"+r.Host+r.URL.String()))
		}
	}
	stream := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, body)
		}
	}
	tests := []struct {
		name    string
		handler http.Handler // nil: nothing listens
		code    string
	}{
		{"refused key", echo(http.StatusUnauthorized, `{"error":{"message":"bad key","type":"invalid_request_error"}}`), openai.CodeAuth},
		{"unknown model", echo(http.StatusNotFound, `{"error":{"message":"no such model"}}`), openai.CodeModelNotFound},
		{"server error naming the URL", echo(http.StatusBadGateway, `{"error":{"message":"upstream URL failed"}}`), openai.CodeUnavailable},
		{"error event naming the URL", stream("data: {\"error\":{\"message\":\"proxy could not reach https://bob:" + urlPassword + "@up/?key=" + urlQueryKey + "\",\"type\":\"server_error\"}}\n\n"), openai.CodeUnavailable},
		{"cut stream", stream("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"), openai.CodeUnavailable},
		{"connection refused", nil, openai.CodeUnavailable},
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
			p := newProvider(t, openai.Config{BaseURL: withCredentials(host), APIKey: testKey, MaxRetries: -1})
			_, err := p.Stream(context.Background(), simple(), func(agent.Delta) error { return nil })
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
			if hostport := strings.TrimPrefix(host, "http://"); tt.name != "error event naming the URL" && !strings.Contains(ae.Message, hostport) {
				t.Errorf("Stream() error = %q, want it to still name the server %s", ae.Message, hostport)
			}
		})
	}
}

func TestNewMasksBaseURLCredentials(t *testing.T) {
	_, err := openai.New(openai.Config{Model: testModel, BaseURL: "ftp://alice:" + urlPassword + "@host/v1?key=" + urlQueryKey})
	if err == nil {
		t.Fatal("New() with an ftp:// base URL = nil error, want one")
	}
	var ae *agent.Error
	msgs := []string{err.Error()}
	if errors.As(err, &ae) && ae.Err != nil {
		msgs = append(msgs, ae.Err.Error())
	}
	for _, s := range msgs {
		if strings.Contains(s, urlPassword) || strings.Contains(s, urlQueryKey) {
			t.Errorf("New() error = %q, names the base URL's credentials", s)
		}
	}
	if !strings.Contains(err.Error(), "ftp://***@host/v1?key=***") {
		t.Errorf("New() error = %q, want it to name the URL with its credentials masked", err)
	}
}
