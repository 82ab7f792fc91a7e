package component

import (
	"fmt"
	"github.com/getorrery/orrery/internal/prose"
	neturl "net/url"
	"path"
	"strings"
)

// Link is an href a link may name: an http(s) URL or a path inside the
// workspace. Exactly one of URL and Path is set.
type Link struct {
	// Href is the href as the structure's bound tree shows it.
	Href string
	// URL is the http:// or https:// URL, or empty for a path.
	URL string
	// Path is the cleaned path relative to the workspace, with / between
	// its elements ("." for the workspace itself), or empty for a URL. The
	// caller still checks that it exists and that no symlink leads out of
	// the workspace.
	Path string
}

// IsURL reports whether the link is an http(s) URL rather than a path.
func (l Link) IsURL() bool { return l.URL != "" }

// LinkText is a link's text form: "label (href)".
func LinkText(label, href string) string { return label + " (" + href + ")" }

const linkHelp = "a link may name an http:// or https:// URL or a relative path inside the workspace, such as docs/report.md"

// CheckHref checks what a link names. It accepts an http:// or https:// URL
// with a host and no user name, and a relative path that stays inside the
// workspace, which it returns cleaned. It refuses with an *Error (ErrLink)
// that names the fix: an empty href, control or text-direction characters,
// surrounding space, a backslash, file:, javascript: and every other scheme, a URL with
// no host or with a user name, a path starting with //, / or ~, a Windows
// drive, and any .. element.
func CheckHref(href string) (Link, error) {
	bad := func(reason string) (Link, error) {
		return Link{}, refuse(ErrLink, "", fmt.Sprintf("the link %q is refused: %s", prose.Shorten(href), reason))
	}
	if href == "" {
		return Link{}, refuse(ErrLink, "", "the link is empty; "+linkHelp)
	}
	for _, r := range href {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			return bad("it has a control or text-direction character; write it without them, as " + linkHelp)
		}
	}
	if strings.TrimSpace(href) != href {
		return bad("it starts or ends with space; write it without")
	}
	if scheme, ok := schemeOf(href); ok {
		switch strings.ToLower(scheme) {
		case "http", "https":
			return checkURL(href, bad)
		case "file":
			return bad("file: links can name anything on the machine; link a relative path inside the workspace instead, such as docs/report.md")
		case "javascript":
			return bad("a link never runs code; " + linkHelp)
		}
		if len(scheme) == 1 {
			return bad("it is an absolute path on a drive; write the path relative to the workspace, such as docs/report.md")
		}
		return bad(fmt.Sprintf("%s: links are not opened; %s", strings.ToLower(prose.Shorten(scheme)), linkHelp))
	}
	if strings.Contains(href, `\`) {
		return bad(`it has a backslash; write a workspace path with / between its parts, such as docs/report.md`)
	}
	switch {
	case strings.HasPrefix(href, "//"):
		return bad("it names another host without a scheme; write the whole URL, such as https://example.com/page")
	case strings.HasPrefix(href, "/"):
		return bad("absolute paths are refused; write the path relative to the workspace, such as docs/report.md")
	case strings.HasPrefix(href, "~"):
		return bad("a path starting with ~ is outside the workspace; write the path relative to the workspace")
	}
	for _, el := range strings.Split(href, "/") {
		if el == ".." {
			return bad(".. may lead out of the workspace; write the path relative to the workspace without ..")
		}
	}
	return Link{Href: href, Path: path.Clean(href)}, nil
}

func checkURL(href string, bad func(string) (Link, error)) (Link, error) {
	u, err := neturl.Parse(href)
	if err != nil {
		return bad(fmt.Sprintf("it is not a URL (%v); write a URL such as https://example.com/page", strings.TrimPrefix(err.Error(), "parse ")))
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("the URL has no host; write it as https://<host>/<path>")
	}
	if u.User != nil {
		return bad("a link may not carry a user name or password; remove the part before @")
	}
	return Link{Href: href, URL: u.String()}, nil
}

// schemeOf returns the scheme of an absolute URI (RFC 3986: a letter, then
// letters, digits, +, - or ., then a colon).
func schemeOf(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return s[:i], true
		default:
			return "", false
		}
	}
	return "", false
}
