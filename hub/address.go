// Package hub is the run's event hub: addresses, mailboxes, request and
// reply, topics with retained values, and the links ACL that decides who
// may reach whom. Agents reach it through hub tools, extensions through
// hub/* methods, and a watching program through the run event bus; all of
// them go through one Hub.
//
// Addresses are agent://{crew}/{agent}, crew://{crew}, client://{name}
// and ext://{id}. With no declared link the hub lets traffic through; a
// crew that declares any link is held to what it declared, and a refusal
// names the missing link.
package hub

import (
	"fmt"
	"strings"
	"unicode"
)

// The address schemes.
const (
	SchemeAgent  = "agent"
	SchemeCrew   = "crew"
	SchemeClient = "client"
	SchemeExt    = "ext"
)

// Address is a parsed hub address. Crew is set for agent and crew
// addresses; Name is the agent, client or extension.
type Address struct {
	Scheme string
	Crew   string
	Name   string
}

// ParseAddress parses an address. "client:studio" is accepted for
// "client://studio" (the short form crew files use in links).
func ParseAddress(s string) (Address, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		scheme, rest, ok = strings.Cut(s, ":")
	}
	bad := func(why string) (Address, error) {
		return Address{}, fmt.Errorf("hub address %q %s: use agent://CREW/AGENT, crew://CREW, client://NAME or ext://ID", s, why)
	}
	if !ok {
		return bad("has no scheme")
	}
	// A part is printable, with no space or slash: an address is shown
	// in clients, logs and the bus, so it may carry no terminal escape.
	valid := func(part string) bool {
		return part != "" && strings.IndexFunc(part, func(r rune) bool {
			return r == '/' || unicode.IsSpace(r) || !unicode.IsGraphic(r)
		}) < 0
	}
	switch scheme {
	case SchemeAgent:
		crew, name, ok := strings.Cut(rest, "/")
		if !ok || !valid(crew) || !valid(name) {
			return bad("needs a crew and an agent")
		}
		return Address{Scheme: scheme, Crew: crew, Name: name}, nil
	case SchemeCrew:
		if !valid(rest) {
			return bad("needs a crew name")
		}
		return Address{Scheme: scheme, Crew: rest}, nil
	case SchemeClient, SchemeExt:
		if !valid(rest) {
			return bad("needs a name")
		}
		return Address{Scheme: scheme, Name: rest}, nil
	}
	return bad("has an unknown scheme " + scheme)
}

// String returns the address in its canonical form.
func (a Address) String() string {
	switch a.Scheme {
	case SchemeAgent:
		return "agent://" + a.Crew + "/" + a.Name
	case SchemeCrew:
		return "crew://" + a.Crew
	case "":
		return ""
	}
	return a.Scheme + "://" + a.Name
}

// Agent returns the address of agent name in crew.
func Agent(crew, name string) string {
	return Address{Scheme: SchemeAgent, Crew: crew, Name: name}.String()
}

// Crew returns the address of crew.
func Crew(crew string) string { return Address{Scheme: SchemeCrew, Crew: crew}.String() }

// Client returns the address of the watching program's seat name.
func Client(name string) string { return Address{Scheme: SchemeClient, Name: name}.String() }

// DefaultClient is the name of the watching program's seat when it names
// none.
const DefaultClient = "studio"
