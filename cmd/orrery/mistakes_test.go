package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCLIMistakes runs each command with the mistakes people make (an
// unknown flag, a missing or extra argument, a bad value, a data dir that
// is not there) and checks the exit code the README gives (2 usage, 1
// failed) and the first line of stderr: one line that names the mistake
// and what to do, and nothing on stdout.
func TestCLIMistakes(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo")
	cfg := filepath.Join(dir, "none.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	badListen := filepath.Join(dir, "listen.toml")
	if err := os.WriteFile(badListen, []byte("[server]\nlisten = \"nope\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badModel := filepath.Join(dir, "model.toml")
	if err := os.WriteFile(badModel, []byte("[agent]\nmodel = \"gemini:pro\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badDuration := filepath.Join(dir, "duration.toml")
	if err := os.WriteFile(badDuration, []byte("[consent]\ntimeout = \"banana\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args  []string
		code  int
		first string // in stderr's first line
	}{
		{[]string{"explode"}, 2, `unknown command "explode"`},
		{[]string{"serve", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"serve", "extra"}, 2, `unexpected argument "extra": run "orrery serve --help"`},
		{[]string{"node", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"node", "token", "bogus"}, 2, `unknown token subcommand "bogus": use create, list or revoke`},
		{[]string{"node", "token", "revoke"}, 2, "node token revoke needs the token's id or name"},
		{[]string{"watch"}, 2, "watch needs a session: orrery watch SESSION"},
		{[]string{"watch", "a", "b"}, 2, `unexpected argument "b"`},
		{[]string{"watch", "s", "--since", "x"}, 2, `--since "x" must be a whole number`},
		{[]string{"watch", "s", "--connect", "ftp://x"}, 1, "scheme ftp is unknown: use http://, ws:// or pipe:NAME"},
		{[]string{"run"}, 2, `run needs a prompt: orrery run -p "PROMPT"`},
		{[]string{"run", "-p", "hi", "--json", "--stream-mode", "weird"}, 2, `unknown stream_mode "weird"`},
		{[]string{"run", "-p", "hi", "--stream-mode", "openai"}, 2, "--stream-mode shapes the --json lines: add --json"},
		{[]string{"run", "-p", "hi", "crew.toml"}, 2, "run takes a prompt (-p) or a crew file, not both"},
		{[]string{"run", "nosuch.toml"}, 2, "read crew file: open nosuch.toml"},
		{[]string{"run", "-p", "hi", "--events", "xml"}, 2, `--events accepts only jsonl, not "xml"`},
		{[]string{"run", "-p", "hi", "--model", "nosuch:model"}, 2, "nosuch"},
		{[]string{"sessions", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"sessions", "extra"}, 2, `unexpected argument "extra": run "orrery sessions --help"`},
		{[]string{"sessions", "--data", missing}, 1, "no data dir at " + missing},
		{[]string{"ext", "bogus"}, 2, "ext bogus is not a subcommand: use list, add, remove, restart or logs"},
		{[]string{"ext", "--json"}, 2, "ext needs its subcommand before --json"},
		{[]string{"ext", "restart", "x"}, 2, "ext restart needs --session ID"},
		{[]string{"ext", "logs"}, 2, "ext logs needs one NAME"},
		{[]string{"acp", "extra"}, 2, `unexpected argument "extra": run "orrery acp --help"`},
		{[]string{"config", "bogus"}, 2, `unknown config subcommand "bogus": use validate, get or set`},
		{[]string{"config", "--project"}, 2, "config needs its subcommand before --project"},
		{[]string{"config", "get"}, 2, "config get takes 1 argument(s)"},
		{[]string{"config", "set", "a"}, 2, "config set takes 2 argument(s)"},
		{[]string{"config", "validate", "--config", badListen}, 1, `server.listen is "nope", which is not host:port`},
		{[]string{"config", "validate", "--config", badModel}, 1, `model "gemini:pro" is unknown`},
		{[]string{"config", "validate", "--config", badDuration}, 1, `"banana" is not a duration: write it as 15s, 500ms or 2m`},
		{[]string{"db", "bogus"}, 2, `unknown db subcommand "bogus": use check, repair or backup PATH`},
		{[]string{"db", "--json"}, 2, "db needs its subcommand before --json"},
		{[]string{"db", "backup"}, 2, "db backup needs the PATH to copy the log to"},
		{[]string{"db", "check", "extra"}, 2, `unexpected argument "extra": run "orrery db check --help"`},
		{[]string{"db", "check", "--data", missing}, 1, "there is no database at " + missing},
		{[]string{"version", "extra"}, 2, `unexpected argument "extra": run "orrery version --help"`},
		{[]string{"--resume", "a", "b"}, 2, `unexpected argument "b": run "orrery --help"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			args := tt.args
			// A data dir and a config of the test's own unless the row
			// names them; flags go after a subcommand's operands.
			if !slices.Contains(args, "--data") && args[0] != "config" && args[0] != "explode" {
				args = append(args, "--data", filepath.Join(t.TempDir(), "data"))
			}
			if !slices.Contains(args, "--config") && (args[0] == "run" || args[0] == "serve" || args[0] == "sessions") {
				args = append(args, "--config", cfg)
			}
			var stdout, stderr strings.Builder
			e := &env{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
			code := run(context.Background(), e, args)
			first, _, _ := strings.Cut(stderr.String(), "\n")
			if code != tt.code || !strings.Contains(first, tt.first) {
				t.Errorf("orrery %q = %d, first line of stderr %q; want %d and %q", args, code, first, tt.code, tt.first)
			}
			if lines := strings.Count(strings.TrimSpace(stderr.String()), "\n") + 1; lines > 2 {
				t.Errorf("orrery %q printed %d lines on stderr, want the mistake in one (and where the usage is):\n%s", args, lines, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("orrery %q printed on stdout: %q, want nothing", args, stdout.String())
			}
		})
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("a command made the missing data dir %s", missing)
	}
}
