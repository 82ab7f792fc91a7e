package acp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/acp"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// TestAgentScript is the test agent, relative to this package.
const testAgentScript = "testdata/agent/agent.mjs"

// requireNode skips the test when node or the test agent's packages are
// missing, unless ORRERY_REQUIRE_NODE is set.
func requireNode(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		if _, serr := os.Stat("testdata/agent/node_modules/@agentclientprotocol/sdk/package.json"); serr != nil {
			err = serr
		}
	}
	if err != nil {
		if os.Getenv("ORRERY_REQUIRE_NODE") != "" {
			t.Fatalf("node and the test agent are required (ORRERY_REQUIRE_NODE is set): %v; run npm ci --prefix agent/acp/testdata/agent", err)
		}
		t.Skipf("node or the test agent is missing (%v): run npm ci --prefix agent/acp/testdata/agent", err)
	}
	return node
}

var consentClient = kernel.Caller{Client: "web", Draws: []string{"thread", "tools", "consent"}}

// env is a kernel on a real SQLite file whose sessions run the test agent.
type env struct {
	k     *kernel.Kernel
	agent *acp.Agent
	s     *kernel.Session
}

func newEnv(t *testing.T, flags []string, opts ...func(*kernel.Config, *acp.Config)) *env {
	t.Helper()
	node := requireNode(t)
	script, err := filepath.Abs(testAgentScript)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{}
	acfg := acp.Config{
		Name: "test", Command: node, Args: append([]string{script}, flags...),
		CancelTimeout: 500 * time.Millisecond, StopTimeout: 500 * time.Millisecond,
		Outside: func(ctx context.Context, session string, evs ...protocol.Event) error {
			s, err := e.k.Session(ctx, session)
			if err != nil {
				return err
			}
			return s.Append(ctx, evs...)
		},
	}
	kcfg := kernel.Config{
		Store: st, DefaultModel: "acp:test", DebugActor: true,
		Workspace:      workspace(t),
		ConsentTimeout: 20 * time.Second,
	}
	for _, o := range opts {
		o(&kcfg, &acfg)
	}
	a, err := acp.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	e.agent = a
	kcfg.Models = func(spec string) (agent.Provider, error) {
		if spec == "acp:test" {
			return a, nil
		}
		return models.Resolve(spec)
	}
	e.k = kernel.New(kcfg)
	if err := e.k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.k.Close(ctx); err != nil {
			t.Errorf("kernel Close() = %v", err)
		}
		if err := a.Close(ctx); err != nil {
			t.Errorf("agent Close() = %v", err)
		}
		st.Close()
	})
	e.s, err = e.k.CreateSession(context.Background(), kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// workspace is the tests' workspace: the package's directory.
func workspace(t *testing.T) tool.Workspace {
	t.Helper()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return tool.Workspace{Root: cwd}
}

// turn is one run as a consent-drawing client sees it.
type turn struct {
	t      *testing.T
	sub    *kernel.Subscription
	runID  string
	events []protocol.Event
}

// start sends text with a subscription open from the session's head.
func (e *env) start(t *testing.T, in kernel.SendInput, caller kernel.Caller) *turn {
	t.Helper()
	head := e.s.Head()
	sub, err := e.s.SubscribeWith(context.Background(), kernel.SubscribeOptions{Since: &head, Caller: caller})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	res, err := e.s.Send(context.Background(), in)
	if err != nil {
		t.Fatalf("Send() = %v", err)
	}
	return &turn{t: t, sub: sub, runID: res.RunID}
}

// until reads events until one satisfies stop, and returns it.
func (tr *turn) until(stop func(protocol.Event) bool) protocol.Event {
	tr.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		for _, f := range tr.sub.Take(nil) {
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				tr.t.Fatal(err)
			}
			tr.events = append(tr.events, ev)
			if stop(ev) {
				return ev
			}
		}
		select {
		case <-tr.sub.Ready():
		case <-tr.sub.Done():
			tr.t.Fatalf("subscription ended: %v", tr.sub.Err())
		case <-timeout:
			tr.t.Fatalf("timed out; got %v", types(tr.events))
		}
	}
}

func (tr *turn) end() protocol.Event {
	tr.t.Helper()
	return tr.until(func(ev protocol.Event) bool { return ev.EventType().Terminal() })
}

func (tr *turn) consentRequest() kernel.ConsentRequested {
	tr.t.Helper()
	ev := tr.until(func(ev protocol.Event) bool {
		c, ok := ev.(*protocol.Custom)
		return ok && c.Name == kernel.ConsentRequestedEvent
	})
	var req kernel.ConsentRequested
	if err := json.Unmarshal(ev.(*protocol.Custom).Value, &req); err != nil {
		tr.t.Fatal(err)
	}
	return req
}

func types(evs []protocol.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = string(ev.EventType())
		if c, ok := ev.(*protocol.Custom); ok {
			out[i] += ":" + c.Name
		}
	}
	return out
}

func text(evs []protocol.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if c, ok := ev.(*protocol.TextMessageContent); ok {
			b.WriteString(c.Delta)
		}
	}
	return b.String()
}

