package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/bus"
	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/crew"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/tool"
)

func (c *runCmd) registerBus(fs *flag.FlagSet) {
	fs.StringVar(&c.events, "events", "", "speak the run event bus instead of printing text: jsonl (one JSON event per line on stdout, verbs on stdin)")
	fs.StringVar(&c.client, "client", "", "with --events: the watching program's hub seat, client://NAME (default "+hub.DefaultClient+")")
	fs.BoolVar(&c.stream, "stream", false, "with --events: add llm.delta events for the generated text")
}

// parseArgs parses flags before and after one positional argument, the
// crew file.
func (c *runCmd) parseArgs(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return nil
	}
	c.target = fs.Arg(0)
	return parse(fs, fs.Args()[1:])
}

// checkBusFlags refuses what --events cannot mean and warns about bus
// flags given without it.
func (c *runCmd) checkBusFlags() error {
	if c.events != "" && c.events != "jsonl" {
		return &usageError{msg: fmt.Sprintf("--events accepts only jsonl, not %q: pass --events jsonl, or leave it out to print text", c.events)}
	}
	if c.events != "" && c.client != "" {
		if _, err := hub.ParseAddress(hub.Client(c.client)); err != nil {
			return &usageError{msg: fmt.Sprintf("--client %q cannot be a hub seat: name it with letters, digits and dashes, as client://NAME's NAME", c.client)}
		}
	}
	if c.events == "" && c.client != "" {
		fmt.Fprintf(c.env.stderr, "orrery: warning: --client %s has no effect without --events jsonl; add --events jsonl to take the hub seat\n", c.client)
	}
	if c.events == "" && c.stream {
		fmt.Fprintln(c.env.stderr, "orrery: warning: --stream has no effect without --events jsonl (text is printed as it comes anyway)")
	}
	if c.target != "" && c.prompt != "" {
		return &usageError{msg: "run takes a prompt (-p) or a crew file, not both: drop one"}
	}
	if c.target != "" && c.session != "" {
		return &usageError{msg: "a crew runs in a session of its own: drop --session"}
	}
	return nil
}

// cachedModels resolves each spec once, so that every agent of a run that
// names the same model shares one provider (a script's position).
func cachedModels(resolve func(string) (agent.Provider, error)) func(string) (agent.Provider, error) {
	var mu sync.Mutex
	cache := map[string]agent.Provider{}
	return func(spec string) (agent.Provider, error) {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := cache[spec]; ok {
			return p, nil
		}
		p, err := resolve(spec)
		if err != nil {
			return nil, err
		}
		cache[spec] = p
		return p, nil
	}
}

// withTools returns set plus extra.
func withTools(set *tool.Set, extra ...tool.Tool) *tool.Set {
	var all []tool.Tool
	for _, spec := range set.Specs() {
		t, _ := set.Lookup(spec.Name)
		all = append(all, t)
	}
	return tool.NewSet(append(all, extra...)...)
}

// busKernel adds what the bus and crews need to the kernel's config (the
// agent tools and the hub are openKernel's): models resolved once per run,
// and for a crew its runner as the model "crew:PATH". A
// crew that does not validate is reported in cr.err.
func (c *runCmd) busKernel(cr *crewRun) func(*kernel.Config) {
	return func(kc *kernel.Config) {
		models := cachedModels(kc.Models)
		kc.Models = models
		if cr == nil {
			return
		}
		known := crew.Known{
			Tools: func(name string) bool {
				_, ok := kc.Tools.Lookup(name)
				_, found := kc.Searchable.Lookup(name)
				return ok || found || name == agent.SearchTool
			},
			Model: func(spec string) error { _, err := models(spec); return err },
		}
		if cr.err = cr.runner.File.Validate(known); cr.err != nil {
			return
		}
		cr.runner.Models = models
		cr.runner.DefaultModel = kc.DefaultModel
		cr.runner.Tools = kc.Tools
		cr.runner.Searchable = kc.Searchable
		cr.runner.MaxSteps = kc.MaxSteps
		spec := "crew:" + cr.runner.File.Path()
		kc.Models = func(s string) (agent.Provider, error) {
			if s == spec {
				return cr.runner, nil
			}
			return models(s)
		}
	}
}

// crewRun is a crew being wired into a kernel.
type crewRun struct {
	runner *crew.Runner
	err    error
}

