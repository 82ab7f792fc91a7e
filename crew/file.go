// Package crew reads a crew file (crew.toml) and runs it: a team of agents,
// each with a role, a model, tools and instructions; tasks, each done by
// one agent after the tasks it depends on; and the links that say whom the
// crew may talk to on the hub. A crew runs as one run of a session: each
// task is a sub-agent run inside it, so every client sees the crew live.
package crew

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/getorrery/orrery/hub"
)

// File is a parsed crew file.
type File struct {
	// Name is the crew's id: agent://{name}/{agent}, crew://{name}.
	Name string `toml:"name"`
	// Model is the model of agents that name none; empty means the run's.
	Model  string     `toml:"model"`
	Agents []Agent    `toml:"agents"`
	Tasks  []Task     `toml:"tasks"`
	Links  []hub.Link `toml:"links"`

	path  string
	lines lineIndex
}

// Agent is one [[agents]] entry.
type Agent struct {
	// ID names the agent in its crew; empty means its role.
	ID   string `toml:"id"`
	Role string `toml:"role"`
	// Model is a model spec; empty means the crew's.
	Model string `toml:"model"`
	// Tools are the tools it may call, by name; absent means the run's
	// default tools. Hub tools are always found with tools.search.
	Tools        []string `toml:"tools"`
	Instructions string   `toml:"instructions"`
}

// Task is one [[tasks]] entry.
type Task struct {
	ID          string `toml:"id"`
	Description string `toml:"description"`
	// Agent is the ID of the agent that does it.
	Agent string `toml:"agent"`
	// HumanInput asks the person to confirm before the task runs (on the
	// run event bus, input.needed); without a watching program it is
	// approved.
	HumanInput      bool     `toml:"human_input"`
	HumanInputCamel bool     `toml:"humanInput"`
	DependsOn       []string `toml:"depends_on"`
}

// NeedsHuman reports whether the task declared human input.
func (t Task) NeedsHuman() bool { return t.HumanInput || t.HumanInputCamel }

// Path returns the file the crew was read from.
func (f *File) Path() string { return f.path }

// Agent returns the agent with id.
func (f *File) Agent(id string) (Agent, bool) {
	for _, a := range f.Agents {
		if a.ID == id {
			return a, true
		}
	}
	return Agent{}, false
}

// AgentIDs returns the agents' ids in file order.
func (f *File) AgentIDs() []string {
	ids := make([]string, len(f.Agents))
	for i, a := range f.Agents {
		ids[i] = a.ID
	}
	return ids
}

// Load reads and parses the crew file at path; it does not validate it.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read crew file: %w", err)
	}
	return Parse(path, data)
}

