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

	"github.com/getorrery/orrery/consent"
	"github.com/getorrery/orrery/hub"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
)

type runCmd struct {
	env     *env
	common  commonFlags
	prompt  string
	json    bool
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
	return "run one prompt in an embedded kernel and print the answer"
}

func (c *runCmd) Run(ctx context.Context, args []string) error {
	fs := newFlagSet(c.env, "run", "run (-p PROMPT | CREW.toml) [--events jsonl [--client NAME] [--stream]] [--model NAME] [--json] [--session ID] [--allow RULE]... [--deny RULE]... [--yes] [--data DIR]")
	c.common.register(fs, true)
	fs.StringVar(&c.prompt, "p", "", "the prompt; - reads it from standard input")
	fs.BoolVar(&c.json, "json", false, "print every frame of the run as one JSON line (AG-UI events) instead of the answer's text")
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
	if strings.TrimSpace(c.prompt) == "" {
		return &usageError{msg: "run needs a prompt: orrery run -p \"PROMPT\" (or -p - to read it from standard input)"}
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	// Nobody can be asked here: a call that would be asked about is denied
	// unless --allow or --yes covers it.
	cfg.Permissions.Allow = append(cfg.Permissions.Allow, c.allow...)
	cfg.Permissions.Deny = append(cfg.Permissions.Deny, c.deny...)
	h := hub.New()
	k, err := openKernel(ctx, c.env, cfg, newLogger(c.env, slog.LevelWarn), true, func(kc *kernel.Config) { kc.AutoApprove = c.yes }, c.busKernel(h, nil))
	if err != nil {
		return err
	}
	defer k.Close(context.Background())
	k.useHub(h)

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
		return c.runEvents(ctx, sess, h, "prompt", c.prompt)
	}
	head := sess.Head()
	sub, err := sess.Subscribe(ctx, &head)
	if err != nil {
		return err
	}
	defer sub.Close()
	res, err := sess.Send(ctx, kernel.SendInput{Text: c.prompt})
	if err != nil {
		return err
	}
	return c.print(ctx, sess, sub, res.RunID)
}

// print writes the run's frames until its terminal event.
func (c *runCmd) print(ctx context.Context, sess *kernel.Session, sub *kernel.Subscription, runID string) error {
	out := bufio.NewWriter(c.env.stdout)
	defer out.Flush()
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
			done, err := c.frame(out, f, runID)
			if err != nil || done {
				if err == nil && cancelled {
					return &exitCodeError{code: exitCancelled, err: errors.New("cancelled")}
				}
				return err
			}
		}
	}
}

// frame prints one frame and reports whether it ended the run.
func (c *runCmd) frame(out *bufio.Writer, f kernel.Frame, runID string) (bool, error) {
	if c.json {
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
			out.WriteString(e.Delta)
		}
	case *protocol.TextMessageEnd:
		if !c.json {
			out.WriteByte('\n')
		}
	case *protocol.ToolCallStart:
		if !c.json {
			out.Flush()
			fmt.Fprintf(c.env.stderr, "→ %s\n", e.ToolCallName)
		}
	case *protocol.ToolCallResult:
		var o struct{ Status, Rule string }
		if json.Unmarshal(e.Orrery().Outcome, &o) == nil && o.Status == "denied" && !c.json {
			out.Flush()
			if strings.HasPrefix(o.Rule, "deny = ") {
				fmt.Fprintf(c.env.stderr, "✗ denied by the rule %s: a deny rule wins over --allow and --yes; remove it to allow such calls\n", o.Rule)
			} else {
				fmt.Fprintf(c.env.stderr, "✗ denied (%s): pass --allow RULE or --yes to allow such calls\n", o.Rule)
			}
		}
	case *protocol.RunFinished:
		if e.RunID == runID {
			return true, nil
		}
	case *protocol.RunError:
		if f.Run == runID {
			out.Flush()
			return true, &exitCodeError{code: exitRunFailed, err: fmt.Errorf("run failed (%s): %s", e.Code, e.Message)}
		}
	}
	return false, nil
}
