// Package redact masks the credentials that ride inside URLs, so that a URL
// can be named in an error, a log line or a frame: the userinfo of
// scheme://user:pass@host becomes ***@, and the value of a query (or
// fragment) parameter whose name says it holds a secret (key, api_key,
// token, access_token, signature, password …) becomes ***. Everything else
// is kept byte for byte, so a message still says which server it means.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask is what a credential is replaced with.
const Mask = "***"

// urlInText is a URL inside free text: a scheme, ://, and everything up to
// a space, a quote, a backquote or an angle bracket (as %q and error
// messages delimit one).
var urlInText = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s\"'`<>]+")

// URL returns raw with its credentials masked. raw need not be a valid URL:
// whatever precedes an @ in its authority is masked whether or not it
// parses, and a raw without a scheme is read as starting with its
// authority.
func URL(raw string) string {
	prefix, rest := "", raw
	if i := strings.Index(raw, "://"); i >= 0 {
		prefix, rest = raw[:i+3], raw[i+3:]
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		rest = Mask + rest[at:]
	}
	// The query, then the fragment (where OAuth's implicit flow puts
	// access_token).
	if q := strings.IndexAny(rest, "?#"); q >= 0 {
		head, tail := rest[:q+1], rest[q+1:]
		var b strings.Builder
		b.WriteString(head)
		for tail != "" {
			i := strings.IndexAny(tail, "&;#")
			part, sep := tail, ""
			if i >= 0 {
				part, sep, tail = tail[:i], tail[i:i+1], tail[i+1:]
			} else {
				tail = ""
			}
			b.WriteString(maskParam(part))
			b.WriteString(sep)
		}
		rest = b.String()
	}
	return prefix + rest
}

// maskParam masks the value of one name=value pair when the name is a
// secret's.
func maskParam(part string) string {
	name, value, ok := strings.Cut(part, "=")
	if !ok || value == "" || value == Mask || !SecretName(name) {
		return part
	}
	return name + "=" + Mask
}

// secretWords are the parts of a parameter's or variable's name that say
// its value is a secret.
var secretWords = []string{"key", "token", "secret", "pass", "pwd", "sig", "auth", "credential", "cookie", "session"}

// SecretName reports whether a query parameter's name says its value is a
// secret: it contains key, token, secret, pass, pwd, sig, auth,
// credential, cookie or session, in any case (api_key, access_token,
// X-Amz-Signature, password). It errs on the side of masking.
func SecretName(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	name = strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// Text returns s with the credentials of every URL in it masked (see URL).
// A URL in text starts with its scheme and ends before a space, a quote, a
// backquote or an angle bracket.
func Text(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, URL)
}

// HasCredentials reports whether s is, or holds, a URL with credentials in
// it (see URL and Text).
func HasCredentials(s string) bool { return Text(s) != s }

// Error returns err with its message passed through Text; errors.Is and
// errors.As still see err. It returns nil for nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(redacted); ok {
		return err
	}
	return redacted{err}
}

type redacted struct{ err error }

func (e redacted) Error() string { return Text(e.err.Error()) }
func (e redacted) Unwrap() error { return e.err }