// Parse parses a crew file's text; path names it in errors.
func Parse(path string, data []byte) (*File, error) {
	f := &File{path: path}
	md, err := toml.Decode(string(data), f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s:%d: %s: fix the TOML syntax", path, pe.Position.Line, pe.Message)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.lines = indexLines(data)
	if und := md.Undecoded(); len(und) > 0 {
		k := und[0]
		return nil, fmt.Errorf("%s:%d: unknown key %s: a crew file has name, model, [[agents]], [[tasks]] and [[links]]", path, f.lines.find(k), k.String())
	}
	for i := range f.Agents {
		if f.Agents[i].ID == "" {
			f.Agents[i].ID = f.Agents[i].Role
		}
	}
	return f, nil
}

// lineIndex maps entries and their keys to lines of the file.
type lineIndex struct {
	// entries[section][i] is the line of the i-th [[section]] header.
	entries map[string][]int
	// keys[section][i][key] is the line of key in that entry.
	keys map[string][]map[string]int
}

func indexLines(data []byte) lineIndex {
	li := lineIndex{entries: map[string][]int{}, keys: map[string][]map[string]int{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	section, n := "", 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[[") {
			section = strings.TrimSpace(strings.Trim(strings.SplitN(line, "]]", 2)[0], "[ "))
			li.entries[section] = append(li.entries[section], n)
			li.keys[section] = append(li.keys[section], map[string]int{})
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = ""
			continue
		}
		key, _, ok := strings.Cut(line, "=")
		if !ok || section == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key = strings.Trim(strings.TrimSpace(key), `"'`)
		entries := li.keys[section]
		if _, seen := entries[len(entries)-1][key]; !seen {
			entries[len(entries)-1][key] = n
		}
	}
	return li
}

// line returns the line of key in the i-th entry of section, or of the
// entry's header when key is empty or absent.
func (li lineIndex) line(section string, i int, key string) int {
	if i < 0 || i >= len(li.entries[section]) {
		return 0
	}
	if n, ok := li.keys[section][i][key]; ok && key != "" {
		return n
	}
	return li.entries[section][i]
}

// find returns the line of an undecoded key such as tasks.foo.
func (li lineIndex) find(k toml.Key) int {
	if len(k) >= 2 {
		if entries := li.keys[k[0]]; len(entries) > 0 {
			for i := range entries {
				if n, ok := entries[i][k[len(k)-1]]; ok {
					return n
				}
			}
			return li.entries[k[0]][0]
		}
	}
	return 1
}

// Error is a crew file that cannot run, at a line.
type Error struct {
	Path string
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg) }

// Known says which tools and models exist, for Validate.
type Known struct {
	// Tools reports whether a tool name exists.
	Tools func(name string) bool
	// Model checks a model spec; nil accepts any.
	Model func(spec string) error
}

// Validate refuses a crew that cannot run, naming the line: no name, an
// agent without a role, a duplicate id, a task for an unknown agent, an
// unknown tool or model, a dependency on an unknown task, a cycle, or a
// bad link.
func (f *File) Validate(k Known) error {
	bad := func(section string, i int, key, format string, args ...any) error {
		return &Error{Path: f.path, Line: f.lines.line(section, i, key), Msg: fmt.Sprintf(format, args...)}
	}
	if f.Name == "" {
		return &Error{Path: f.path, Line: 1, Msg: `the crew has no name: add name = "my-crew" at the top`}
	}
	if _, err := hub.ParseAddress(hub.Crew(f.Name)); err != nil {
		return &Error{Path: f.path, Line: 1, Msg: fmt.Sprintf("crew name %q cannot be a hub address: use letters, digits and dashes", f.Name)}
	}
	if len(f.Tasks) == 0 {
		return &Error{Path: f.path, Line: 1, Msg: "the crew has no tasks: add a [[tasks]] entry with description and agent"}
	}
	if len(f.Agents) == 0 {
		return &Error{Path: f.path, Line: 1, Msg: "the crew has no agents: add an [[agents]] entry with a role for its tasks to name"}
	}
	agents := map[string]bool{}
	for i, a := range f.Agents {
		if a.Role == "" {
			return bad("agents", i, "", "agent %d has no role: add role = \"…\"", i+1)
		}
		if agents[a.ID] {
			return bad("agents", i, "id", "agent id %q is used twice: give each agent its own id", a.ID)
		}
		if _, err := hub.ParseAddress(hub.Agent(f.Name, a.ID)); err != nil {
			return bad("agents", i, "id", "agent id %q cannot be a hub address: use letters, digits and dashes", a.ID)
		}
		agents[a.ID] = true
		for _, t := range a.Tools {
			if k.Tools != nil && !k.Tools(t) {
				return bad("agents", i, "tools", "agent %s names an unknown tool %q: remove it or use a tool this run has", a.ID, t)
			}
		}
		model := cmp(a.Model, f.Model)
		if model != "" && k.Model != nil {
			if err := k.Model(model); err != nil {
				return bad("agents", i, "model", "agent %s: %v", a.ID, err)
			}
		}
	}
	tasks := map[string]int{}
	for i, t := range f.Tasks {
		if t.ID == "" {
			return bad("tasks", i, "", "task %d has no id: add id = \"…\"", i+1)
		}
		if _, dup := tasks[t.ID]; dup {
			return bad("tasks", i, "id", "task id %q is used twice: give each task its own id", t.ID)
		}
		tasks[t.ID] = i
		if strings.TrimSpace(t.Description) == "" {
			return bad("tasks", i, "", "task %s has no description: say what the agent should do", t.ID)
		}
		if !agents[t.Agent] {
			return bad("tasks", i, "agent", "task %s names an unknown agent %q: use one of %s", t.ID, t.Agent, strings.Join(f.AgentIDs(), ", "))
		}
	}
	for i, t := range f.Tasks {
		for _, d := range t.DependsOn {
			if _, ok := tasks[d]; !ok {
				return bad("tasks", i, "depends_on", "task %s depends on an unknown task %q", t.ID, d)
			}
		}
	}
	if cyc := f.cycle(tasks); cyc != nil {
		return bad("tasks", tasks[cyc[0]], "depends_on", "tasks depend on each other in a cycle (%s): remove one of these dependencies", strings.Join(cyc, " → "))
	}
	for i, l := range f.Links {
		if err := l.Validate(); err != nil {
			return bad("links", i, "", "%v", err)
		}
	}
	return nil
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// cycle returns a dependency cycle as task ids (the first repeated last),
// or nil.
func (f *File) cycle(index map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(f.Tasks))
	var stack []string
	var found []string
	var visit func(i int) bool
	visit = func(i int) bool {
		color[i] = grey
		stack = append(stack, f.Tasks[i].ID)
		for _, d := range f.Tasks[i].DependsOn {
			j := index[d]
			switch color[j] {
			case grey:
				at := slices.Index(stack, d)
				found = append(slices.Clone(stack[at:]), d)
				return true
			case white:
				if visit(j) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return false
	}
	for i := range f.Tasks {
		if color[i] == white && visit(i) {
			return found
		}
	}
	return nil
}

// Order returns the tasks in dependency order: each after the tasks it
// depends on, and otherwise in file order. The file must be valid.
func (f *File) Order() []Task {
	done := map[string]bool{}
	var out []Task
	for len(out) < len(f.Tasks) {
		progressed := false
		for _, t := range f.Tasks {
			if done[t.ID] {
				continue
			}
			ready := true
			for _, d := range t.DependsOn {
				if !done[d] {
					ready = false
					break
				}
			}
			if ready {
				done[t.ID] = true
				out = append(out, t)
				progressed = true
				break
			}
		}
		if !progressed {
			break // a cycle: Validate refuses it
		}
	}
	return out
}
