// Package mcp makes the tools of MCP (Model Context Protocol) servers
// Orrery tools. It starts a server as a process that speaks MCP on its
// stdin and stdout, or reaches one over streamable HTTP, lists its tools
// and calls them, using the official Go SDK.
//
// A server's tool "search" of the server configured as [mcp.servers.docs]
// becomes the Orrery tool "mcp.docs.search".
package mcp

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/getorrery/orrery/internal/redact"
)

// ServerConfig is one [mcp.servers.<name>] table of the config: either a
// command to start (Command, with Args, Env and Cwd) or the URL of a
// streamable HTTP endpoint (URL, with Headers). The zero ServerConfig is
// invalid: it names neither.
type ServerConfig struct {
	// Command is the program to start; it speaks MCP on stdin and stdout.
	Command string `toml:"command"`
	// Args are the program's arguments.
	Args []string `toml:"args"`
	// Env holds variables added to the environment Orrery itself runs in,
	// replacing any of the same name. (Command is found through Orrery's
	// own PATH, not one set here.)
	Env map[string]string `toml:"env"`
	// Cwd is the directory the program runs in; empty means Orrery's own.
	Cwd string `toml:"cwd"`

	// URL is the streamable HTTP endpoint of a server that is already
	// running, such as "http://127.0.0.1:8931/mcp".
	URL string `toml:"url"`
	// Headers are sent with every HTTP request to URL, such as
	// Authorization.
	Headers map[string]string `toml:"headers"`
}

// Validate reports whether c names exactly one way to reach a server and
// sets only the fields that apply to it. Its error is a sentence that says
// what to change.
func (c ServerConfig) Validate() error {
	switch {
	case c.Command == "" && c.URL == "":
		return fmt.Errorf("set command (a program that speaks MCP on stdin and stdout) or url (a streamable HTTP endpoint)")
	case c.Command != "" && c.URL != "":
		return fmt.Errorf("set command or url, not both: command starts a server, url reaches one that is already running")
	case c.Command != "":
		if len(c.Headers) > 0 {
			return fmt.Errorf("headers apply only to a url server; remove headers, or pass what they carry to the command through env")
		}
		for k := range c.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return fmt.Errorf("env has the invalid variable name %q; use a name without '=' or NUL", k)
			}
		}
		return nil
	}
	if len(c.Args) > 0 || len(c.Env) > 0 || c.Cwd != "" {
		return fmt.Errorf("args, env and cwd apply only to a command server; remove them from a url server")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q is not an http or https URL; write it as http://host:port/path", redact.URL(c.URL))
	}
	for k := range c.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			return fmt.Errorf("headers has the invalid header name %q; use a name such as Authorization", k)
		}
	}
	return nil
}

// nameRE is what a server's name may be: it becomes part of every tool
// name, where a dot separates it from the tool's own name.
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// ValidateName reports whether name may name a server. Its error is a
// sentence that says what to change.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("the MCP server name %q may hold only letters, digits, '_' and '-'; rename [mcp.servers.%s]", name, name)
	}
	return nil
}
