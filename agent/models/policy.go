package models

import (
	"fmt"
	"slices"
	"strings"

	"github.com/getorrery/orrery/internal/prose"
)

// RequestPolicy decides which model specs a client's request may name. A
// request may name only what config or the command line defines: the
// default model, a [models.<alias>], an [agents.<name>] (as agent:NAME) or a
// provider spec (offline, openai:NAME, anthropic:NAME). A spec that starts
// a process or reads a file of the request's choosing (acp:COMMAND,
// script:PATH, crew:PATH) is refused unless AllowCommands is set. The zero
// RequestPolicy accepts only the default model and provider specs.
type RequestPolicy struct {
	// Aliases are the [models.<alias>] names.
	Aliases []string
	// Agents are the [agents.<name>] names.
	Agents []string
	// Defined are specs the command line or config chose, such as the
	// default model, accepted as they are.
	Defined []string
	// AllowCommands accepts every spec: [server] allow_agent_commands, for
	// a machine where every client is trusted to run commands.
	AllowCommands bool
}

// commandSchemes are the spec schemes that start a process or read a file
// the spec names.
var commandSchemes = []string{"acp", "script", "crew"}

// Check returns nil when a request may name spec, or an error that says
// what to name instead.
func (p RequestPolicy) Check(spec string) error {
	if spec == "" || p.AllowCommands || slices.Contains(p.Defined, spec) || slices.Contains(p.Aliases, spec) {
		return nil
	}
	scheme, arg, _ := strings.Cut(spec, ":")
	switch {
	case scheme == "offline" && arg == "":
		return nil
	case (scheme == "openai" || scheme == "anthropic") && arg != "":
		return nil
	case scheme == "agent":
		if slices.Contains(p.Agents, arg) {
			return nil
		}
		return fmt.Errorf("no agent %q is configured: a request may name only an agent that [agents.<name>] defines%s", arg, p.list(p.Agents, "agents"))
	case slices.Contains(commandSchemes, scheme):
		return fmt.Errorf("a request may not name the model or agent %s: an acp:, script: or crew: spec starts a process or reads a file the request chooses; "+
			"define the agent in config as [agents.<name>] and name it (session.new {\"agent\": \"<name>\"}), or start the kernel with --agent, "+
			"or set [server] allow_agent_commands = true on a machine where every client may run commands", prose.Quote(spec))
	}
	return fmt.Errorf("model %s is not one this kernel defines: name offline, openai:NAME, anthropic:NAME%s", prose.Quote(spec), p.list(p.Aliases, "models"))
}

func (p RequestPolicy) list(names []string, table string) string {
	if len(names) == 0 {
		return fmt.Sprintf(" (none is configured: add [%s.<name>] to the config)", table)
	}
	sorted := slices.Sorted(slices.Values(names))
	return " (configured: " + strings.Join(sorted, ", ") + ")"
}
