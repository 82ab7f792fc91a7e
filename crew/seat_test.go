package crew_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/crew"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// crewEnd is how a crew's run ended, and the sub-agents it ran.
type crewEnd struct {
	runID     string
	finished  bool
	errorMsg  string
	subagents []string
}

// runCrew sends text to sess and reads its frames until the run ends.
func runCrew(t *testing.T, sess *kernel.Session, started chan<- string) crewEnd {
	t.Helper()
	ctx := context.Background()
	res, err := sess.Send(ctx, kernel.SendInput{Text: "run the crew", Subscribe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Sub.Close()
	end := crewEnd{runID: res.RunID}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-res.Sub.Ready():
		case <-deadline:
			t.Fatal("no terminal event")
		}
		for _, fr := range res.Sub.Take(nil) {
			ev, err := protocol.DecodeEvent(fr.Data)
			if err != nil {
				t.Fatal(err)
			}
			switch e := ev.(type) {
			case *protocol.SubagentStarted:
				end.subagents = append(end.subagents, e.Name)
				if started != nil {
					started <- e.Name
				}
			case *protocol.RunFinished:
				end.finished = true
				return end
			case *protocol.RunError:
				end.errorMsg = e.Message
				return end
			}
		}
	}
}

// TestRunnerSeatsTheCrewEachRun runs a crew file on a kernel that lives
// long, as orrery serve runs one for its pipe's clients: the crew is
// seated on the hub for each run only, so a second run of the same crew
// while the first is in flight fails naming why, and runs once the first
// has ended; the file is read again at each run, so an edit applies; and
// a task that declared human input runs when nobody can be asked.
func TestRunnerSeatsTheCrewEachRun(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "model.json",
		map[string]any{"text": []string{"thinking"}, "hang": true},
		map[string]any{"text": []string{"first done"}},
		map[string]any{"text": []string{"edited done"}},
	)
	path := filepath.Join(dir, "crew.toml")
	write := func(role string) {
		text := "name = \"seat\"\nmodel = \"script:" + script + "\"\n[[agents]]\nid = \"a\"\nrole = \"" + role +
			"\"\n[[tasks]]\nid = \"t\"\ndescription = \"Do it.\"\nagent = \"a\"\nhuman_input = true\n"
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("Writer")
	f, err := crew.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// One provider for the script, as a kernel's resolver keeps one.
	var once sync.Once
	var scripted agent.Provider
	resolve := func(spec string) (agent.Provider, error) {
		if spec != "script:"+script {
			return models.Resolve(spec)
		}
		once.Do(func() { scripted, err = models.Resolve(spec) })
		return scripted, err
	}
	h := hub.New()
	known := crew.Known{Model: func(spec string) error { _, err := resolve(spec); return err }}
	runner := &crew.Runner{File: f, Reload: true, Known: known, Hub: h, Models: resolve, Tools: tool.NewSet(), Searchable: tool.NewSet()}
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := kernel.New(kernel.Config{Store: st, DefaultModel: "crew", DebugActor: true,
		Models: func(spec string) (agent.Provider, error) {
			if spec == "crew" {
				return runner, nil
			}
			return resolve(spec)
		}})
	ctx := context.Background()
	if err := k.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	first, err := k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The first run hangs in its task, which ran unasked: nobody can be.
	started := make(chan string, 1)
	ended := make(chan crewEnd, 1)
	go func() { ended <- runCrew(t, first, started) }()
	select {
	case name := <-started:
		if name != "Writer" {
			t.Fatalf("the first run's sub-agent = %q, want Writer", name)
		}
	case got := <-ended:
		t.Fatalf("the first run ended before its task started: %+v", got)
	}
	if got := runCrew(t, second, nil); got.finished || !strings.Contains(got.errorMsg, "crew seat is already running") || len(got.subagents) != 0 {
		t.Errorf("a second run of the crew while the first runs = %+v, want RUN_ERROR naming the running crew and no task run", got)
	}
	if err := first.Cancel(ctx, ""); err != nil {
		t.Fatal(err)
	}
	<-ended

	// With the first run over, the crew runs again: the mailbox went.
	if got := runCrew(t, second, nil); !got.finished || len(got.subagents) != 1 {
		t.Errorf("the crew's run after the first ended = %+v, want it finished", got)
	}
	write("Editor")
	if got := runCrew(t, second, nil); !got.finished || len(got.subagents) != 1 || got.subagents[0] != "Editor" {
		t.Errorf("the crew's run after its file was edited = %+v, want it finished by the edited role", got)
	}
	if err := h.AddCrew("seat", []string{"a"}, nil); err != nil {
		t.Errorf("AddCrew after the crew's runs = %v, want its name free", err)
	}
}

// TestSubAgentReportsADeniedCall: a crew agent's call that was denied
// (nobody can be asked) is reported by the offline model as not done,
// since the sub-agent's conversation carries the call's outcome as the
// session's does.
func TestSubAgentReportsADeniedCall(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "crew.toml")
	text := "name = \"deny\"\nmodel = \"offline\"\n[[agents]]\nid = \"a\"\nrole = \"Runner\"\n[[tasks]]\nid = \"t\"\ndescription = \"run `echo hi`\"\nagent = \"a\"\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := crew.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tools := tool.NewSet(tool.Coding(tool.Shell{})...)
	runner := &crew.Runner{File: f, Models: models.Resolve, Tools: tools, Searchable: tool.NewSet()}
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := kernel.New(kernel.Config{Store: st, DefaultModel: "crew", DebugActor: true, Tools: tools, Workspace: tool.Workspace{Root: dir},
		Models: func(spec string) (agent.Provider, error) {
			if spec == "crew" {
				return runner, nil
			}
			return models.Resolve(spec)
		}})
	ctx := context.Background()
	if err := k.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	sess, err := k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if end := runCrew(t, sess, nil); !end.finished {
		t.Fatalf("the crew's run = %+v, want it finished", end)
	}
	frames, _, err := sess.Read(ctx, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var said strings.Builder
	for _, fr := range frames {
		if ev, err := protocol.DecodeEvent(fr.Data); err == nil {
			if c, ok := ev.(*protocol.TextMessageContent); ok {
				said.WriteString(c.Delta)
			}
		}
	}
	if !strings.Contains(said.String(), "Not done: shell was denied") || strings.Contains(said.String(), "Done: shell returned") {
		t.Errorf("the crew said %q, want the denied call reported as not done", said.String())
	}
}
