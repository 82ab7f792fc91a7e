package jetstream

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// Token is how a session id appears in subjects, KV keys and object
// names: the id itself when it is made of letters, digits, '-' and '_'
// only (as the kernel's generated ids are), so that an operator reading
// `nats stream subjects` recognises it; anything else is "=" and the id in
// unpadded URL-safe base64. The two forms cannot collide: a verbatim token
// never holds '='.
func Token(id string) string {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "=" + base64.RawURLEncoding.EncodeToString([]byte(id))
		}
	}
	return id
}

// SessionOfToken is Token's inverse: the session id a subject token or
// key names.
func SessionOfToken(tok string) (string, error) { return sessionOf(tok) }

// StreamNames are the JetStream streams a Log with prefix keeps: the
// frames stream, then the streams under its session bucket and its
// checkpoint store.
func StreamNames(prefix string) []string {
	n := newNames(prefix)
	return []string{n.stream, "KV_" + n.sessions, "OBJ_" + n.checkpoints}
}

// sessionOf is Token's inverse.
func sessionOf(tok string) (string, error) {
	enc, ok := strings.CutPrefix(tok, "=")
	if !ok {
		return tok, nil
	}
	id, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("key %q names no session: %w", tok, err)
	}
	return string(id), nil
}

// names are the JetStream names one Log uses, all derived from its
// prefix so that several Logs (tenants, tests) can share a cluster.
type names struct {
	stream      string // the frames stream, "ORRERY"
	frames      string // subject prefix of frames, "orrery.log.f."
	costs       string // subject prefix of cost-only records, "orrery.log.c."
	any         string // subject prefix of a session's records of either kind, "orrery.log.*."
	live        string // republished frames, "orrery.live."
	sessions    string // KV bucket of session records
	checkpoints string // object store of checkpoints
}

func newNames(prefix string) names {
	return names{
		stream:      strings.ToUpper(prefix),
		frames:      prefix + ".log.f.",
		costs:       prefix + ".log.c.",
		any:         prefix + ".log.*.",
		live:        prefix + ".live.",
		sessions:    prefix + "_sessions",
		checkpoints: prefix + "_checkpoints",
	}
}

// validPrefix reports whether p can prefix stream, bucket and subject
// names.
func validPrefix(p string) error {
	if p == "" || len(p) > 32 {
		return fmt.Errorf("jetstream prefix %q: use 1 to 32 letters, digits, '-' or '_'", p)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("jetstream prefix %q: use 1 to 32 letters, digits, '-' or '_'", p)
		}
	}
	return nil
}
