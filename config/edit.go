package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/getorrery/orrery/internal/redact"
)

// ParseKey splits a dotted key such as ui.placements."build-times".placement
// into its parts; a quoted part may hold dots.
func ParseKey(key string) ([]string, error) {
	var parts []string
	rest := strings.TrimSpace(key)
	for rest != "" {
		var part string
		if rest[0] == '"' {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("key %s: a quoted part is not closed", key)
			}
			part, rest = rest[1:end+1], rest[end+2:]
		} else {
			i := strings.IndexByte(rest, '.')
			if i < 0 {
				i = len(rest)
			}
			part, rest = strings.TrimSpace(rest[:i]), rest[i:]
			if part == "" || !bareKey.MatchString(part) {
				return nil, fmt.Errorf("key %s: part %q must be quoted (\"…\") or use only letters, digits, _ and -", key, part)
			}
		}
		parts = append(parts, part)
		if rest == "" {
			break
		}
		if rest[0] != '.' {
			return nil, fmt.Errorf("key %s: expected a dot after %q", key, part)
		}
		rest = rest[1:]
		if rest == "" {
			return nil, fmt.Errorf("key %s ends with a dot", key)
		}
	}
	if len(parts) == 0 {
		return nil, errors.New("the key is empty: name one, such as agent.model")
	}
	return parts, nil
}

var (
	bareKey    = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	headerLine = regexp.MustCompile(`^\s*\[([^\[\]]+)\]\s*(#.*)?$`)
)

func formatKey(parts []string) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		if bareKey.MatchString(p) {
			out[i] = p
		} else {
			out[i] = fmt.Sprintf("%q", p)
		}
	}
	return strings.Join(out, ".")
}

// tomlValue returns v as a TOML value: v itself when it already is one
// (a number, true/false, a quoted string, an array), else v quoted.
func tomlValue(v string) string {
	var probe map[string]any
	if _, err := toml.Decode("v = "+v, &probe); err == nil {
		return v
	}
	return fmt.Sprintf("%q", v)
}

// Set writes key = value into the TOML file at path, keeping the rest of
// the file, its order and its comments. It makes the file (and its table)
// when missing. The result must still be a valid configuration, or the file
// is left as it was and the error says why.
func Set(path, key, value string) error {
	parts, err := ParseKey(key)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	updated := setLine(string(old), parts[:len(parts)-1], parts[len(parts)-1], tomlValue(value))
	cfg := Default()
	if _, err := toml.Decode(updated, &cfg); err != nil {
		return fmt.Errorf("set %s: the file would not be valid TOML (%v); it is unchanged", key, err)
	}
	md, _ := toml.Decode(updated, &Config{})
	if un := md.Undecoded(); len(un) > 0 {
		return fmt.Errorf("set %s: %s is not a configuration key; the file is unchanged", key, un[0])
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("set %s: %w; the file is unchanged", key, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("set %s: %w", key, err)
	}
	// A fresh temporary file is 0600 whatever the umask (the file may hold
	// a base_url's credentials or an MCP server's token); a fixed name
	// would keep the mode of a stale one left by a crash.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("set %s: %w", key, err)
	}
	tmp := f.Name()
	_, err = f.WriteString(updated)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("set %s: %w", key, err)
	}
	return nil
}

// setLine returns text with key = value set in the table named by table.
func setLine(text string, table []string, key, value string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if text == "" {
		lines = nil
	}
	assign := formatKey([]string{key}) + " = " + value
	keyLine := regexp.MustCompile(`^\s*(` + regexp.QuoteMeta(key) + `|"` + regexp.QuoteMeta(key) + `")\s*=`)
	// Find the table's body: from its header (or the top) to the next header.
	start, end := 0, len(lines)
	found := len(table) == 0
	for i, l := range lines {
		m := headerLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if found {
			end = i
			break
		}
		if parts, err := ParseKey(m[1]); err == nil && equal(parts, table) {
			found, start = true, i+1
		}
	}
	if !found {
		var b bytes.Buffer
		b.WriteString(strings.Join(lines, "\n"))
		if len(lines) > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "[%s]\n%s\n", formatKey(table), assign)
		return b.String()
	}
	if len(table) == 0 {
		end = len(lines)
		for i, l := range lines {
			if headerLine.MatchString(l) {
				end = i
				break
			}
		}
	}
	for i := start; i < end; i++ {
		if keyLine.MatchString(lines[i]) {
			lines[i] = assign
			return strings.Join(lines, "\n") + "\n"
		}
	}
	at := end
	for at > start && strings.TrimSpace(lines[at-1]) == "" {
		at--
	}
	lines = append(lines[:at], append([]string{assign}, lines[at:]...)...)
	return strings.Join(lines, "\n") + "\n"
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Get returns the value of key in the configuration cfg, as TOML. The
// credentials of a URL in it (a base_url's user:pass@ or ?api_key=) are
// masked as ***: what Get prints tends to be pasted and logged, and the
// file itself still holds them.
func Get(cfg Config, key string) (string, error) {
	parts, err := ParseKey(key)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(cfg); err != nil {
		return "", err
	}
	var tree map[string]any
	if _, err := toml.Decode(b.String(), &tree); err != nil {
		return "", err
	}
	var cur any = maskURLs(tree)
	for _, p := range parts {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", fmt.Errorf("%s is not set", key)
		}
		if cur, ok = m[p]; !ok {
			return "", fmt.Errorf("%s is not set", key)
		}
	}
	if m, ok := cur.(map[string]any); ok {
		var out bytes.Buffer
		if err := toml.NewEncoder(&out).Encode(m); err != nil {
			return "", err
		}
		return strings.TrimRight(out.String(), "\n"), nil
	}
	var out bytes.Buffer
	if err := toml.NewEncoder(&out).Encode(map[string]any{"v": cur}); err != nil {
		return "", err
	}
	return strings.TrimPrefix(strings.TrimRight(out.String(), "\n"), "v = "), nil
}

// maskURLs masks the credentials of the URLs in the string values of a
// decoded TOML tree, in place, and returns it.
func maskURLs(v any) any {
	switch v := v.(type) {
	case string:
		return redact.Text(v)
	case map[string]any:
		for k, e := range v {
			v[k] = maskURLs(e)
		}
	case []any:
		for i, e := range v {
			v[i] = maskURLs(e)
		}
	case []map[string]any:
		for _, e := range v {
			maskURLs(e)
		}
	}
	return v
}