// runCrew runs a crew file: its tasks, in dependency order, as sub-agents
// of one run in a new session.
func (c *runCmd) runCrew(ctx context.Context) error {
	f, err := crew.Load(c.target)
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	c.placementRules(&cfg)
	cr := &crewRun{runner: &crew.Runner{File: f, AutoHumanInput: c.events == ""}}
	log := newLogger(c.env, slog.LevelWarn)
	// The crew's runner is this process's: it cannot run in another's
	// kernel. It waits for another orrery run to end; admit refuses any
	// other holder.
	j, err := embedOrJoin(ctx, cfg, client.Options{}, func() (*embedded, error) {
		return openKernel(ctx, c.env, cfg, log, true, c.busKernel(cr))
	}, c.admit(cfg))
	if err != nil {
		return c.interrupted(ctx, err)
	}
	if j.cl != nil {
		j.cl.Close() // admit never lets a crew join: not reached
		return errors.New("a crew cannot run in another process's kernel")
	}
	ek := j.k
	h, err := hold(c.env, cfg, c.common.configPath, ek, "orrery run "+c.target, log)
	if err != nil {
		return errors.Join(err, ek.Close(context.Background()))
	}
	defer h.Close(ctx, true, c.env.stderr)
	k := ek
	if cr.err != nil {
		return &usageError{msg: cr.err.Error() + " (nothing ran)"}
	}
	if err := k.hub.AddCrew(f.Name, f.AgentIDs(), f.Links); err != nil {
		return &usageError{msg: fmt.Sprintf("%s: %v", c.target, err)}
	}
	sess, err := k.kernel.CreateSession(ctx, kernel.SessionOptions{Model: "crew:" + f.Path(), Title: "crew " + f.Name})
	if err != nil {
		return err
	}
	prompt := fmt.Sprintf("Run crew %s (%s): %d tasks.", f.Name, c.target, len(f.Tasks))
	if c.events != "" {
		return c.runEvents(ctx, sess, k.hub, c.target, prompt)
	}
	head := sess.Head()
	sub, err := sess.Subscribe(ctx, &head)
	if err != nil {
		return err
	}
	defer sub.Close()
	res, err := sess.Send(ctx, kernel.SendInput{Text: prompt, Permissions: c.permissions()})
	if err != nil {
		return err
	}
	return c.print(ctx, sess, sub, res.RunID)
}

// runEvents runs prompt in sess and speaks the run event bus: events on
// stdout, verbs on stdin. Logs stay on stderr.
func (c *runCmd) runEvents(ctx context.Context, sess *kernel.Session, h *hub.Hub, target, prompt string) error {
	log := newLogger(c.env, slog.LevelWarn)
	w := bus.NewWriter(c.env.stdout)
	w.Logger = log
	br, err := bus.NewBridge(ctx, w, sess, h, bus.Options{Client: c.client, Stream: c.stream, Logger: log})
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	defer br.Close()
	head := sess.Head()
	sub, err := sess.SubscribeWith(ctx, kernel.SubscribeOptions{Since: &head, Caller: br.Caller()})
	if err != nil {
		return err
	}
	defer sub.Close()
	if err := br.Started(target); err != nil {
		return err
	}
	// The run logs orrery.usage after each model call, for cost.updated;
	// other runs on this kernel (its clients') do not.
	res, err := sess.Send(ctx, kernel.SendInput{Text: prompt, Permissions: c.permissions(), UsageEvents: true})
	if err != nil {
		return err
	}
	br.Follow(res.RunID)
	go func() {
		if err := bus.ReadLines(ctx, c.env.stdin, log, func(in bus.Inbound) { br.Handle(ctx, in) }); err != nil && ctx.Err() == nil {
			log.Warn("bus: stopped reading stdin", "err", err)
		}
		// Nobody can answer from here on: every question is refused.
		br.InputClosed()
	}()
	var frames []kernel.Frame
	interrupt := ctx.Done()
	for {
		frames = sub.Take(frames[:0])
		if len(frames) == 0 {
			select {
			case <-sub.Ready():
			case <-interrupt:
				interrupt = nil
				_ = sess.Cancel(context.WithoutCancel(ctx), res.RunID)
			case <-sub.Done():
				if frames = sub.Take(frames[:0]); len(frames) == 0 {
					return fmt.Errorf("the session stopped before the run ended: %v", sub.Err())
				}
			}
		}
		for _, f := range frames {
			if done, code := br.Frame(f); done {
				if code != 0 {
					return &exitCodeError{code: code, err: errors.New(strings.TrimSpace(""))}
				}
				return nil
			}
		}
	}
}
