package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/dialect"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
	"github.com/getorrery/orrery/ui"
)

type runCmd struct {
	env     *env
	common  commonFlags
	prompt  string
	json    bool
	mode    string
	enc     kernel.Encoder
	encoded []kernel.Frame
	session string
	allow   ruleList
	deny    ruleList
	yes     bool
	// The run event bus (runbus.go).
	events string
	client string
	stream bool
	target string // a crew file, the positional argument
}

// ruleList is a repeatable flag of permission rules.
type ruleList []string

func (r *ruleList) String() string { return strings.Join(*r, ", ") }

func (r *ruleList) Set(v string) error {
	if err := (consent.Rules{Allow: []string{v}}).Validate(); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "permissions.allow: "))
	}
	*r = append(*r, v)
	return nil
}

func (c *runCmd) Synopsis() string {
	return "run one prompt in the data dir's kernel (this process's, or the one holding the dir) and print the answer"
}

func (c *runCmd) Run(ctx context.Context, args []string) error {
	fs := newFlagSet(c.env, "run", "run (-p PROMPT | CREW.toml) [--events jsonl [--client NAME] [--stream]] [--model NAME] [--json [--stream-mode MODE]] [--session ID] [--allow RULE]... [--deny RULE]... [--yes] [--data DIR]")
	c.common.register(fs, true)
	fs.StringVar(&c.prompt, "p", "", "the prompt; - reads it from standard input")
	fs.BoolVar(&c.json, "json", false, "print every frame of the run as one JSON line (AG-UI events) instead of the answer's text")
	fs.StringVar(&c.mode, "stream-mode", "", "with --json, the dialect of the lines: agui_spec (default), agui, openai or dual (docs/dialects.md)")
	fs.StringVar(&c.session, "session", "", "continue this session instead of starting a new one")
	fs.Var(&c.allow, "allow", "allow tool calls that match this rule, such as 'shell(go test*)' (repeatable)")
	fs.Var(&c.deny, "deny", "deny tool calls that match this rule, such as 'write_file(**)' (repeatable)")
	fs.BoolVar(&c.yes, "yes", false, "allow every tool call that would be asked about (deny rules still deny): for scripts that accept the risk")
	c.registerBus(fs)
	if err := c.parseArgs(fs, args); err != nil {
		return err
	}
	if err := c.checkBusFlags(); err != nil {
		return err
	}
	if c.target != "" {
		return c.runCrew(ctx)
	}
	if c.prompt == "-" {
		b, err := io.ReadAll(c.env.stdin)
		if err != nil {
			return fmt.Errorf("read the prompt from standard input: %w", err)
		}
		c.prompt = string(b)
	}
	mode, err := dialect.ParseMode(c.mode)
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	if c.mode != "" && !c.json {
		return &usageError{msg: "--stream-mode shapes the --json lines: add --json, or leave --stream-mode out"}
	}
	c.enc = dialect.Encoder(mode, dialect.Options{Model: c.common.model})
	if strings.TrimSpace(c.prompt) == "" {
		return &usageError{msg: "run needs a prompt: orrery run -p \"PROMPT\" (or -p - to read it from standard input)"}
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	c.placementRules(&cfg)
	// This process's own kernel when the data dir is free; else the
	// holder's, as its client (runclient.go).
	log := newLogger(c.env, slog.LevelWarn)
	rh := &remoteHub{}
	j, err := embedOrJoin(ctx, cfg, c.clientOptions(log, rh), func() (*embedded, error) {
		return openKernel(ctx, c.env, cfg, log, true, c.busKernel())
	}, c.admit(cfg))
	if err != nil {
		return c.interrupted(ctx, err)
	}
	if j.cl != nil {
		defer j.cl.Close()
		return c.runClient(ctx, cfg, j, rh)
	}
	h, err := hold(c.env, cfg, c.common.configPath, j.k, "orrery run", log)
	if err != nil {
		return errors.Join(err, j.k.Close(context.Background()))
	}
	// Other orrery commands that became this kernel's clients meanwhile
	// finish their work before it stops.
	defer h.Close(ctx, true, c.env.stderr)
	k := j.k

	var sess *kernel.Session
	if c.session != "" {
		sess, err = k.kernel.Session(ctx, c.session)
		if errors.Is(err, kernel.ErrUnknownSession) {
			return &usageError{msg: fmt.Sprintf("no session %s in %s: list them with orrery sessions", c.session, cfg.Store.Data)}
		}
	} else {
		sess, err = k.kernel.CreateSession(ctx, kernel.SessionOptions{Model: c.common.model})
	}
	if err != nil {
		return err
	}
	if c.events != "" {
		return c.runEvents(ctx, sess, k.hub, "prompt", c.prompt)
	}
	head := sess.Head()
	sub, err := sess.Subscribe(ctx, &head)
	if err != nil {
		return err
	}
	defer sub.Close()
	res, err := sess.Send(ctx, kernel.SendInput{Text: c.prompt, Permissions: c.permissions()})
	if err != nil {
		return err
	}
	return c.print(ctx, sess, sub, res.RunID)
}

// permissions are the run's own consent rules: --allow, --deny and --yes.
// Nobody can be asked here, so a call that would be asked about is denied
// unless --allow or --yes covers it. They are the run's, not the kernel's:
// a run of another command on this kernel (its client) has only its own.
func (c *runCmd) permissions() *kernel.RunPermissions {
	if len(c.allow) == 0 && len(c.deny) == 0 && !c.yes {
		return nil
	}
	return &kernel.RunPermissions{Allow: c.allow, Deny: c.deny, Yes: c.yes}
}

// placementRules adds the --allow and --deny rules that are placement
// rules, ui(…), to cfg's [permissions]: placements are the kernel's, not a
// run's (a tool call's rules go with the run, permissions).
func (c *runCmd) placementRules(cfg *config.Config) {
	for _, r := range c.allow {
		if _, isUI, _ := ui.ParseUIRule(r); isUI {
			cfg.Permissions.Allow = append(cfg.Permissions.Allow, r)
		}
	}
	for _, r := range c.deny {
		if _, isUI, _ := ui.ParseUIRule(r); isUI {
			cfg.Permissions.Deny = append(cfg.Permissions.Deny, r)
		}
	}
}

// interrupted maps an error that came of a Ctrl-C before the run started
// to the exit code of a cancelled run.
func (c *runCmd) interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return &exitCodeError{code: exitCancelled, err: errors.New("cancelled")}
	}
	return err
}

