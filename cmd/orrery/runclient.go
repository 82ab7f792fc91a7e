package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/datadir"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
	"github.com/getorrery/orrery/tool"
)

// orrery run on a data dir another process holds is that process's client
// over the dir's pipe, and prints the same as on its own kernel:
//
//   - the session: --session's, or a new one (session.new) working in this
//     directory, with the model --model, --agent or the config names (when
//     none does, the holder's default);
//   - the run: run.send with --allow, --deny and --yes as the run's
//     permissions, so that they apply to this run as they would to this
//     command's own kernel, and to no other run; the holder's
//     [permissions] apply too, as to every run on it;
//   - the frames: attached after the session's head, each as logged, and
//     printed (or encoded with --stream-mode) by the same code.
//
// The client draws nothing, so, as on its own kernel, nobody is asked:
// what would be asked about is denied unless --allow or --yes covers it
// (or a person's client attached to the session answers it).

// admit judges the holder of the data dir before orrery run joins it.
// What cannot be its client: a run in a new session (a prompt's or a
// crew's) in a directory the holder does not take as a workspace. When the holder is another orrery
// run, which ends by itself, such a run waits for the data dir, saying so
// once on stderr; when it is one that stays (serve, the terminal UI, acp),
// the run is refused, naming why and the choices.
func (c *runCmd) admit(cfg config.Config) func(datadir.Owner) error {
	said := false
	return func(o datadir.Owner) error {
		why := c.unjoinable(o)
		if why == "" {
			return nil
		}
		if o.Command != "orrery run" && !strings.HasPrefix(o.Command, "orrery run ") {
			return &exitCodeError{code: exitError, err: fmt.Errorf("the data dir %s is in use by %s, and %s: "+
				"%s, or give orrery run a data dir of its own with --data DIR", cfg.Store.Data, o, why, c.fix(o))}
		}
		if !said {
			said = true
			fmt.Fprintf(c.env.stderr, "orrery: %s\n", termtext.Visible(fmt.Sprintf("the data dir %s is in use by %s, and %s: this run starts when that one ends (Ctrl-C stops waiting)", cfg.Store.Data, o, why)))
		}
		return errWait
	}
}

// unjoinable says why this run cannot be o's client, or "".
func (c *runCmd) unjoinable(o datadir.Owner) string {
	if c.session != "" || len(o.Roots) == 0 {
		return "" // an existing session works where it always has
	}
	cwd, err := os.Getwd()
	if err != nil {
		return "" // session.new says what is wrong
	}
	if _, err := (tool.Workspace{Root: o.Roots[0], Extra: o.Roots[1:]}).Resolve(cwd); err == nil {
		return ""
	}
	return fmt.Sprintf("its sessions work in %s, which does not take this directory %s as a run's workspace", strings.Join(o.Roots, ", "), cwd)
}

// fix is what to do about unjoinable, but a data dir of the run's own.
func (c *runCmd) fix(o datadir.Owner) string {
	return "run from inside one of " + strings.Join(o.Roots, ", ") + ", add this directory to [workspace] roots in that kernel's config and restart it"
}

// clientOptions are the options orrery run dials the holder of its data dir
// with. A pipe drops only when its holder stops, so it tries again only a
// few times. With --events the connection is the watching program's: it
// names the program's hub seat, draws consent, and hands what reaches the
// seat to rh.
func (c *runCmd) clientOptions(log *slog.Logger, rh *remoteHub) client.Options {
	o := client.Options{Client: "orrery-run", Logger: log, MaxReconnects: 3}
	if c.events != "" {
		o.Client, o.Draws, o.OnHubMessage = c.busSeat(), []string{protocol.DrawThread, protocol.DrawTools, protocol.DrawConsent}, rh.onMessage
	}
	return o
}

// runClient runs the prompt on the kernel j.cl is a client of.
func (c *runCmd) runClient(ctx context.Context, cfg config.Config, j joined, rh *remoteHub) error {
	// Requests that must be answered even after a Ctrl-C.
	bg := context.WithoutCancel(ctx)
	session := c.session
	if session != "" {
		known, err := hasSession(bg, j.cl, session)
		if err != nil {
			return err
		}
		if !known {
			return &usageError{msg: fmt.Sprintf("no session %s in %s: list them with orrery sessions", termtext.VisibleLine(session), cfg.Store.Data)}
		}
	} else {
		model := c.common.model
		if model == "" && c.common.agent == "" && c.common.modelWhy == "" {
			model = cfg.Agent.Model // the config's; else the holder picks its own
		}
		var err error
		if session, err = c.newClientSession(ctx, cfg, j, protocol.SessionNew{Model: model, Agent: c.common.agent}); err != nil {
			return err
		}
	}
	return c.sendClient(ctx, j.cl, rh, session, "prompt", c.prompt)
}

// newClientSession starts a session on the holder for this run, working in
// this directory. A spec naming a file (script:, crew:) is named from the
// root, since the holder works in a directory of its own. What the holder
// refuses in the request is a usage error: nothing ran.
func (c *runCmd) newClientSession(ctx context.Context, cfg config.Config, j joined, opts protocol.SessionNew) (string, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the current directory, the run's workspace: %w", err)
	}
	opts.Cwd = cwd
	opts.Model = absoluteSpec(opts.Model)
	session, err := j.cl.NewSession(context.WithoutCancel(ctx), opts)
	var re *client.RequestError
	if errors.As(err, &re) {
		return "", &usageError{msg: fmt.Sprintf("%s holds the data dir %s and did not start a session for this run: %s (nothing ran)", j.owner, cfg.Store.Data, re.Message)}
	}
	if err != nil {
		return "", fmt.Errorf("%s holds the data dir %s and did not start a session for this run: %w (or give orrery run a data dir of its own with --data DIR)", j.owner, cfg.Store.Data, err)
	}
	return session, nil
}

