// Package ext is the extension host. An extension is a directory with an
// orrery.toml manifest ([extension] api = "orrery-ext/1") and, unless its
// runtime is "none", a process that speaks JSON-RPC 2.0 framed with
// Content-Length headers on stdin and stdout (package ext/jsonrpc); its
// stderr goes to the host's logs.
//
// The Host finds extensions in the project's .orrery/extensions/ and the
// user's config dir (Discover), and runs one Instance of each per session.
// An extension that declares placements or subscribes to events starts with
// the session: its declared surfaces are drawn at once in a loading state
// and filled after the ext/load handshake. Others start on first need (a
// tool call, a committed action). Calls that change what the extension owns
// (ui/*, state/*, tools/*, ext/register, ext/unregister) take effect in the
// order sent, through one queue per instance; its other calls may run
// concurrently. A heartbeat (ext/ping) notices a crash or a hang, and a
// supervisor restarts the process with backoff while its surfaces show as
// stopped, naming the fix /ext restart <name>.
//
// Package ext/sdk is the Go SDK for writing extensions.
package ext
