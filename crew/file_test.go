package crew_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/getorrery/orrery/crew"
)

const twoAgents = `name = "billing"
model = "offline"

[[agents]]
role = "Writer"
tools = ["echo"]

[[agents]]
id = "rev"
role = "Reviewer"
`

func TestParse(t *testing.T) {
	tests := []struct {
		name, text string
		wantErr    string // "" means it parses
		check      func(t *testing.T, f *crew.File)
	}{
		{name: "ids default to roles", text: twoAgents + "\n[[tasks]]\nid = \"w\"\ndescription = \"d\"\nagent = \"Writer\"\n",
			check: func(t *testing.T, f *crew.File) {
				if got := strings.Join(f.AgentIDs(), ","); got != "Writer,rev" {
					t.Errorf("AgentIDs() = %s, want Writer,rev", got)
				}
				if a, ok := f.Agent("rev"); !ok || a.Role != "Reviewer" || a.Tools != nil {
					t.Errorf("Agent(rev) = %+v, %v; want the reviewer with no tools list", a, ok)
				}
				if a, _ := f.Agent("Writer"); len(a.Tools) != 1 {
					t.Errorf("Agent(Writer).Tools = %v, want [echo]", a.Tools)
				}
			}},
		{name: "human input in either spelling", text: twoAgents + `
[[tasks]]
id = "a"
description = "d"
agent = "rev"
human_input = true

[[tasks]]
id = "b"
description = "d"
agent = "rev"
humanInput = true

[[tasks]]
id = "c"
description = "d"
agent = "rev"
`, check: func(t *testing.T, f *crew.File) {
			for i, want := range []bool{true, true, false} {
				if got := f.Tasks[i].NeedsHuman(); got != want {
					t.Errorf("task %s NeedsHuman() = %v, want %v", f.Tasks[i].ID, got, want)
				}
			}
		}},
		{name: "links", text: twoAgents + "\n[[links]]\nto = \"client:studio\"\ndirection = \"outbound\"\nallowed_topics = [\"run.progress\"]\n",
			check: func(t *testing.T, f *crew.File) {
				if len(f.Links) != 1 || f.Links[0].To != "client:studio" || f.Links[0].Direction != "outbound" || f.Links[0].AllowedTopics[0] != "run.progress" {
					t.Errorf("Links = %+v, want the one outbound link", f.Links)
				}
			}},
		{name: "syntax error names its line", text: "name = \"x\"\n\n[[agents]\nrole = 1\n", wantErr: "crew.toml:4: expected end of table array name delimiter"},
		{name: "unknown key names its line", text: twoAgents + "\n[[tasks]]\nid = \"w\"\nprompt = \"x\"\n", wantErr: "crew.toml:14: unknown key tasks.prompt"},
		{name: "a wrong type", text: "name = 3\n", wantErr: "crew.toml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := crew.Parse("crew.toml", []byte(tt.text))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse() = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() = %v, want nil", err)
			}
			if f.Path() != "crew.toml" {
				t.Errorf("Path() = %q, want crew.toml", f.Path())
			}
			tt.check(t, f)
		})
	}
}

// task returns a [[tasks]] entry.
func task(id, agent string, deps ...string) string {
	quoted := make([]string, len(deps))
	for i, d := range deps {
		quoted[i] = fmt.Sprintf("%q", d)
	}
	return fmt.Sprintf("\n[[tasks]]\nid = %q\ndescription = \"do %s\"\nagent = %q\ndepends_on = [%s]\n", id, id, agent, strings.Join(quoted, ", "))
}

