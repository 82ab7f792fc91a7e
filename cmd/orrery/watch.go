package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
)

// watchCmd is `orrery watch SESSION`: it follows a session on a running
// kernel and prints it until interrupted.
type watchCmd struct {
	env     *env
	common  commonFlags
	since   string
	json    bool
	connect string
	token   string
	caCert  string
}

func (c *watchCmd) Synopsis() string {
	return "follow a session on a running kernel and print it as it happens"
}

func (c *watchCmd) Run(ctx context.Context, args []string) error {
	fs := newFlagSet(c.env, "watch", "watch SESSION [--since N] [--json] [--connect URL|pipe:NAME] [--token T] [--ca-cert FILE]")
	c.common.register(fs, false)
	fs.StringVar(&c.since, "since", "", "resume after this seq; without it the session's history comes first as a snapshot")
	fs.BoolVar(&c.json, "json", false, "print each frame as one JSON line (AG-UI events, exactly as received)")
	fs.StringVar(&c.connect, "connect", "", "the kernel: http://HOST:PORT, ws://HOST:PORT or pipe:NAME (default: the one holding the data dir, over its pipe; else http:// and [server] listen from the config)")
	fs.StringVar(&c.token, "token", "", "node token, needed for a kernel off loopback")
	registerCACert(fs, &c.caCert)
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	switch len(positional) {
	case 0:
		return &usageError{msg: "watch needs a session: orrery watch SESSION (list them with orrery sessions)"}
	case 1:
	default:
		return &usageError{msg: fmt.Sprintf("unexpected argument %q: watch follows one session; run \"orrery watch --help\"", positional[1])}
	}
	session := positional[0]
	var since *uint64
	if c.since != "" {
		n, err := strconv.ParseUint(c.since, 10, 64)
		if err != nil {
			return &usageError{msg: fmt.Sprintf("--since %q must be a whole number: the last seq received", c.since)}
		}
		since = &n
	}
	cfg, err := c.common.load(c.env)
	if err != nil {
		return err
	}
	hc, err := httpClient(c.caCert)
	if err != nil {
		return err
	}
	log := newLogger(c.env, slog.LevelWarn)
	copts := client.Options{
		Token: c.token, Client: "orrery-watch", DataDir: cfg.Store.Data, Logger: log, HTTPClient: hc,
		Draws: []string{protocol.DrawThread, protocol.DrawTools, protocol.DrawReasoning},
	}
	// Without --connect: the kernel that holds the data dir, over its
	// pipe; when none does, [server] listen from the config.
	var cl *client.Client
	if c.connect == "" {
		cl = dialDataDir(ctx, cfg.Store.Data, copts)
	}
	if cl == nil {
		target := c.connect
		if target == "" {
			target = "http://" + dialAddr(cfg.Server.Listen)
			if cfg.Server.TLSCert != "" {
				target = "https://" + dialAddr(cfg.Server.Listen)
			}
		}
		cl, err = client.Dial(ctx, target, copts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	defer cl.Close()
	// Frames come as the session logged them, whichever transport carried
	// them (a pipe tags each with its session).
	untag := cl.Transport() != client.TransportHTTP
	stream, err := cl.Attach(ctx, session, since)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		// A session that is not there is named in the CLI's words, not
		// the protocol's.
		if known, lerr := hasSession(ctx, cl, session); lerr == nil && !known {
			return noSession(session, watchedWhere(c.connect, cfg.Store.Data))
		}
		return err
	}
	defer stream.Close()

	p := newPrinter(c.env, c.json)
	defer p.flush()
	for {
		f, err := stream.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: the normal way to stop watching
			}
			p.endLine()
			p.out.Flush()
			return fmt.Errorf("watch %s: %w", session, err)
		}
		if untag {
			f.Data = f.Logged()
		}
		if err := p.frame(f); err != nil {
			return err
		}
		if err := p.out.Flush(); err != nil {
			return err
		}
	}
}

// parseInterspersed parses args with flags before or after the positional
// arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// dialAddr turns a listen address into one to dial: a wildcard host is
// this machine's loopback.
func dialAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// printer renders frames for a person: the prompts, streamed assistant
// text, reasoning dimmed, tool calls and their results, run starts and
// ends; errors go to stderr. Everything it prints from the session is
// shown with termtext.Visible, so that no escape sequence or control in it
// reaches the terminal. With json it prints each frame as received.
type printer struct {
	out     *bufio.Writer
	text    *termtext.Writer // streamed text, shown visibly, to out
	errw    io.Writer
	json    bool
	color   bool
	midLine bool             // the last thing printed did not end its line
	args    map[string]*call // tool calls whose arguments are streaming
}

type call struct {
	name string
	args strings.Builder
}

func newPrinter(e *env, asJSON bool) *printer {
	out := bufio.NewWriter(e.stdout)
	return &printer{
		out: out, text: termtext.NewWriter(out), errw: e.stderr, json: asJSON,
		color: isTerminal(e.stdout) && e.getenv("NO_COLOR") == "",
		args:  make(map[string]*call),
	}
}

