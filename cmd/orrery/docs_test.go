package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/getorrery/orrery/crew"
	"github.com/getorrery/orrery/ext"
)

// docBlock is one fenced code block of a Markdown file.
type docBlock struct {
	file string // relative to the repository's root
	line int    // of the opening fence
	lang string
	text string
}

func (b docBlock) String() string { return b.file + ":" + strconv.Itoa(b.line) }

// docBlocks returns every fenced block of README.md and docs/*.md.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var out []docBlock
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		var cur *docBlock
		var text []string
		for i, l := range strings.Split(string(data), "\n") {
			if !strings.HasPrefix(l, "```") {
				if cur != nil {
					text = append(text, l)
				}
				continue
			}
			if cur == nil {
				cur = &docBlock{file: rel, line: i + 1, lang: strings.TrimSpace(strings.TrimPrefix(l, "```"))}
				text = nil
				continue
			}
			cur.text = strings.Join(text, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		}
		if cur != nil {
			t.Fatalf("%s: the block opened at line %d never closes", rel, cur.line)
		}
	}
	return out
}

// testDocs runs the examples of README.md and docs/ as written (the
// README's Try it block has testReadme; surfaces.md and bindings.md have
// tests of their own in ui/):
//   - every TOML block: a crew file loads as a crew, an extension manifest
//     parses, anything else passes orrery config validate;
//   - every orrery command line in a block: each flag it names is one the
//     command's --help lists;
//   - every JSON block that elides nothing parses;
//   - docs/protocol.md's requests, sent to orrery serve over /control with
//     the files they name in its workspace, get the reply shown.
func testDocs(t *testing.T, bin string) {
	blocks := docBlocks(t)
	env := environ(t)
	t.Run("TOML", func(t *testing.T) {
		n := 0
		for _, b := range blocks {
			if b.lang != "toml" {
				continue
			}
			n++
			dir := t.TempDir()
			switch {
			case strings.Contains(b.text, "[[agents]]") && strings.Contains(b.text, "[[tasks]]"):
				path := filepath.Join(dir, "crew.toml")
				if _, err := crew.Parse(path, []byte(b.text)); err != nil {
					t.Errorf("%s: the crew file does not load: %v", b, err)
				}
			case strings.Contains(b.text, "[extension]"):
				if _, err := ext.ParseManifest([]byte(b.text)); err != nil {
					t.Errorf("%s: the manifest does not parse: %v", b, err)
				}
			default:
				path := filepath.Join(dir, "orrery.toml")
				if err := os.WriteFile(path, []byte(b.text), 0o600); err != nil {
					t.Fatal(err)
				}
				if r := orrery(t, bin, env, "config", "validate", "--config", path); r.code != 0 {
					t.Errorf("%s: orrery config validate = %d\n%s%s", b, r.code, r.stdout, r.stderr)
				}
			}
		}
		if n < 5 {
			t.Errorf("found %d TOML blocks in the docs, want at least 5 (README, acp, bus, extensions, security)", n)
		}
	})
	t.Run("Flags", func(t *testing.T) {
		help := map[string]string{}
		helpOf := func(cmd []string) string {
			key := strings.Join(cmd, " ")
			if h, ok := help[key]; ok {
				return h
			}
			r := orrery(t, bin, env, append(cmd, "--help")...)
			help[key] = r.stdout + r.stderr
			return help[key]
		}
		flagRE := regexp.MustCompile(`(?:^|[\s\[(|])(--?[a-z][a-z-]*)`)
		n := 0
		for _, b := range blocks {
			if b.lang != "" && b.lang != "sh" {
				continue
			}
			for _, line := range strings.Split(b.text, "\n") {
				line, _, _ = strings.Cut(line, "#")
				words := strings.Fields(line)
				if len(words) == 0 || words[0] != "orrery" {
					continue
				}
				// The command is the words before the first flag or
				// argument in capitals or with a dot (a path, an id).
				cmd := []string{}
				for _, w := range words[1:] {
					if strings.HasPrefix(w, "-") || strings.ContainsAny(w, ".…/[|") || strings.ToUpper(w) == w {
						break
					}
					cmd = append(cmd, w)
				}
				switch {
				case len(cmd) >= 3 && cmd[0] == "node" && cmd[1] == "token":
					cmd = cmd[:3] // orrery node token create|list|revoke has flags of its own
				case len(cmd) >= 2 && cmd[0] == "node" && cmd[1] == "status":
					cmd = cmd[:2]
				case len(cmd) > 0 && (cmd[0] == "run" || cmd[0] == "serve" || cmd[0] == "node" || cmd[0] == "watch" || cmd[0] == "sessions" || cmd[0] == "acp" || cmd[0] == "version"):
					cmd = cmd[:1] // the rest are arguments
				}
				h := helpOf(cmd)
				for _, m := range flagRE.FindAllStringSubmatch(line, -1) {
					flag := strings.TrimLeft(m[1], "-")
					n++
					if !strings.Contains(h, "-"+flag) {
						t.Errorf("%s: %q names --%s, which orrery %s --help does not list:\n%s", b, strings.TrimSpace(line), flag, strings.Join(cmd, " "), h)
					}
				}
			}
		}
		if n < 10 {
			t.Errorf("checked %d flags in the docs' command lines, want at least 10", n)
		}
	})
	t.Run("JSON", func(t *testing.T) {
		// Every JSON example that elides nothing (…) is JSON, or JSON
		// lines; a request and its reply are split at →.
		for _, b := range blocks {
			if b.lang != "json" || strings.Contains(b.text, "…") {
				continue
			}
			for _, part := range strings.Split(b.text, "→") {
				dec := json.NewDecoder(strings.NewReader(part))
				for {
					var v any
					err := dec.Decode(&v)
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Errorf("%s: not JSON: %v\n%s", b, err, part)
						break
					}
				}
			}
		}
	})
	t.Run("Protocol", func(t *testing.T) { testProtocolDoc(t, bin, env, blocks) })
}