var known = crew.Known{
	Tools: func(name string) bool { return name == "echo" || name == "read_file" },
	Model: func(spec string) error {
		if spec == "offline" || strings.HasPrefix(spec, "script:") {
			return nil
		}
		return errors.New("unknown model " + spec + ": use offline")
	},
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name, text string
		wantErr    string // "" means valid; else the whole message's start, with its line
	}{
		{"valid", twoAgents + task("w", "Writer") + task("r", "rev", "w"), ""},
		{"no name", strings.Replace(twoAgents, `name = "billing"`, "", 1) + task("w", "Writer"), "crew.toml:1: the crew has no name"},
		{"a name that is no address", strings.Replace(twoAgents, `"billing"`, `"bill ing"`, 1) + task("w", "Writer"), "crew.toml:1: crew name \"bill ing\" cannot be a hub address"},
		{"no tasks", twoAgents, "crew.toml:1: the crew has no tasks"},
		{"a name with a terminal escape", strings.Replace(twoAgents, `"billing"`, `"bill\u001b]0;x\u0007"`, 1) + task("w", "Writer"), `crew.toml:1: crew name "bill\x1b]0;x\a" cannot be a hub address`},
		{"no agents", "name = \"x\"\n[[tasks]]\nid = \"t\"\ndescription = \"d\"\nagent = \"a\"\n", "crew.toml:1: the crew has no agents"},
		{"agent without role", twoAgents + "\n[[agents]]\nid = \"x\"\n" + task("w", "Writer"), "crew.toml:12: agent 3 has no role"},
		{"duplicate agent", twoAgents + "\n[[agents]]\nid = \"rev\"\nrole = \"Other\"\n" + task("w", "Writer"), "crew.toml:13: agent id \"rev\" is used twice"},
		{"unknown tool", strings.Replace(twoAgents, `["echo"]`, `["echo", "rm_rf"]`, 1) + task("w", "Writer"), "crew.toml:6: agent Writer names an unknown tool \"rm_rf\""},
		{"unknown model", strings.Replace(twoAgents, "id = \"rev\"\n", "id = \"rev\"\nmodel = \"gpt-9\"\n", 1) + task("w", "Writer"), "crew.toml:10: agent rev: unknown model gpt-9"},
		{"task without id", twoAgents + "\n[[tasks]]\ndescription = \"d\"\nagent = \"rev\"\n", "crew.toml:12: task 1 has no id"},
		{"duplicate task", twoAgents + task("w", "Writer") + task("w", "rev"), "crew.toml:19: task id \"w\" is used twice"},
		{"task without description", twoAgents + "\n[[tasks]]\nid = \"w\"\nagent = \"rev\"\n", "crew.toml:12: task w has no description"},
		{"unknown agent", twoAgents + task("w", "Editor"), "crew.toml:15: task w names an unknown agent \"Editor\": use one of Writer, rev"},
		{"unknown dependency", twoAgents + task("w", "Writer", "nope"), "crew.toml:16: task w depends on an unknown task \"nope\""},
		{"cycle", twoAgents + task("a", "Writer", "c") + task("b", "rev", "a") + task("c", "rev", "b"), "crew.toml:16: tasks depend on each other in a cycle (a → c → b → a)"},
		{"self dependency", twoAgents + task("a", "Writer", "a"), "crew.toml:16: tasks depend on each other in a cycle (a → a)"},
		{"bad link direction", twoAgents + task("w", "Writer") + "\n[[links]]\nto = \"client:studio\"\ndirection = \"sideways\"\n", "crew.toml:18: link to client:studio has direction \"sideways\""},
		{"bad link address", twoAgents + task("w", "Writer") + "\n[[links]]\nto = \"studio\"\n", "crew.toml:18: link to: hub address \"studio\" has no scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := crew.Parse("crew.toml", []byte(tt.text))
			if err != nil {
				t.Fatalf("Parse() = %v", err)
			}
			err = f.Validate(known)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			var ce *crew.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Validate() = %v, want a *crew.Error", err)
			}
			if !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("Validate() = %q, want it to start with %q", err, tt.wantErr)
			}
		})
	}
}

func TestOrder(t *testing.T) {
	tests := []struct {
		name  string
		tasks string
		want  string
	}{
		{"file order without dependencies", task("a", "rev") + task("b", "rev") + task("c", "rev"), "a b c"},
		{"a dependency moves a task after it", task("a", "rev", "c") + task("b", "rev") + task("c", "rev"), "b c a"},
		{"a chain runs backwards through the file", task("a", "rev", "b") + task("b", "rev", "c") + task("c", "rev"), "c b a"},
		{"a diamond", task("d", "rev", "b", "c") + task("b", "rev", "a") + task("c", "rev", "a") + task("a", "rev"), "a b c d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := crew.Parse("crew.toml", []byte(twoAgents+tt.tasks))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Validate(known); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, task := range f.Order() {
				ids = append(ids, task.ID)
			}
			if got := strings.Join(ids, " "); got != tt.want {
				t.Errorf("Order() = %s, want %s", got, tt.want)
			}
		})
	}
}
