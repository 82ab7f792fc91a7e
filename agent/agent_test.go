package agent_test

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/provider/offline"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// turnResult is what one run through a real kernel produced.
type turnResult struct {
	events []protocol.Event
	// terminal is the run's RUN_FINISHED or RUN_ERROR.
	terminal protocol.Event
}

func (r *turnResult) types() string {
	var out []string
	for _, ev := range r.events {
		out = append(out, string(ev.EventType()))
	}
	return strings.Join(out, " ")
}

// run drives the loop the way Orrery does: a kernel on a real SQLite file,
// one session, one prompt. It returns the run's events between its
// STATE_SNAPSHOT and its terminal event.
func run(t *testing.T, p agent.Provider, tools *tool.Set, maxSteps int, prompt string, clientTools ...protocol.Tool) *turnResult {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := kernel.New(kernel.Config{
		Store: st, Models: func(string) (agent.Provider, error) { return p, nil }, DefaultModel: "test",
		Tools: tools, MaxSteps: maxSteps, DebugActor: true,
	})
	ctx := context.Background()
	if err := k.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	s, err := k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Send(ctx, kernel.SendInput{Text: prompt, Tools: clientTools, Subscribe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Sub.Close()
	out := &turnResult{}
	timeout := time.After(20 * time.Second)
	for out.terminal == nil {
		select {
		case <-res.Sub.Ready():
		case <-timeout:
			t.Fatalf("the run did not end: %s", out.types())
		}
		for _, f := range res.Sub.Take(nil) {
			ev, err := protocol.DecodeEvent(f.Data)
			if err != nil {
				t.Fatal(err)
			}
			switch ev.EventType() {
			case protocol.TypeRunStarted, protocol.TypeStateSnapshot:
			case protocol.TypeRunFinished, protocol.TypeRunError:
				out.terminal = ev
			default:
				out.events = append(out.events, ev)
			}
		}
	}
	return out
}

func TestOfflineLoop(t *testing.T) {
	tests := []struct {
		prompt    string
		wantTypes string
		wantText  string // a part of the final text
	}{
		{
			prompt:    "hello",
			wantTypes: `^REASONING_START REASONING_MESSAGE_START (REASONING_MESSAGE_CONTENT )+REASONING_MESSAGE_END REASONING_END TEXT_MESSAGE_START (TEXT_MESSAGE_CONTENT ){2,}TEXT_MESSAGE_END$`,
			wantText:  `You said: "hello".`,
		},
		{
			prompt:   "echo hello world",
			wantText: `echo returned "hello world"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			r := run(t, offline.New(), tool.Builtins(), 0, tt.prompt)
			if fin, ok := r.terminal.(*protocol.RunFinished); !ok || len(fin.Outcome.PendingToolCallIDs) > 0 {
				t.Fatalf("terminal = %#v, want RUN_FINISHED without pending calls", r.terminal)
			}
			if tt.wantTypes != "" && !regexp.MustCompile(tt.wantTypes).MatchString(r.types()) {
				t.Errorf("events = %s, want %s", r.types(), tt.wantTypes)
			}
			var text strings.Builder
			deltas := 0
			for _, ev := range r.events {
				if c, ok := ev.(*protocol.TextMessageContent); ok {
					text.WriteString(c.Delta)
					deltas++
				}
			}
			if !strings.Contains(text.String(), tt.wantText) {
				t.Errorf("text = %q, want it to contain %q", text.String(), tt.wantText)
			}
			if deltas < 2 {
				t.Errorf("text came in %d deltas, want several", deltas)
			}
			if u := r.terminal.(*protocol.RunFinished).Usage; len(u) != 1 || u[0].InputTokens == 0 || u[0].OutputTokens == 0 {
				t.Errorf("usage = %+v, want input and output tokens", u)
			}
		})
	}
}

func TestOfflineIsDeterministic(t *testing.T) {
	// Ids and timestamps differ between runs; what the model says must not.
	said := func() string {
		r := run(t, offline.New(), tool.Builtins(), 0, "echo same")
		var b strings.Builder
		for _, ev := range r.events {
			switch e := ev.(type) {
			case *protocol.TextMessageContent:
				b.WriteString("text:" + e.Delta + "|")
			case *protocol.ReasoningMessageContent:
				b.WriteString("reason:" + e.Delta + "|")
			case *protocol.ToolCallStart:
				b.WriteString("call:" + e.ToolCallName + "|")
			case *protocol.ToolCallArgs:
				b.WriteString("args:" + e.Delta + "|")
			case *protocol.ToolCallResult:
				b.WriteString("result:" + e.Content.String() + "|")
			}
		}
		return b.String()
	}
	if a, b := said(), said(); a != b {
		t.Errorf("two runs differ:\n%s\n%s", a, b)
	}
}

func TestClientToolIsPending(t *testing.T) {
	r := run(t, offline.New(), tool.Builtins(), 0, "please confirm", protocol.Tool{Name: "confirm", Description: "asks"})
	if fin, ok := r.terminal.(*protocol.RunFinished); !ok || len(fin.Outcome.PendingToolCallIDs) != 1 {
		t.Fatalf("terminal = %#v, want RUN_FINISHED with one pending call", r.terminal)
	}
	for _, ev := range r.events {
		if _, ok := ev.(*protocol.ToolCallResult); ok {
			t.Errorf("a client tool got a result from the server")
		}
	}
}

// failing is a provider that fails at once.
type failing struct{}

func (failing) Name() string  { return "failing" }
func (failing) Model() string { return "x" }
func (failing) Stream(context.Context, agent.Request, func(agent.Delta) error) (agent.Usage, error) {
	return agent.Usage{InputTokens: 3}, &agent.Error{Code: "provider_error", Message: "no key: set ANTHROPIC_API_KEY"}
}

func TestProviderErrorEndsLoop(t *testing.T) {
	r := run(t, failing{}, nil, 0, "hi")
	re, ok := r.terminal.(*protocol.RunError)
	if !ok || re.Code != "provider_error" || re.Message != "no key: set ANTHROPIC_API_KEY" {
		t.Fatalf("terminal = %#v, want RUN_ERROR provider_error with the provider's message", r.terminal)
	}
	if res := re.Orrery().Result; res == nil || res.InputTokens != 3 {
		t.Errorf("metadata.orrery.result = %+v, want the failed call's 3 input tokens", res)
	}
}

// looping always calls echo, so the loop must stop at MaxSteps.
type looping struct{}

func (looping) Name() string  { return "looping" }
func (looping) Model() string { return "x" }
func (looping) Stream(_ context.Context, _ agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	if err := emit(agent.Delta{Kind: agent.DeltaToolCall, ToolName: "echo"}); err != nil {
		return agent.Usage{}, err
	}
	return agent.Usage{}, emit(agent.Delta{Kind: agent.DeltaToolArgs, Text: `{"text":"again"}`})
}

func TestMaxSteps(t *testing.T) {
	r := run(t, looping{}, tool.Builtins(), 3, "hi")
	if re, ok := r.terminal.(*protocol.RunError); !ok || re.Code != "max_steps" {
		t.Fatalf("terminal = %#v, want RUN_ERROR max_steps", r.terminal)
	}
	if n := strings.Count(r.types(), "TOOL_CALL_RESULT"); n != 3 {
		t.Errorf("%d tool results, want 3", n)
	}
}

func TestUnknownToolIsReportedToTheModel(t *testing.T) {
	r := run(t, &oneCall{name: "nosuch"}, tool.Builtins(), 2, "x")
	for _, ev := range r.events {
		if res, ok := ev.(*protocol.ToolCallResult); ok {
			if !strings.Contains(res.Content.String(), `no tool named "nosuch"`) || !strings.Contains(res.Content.String(), "echo") {
				t.Errorf("result = %q, want it to name the missing tool and the available ones", res.Content.String())
			}
			return
		}
	}
	t.Errorf("no TOOL_CALL_RESULT for an unknown tool: %s", r.types())
}

// oneCall calls name once, then answers text.
type oneCall struct {
	name  string
	calls int
}

func (o *oneCall) Name() string  { return "one" }
func (o *oneCall) Model() string { return "x" }
func (o *oneCall) Stream(_ context.Context, _ agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	o.calls++
	if o.calls > 1 {
		return agent.Usage{}, emit(agent.Delta{Kind: agent.DeltaText, Text: "ok"})
	}
	return agent.Usage{}, emit(agent.Delta{Kind: agent.DeltaToolCall, ToolName: o.name})
}

func TestPriceTable(t *testing.T) {
	table := agent.PriceTable{
		"openai:gpt-x":  {Input: 2_000_000, Output: 8_000_000, CachedInput: 500_000},
		"anthropic:*":   {Input: 3_000_000, Output: 15_000_000},
		"openai:cheap":  {Input: 1, Output: 1},
		"ollama:llama3": {},
	}
	tests := []struct {
		provider, model string
		usage           agent.Usage
		want            int64
	}{
		{"openai", "gpt-x", agent.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}, 10_000_000},
		{"openai", "gpt-x", agent.Usage{InputTokens: 1_000_000, CachedInputTokens: 1_000_000}, 500_000},
		{"anthropic", "claude", agent.Usage{InputTokens: 1000, OutputTokens: 100}, 4_500},
		{"openai", "cheap", agent.Usage{InputTokens: 999_999}, 0},
		{"offline", "offline", agent.Usage{InputTokens: 1_000_000}, 0},
	}
	for _, tt := range tests {
		if got := table.Cost(tt.provider, tt.model, tt.usage); got != tt.want {
			t.Errorf("Cost(%s:%s, %+v) = %d, want %d", tt.provider, tt.model, tt.usage, got, tt.want)
		}
	}
}

func TestOfflineShowsASurface(t *testing.T) {
	r := run(t, offline.New(), tool.Builtins(), 0, "show me a table")
	if _, ok := r.terminal.(*protocol.RunFinished); !ok {
		t.Fatalf("terminal = %#v, want RUN_FINISHED", r.terminal)
	}
	var calls, placed []string
	for _, ev := range r.events {
		switch e := ev.(type) {
		case *protocol.ToolCallStart:
			calls = append(calls, e.ToolCallName)
		case *protocol.Custom:
			if e.Name == "orrery.placed" {
				placed = append(placed, string(e.Value))
			}
		}
	}
	if strings.Join(calls, ",") != "tools.search,ui.show" {
		t.Errorf("calls = %v, want tools.search then ui.show", calls)
	}
	if len(placed) != 1 || !strings.Contains(placed[0], `"id":"offline-demo"`) || !strings.Contains(placed[0], "table") {
		t.Errorf("orrery.placed = %v, want the offline demo table", placed)
	}
}

// deltas is a provider that streams a fixed list of deltas once, then
// answers "ok".
type deltas struct {
	list  []agent.Delta
	calls int
}

func (d *deltas) Name() string  { return "test" }
func (d *deltas) Model() string { return "deltas" }
func (d *deltas) Stream(ctx context.Context, _ agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	d.calls++
	list := d.list
	if d.calls > 1 {
		list = []agent.Delta{{Kind: agent.DeltaText, Text: "ok"}}
	}
	for _, x := range list {
		if err := emit(x); err != nil {
			return agent.Usage{}, err
		}
	}
	return agent.Usage{}, nil
}

func TestTextAfterACallIsANewMessage(t *testing.T) {
	p := &deltas{list: []agent.Delta{
		{Kind: agent.DeltaText, Text: "before"},
		{Kind: agent.DeltaToolCall, ToolName: "echo", Text: `{"text":"x"}`},
		{Kind: agent.DeltaText, Text: "after"},
	}}
	res := run(t, p, tool.Builtins(), 0, "go")
	started := map[string]int{}
	for _, ev := range res.events {
		if s, ok := ev.(*protocol.TextMessageStart); ok {
			started[s.MessageID]++
		}
	}
	if len(started) != 3 {
		t.Errorf("text messages started = %v, want three distinct ids (before, after, ok): %s", started, res.types())
	}
	for id, n := range started {
		if n != 1 {
			t.Errorf("message %s started %d times", id, n)
		}
	}
}

func TestBadArgumentsAreReportedToTheModel(t *testing.T) {
	tests := []struct {
		name, args, want string
	}{
		{"not JSON", `{"text": `, "not valid JSON"},
		{"wrong type", `{"text": 5}`, "at /text"},
		{"missing field", `{}`, "text"},
		{"not an object", `["x"]`, "must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &deltas{list: []agent.Delta{{Kind: agent.DeltaToolCall, ToolName: "echo", Text: tt.args}}}
			res := run(t, p, tool.Builtins(), 0, "go")
			var result *protocol.ToolCallResult
			for _, ev := range res.events {
				if r, ok := ev.(*protocol.ToolCallResult); ok {
					result = r
				}
			}
			if result == nil {
				t.Fatalf("no TOOL_CALL_RESULT: %s", res.types())
			}
			if got := result.Content.String(); !strings.Contains(got, tt.want) || !strings.Contains(string(result.Orrery().Outcome), `"status":"error"`) {
				t.Errorf("result %q, outcome %s; want an error naming %q", got, result.Orrery().Outcome, tt.want)
			}
			if _, ok := res.terminal.(*protocol.RunFinished); !ok {
				t.Errorf("terminal = %T, want the run to go on and finish", res.terminal)
			}
		})
	}
}