func customs(evs []protocol.Event, name string) []json.RawMessage {
	var out []json.RawMessage
	for _, ev := range evs {
		if c, ok := ev.(*protocol.Custom); ok && c.Name == name {
			out = append(out, c.Value)
		}
	}
	return out
}

func has(evs []protocol.Event, typ protocol.EventType) bool {
	for _, ev := range evs {
		if ev.EventType() == typ {
			return true
		}
	}
	return false
}

func run(t *testing.T, e *env, prompt string) []protocol.Event {
	t.Helper()
	tr := e.start(t, kernel.SendInput{Text: prompt}, kernel.Caller{})
	tr.end()
	return tr.events
}

func TestTextTurn(t *testing.T) {
	e := newEnv(t, nil)
	evs := run(t, e, "text please")
	if got := text(evs); got != "Hello, world." {
		t.Errorf("text = %q, want %q", got, "Hello, world.")
	}
	fin, ok := evs[len(evs)-1].(*protocol.RunFinished)
	if !ok {
		t.Fatalf("last event = %s, want RUN_FINISHED; events %v", evs[len(evs)-1].EventType(), types(evs))
	}
	var res protocol.RunResult
	if err := json.Unmarshal(fin.Result, &res); err != nil {
		t.Fatal(err)
	}
	if res.MicroUSD != 12500 {
		t.Errorf("RUN_FINISHED micro_usd = %d, want 12500 (the agent's usage_update cost)", res.MicroUSD)
	}
	for _, typ := range []protocol.EventType{protocol.TypeReasoningStart, protocol.TypeReasoningMessageContent, protocol.TypeReasoningEnd} {
		if !has(evs, typ) {
			t.Errorf("no %s in %v", typ, types(evs))
		}
	}
	// The commands were sent before session/new answered: buffered, then
	// delivered into the first turn.
	cmds := customs(evs, acp.CommandsEvent)
	if len(cmds) != 1 || !strings.Contains(string(cmds[0]), `"name":"test"`) {
		t.Errorf("orrery.commands = %s, want the agent's commands", cmds)
	}
	if got := customs(evs, acp.SessionEvent); len(got) != 1 || !strings.Contains(string(got[0]), `"sessionId":"sess_1"`) {
		t.Errorf("orrery.acp.session = %s", got)
	}
	if got := customs(evs, acp.StopEvent); len(got) != 1 || string(got[0]) != `{"stopReason":"end_turn"}` {
		t.Errorf("orrery.acp.stop = %s", got)
	}
	// The plan is a task surface.
	var plan string
	for _, ev := range evs {
		if d, ok := ev.(*protocol.StateDelta); ok && d.Delta[0].Path == "/surfaces/plan" {
			plan = string(d.Delta[0].Value)
		}
	}
	wantPlan := `{"kind":{"status":"running","steps":[{"status":"done","title":"Read the code"},{"status":"running","title":"Write the answer"}],"t":"task","title":"Plan"}}`
	if plan != wantPlan {
		t.Errorf("plan surface = %s, want %s", plan, wantPlan)
	}
	// Every text frame made from an update carries it in metadata.acp.
	for _, ev := range evs {
		if c, ok := ev.(*protocol.TextMessageContent); ok {
			raw := string(c.Metadata.Extra[acp.MetaKey])
			if !strings.Contains(raw, `"sessionUpdate":"agent_message_chunk"`) {
				t.Errorf("TEXT_MESSAGE_CONTENT metadata.acp = %s, want the raw update", raw)
			}
		}
	}
	// A second turn goes to the same process and ACP session.
	evs = run(t, e, "text again")
	if got := customs(evs, acp.SessionEvent); len(got) != 0 {
		t.Errorf("second turn opened a new ACP session: %s", got)
	}
	if got := text(evs); got != "Hello, world." {
		t.Errorf("second turn text = %q", got)
	}
}