// flush writes out all that is printed, streamed text held back included.
func (p *printer) flush() error {
	p.text.Flush()
	return p.out.Flush()
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

const (
	ansiDim   = "\x1b[2m"
	ansiBold  = "\x1b[1m"
	ansiReset = "\x1b[0m"
)

func (p *printer) style(code, s string) string {
	if !p.color || s == "" {
		return s
	}
	return code + s + ansiReset
}

// endLine ends streamed text, and the line it left open.
func (p *printer) endLine() {
	p.text.Flush()
	if p.midLine {
		p.out.WriteByte('\n')
		p.midLine = false
	}
}

// line prints one whole line.
func (p *printer) line(format string, args ...any) {
	p.endLine()
	fmt.Fprintf(p.out, format+"\n", args...)
}

// stream prints a piece of streamed text, which may end mid-line, in the
// style code (none if ""). The text is shown visibly, and a sequence or a
// character cut between two pieces is shown whole (termtext.Writer).
func (p *printer) stream(code, s string) {
	if s == "" {
		return
	}
	styled := p.color && code != ""
	if styled {
		p.out.WriteString(code)
	}
	p.text.WriteString(s)
	if styled {
		p.out.WriteString(ansiReset)
	}
	p.midLine = !strings.HasSuffix(s, "\n")
}

// errorf prints a line on stderr, after what stdout holds.
func (p *printer) errorf(format string, args ...any) {
	p.endLine()
	p.out.Flush()
	fmt.Fprintf(p.errw, format+"\n", args...)
}

func (p *printer) frame(f client.Frame) error {
	if p.json {
		p.out.Write(f.Data)
		return p.out.WriteByte('\n')
	}
	switch e := f.Event.(type) {
	case *protocol.MessagesSnapshot:
		for _, m := range e.Messages {
			p.message(m)
		}
	case *protocol.Custom:
		p.custom(e)
	case *protocol.RunStarted:
		p.line("%s", p.style(ansiBold, "── run "+termtext.VisibleLine(e.RunID)+" started"))
	case *protocol.TextMessageStart:
		p.endLine()
	case *protocol.TextMessageContent:
		p.stream("", e.Delta)
	case *protocol.TextMessageEnd:
		p.endLine()
	case *protocol.ReasoningMessageStart:
		p.endLine()
		p.stream(ansiDim, "thinking: ")
	case *protocol.ReasoningMessageContent:
		p.stream(ansiDim, e.Delta)
	case *protocol.ReasoningMessageEnd:
		p.endLine()
	case *protocol.ToolCallStart:
		p.args[e.ToolCallID] = &call{name: e.ToolCallName}
	case *protocol.ToolCallArgs:
		if c := p.args[e.ToolCallID]; c != nil {
			c.args.WriteString(e.Delta)
		}
	case *protocol.ToolCallEnd:
		if c := p.args[e.ToolCallID]; c != nil {
			delete(p.args, e.ToolCallID)
			p.line("→ %s %s", termtext.VisibleLine(c.name), indent(termtext.Visible(c.args.String())))
		}
	case *protocol.ToolCallResult:
		p.line("← %s", indent(termtext.Visible(e.Content.String())))
	case *protocol.RunFinished:
		p.finished(e)
	case *protocol.RunError:
		p.line("%s", p.style(ansiBold, "── run failed"))
		p.errorf("orrery: run failed (%s): %s", termtext.VisibleLine(e.Code), termtext.Visible(e.Message))
	}
	return nil
}

// message prints one message of a MESSAGES_SNAPSHOT.
func (p *printer) message(m protocol.Message) {
	text := termtext.Visible(m.Content.String())
	switch m.Role {
	case protocol.RoleUser:
		p.line("> %s", indent(text))
	case protocol.RoleReasoning:
		p.line("%s", p.style(ansiDim, "thinking: "+text))
	case protocol.RoleTool:
		p.line("← %s", indent(text))
	default:
		if text != "" {
			p.line("%s", text)
		}
		for _, tc := range m.ToolCalls {
			p.line("→ %s %s", termtext.VisibleLine(tc.Function.Name), indent(termtext.Visible(tc.Function.Arguments)))
		}
	}
}

// custom prints Orrery's own events it knows; others are ignored.
func (p *printer) custom(e *protocol.Custom) {
	switch e.Name {
	case client.UserMessageEvent:
		var um struct {
			Content protocol.Content `json:"content"`
			Steer   bool             `json:"steer"`
		}
		if json.Unmarshal(e.Value, &um) != nil {
			return
		}
		prefix := "> "
		if um.Steer {
			prefix = "> (steer) "
		}
		p.line("%s%s", prefix, indent(termtext.Visible(um.Content.String())))
	case "orrery.notice":
		var n struct {
			Ext   string `json:"ext"`
			Level string `json:"level"`
			Text  string `json:"text"`
		}
		if json.Unmarshal(e.Value, &n) == nil {
			p.errorf("notice (%s) %s: %s", termtext.VisibleLine(n.Level), termtext.VisibleLine(n.Ext), indent(termtext.Visible(n.Text)))
		}
	}
}

func (p *printer) finished(e *protocol.RunFinished) {
	what := "finished"
	if e.Outcome != nil {
		switch {
		case e.Outcome.Type == protocol.OutcomeCancelled:
			what = "cancelled"
		case len(e.Outcome.PendingToolCallIDs) > 0:
			what = "finished, waiting for the client's tools " + termtext.VisibleLine(strings.Join(e.Outcome.PendingToolCallIDs, ", "))
		}
	}
	var res protocol.RunResult
	if len(e.Result) > 0 && json.Unmarshal(e.Result, &res) == nil {
		what += fmt.Sprintf(" · %d in, %d out tokens · $%.6f", res.InputTokens, res.OutputTokens, float64(res.MicroUSD)/1e6)
	}
	p.line("%s", p.style(ansiBold, "── run "+termtext.VisibleLine(e.RunID)+" "+what))
}

// indent keeps a multi-line text under its prefix.
func indent(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

// watchedWhere names what orrery watch attached to: the --connect target,
// else the data dir whose kernel it reached.
func watchedWhere(connect, data string) string {
	if connect != "" {
		return connect
	}
	return data
}
