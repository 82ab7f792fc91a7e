package redact_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"unicode"

	"github.com/getorrery/orrery/internal/redact"
)

func TestURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://api.example.com/v1", "https://api.example.com/v1"},
		{"https://user:secret@host/v1", "https://***@host/v1"},
		{"https://token@host", "https://***@host"},
		{"http://user:p@ss@127.0.0.1:8080/v1/", "http://***@127.0.0.1:8080/v1/"},
		{"https://host/v1?key=secret", "https://host/v1?key=***"},
		{"https://host/v1?api-version=2024&api_key=s1&X-Amz-Signature=s2", "https://host/v1?api-version=2024&api_key=***&X-Amz-Signature=***"},
		{"https://host/v1?model=x;token=s", "https://host/v1?model=x;token=***"},
		{"https://host/cb#access_token=s&state=1", "https://host/cb#access_token=***&state=1"},
		{"https://host/v1?Password=s#frag", "https://host/v1?Password=***#frag"},
		{"https://host/users/@me", "https://host/users/@me"},
		{"user:secret@host/v1", "***@host/v1"},
		{"https://u:s@host/v1 x", "https://***@host/v1 x"},
		{"https://host/v1?key=", "https://host/v1?key="},
		{"", ""},
	}
	for _, tt := range tests {
		if got := redact.URL(tt.in); got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := redact.URL(redact.URL(tt.in)); got != tt.want {
			t.Errorf("URL(URL(%q)) = %q, want %q (masking twice changes nothing)", tt.in, got, tt.want)
		}
	}
}

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{`Post "http://user:***@127.0.0.1:1/v1/chat/completions": dial tcp 127.0.0.1:1: connect: connection refused`,
			`Post "http://***@127.0.0.1:1/v1/chat/completions": dial tcp 127.0.0.1:1: connect: connection refused`},
		{"the server at https://u:s@h/v1?key=k (401) and https://other/?token=t.",
			"the server at https://***@h/v1?key=*** (401) and https://other/?token=***"},
		{"no url here: user@example.com", "no url here: user@example.com"},
		{"`ws://a:b@c/`", "`ws://***@c/`"},
	}
	for _, tt := range tests {
		if got := redact.Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHasCredentials(t *testing.T) {
	for _, s := range []string{"https://u:p@host", "postgres://app:pw@db/app", "https://host/?api_key=x", "see https://t@h/"} {
		if !redact.HasCredentials(s) {
			t.Errorf("HasCredentials(%q) = false, want true", s)
		}
	}
	for _, s := range []string{"", "/usr/bin:/bin", "https://host/v1", "me@example.com", "https://host/?page=2", "xterm-256color"} {
		if redact.HasCredentials(s) {
			t.Errorf("HasCredentials(%q) = true, want false", s)
		}
	}
}

func TestError(t *testing.T) {
	if redact.Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
	base := fmt.Errorf("post %q: %w", "https://u:secret@h/v1?key=k2", syscall.ECONNREFUSED)
	err := redact.Error(base)
	if s := err.Error(); strings.Contains(s, "secret") || strings.Contains(s, "k2") {
		t.Errorf("Error().Error() = %q, want the credentials masked", s)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Error("errors.Is(Error(err), ECONNREFUSED) = false, want true")
	}
	if redact.Error(err) != err {
		t.Error("Error(Error(err)) wraps twice")
	}
}

// hasAny reports whether s has a character of chars, a space or control
// character, or a character that ends a URL in text.
func hasAny(s, chars string) bool {
	return strings.ContainsAny(s, chars+"\"'`<>") || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || unicode.IsSpace(r) })
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// FuzzURL checks that a password between :// and @ never survives URL or
// Text, and that masking is idempotent.
func FuzzURL(f *testing.F) {
	f.Add("https", "user", "hunter2secret", "host:8080/v1?key=abc")
	f.Add("http", "", "tok", "h")
	f.Fuzz(func(t *testing.T, scheme, user, pass, rest string) {
		if len(pass) < 6 || hasAny(pass, "/?#@") || hasAny(user, "/?#@") || hasAny(rest, "") || !schemeRE.MatchString(scheme) ||
			strings.Contains(rest, pass) || strings.Contains(scheme, pass) || strings.Contains(user, pass) {
			t.Skip()
		}
		raw := scheme + "://" + user + ":" + pass + "@" + rest
		for name, got := range map[string]string{"URL": redact.URL(raw), "Text": redact.Text("at " + raw + " now")} {
			if strings.Contains(got, pass) {
				t.Errorf("%s(%q) = %q, still holds the password", name, raw, got)
			}
		}
		if once := redact.URL(raw); redact.URL(once) != once {
			t.Errorf("URL(URL(%q)) = %q, want %q", raw, redact.URL(once), once)
		}
	})
}