func TestPermission(t *testing.T) {
	tests := []struct {
		name     string
		prompt   string
		rules    consent.Rules
		caller   kernel.Caller
		answer   string // "" when no question is expected
		wantText string
		wantOK   bool
	}{
		{"allowed by a person", "tool", consent.Rules{}, consentClient, "yes", "chose yes", true},
		{"rejected by a person", "tool", consent.Rules{}, consentClient, "no", "chose no", false},
		{"allowed by a rule", "tool", consent.Rules{Allow: []string{"edit_file(/tmp/*)"}}, consentClient, "", "chose yes", true},
		{"denied by a rule", "tool", consent.Rules{Deny: []string{"edit_file"}}, consentClient, "", "chose no", false},
		{"no client draws consent", "tool", consent.Rules{}, kernel.Caller{}, "", "chose no", false},
		{"never announced", "unannounced", consent.Rules{}, consentClient, "yes", "chose yes", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil, func(k *kernel.Config, _ *acp.Config) { k.Consent = tt.rules })
			tr := e.start(t, kernel.SendInput{Text: tt.prompt}, tt.caller)
			if tt.answer != "" {
				req := tr.consentRequest()
				var ids []string
				for _, o := range req.Options {
					ids = append(ids, o.ID)
				}
				if strings.Join(ids, ",") != "yes,always,no" {
					t.Fatalf("consent options = %v, want the agent's own yes,always,no", ids)
				}
				if req.Tool != "edit_file" || req.ToolCallID != "call_1" || !strings.Contains(string(req.Source), `"optionId":"always"`) {
					t.Errorf("consent request = %+v", req)
				}
				if err := e.s.AnswerConsent(context.Background(), consentClient, req.Request, "maybe"); err == nil || !strings.Contains(err.Error(), "was not offered") {
					t.Errorf("AnswerConsent(maybe) = %v, want refused: not offered", err)
				}
				if err := e.s.AnswerConsent(context.Background(), consentClient, req.Request, tt.answer); err != nil {
					t.Fatalf("AnswerConsent(%s) = %v", tt.answer, err)
				}
				if err := e.s.AnswerConsent(context.Background(), consentClient, req.Request, tt.answer); err == nil {
					t.Errorf("a second answer was accepted; the first answer must win")
				}
			}
			tr.end()
			evs := tr.events
			if _, ok := evs[len(evs)-1].(*protocol.RunFinished); !ok {
				t.Fatalf("last event %s; events %v", evs[len(evs)-1].EventType(), types(evs))
			}
			if got := text(evs); got != tt.wantText {
				t.Errorf("text = %q, want %q", got, tt.wantText)
			}
			if tt.answer == "" && len(customs(evs, kernel.ConsentRequestedEvent)) > 0 {
				t.Errorf("a question was placed though the rules or the lack of clients decide")
			}
			var starts int
			var status, surface string
			for _, ev := range evs {
				switch ev := ev.(type) {
				case *protocol.ToolCallStart:
					starts++
				case *protocol.ToolCallResult:
					var o map[string]string
					_ = json.Unmarshal(ev.Orrery().Outcome, &o)
					status = o["status"]
				case *protocol.StateDelta:
					if ev.Delta[0].Path == "/surfaces/call_1" && surface == "" {
						surface = string(ev.Delta[0].Value)
					}
				}
			}
			if starts != 1 {
				t.Errorf("TOOL_CALL_START count = %d, want 1", starts)
			}
			if want := map[bool]string{true: "ok", false: "error"}[tt.wantOK]; status != want {
				t.Errorf("TOOL_CALL_RESULT status = %q, want %q", status, want)
			}
			if !strings.Contains(surface, `"t":"diff"`) || !strings.Contains(surface, `+new`) {
				t.Errorf("tool call surface = %s, want a diff surface", surface)
			}
		})
	}
}

// TestPermissionShellLine: an agent's execute permission is a shell line,
// judged part by part like the shell tool's.
func TestPermissionShellLine(t *testing.T) {
	rules := consent.Rules{Allow: []string{"shell(git status*)"}}
	t.Run("every part allowed", func(t *testing.T) {
		e := newEnv(t, nil, func(k *kernel.Config, _ *acp.Config) { k.Consent = rules })
		tr := e.start(t, kernel.SendInput{Text: "execute git status && git status --short"}, consentClient)
		tr.end()
		if got := text(tr.events); got != "chose yes" {
			t.Errorf("text = %q, want the rules to allow the line", got)
		}
		if len(customs(tr.events, kernel.ConsentRequestedEvent)) > 0 {
			t.Error("a question was placed though every part of the line is allowed")
		}
	})
	t.Run("a part not allowed", func(t *testing.T) {
		e := newEnv(t, nil, func(k *kernel.Config, _ *acp.Config) { k.Consent = rules })
		tr := e.start(t, kernel.SendInput{Text: "execute git status; touch pwned"}, consentClient)
		req := tr.consentRequest()
		if req.Tool != "shell" || req.Part != "touch pwned" || !strings.Contains(req.Rule, `the part "touch pwned"`) {
			t.Errorf("consent request = tool %q, part %q, rule %q; want shell asked about the part touch pwned", req.Tool, req.Part, req.Rule)
		}
		if err := e.s.AnswerConsent(context.Background(), consentClient, req.Request, "no"); err != nil {
			t.Fatal(err)
		}
		tr.end()
		if got := text(tr.events); got != "chose no" {
			t.Errorf("text = %q, want the person's no", got)
		}
	})
}

