package ext_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/ext"
)

const goodManifest = `
[extension]
api = "orrery-ext/1"
name = "build-times"
version = "0.1.0"
runtime = "go"
command = ["./build-times", "--quiet"]
resident = true

[[provides.placements]]
id = "build-times"
placement = "pane.right"
title = "Build times"

[[provides.components]]
name = "runs"
structure = {type = "text", value = "${/failed} failed"}
schema = '{"type":"object","properties":{"failed":{"type":"integer","default":0}}}'

[provides.actions.rerun]
description = "Run the build again"

[[provides.tools]]
name = "build_times"
description = "Lists recent build times."
parameters = {type = "object", properties = {days = {type = "integer"}}}
read_only = true

[subscribe]
events = ["RUN_FINISHED", "orrery.user.message"]
`

func TestParseManifest(t *testing.T) {
	m, err := ext.ParseManifest([]byte(goodManifest))
	if err != nil {
		t.Fatalf("ParseManifest() error = %v", err)
	}
	if m.Extension.Name != "build-times" || !m.Extension.Resident || strings.Join(m.Extension.Command, " ") != "./build-times --quiet" {
		t.Errorf("ParseManifest() extension = %+v", m.Extension)
	}
	if len(m.Provides.Placements) != 1 || m.Provides.Placements[0].Placement != "pane.right" {
		t.Errorf("placements = %+v", m.Provides.Placements)
	}
	if got := string(m.Provides.Components[0].Structure); got != `{"type":"text","value":"${/failed} failed"}` {
		t.Errorf("component structure = %s", got)
	}
	if got := string(m.Provides.Tools[0].Parameters); !strings.Contains(got, `"days"`) {
		t.Errorf("tool parameters = %s", got)
	}
	if !m.StartsWithSession() || !m.Subscribes("RUN_FINISHED") || m.Subscribes("RUN_STARTED") {
		t.Error("StartsWithSession/Subscribes disagree with the manifest")
	}
	if m.Owner() != "ext:build-times" {
		t.Errorf("Owner() = %s", m.Owner())
	}
}

func TestParseManifestRefusals(t *testing.T) {
	base := "[extension]\napi = \"orrery-ext/1\"\nname = \"x\"\nversion = \"1\"\nruntime = \"binary\"\ncommand = \"./x\"\n"
	tests := []struct {
		name      string
		manifest  string
		wantField string
		wantFix   string
	}{
		{"bad toml", "[extension\n", "", "not valid TOML at line"},
		{"no api", strings.Replace(base, "api = \"orrery-ext/1\"\n", "", 1), "extension.api", `set api = "orrery-ext/1"`},
		{"wrong api", strings.Replace(base, "orrery-ext/1", "orrery-ext/2", 1), "extension.api", `set api = "orrery-ext/1"`},
		{"bad name", strings.Replace(base, `name = "x"`, `name = "X Y"`, 1), "extension.name", "lowercase"},
		{"no version", strings.Replace(base, "version = \"1\"\n", "", 1), "extension.version", "set version"},
		{"bad runtime", strings.Replace(base, `"binary"`, `"ruby"`, 1), "extension.runtime", "go, node, python, binary, none"},
		{"no command", strings.Replace(base, "command = \"./x\"\n", "", 1), "extension.command", "set the program"},
		{"none with command", strings.Replace(base, `"binary"`, `"none"`, 1), "extension.command", "remove command"},
		{"command type", strings.Replace(base, `command = "./x"`, `command = 3`, 1), "", "string or an array"},
		{"unknown key", base + "colour = \"red\"\n", "extension.colour", "unknown; remove it"},
		{"inline default", base + "[[provides.placements]]\nid = \"a\"\nplacement = \"inline\"\n", "provides.placements[0].placement", "declare band, pane.left"},
		{"host id", base + "[[provides.placements]]\nid = \"consent\"\nplacement = \"band\"\n", "provides.placements[0].id", "host's own"},
		{"duplicate placement", base + "[[provides.placements]]\nid = \"a\"\nplacement = \"band\"\n[[provides.placements]]\nid = \"a\"\nplacement = \"footer\"\n", "provides.placements[1].id", "twice"},
		{"structure outside catalog", base + "[[provides.components]]\nname = \"c\"\nstructure = {type = \"video\"}\nschema = {type = \"object\"}\n", "provides.components[0].structure", "video"},
		{"bad schema", base + "[[provides.components]]\nname = \"c\"\nstructure = {type = \"text\", value = \"x\"}\nschema = {type = 7}\n", "provides.components[0].schema", "fix it under [[provides.components]]"},
		{"no schema", base + "[[provides.components]]\nname = \"c\"\nstructure = {type = \"text\", value = \"x\"}\n", "provides.components[0].schema", "JSON Schema"},
		{"tool without description", base + "[[provides.tools]]\nname = \"t\"\n", "provides.tools[0].description", "one sentence"},
		{"tool params not object", base + "[[provides.tools]]\nname = \"t\"\ndescription = \"d\"\nparameters = {type = \"string\"}\n", "provides.tools[0].parameters", `type = "object"`},
		{"bad tool name", base + "[[provides.tools]]\nname = \"a.b\"\ndescription = \"d\"\n", "provides.tools[0].name", "letters, digits"},
		{"bad event", base + "[subscribe]\nevents = [\"RUN_DONE\"]\n", "subscribe.events[0]", "RUN_FINISHED"},
		{"none action without command", strings.Replace(strings.Replace(base, `"binary"`, `"none"`, 1), "command = \"./x\"\n", "", 1) + "[provides.actions.go]\ndescription = \"d\"\n", "provides.actions.go.command", "runs a command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ext.ParseManifest([]byte(tt.manifest))
			var me *ext.ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("ParseManifest() error = %v, want a *ManifestError", err)
			}
			if me.Field != tt.wantField || !strings.Contains(me.Msg, tt.wantFix) {
				t.Errorf("ParseManifest() = field %q, %q; want field %q with %q", me.Field, me.Msg, tt.wantField, tt.wantFix)
			}
		})
	}
}

func TestRenderersIgnored(t *testing.T) {
	m := "[extension]\napi = \"orrery-ext/1\"\nname = \"x\"\nversion = \"1\"\nruntime = \"none\"\nrenderers = [\"tui\"]\n"
	if _, err := ext.ParseManifest([]byte(m)); err != nil {
		t.Errorf("ParseManifest() with renderers = %v, want it accepted (it does nothing)", err)
	}
}

func TestDiscover(t *testing.T) {
	project, user := t.TempDir(), t.TempDir()
	write := func(dir, sub, name, version string) {
		t.Helper()
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		m := "[extension]\napi = \"orrery-ext/1\"\nname = \"" + name + "\"\nversion = \"" + version + "\"\nruntime = \"none\"\n"
		if err := os.WriteFile(filepath.Join(d, ext.ManifestFile), []byte(m), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(project, "a", "alpha", "2")
	write(user, "a", "alpha", "1")
	write(user, "b", "beta", "1")
	write(user, "bad", "Bad Name", "1")
	got, errs := ext.Discover(project, user, filepath.Join(t.TempDir(), "missing"))
	if len(got) != 2 || got[0].Extension.Name != "alpha" || got[0].Extension.Version != "2" || got[1].Extension.Name != "beta" {
		t.Errorf("Discover() = %v, want alpha 2 (the project's) and beta", got)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), filepath.Join("bad", ext.ManifestFile)+": extension.name") {
		t.Errorf("Discover() errors = %v, want the bad manifest named with its field", errs)
	}
}