// absoluteSpec names the file of a script: or crew: spec from the root.
func absoluteSpec(spec string) string {
	scheme, path, ok := strings.Cut(spec, ":")
	if !ok || (scheme != "script" && scheme != "crew") || path == "" || filepath.IsAbs(path) {
		return spec
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return spec
	}
	return scheme + ":" + abs
}

// sendClient runs prompt in session on the kernel cl is a client of and
// prints its frames, or speaks the run event bus with --events (target
// names what runs in bus.started: prompt, or the crew file).
func (c *runCmd) sendClient(ctx context.Context, cl *client.Client, rh *remoteHub, session, target, prompt string) error {
	if c.events != "" {
		return c.runEventsClient(ctx, cl, rh, session, target, prompt)
	}
	bg := context.WithoutCancel(ctx)
	st, err := attachAtHead(bg, cl, session)
	if err != nil {
		return err
	}
	defer st.Close()
	sent, err := cl.SendWith(bg, session, protocol.RunInput{Text: prompt}, client.SendOptions{Permissions: c.wirePermissions()})
	if err != nil {
		return err
	}
	return c.printStream(ctx, cl, st, session, sent.RunID)
}

// printStream writes the run's frames as print does, until its terminal
// event. A Ctrl-C cancels the run (run.cancel) and waits for its end.
func (c *runCmd) printStream(ctx context.Context, cl *client.Client, st *client.Stream, session, runID string) error {
	out := bufio.NewWriter(c.env.stdout)
	defer out.Flush()
	text := termtext.NewWriter(out) // the answer, shown visibly
	defer text.Flush()
	var cancelled atomic.Bool
	stop := context.AfterFunc(ctx, func() {
		cancelled.Store(true)
		_ = cl.Cancel(context.WithoutCancel(ctx), session, runID)
	})
	defer stop()
	bg := context.WithoutCancel(ctx)
	frames := runFrames{runID: runID}
	for {
		f, err := st.Next(bg)
		if err != nil {
			text.Flush()
			out.Flush()
			return fmt.Errorf("the session stopped before the run ended: %v", err)
		}
		kf, ok := frames.next(f)
		if !ok {
			continue
		}
		if kf.Seq == 0 {
			done, err := c.frame(out, text, kf, runID)
			if err != nil || done {
				return err
			}
			continue
		}
		done, err := c.frame(out, text, kf, runID)
		if err != nil || done {
			if err == nil && cancelled.Load() {
				return &exitCodeError{code: exitCancelled, err: errors.New("cancelled")}
			}
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
}

// hasSession reports whether the kernel cl is a client of has session.
// The CLI asks before (or after) a request the session would fail, to
// say so in its own words: the server's name its requests.
func hasSession(ctx context.Context, cl *client.Client, session string) (bool, error) {
	list, err := cl.Sessions(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(list, func(s protocol.SessionSummary) bool { return s.ID == session }), nil
}

// noSession is the CLI's error for a session the kernel at where does not
// have.
func noSession(session, where string) error {
	return &exitCodeError{code: exitError, err: fmt.Errorf("no session %s on %s: list them with orrery sessions", termtext.VisibleLine(session), where)}
}

// attachAtHead attaches to session after its head, so that the stream
// holds what the run about to be sent logs.
func attachAtHead(ctx context.Context, cl *client.Client, session string) (*client.Stream, error) {
	page, err := cl.Read(ctx, session, 0, 1)
	if err != nil {
		return nil, err
	}
	return cl.Attach(ctx, session, &page.Head)
}

// wirePermissions are the run's own consent rules (permissions) as
// run.send carries them, or nil.
func (c *runCmd) wirePermissions() *protocol.RunPermissions {
	p := c.permissions()
	if p == nil {
		return nil
	}
	return &protocol.RunPermissions{Allow: p.Allow, Deny: p.Deny, Yes: p.Yes}
}

// runFrames turns the frames of a stream attached for run runID into the
// kernel's form, each with its run as the store tracks it.
type runFrames struct {
	runID   string
	current string // the run the logged frames belong to
}

// next returns f as a kernel frame, or false for a frame that is not the
// run's. Seq 0 is a snapshot, or the end of a run whose store failed, sent
// because it could not be logged: the closers, then RUN_ERROR
// store_failed, naming their run (an earlier run's end comes too when the
// session was still broken as the stream attached); only runID's end is
// kept.
func (r *runFrames) next(f client.Frame) (kernel.Frame, bool) {
	if f.Seq == 0 {
		if !f.Type.Terminal() || f.Event == nil || f.Event.Header().Orrery().Run != r.runID {
			return kernel.Frame{}, false
		}
		return kernel.Frame{Type: string(f.Type), Run: r.runID, Data: f.Logged()}, true
	}
	if rs, ok := f.Event.(*protocol.RunStarted); ok {
		r.current = rs.RunID
	}
	kf := kernel.Frame{Seq: f.Seq, Type: string(f.Type), Run: r.current, Data: f.Logged()}
	if f.Type.Terminal() {
		r.current = ""
	}
	return kf, true
}