// TestPermissionArgv: an agent's execute command given as an argv is
// judged as the line it runs, each word quoted: a deny rule sees the
// command inside sh -c, and a word with a space stays one word.
func TestPermissionArgv(t *testing.T) {
	rules := consent.Rules{Allow: []string{"shell(git status*)"}, Deny: []string{"shell(rm -rf*)"}}
	for _, tc := range []struct {
		argv, part string
		denied     bool
	}{
		{`["sh","-c","rm -rf x"]`, "rm -rf x", true},
		{`["git","status","; touch pwned"]`, "", false},
	} {
		t.Run(tc.argv, func(t *testing.T) {
			e := newEnv(t, nil, func(k *kernel.Config, _ *acp.Config) { k.Consent = rules })
			tr := e.start(t, kernel.SendInput{Text: "argv " + tc.argv}, consentClient)
			tr.end()
			if got := text(tr.events); tc.denied && got == "chose yes" || !tc.denied && got != "chose yes" {
				t.Errorf("argv %s: text = %q, want denied %v", tc.argv, got, tc.denied)
			}
			if n := len(customs(tr.events, kernel.ConsentRequestedEvent)); n > 0 {
				t.Errorf("argv %s: %d questions placed, want the rules to decide", tc.argv, n)
			}
		})
	}
}

