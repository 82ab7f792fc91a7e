package component_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/getorrery/orrery/ui/component"
)

func TestCheckHref(t *testing.T) {
	tests := []struct {
		href, url, path string
	}{
		{"https://example.com/ci?branch=main#top", "https://example.com/ci?branch=main#top", ""},
		{"http://localhost:8080/", "http://localhost:8080/", ""},
		{"HTTPS://Example.com", "https://Example.com", ""},
		{"docs/report.md", "", "docs/report.md"},
		{"./docs//report.md", "", "docs/report.md"},
		{"docs/", "", "docs"},
		{".", "", "."},
		{"a..b/c...d", "", "a..b/c...d"},
		{"notes.md#intro", "", "notes.md#intro"},
	}
	for _, tt := range tests {
		l, err := component.CheckHref(tt.href)
		if err != nil {
			t.Errorf("CheckHref(%q) error: %v", tt.href, err)
			continue
		}
		if l.Href != tt.href || l.URL != tt.url || l.Path != tt.path || l.IsURL() != (tt.url != "") {
			t.Errorf("CheckHref(%q) = %+v, want URL %q, Path %q", tt.href, l, tt.url, tt.path)
		}
	}
}

// TestCheckHrefRefusals checks every forbidden link shape is refused with
// the fix.
func TestCheckHrefRefusals(t *testing.T) {
	tests := []struct {
		name, href, want string
	}{
		{"file URL", "file:///etc/passwd", "file: links can name anything on the machine; link a relative path inside the workspace instead, such as docs/report.md"},
		{"file upper case", "FILE:/etc/passwd", "file: links can name anything"},
		{"javascript", "javascript:alert(1)", "a link never runs code; a link may name an http:// or https:// URL or a relative path inside the workspace"},
		{"javascript mixed case", "JavaScript:void(0)", "a link never runs code"},
		{"other scheme", "mailto:a@b.c", "mailto: links are not opened; a link may name an http:// or https:// URL"},
		{"data URL", "data:text/html,<b>x</b>", "data: links are not opened"},
		{"absolute path", "/etc/passwd", "absolute paths are refused; write the path relative to the workspace"},
		{"Windows drive", `C:\Windows\win.ini`, "it is an absolute path on a drive"},
		{"Windows drive with slash", "c:/x", "it is an absolute path on a drive"},
		{"UNC or protocol-relative", "//evil.example/x", "it names another host without a scheme"},
		{"home", "~/.ssh/id_rsa", "a path starting with ~ is outside the workspace"},
		{"dot dot", "../secrets", ".. may lead out of the workspace"},
		{"dot dot inside", "docs/../../x", ".. may lead out of the workspace"},
		{"dot dot at end", "docs/..", ".. may lead out of the workspace"},
		{"backslash", `docs\..\x`, "it has a backslash"},
		{"empty", "", "the link is empty"},
		{"space", " docs/a.md", "it starts or ends with space"},
		{"control", "docs/a\n.md", "it has a control or text-direction character"},
		{"bidi override", "docs/\u202egnp.exe", "it has a control or text-direction character"},
		{"URL without host", "https:///path", "the URL has no host"},
		{"opaque URL", "https:example.com", "the URL has no host"},
		{"user in URL", "https://user:pw@example.com/", "a link may not carry a user name or password"},
		{"bad URL", "http://[::1", "it is not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := component.CheckHref(tt.href)
			if !errors.Is(err, component.ErrLink) {
				t.Fatalf("CheckHref(%q) = %v, want ErrLink", tt.href, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckHref(%q) = %q, want it to contain %q", tt.href, err, tt.want)
			}
		})
	}
}

func TestLinkText(t *testing.T) {
	if got, want := component.LinkText("Docs", "docs/a.md"), "Docs (docs/a.md)"; got != want {
		t.Errorf("LinkText() = %q, want %q", got, want)
	}
}