// print writes the run's frames until its terminal event.
func (c *runCmd) print(ctx context.Context, sess *kernel.Session, sub *kernel.Subscription, runID string) error {
	out := bufio.NewWriter(c.env.stdout)
	defer out.Flush()
	text := termtext.NewWriter(out) // the answer, shown visibly
	defer text.Flush()
	var frames []kernel.Frame
	cancelled := false
	interrupt := ctx.Done()
	for {
		frames = sub.Take(frames[:0])
		if len(frames) == 0 {
			if err := out.Flush(); err != nil {
				return err
			}
			select {
			case <-sub.Ready():
			case <-interrupt:
				interrupt, cancelled = nil, true
				_ = sess.Cancel(context.WithoutCancel(ctx), runID)
			case <-sub.Done():
				if frames = sub.Take(frames[:0]); len(frames) == 0 {
					return fmt.Errorf("the session stopped before the run ended: %v", sub.Err())
				}
			}
		}
		for _, f := range frames {
			done, err := c.frame(out, text, f, runID)
			if err != nil || done {
				if err == nil && cancelled {
					return &exitCodeError{code: exitCancelled, err: errors.New("cancelled")}
				}
				return err
			}
		}
	}
}

// frame prints one frame and reports whether it ended the run. The
// answer's text goes through text, whose visible form a delta that ends
// inside a sequence or a character cannot break; what else it prints from
// the run is shown with termtext.VisibleLine.
func (c *runCmd) frame(out *bufio.Writer, text *termtext.Writer, f kernel.Frame, runID string) (bool, error) {
	if c.json && c.enc != nil {
		c.encoded = c.enc.Encode(c.encoded[:0], f)
		for _, e := range c.encoded {
			out.Write(e.Data)
			out.WriteByte('\n')
		}
	} else if c.json {
		out.Write(f.Data)
		out.WriteByte('\n')
	}
	ev, err := protocol.DecodeEvent(f.Data)
	if err != nil {
		return false, err
	}
	switch e := ev.(type) {
	case *protocol.TextMessageContent:
		if !c.json {
			text.WriteString(e.Delta)
		}
	case *protocol.TextMessageEnd:
		if !c.json {
			text.Flush()
			out.WriteByte('\n')
		}
	case *protocol.ToolCallStart:
		if !c.json {
			text.Flush()
			out.Flush()
			fmt.Fprintf(c.env.stderr, "→ %s\n", termtext.VisibleLine(e.ToolCallName))
		}
	case *protocol.ToolCallResult:
		var o struct{ Status, Rule string }
		if json.Unmarshal(e.Orrery().Outcome, &o) == nil && o.Status == "denied" && !c.json {
			text.Flush()
			out.Flush()
			if strings.HasPrefix(o.Rule, "deny = ") {
				fmt.Fprintf(c.env.stderr, "✗ denied by the rule %s: a deny rule wins over --allow and --yes; remove it to allow such calls\n", termtext.VisibleLine(o.Rule))
			} else {
				fmt.Fprintf(c.env.stderr, "✗ denied (%s): pass --allow RULE or --yes to allow such calls\n", termtext.VisibleLine(o.Rule))
			}
		}
	case *protocol.RunFinished:
		if e.RunID == runID {
			return true, nil
		}
	case *protocol.RunError:
		if f.Run == runID {
			text.Flush()
			out.Flush()
			// finish shows the message visibly, with every error.
			return true, &exitCodeError{code: exitRunFailed, err: fmt.Errorf("run failed (%s): %s", e.Code, e.Message)}
		}
	}
	return false, nil
}