func TestCancelDuringPermission(t *testing.T) {
	e := newEnv(t, nil)
	tr := e.start(t, kernel.SendInput{Text: "wait"}, consentClient)
	req := tr.consentRequest()
	if err := e.s.Cancel(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	fin, ok := tr.end().(*protocol.RunFinished)
	if !ok || fin.Outcome == nil || fin.Outcome.Type != protocol.OutcomeCancelled {
		t.Fatalf("terminal = %v, want RUN_FINISHED cancelled", types(tr.events))
	}
	resolved := customs(tr.events, kernel.ConsentResolvedEvent)
	if len(resolved) != 1 || !strings.Contains(string(resolved[0]), `"outcome":"cancelled"`) || !strings.Contains(string(resolved[0]), req.Request) {
		t.Errorf("consent.resolved = %s, want %s cancelled", resolved, req.Request)
	}
	// The agent got cancelled for its permission and ended its turn: the
	// same process takes the next prompt.
	evs := run(t, e, "text")
	if got := text(evs); got != "Hello, world." {
		t.Errorf("next turn text = %q", got)
	}
	if got := customs(evs, acp.SessionEvent); len(got) != 0 {
		t.Errorf("next turn started a new agent session: %s", got)
	}
}

func TestWithdrawnPermission(t *testing.T) {
	e := newEnv(t, nil)
	tr := e.start(t, kernel.SendInput{Text: "withdraw"}, consentClient)
	req := tr.consentRequest()
	tr.end()
	if got := text(tr.events); got != "withdrawn: cancelled" {
		t.Errorf("text = %q, want the agent to see its withdrawn request cancelled", got)
	}
	resolved := customs(tr.events, kernel.ConsentResolvedEvent)
	if len(resolved) != 1 || !strings.Contains(string(resolved[0]), req.Request) || !strings.Contains(string(resolved[0]), `"outcome":"cancelled"`) {
		t.Errorf("consent.resolved = %s, want the question withdrawn", resolved)
	}
	if err := e.s.AnswerConsent(context.Background(), consentClient, req.Request, "yes"); err == nil {
		t.Errorf("an answer to a withdrawn question was accepted")
	}
}

func TestUnknownUpdateIsRaw(t *testing.T) {
	e := newEnv(t, nil)
	evs := run(t, e, "unknown")
	var raw *protocol.Raw
	for _, ev := range evs {
		if r, ok := ev.(*protocol.Raw); ok && strings.Contains(string(r.Event), "compaction_summary_chunk") {
			raw = r
		}
	}
	if raw == nil {
		t.Fatalf("no RAW for the unknown update in %v", types(evs))
	}
	if raw.Source != "acp" || !strings.Contains(string(raw.Event), `"futureField":true`) {
		t.Errorf("RAW = source %q event %s, want source acp and every field kept", raw.Source, raw.Event)
	}
	if got := text(evs); got != "after unknown" {
		t.Errorf("text = %q", got)
	}
}

func TestCrashEndsRunAndNextPromptRestarts(t *testing.T) {
	e := newEnv(t, nil)
	evs := run(t, e, "crash")
	re, ok := evs[len(evs)-1].(*protocol.RunError)
	if !ok {
		t.Fatalf("terminal = %v, want RUN_ERROR", types(evs))
	}
	if re.Code != "agent_crashed" || !strings.Contains(re.Message, "exit status 3") || !strings.Contains(re.Message, "send the prompt again") {
		t.Errorf("RUN_ERROR = %q %q", re.Code, re.Message)
	}
	evs = run(t, e, "text")
	if got := text(evs); got != "Hello, world." {
		t.Errorf("text after restart = %q", got)
	}
	if got := customs(evs, acp.SessionEvent); len(got) != 1 {
		t.Errorf("the restarted agent opened %d sessions, want 1", len(got))
	}
	if st := e.agent.Stats(); st != (acp.Stats{Running: 1, Starts: 2, Crashes: 1}) {
		t.Errorf("Stats() after a crash and a restart = %+v, want 1 running of 2 started, 1 crashed", st)
	}
	if err := e.agent.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := e.agent.Stats(); st != (acp.Stats{Running: 0, Starts: 2, Crashes: 1}) {
		t.Errorf("Stats() after Close = %+v: a process Orrery stopped is not a crash", st)
	}
}

func TestAuthRequired(t *testing.T) {
	e := newEnv(t, []string{"--auth"})
	evs := run(t, e, "text")
	re, ok := evs[len(evs)-1].(*protocol.RunError)
	if !ok {
		t.Fatalf("terminal = %v, want RUN_ERROR", types(evs))
	}
	if re.Code != "auth_required" || !strings.Contains(re.Message, "log in") || !strings.Contains(re.Message, "API key") {
		t.Errorf("RUN_ERROR = %q %q, want auth_required saying how to log in", re.Code, re.Message)
	}
}

func TestAgentIgnoringCancelIsKilled(t *testing.T) {
	e := newEnv(t, []string{"--ignore-cancel"})
	tr := e.start(t, kernel.SendInput{Text: "slow"}, kernel.Caller{})
	tr.until(func(ev protocol.Event) bool { return ev.EventType() == protocol.TypeTextMessageContent })
	if err := e.s.Cancel(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	tr.end()
	// The agent was killed after the cancel timeout: the next prompt
	// starts a new process with a new session.
	evs := run(t, e, "text")
	if got := customs(evs, acp.SessionEvent); len(got) != 1 {
		t.Errorf("next turn opened %d agent sessions, want 1 (a new process)", len(got))
	}
	if got := text(evs); got != "Hello, world." {
		t.Errorf("text = %q", got)
	}
}

func TestBadAndLateOutput(t *testing.T) {
	e := newEnv(t, nil)
	if got := text(run(t, e, "noise")); got != "after noise" {
		t.Errorf("after a non-JSON line: text = %q, want the turn to go on", got)
	}
	if got := text(run(t, e, "big")); len(got) != 100*1024 {
		t.Errorf("a 100 KiB chunk arrived as %d bytes", len(got))
	}
	head := e.s.Head()
	sub, err := e.s.Subscribe(context.Background(), &head)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if got := text(run(t, e, "after")); got != "before the end" {
		t.Errorf("text = %q", got)
	}
	tr := &turn{t: t, sub: sub}
	ev := tr.until(func(ev protocol.Event) bool {
		r, ok := ev.(*protocol.Raw)
		return ok && strings.Contains(string(r.Event), "after the end")
	})
	if ev.(*protocol.Raw).Source != "acp" {
		t.Errorf("late update RAW source = %q", ev.(*protocol.Raw).Source)
	}
}

func TestPromptAttachments(t *testing.T) {
	e := newEnv(t, nil)
	cwd, _ := os.Getwd()
	abs := filepath.Join(cwd, "testdata", "x.txt")
	// A file outside the workspace is refused before the agent is handed
	// it, whichever way it is named.
	for _, outside := range []string{"file:///abs/x.txt", "file://" + filepath.Dir(cwd) + "/x.txt"} {
		_, err := e.s.Send(context.Background(), kernel.SendInput{Text: "echo", Attachments: []protocol.ContentPart{
			{Type: "document", Source: &protocol.Source{Type: "url", Value: outside}}}})
		if err == nil || !strings.Contains(err.Error(), "outside the session's workspace") {
			t.Errorf("Send() attaching %s = %v, want refused: outside the workspace", outside, err)
		}
	}
	atts := []protocol.ContentPart{
		{Type: "document", Source: &protocol.Source{Type: "path", Value: "src/main.go"}, Metadata: json.RawMessage(`{"name":"main"}`)},
		{Type: "document", Source: &protocol.Source{Type: "url", Value: "file://" + abs}},
		{Type: "document", Source: &protocol.Source{Type: "path", Value: ""}},
	}
	tr := e.start(t, kernel.SendInput{Text: "echo @main", Attachments: atts}, kernel.Caller{})
	tr.end()
	var blocks []map[string]string
	if err := json.Unmarshal([]byte(text(tr.events)), &blocks); err != nil {
		t.Fatalf("echo = %q: %v", text(tr.events), err)
	}
	want := []map[string]string{
		{"type": "text", "text": "echo @main"},
		{"type": "resource_link", "uri": "file://" + filepath.Join(cwd, "src/main.go"), "name": "main"},
		{"type": "resource_link", "uri": "file://" + abs, "name": abs},
	}
	if len(blocks) != len(want) {
		t.Fatalf("prompt blocks = %v, want %v", blocks, want)
	}
	for i := range want {
		for k, v := range want[i] {
			if blocks[i][k] != v {
				t.Errorf("block %d %s = %q, want %q", i, k, blocks[i][k], v)
			}
		}
	}
}

// TestResumeAfterRestart: a kernel that restarts on the same log starts a
// new agent process, which resumes the agent's recorded session with
// session/load (the agent offers it) instead of opening a new one.
func TestResumeAfterRestart(t *testing.T) {
	node := requireNode(t)
	script, _ := filepath.Abs(testAgentScript)
	dbPath := filepath.Join(t.TempDir(), "orrery.db")
	open := func() (*kernel.Kernel, *acp.Agent, func()) {
		st, err := sqlite.Open(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		var k *kernel.Kernel
		a, err := acp.New(acp.Config{Name: "test", Command: node, Args: []string{script, "--load"},
			Resume: lastSessionIn(func() *kernel.Kernel { return k })})
		if err != nil {
			t.Fatal(err)
		}
		k = kernel.New(kernel.Config{Store: st, DefaultModel: "acp:test", DebugActor: true, Workspace: workspace(t),
			Models: func(spec string) (agent.Provider, error) { return a, nil }})
		if err := k.Open(context.Background()); err != nil {
			t.Fatal(err)
		}
		return k, a, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = k.Close(ctx)
			_ = a.Close(ctx)
			st.Close()
		}
	}
	k, _, closeAll := open()
	s, err := k.CreateSession(context.Background(), kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{k: k, s: s}
	if got := customs(run(t, e, "text"), acp.SessionEvent); len(got) != 1 {
		t.Fatalf("first turn recorded %d agent sessions, want 1", len(got))
	}
	closeAll()

	k, _, closeAll = open()
	defer closeAll()
	s, err = k.Session(context.Background(), s.ID())
	if err != nil {
		t.Fatal(err)
	}
	e = &env{k: k, s: s}
	evs := run(t, e, "text")
	if _, ok := evs[len(evs)-1].(*protocol.RunFinished); !ok {
		t.Fatalf("turn after restart: %v", types(evs))
	}
	if got := customs(evs, acp.SessionEvent); len(got) != 0 {
		t.Errorf("turn after restart opened a new agent session %s, want the old one resumed", got)
	}
	if got := text(evs); got != "Hello, world." {
		t.Errorf("text after restart = %q; the replayed history must not leak into the turn", got)
	}
}

// TestSessionNewCarriesCwdAndMCPServers: session/new gets the session's
// workspace and Orrery's MCP servers in ACP's shape: the stdio ones
// always, an HTTP one only to an agent that advertises
// mcpCapabilities.http.
func TestSessionNewCarriesCwdAndMCPServers(t *testing.T) {
	const stdio = `{"name":"docs","command":"docs-server","args":["--root","/srv"],"env":[{"name":"TOKEN","value":"t"}]}`
	const web = `{"type":"http","name":"web","url":"http://127.0.0.1:8931/mcp","headers":[]}`
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{nil, "[" + stdio + "]"},
		{[]string{"--mcp-http"}, "[" + stdio + "," + web + "]"},
	} {
		e := newEnv(t, tc.flags, func(_ *kernel.Config, a *acp.Config) {
			a.MCPServers = []acp.MCPServer{
				{Name: "docs", Command: "docs-server", Args: []string{"--root", "/srv"}, Env: []acp.NameVal{{Name: "TOKEN", Value: "t"}}},
				{Type: "http", Name: "web", URL: "http://127.0.0.1:8931/mcp"},
			}
		})
		got := text(run(t, e, "session"))
		cwd, _ := os.Getwd()
		want := `{"cwd":` + strconvQuote(cwd) + `,"mcpServers":` + tc.want + `}`
		var g, w any
		if err := json.Unmarshal([]byte(got), &g); err != nil {
			t.Fatalf("echo %q: %v", got, err)
		}
		_ = json.Unmarshal([]byte(want), &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("agent flags %v: session/new params = %s\nwant %s", tc.flags, got, want)
		}
	}
}

func strconvQuote(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}

// TestCloseStopsStubbornAgent: Close ends an agent that ignores the end of
// its stdin and SIGTERM, with SIGKILL to its process group.
func TestCloseStopsStubbornAgent(t *testing.T) {
	e := newEnv(t, []string{"--stubborn"}, func(_ *kernel.Config, a *acp.Config) { a.StopTimeout = 200 * time.Millisecond })
	pid := text(run(t, e, "pid"))
	if _, err := os.Stat("/proc/" + pid); err != nil {
		t.Fatalf("agent pid %q is not running: %v", pid, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.agent.Close(ctx); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if _, err := os.Stat("/proc/" + pid); !os.IsNotExist(err) {
		t.Errorf("agent process %s still exists after Close (stat: %v)", pid, err)
	}
}

// TestContextWindow checks that a usage_update's used and size become
// CUSTOM orrery.context, in the turn and after it, each carrying the raw
// update for ACP faces, that its cost still counts, and that an update
// without used is kept as RAW.
func TestContextWindow(t *testing.T) {
	e := newEnv(t, nil)
	head := e.s.Head()
	sub, err := e.s.Subscribe(context.Background(), &head)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	evs := run(t, e, "context")
	var got []acp.ContextWindow
	var raws []string
	for _, ev := range evs {
		c, ok := ev.(*protocol.Custom)
		if !ok || c.Name != acp.ContextEvent {
			continue
		}
		var w acp.ContextWindow
		if err := json.Unmarshal(c.Value, &w); err != nil {
			t.Fatalf("orrery.context value %s: %v", c.Value, err)
		}
		got = append(got, w)
		raw, _ := acp.RawUpdate(ev)
		raws = append(raws, string(raw))
	}
	want := []acp.ContextWindow{{Used: 5000, Size: 200000}, {Used: 6400, Size: 200000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("orrery.context values = %+v, want %+v; events %v", got, want, types(evs))
	}
	if !strings.Contains(raws[1], `"sessionUpdate":"usage_update"`) || !strings.Contains(raws[1], `"used":6400`) || !strings.Contains(raws[1], `"amount":0.002`) {
		t.Errorf("orrery.context metadata.acp = %s, want the agent's whole usage_update", raws[1])
	}
	var rawUsage []string
	for _, ev := range evs {
		if r, ok := ev.(*protocol.Raw); ok && strings.Contains(string(r.Event), "usage_update") {
			rawUsage = append(rawUsage, string(r.Event))
		}
	}
	if len(rawUsage) != 1 || strings.Contains(rawUsage[0], `"used"`) {
		t.Errorf("RAW usage updates = %q, want only the one without used", rawUsage)
	}
	var res protocol.RunResult
	if err := json.Unmarshal(evs[len(evs)-1].(*protocol.RunFinished).Result, &res); err != nil {
		t.Fatal(err)
	}
	if res.MicroUSD != 2000 {
		t.Errorf("RUN_FINISHED micro_usd = %d, want 2000 (the usage_update's cost)", res.MicroUSD)
	}

	// The update after the turn is logged outside any run, mapped the same.
	tr := &turn{t: t, sub: sub}
	ev := tr.until(func(ev protocol.Event) bool {
		c, ok := ev.(*protocol.Custom)
		return ok && c.Name == acp.ContextEvent && strings.Contains(string(c.Value), "7000")
	})
	if v := string(ev.(*protocol.Custom).Value); v != `{"used":7000,"size":200000}` {
		t.Errorf("late orrery.context = %s", v)
	}
	if raw, _ := acp.RawUpdate(ev); !strings.Contains(string(raw), `"used":7000`) {
		t.Errorf("late orrery.context metadata.acp = %s, want the raw usage_update", raw)
	}

	// An ACP face relays the agent's own update verbatim.
	var p acp.Projector
	if ups := p.Updates(ev); len(ups) != 1 || !strings.Contains(string(ups[0]), `"used":7000`) {
		t.Errorf("Projector.Updates(orrery.context) = %s, want the agent's usage_update", ups)
	}
}

// TestProjectContext checks that orrery.context made by Orrery itself (no
// metadata.acp) becomes a usage_update for ACP faces.
func TestProjectContext(t *testing.T) {
	var p acp.Projector
	ups := p.Updates(&protocol.Custom{Name: acp.ContextEvent, Value: json.RawMessage(`{"used":12,"size":100}`)})
	if len(ups) != 1 || string(ups[0]) != `{"sessionUpdate":"usage_update","size":100,"used":12}` {
		t.Errorf("Projector.Updates(orrery.context) = %s, want one usage_update with used 12 and size 100", ups)
	}
}

// TestClaudeShapedToolCall: a call announced as "Terminal" with {} and
// refined by tool_call_updates (as Claude Code's adapter does) reaches
// clients with its command as its name and its final input as its only
// arguments, and the consent rules read that command.
func TestClaudeShapedToolCall(t *testing.T) {
	rules := consent.Rules{Allow: []string{"shell(git status*)"}}
	e := newEnv(t, nil, func(k *kernel.Config, _ *acp.Config) { k.Consent = rules })
	tr := e.start(t, kernel.SendInput{Text: "claude git status --short"}, consentClient)
	tr.end()
	if got := text(tr.events); got != "chose yes" {
		t.Fatalf("text = %q, want the allow rule on git status to answer", got)
	}
	var starts []*protocol.ToolCallStart
	var args []string
	var results []*protocol.ToolCallResult
	for _, ev := range tr.events {
		switch ev := ev.(type) {
		case *protocol.ToolCallStart:
			starts = append(starts, ev)
		case *protocol.ToolCallArgs:
			args = append(args, ev.Delta)
		case *protocol.ToolCallResult:
			results = append(results, ev)
		}
	}
	if len(starts) != 1 || starts[0].ToolCallName != "git status --short" {
		t.Errorf("TOOL_CALL_STARTs %v, want one named for the command", starts)
	}
	if len(args) != 1 || args[0] != `{"command":"git status --short","description":"Run it"}` {
		t.Errorf("TOOL_CALL_ARGS %q, want the final input once", args)
	}
	if len(results) != 1 || results[0].Content.String() != "ran" {
		t.Errorf("results %v, want the agent's one result", results)
	}
}

// TestGeminiShapedPermission: a permission for an unannounced call whose
// command is only its title (as Gemini CLI asks) is judged by the rules as
// that command line; a denied call the agent never reports again still
// gets its TOOL_CALL_RESULT, denied, before the run ends.
func TestGeminiShapedPermission(t *testing.T) {
	rules := consent.Rules{Allow: []string{"shell(git status*)"}, Deny: []string{"shell(rm -rf*)"}}
	for _, tc := range []struct {
		command, text, status string
	}{
		{"git status", "chose yes", "ok"},
		{"rm -rf build", "chose no", "denied"},
		// A title that chains a denied command after an allowed one is
		// judged part by part, as the shell tool's line is.
		{"git status; rm -rf build", "chose no", "denied"},
	} {
		t.Run(tc.command, func(t *testing.T) {
			e := newEnv(t, nil, func(k *kernel.Config, _ *acp.Config) { k.Consent = rules })
			tr := e.start(t, kernel.SendInput{Text: "gemini " + tc.command}, consentClient)
			tr.end()
			if got := text(tr.events); got != tc.text {
				t.Errorf("text = %q, want %q: the rules decide by the title's command", got, tc.text)
			}
			if n := len(customs(tr.events, kernel.ConsentRequestedEvent)); n > 0 {
				t.Errorf("%d questions placed, want the rules to decide", n)
			}
			var result *protocol.ToolCallResult
			for i, ev := range tr.events {
				if r, ok := ev.(*protocol.ToolCallResult); ok {
					result = r
					if i > len(tr.events)-2 {
						t.Error("the result is not before the run's end")
					}
				}
			}
			if result == nil {
				t.Fatalf("no TOOL_CALL_RESULT in %v", types(tr.events))
			}
			var outcome struct{ Status string }
			_ = json.Unmarshal(result.Orrery().Outcome, &outcome)
			if outcome.Status != tc.status {
				t.Errorf("the call's outcome is %q, want %q", outcome.Status, tc.status)
			}
		})
	}
}

// TestRefusalSaysWhy: an agent's error answer ends the run with its
// details and the agent's last stderr lines in the RUN_ERROR, where the
// person sees them whatever the log level.
func TestRefusalSaysWhy(t *testing.T) {
	e := newEnv(t, nil)
	evs := run(t, e, "refuse")
	re, ok := evs[len(evs)-1].(*protocol.RunError)
	if !ok {
		t.Fatalf("terminal = %v, want RUN_ERROR", types(evs))
	}
	for _, want := range []string{"Internal error", "the model quota is used up", "quota check failed: 429 from upstream", "loading model config"} {
		if !strings.Contains(re.Message, want) {
			t.Errorf("RUN_ERROR %q lacks %q", re.Message, want)
		}
	}
}

// TestIdleAgentStops: an agent process whose session has had no turn for
// IdleStop is stopped (not counted a crash), and the next prompt starts a
// new one that resumes the agent's session with session/load.
func TestIdleAgentStops(t *testing.T) {
	var e *env
	e = newEnv(t, []string{"--load"}, func(_ *kernel.Config, a *acp.Config) {
		a.IdleStop = 50 * time.Millisecond
		a.Resume = lastSessionIn(func() *kernel.Kernel { return e.k })
	})
	first := text(run(t, e, "pid"))
	for deadline := time.Now().Add(10 * time.Second); e.agent.Stats().Running != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Stats() = %+v: the idle agent was not stopped", e.agent.Stats())
		}
	}
	evs := run(t, e, "pid")
	if second := text(evs); second == first || second == "" {
		t.Errorf("pid after the idle stop = %q, want a new process (the first was %q)", second, first)
	}
	if got := customs(evs, acp.SessionEvent); len(got) != 0 {
		t.Errorf("the new process opened a new agent session %s, want the old one loaded", got)
	}
	if st := e.agent.Stats(); st.Starts != 2 || st.Crashes != 0 {
		t.Errorf("Stats() = %+v, want 2 starts and no crash", st)
	}
}

// TestProcessLimit: past Limit.Max agent processes, a prompt that needs a
// new one ends with agent_limit saying what to do.
func TestProcessLimit(t *testing.T) {
	limit := &acp.ProcessLimit{Max: 1}
	e := newEnv(t, nil, func(_ *kernel.Config, a *acp.Config) { a.Limit = limit })
	if got := text(run(t, e, "text")); got != "Hello, world." {
		t.Fatalf("first session = %q", got)
	}
	other, err := e.k.CreateSession(context.Background(), kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.s = other
	evs := run(t, e, "text")
	re, ok := evs[len(evs)-1].(*protocol.RunError)
	if !ok || re.Code != "agent_limit" || !strings.Contains(re.Message, "max_processes") {
		t.Fatalf("a second session's prompt = %v, want RUN_ERROR agent_limit naming max_processes", types(evs))
	}
}

// lastSessionIn is a Config.Resume that finds the agent's last session in
// the session's log on the kernel k returns, as cmd/orrery's does.
func lastSessionIn(k func() *kernel.Kernel) func(ctx context.Context, session string) (string, error) {
	return func(ctx context.Context, session string) (string, error) {
		s, err := k().Session(ctx, session)
		if err != nil {
			return "", err
		}
		frames, _, err := s.Read(ctx, 0, 0)
		if err != nil {
			return "", err
		}
		var data [][]byte
		for _, f := range frames {
			data = append(data, f.Data)
		}
		return acp.LastSession(data, "test"), nil
	}
}
