package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/bus"
	"github.com/getorrery/orrery/crew"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
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

// busKernel adds what the bus needs to the kernel's config (the agent
// tools and the hub are openKernel's): models resolved once per run, so
// that the agents of a run that name one script share its position.
func (c *runCmd) busKernel() func(*kernel.Config) {
	return func(kc *kernel.Config) { kc.Models = cachedModels(kc.Models) }
}

// withCrews returns kc's model resolver with crews added: the spec
// crew:PATH is the crew file at PATH run as the session's agent. The file
// is read and checked against kc's tools and models when the spec is
// resolved (a session.new names what is wrong in it), and again at each
// run, so a kernel that lives long runs it as it is now. For each run the
// crew is seated on h, so a second run of a crew of the same name waits
// its turn by failing with a clear error rather than sharing mailboxes.
// Only the command line and a pipe caller may name crew:PATH
// (models.RequestPolicy).
func withCrews(kc *kernel.Config, h *hub.Hub) func(string) (agent.Provider, error) {
	models := kc.Models
	known := crew.Known{
		Tools: func(name string) bool {
			_, ok := kc.Tools.Lookup(name)
			_, found := kc.Searchable.Lookup(name)
			return ok || found || name == agent.SearchTool
		},
		Model: func(spec string) error {
			if strings.HasPrefix(spec, "crew:") {
				return errors.New("a crew's agent cannot be a crew: name a model")
			}
			_, err := models(spec)
			return err
		},
	}
	return func(spec string) (agent.Provider, error) {
		path, ok := strings.CutPrefix(spec, "crew:")
		if !ok {
			return models(spec)
		}
		f, err := crew.Load(path)
		if err == nil {
			err = f.Validate(known)
		}
		if err != nil {
			return nil, err
		}
		return &crew.Runner{
			File: f, Reload: true, Known: known, Hub: h,
			Models: models, DefaultModel: kc.DefaultModel, Tools: kc.Tools, Searchable: kc.Searchable, MaxSteps: kc.MaxSteps,
		}, nil
	}
}

// crewPrompt is the user message that starts a crew's run.
func crewPrompt(f *crew.File, target string) string {
	return fmt.Sprintf("Run crew %s (%s): %d tasks.", f.Name, target, len(f.Tasks))
}

// runCrew runs a crew file: its tasks, in dependency order, as sub-agents
// of one run in a new session whose model is crew:PATH. On a data dir
// another process holds, it is that process's client, as a prompt's run
// is (runclient.go): the holder reads the crew file and seats the crew on
// its hub.
func (c *runCmd) runCrew(ctx context.Context) error {
	path, err := filepath.Abs(c.target)
	if err != nil {
		return fmt.Errorf("find the crew file %s: %w", c.target, err)
	}
	// What is wrong in the file's own terms is named here, in the path as
	// given; its tools and models are checked by the kernel that runs it.
	f, err := crew.Load(c.target)
	if err == nil {
		err = f.Validate(crew.Known{})
	}
	if err != nil {
		return &usageError{msg: err.Error() + " (nothing ran)"}
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	c.placementRules(&cfg)
	log := newLogger(c.env, slog.LevelWarn)
	rh := &remoteHub{}
	j, err := embedOrJoin(ctx, cfg, c.clientOptions(log, rh), func() (*embedded, error) {
		return openKernel(ctx, c.env, cfg, log, true, c.busKernel())
	}, c.admit(cfg))
	if err != nil {
		return c.interrupted(ctx, err)
	}
	prompt := crewPrompt(f, c.target)
	opts := protocol.SessionNew{Model: "crew:" + path, Title: "crew " + f.Name}
	if j.cl != nil {
		defer j.cl.Close()
		session, err := c.newClientSession(ctx, cfg, j, opts)
		if err != nil {
			return err
		}
		return c.sendClient(ctx, j.cl, rh, session, c.target, prompt)
	}
	ek := j.k
	h, err := hold(c.env, cfg, c.common.configPath, ek, "orrery run "+c.target, log)
	if err != nil {
		return errors.Join(err, ek.Close(context.Background()))
	}
	defer h.Close(ctx, true, c.env.stderr)
	k := ek
	sess, err := k.kernel.CreateSession(ctx, kernel.SessionOptions{Model: opts.Model, Title: opts.Title})
	if err != nil {
		var re *kernel.RequestError
		if errors.As(err, &re) {
			return &usageError{msg: err.Error() + " (nothing ran)"}
		}
		return err
	}
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