// testProtocolDoc sends each request of docs/protocol.md's JSON blocks
// (a line that starts with {"t":, continued until it parses) to a real
// kernel, in a workspace holding the files the examples name, with the
// session ses_1 standing for one it created; where the block shows the
// reply (a line → …), the reply must be that JSON.
func testProtocolDoc(t *testing.T, bin string, env []string, blocks []docBlock) {
	ws := t.TempDir()
	for _, f := range []string{"server/conn.go", "client/connect.go", "notes.txt"} {
		p := filepath.Join(ws, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("package x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := serveIn(t, bin, env, ws, "--data", filepath.Join(t.TempDir(), "data"), "--model", "offline")
	post := func(body []byte) (int, json.RawMessage) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/control", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("decode the reply to %s: %v", body, err)
		}
		return resp.StatusCode, out
	}
	code, created := post([]byte(`{"t":"session.new","id":"new"}`))
	var sess struct {
		Session string `json:"session"`
	}
	if json.Unmarshal(created, &sess); code != http.StatusOK || sess.Session == "" {
		t.Fatalf("session.new = %d %s", code, created)
	}
	n := 0
	for _, b := range blocks {
		if b.file != filepath.Join("docs", "protocol.md") || b.lang != "json" {
			continue
		}
		req, reply, _ := strings.Cut(b.text, "→")
		if !strings.HasPrefix(strings.TrimSpace(req), `{"t":`) {
			continue
		}
		n++
		body := strings.ReplaceAll(strings.TrimSpace(req), `"ses_1"`, `"`+sess.Session+`"`)
		if !json.Valid([]byte(body)) {
			t.Errorf("%s: the request is not JSON: %s", b, body)
			continue
		}
		code, got := post([]byte(body))
		if code != http.StatusOK {
			t.Errorf("%s: %s = %d %s", b, body, code, got)
			continue
		}
		if reply = strings.TrimSpace(reply); reply == "" {
			continue
		}
		var want, have any
		if err := json.Unmarshal([]byte(reply), &want); err != nil {
			t.Errorf("%s: the reply shown is not JSON: %v", b, err)
			continue
		}
		if err := json.Unmarshal(got, &have); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(have, want) {
			t.Errorf("%s: %s\nreplies %s\nthe doc shows %s", b, body, got, reply)
		}
	}
	if n < 2 {
		t.Errorf("sent %d of docs/protocol.md's requests, want at least 2", n)
	}
}
