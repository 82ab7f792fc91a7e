package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/ext"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/termtext"
)

// extCmd is `orrery ext list|add|remove|restart|logs`: the extensions
// installed for this project and this user, and those running in a
// kernel's session.
type extCmd struct {
	env *env
}

func (c *extCmd) Synopsis() string {
	return "manage extensions: ext list|add PATH|remove NAME|restart NAME|logs NAME"
}

const extUsage = `ext list [--json] [--session ID [--connect URL]]
       orrery ext add PATH [--project]
       orrery ext remove NAME [--project]
       orrery ext restart NAME --session ID [--connect URL]
       orrery ext logs NAME [--data DIR]

Extensions live in the project's .orrery/extensions/ and in the user's
extensions dir ($ORRERY_EXT_DIR, else <config dir>/orrery/extensions); the
project's wins on a name clash. A kernel finds them when it starts
(orrery serve, orrery run): after add or remove, start it again.`

func (c *extCmd) Run(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		fmt.Fprintf(c.env.stderr, "Usage: orrery %s\n", extUsage)
		if len(args) == 0 {
			return &exitCodeError{code: exitUsage, err: errors.New("")}
		}
		return flag.ErrHelp
	}
	switch args[0] {
	case "list":
		return c.list(ctx, args[1:])
	case "add":
		return c.add(args[1:])
	case "remove":
		return c.remove(args[1:])
	case "restart":
		return c.restart(ctx, args[1:])
	case "logs":
		return c.logs(args[1:])
	}
	if strings.HasPrefix(args[0], "-") {
		return subcommandFirst("ext", args[0], "list|add|remove|restart|logs")
	}
	return &usageError{msg: fmt.Sprintf("ext %s is not a subcommand: use list, add, remove, restart or logs (orrery ext --help)", args[0])}
}

// installed is one extension directory found on disk.
type installed struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Runtime string `json:"runtime,omitempty"`
	// Where is "project" or "user".
	Where string `json:"where"`
	Dir   string `json:"dir"`
	// Shadowed is set on a user extension the project's of the same name
	// replaces.
	Shadowed bool `json:"shadowed,omitempty"`
	// Error is why its manifest is refused; it does not load.
	Error string `json:"error,omitempty"`
}

// scanInstalled lists every extension directory in the project's and the
// user's dirs, refused ones included.
func scanInstalled(projectDir, userDir string) ([]installed, error) {
	var out []installed
	seen := map[string]bool{}
	for _, d := range []struct{ where, dir string }{{"project", projectDir}, {"user", userDir}} {
		if d.dir == "" {
			continue
		}
		entries, err := os.ReadDir(d.dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read extensions in %s: %w", d.dir, err)
		}
		for _, e := range entries {
			dir := filepath.Join(d.dir, e.Name())
			if _, err := os.Stat(filepath.Join(dir, ext.ManifestFile)); err != nil {
				continue
			}
			it := installed{Name: e.Name(), Where: d.where, Dir: dir}
			if m, err := ext.LoadManifest(dir); err != nil {
				it.Error = err.Error()
			} else {
				it.Name, it.Version, it.Runtime = m.Extension.Name, m.Extension.Version, m.Extension.Runtime
				it.Shadowed = seen[it.Name]
				seen[it.Name] = true
			}
			out = append(out, it)
		}
	}
	return out, nil
}

func (c *extCmd) dirs() (project, user string, err error) {
	cwd, err := os.Getwd()
	if err != nil {
		return "", "", fmt.Errorf("find the current directory, the project's root: %w", err)
	}
	return ext.ProjectDir(cwd), extUserDir(c.env), nil
}

func (c *extCmd) list(ctx context.Context, args []string) error {
	fset := newFlagSet(c.env, "ext list", "ext list [--json] [--session ID [--connect URL]]")
	asJSON := fset.Bool("json", false, "print JSON: an array of the extensions, installed ones or, with --session, those of the session with their state")
	session := fset.String("session", "", "list the extensions running in this session of a running kernel, with their state")
	var conn connectFlags
	conn.register(fset)
	if err := parse(fset, args); err != nil {
		return err
	}
	if *session != "" {
		return c.listRunning(ctx, conn, *session, *asJSON)
	}
	project, user, err := c.dirs()
	if err != nil {
		return err
	}
	all, err := scanInstalled(project, user)
	if err != nil {
		return err
	}
	if *asJSON {
		if all == nil {
			all = []installed{}
		}
		return printJSON(c.env, all)
	}
	if len(all) == 0 {
		fmt.Fprintf(c.env.stdout, "no extensions: put one in %s or %s, or run orrery ext add PATH\n", project, user)
		return nil
	}
	tw := tabwriter.NewWriter(c.env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tRUNTIME\tWHERE\tDIR")
	for _, it := range all {
		where := it.Where
		switch {
		case it.Error != "":
			where += " (refused: " + it.Error + ")"
		case it.Shadowed:
			where += " (the project's wins)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(it.Name), cell(it.Version), cell(it.Runtime), termtext.VisibleLine(where), cell(it.Dir))
	}
	return tw.Flush()
}

// cell is s for a cell of a table: shown visibly on one line, and "-" if
// empty. Names, versions and errors come from extensions' manifests and
// from the kernel, and may hold anything.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return termtext.VisibleLine(s)
}

func printJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// connectFlags name a running kernel.
type connectFlags struct {
	common  commonFlags
	connect string
	token   string
}

func (f *connectFlags) register(fset *flag.FlagSet) {
	f.common.register(fset, false)
	fset.StringVar(&f.connect, "connect", "", "the kernel: http://HOST:PORT, ws://HOST:PORT or pipe:NAME (default: the one holding the data dir, over its pipe; else http:// and [server] listen from the config)")
	fset.StringVar(&f.token, "token", "", "node token, needed for a kernel off loopback")
}

func (f *connectFlags) dial(ctx context.Context, e *env) (*client.Client, error) {
	cfg, err := f.common.load(e)
	if err != nil {
		return nil, err
	}
	copts := client.Options{Token: f.token, Client: "orrery-ext", DataDir: cfg.Store.Data, Logger: newLogger(e, slog.LevelWarn)}
	target := f.connect
	if target == "" {
		if cl := dialDataDir(ctx, cfg.Store.Data, copts); cl != nil {
			return cl, nil
		}
		target = "http://" + dialAddr(cfg.Server.Listen)
	}
	return client.Dial(ctx, target, copts)
}

// sessionError is err, a request on session refused, or the CLI's error
// for a session the kernel does not have.
func (f *connectFlags) sessionError(ctx context.Context, e *env, cl *client.Client, session string, err error) error {
	if known, lerr := hasSession(ctx, cl, session); lerr != nil || known {
		return err
	}
	where := f.connect
	if where == "" {
		if cfg, lerr := f.common.load(e); lerr == nil {
			where = cfg.Store.Data
		}
	}
	return noSession(session, where)
}

func (c *extCmd) listRunning(ctx context.Context, conn connectFlags, session string, asJSON bool) error {
	cl, err := conn.dial(ctx, c.env)
	if err != nil {
		return err
	}
	defer cl.Close()
	raw, err := cl.Do(ctx, &protocol.ExtList{Envelope: protocol.Envelope{T: "ext.list"}, Session: session})
	if err != nil {
		return conn.sessionError(ctx, c.env, cl, session, err)
	}
	var reply protocol.ExtListReply
	if err := json.Unmarshal(raw, &reply); err != nil {
		return fmt.Errorf("decode the ext.list reply: %w", err)
	}
	if asJSON {
		// An array, as without --session: each extension's state in it.
		if reply.Extensions == nil {
			reply.Extensions = []protocol.ExtStatus{}
		}
		return printJSON(c.env, reply.Extensions)
	}
	if len(reply.Extensions) == 0 {
		fmt.Fprintf(c.env.stdout, "no extension runs in session %s\n", termtext.VisibleLine(session))
		return nil
	}
	tw := tabwriter.NewWriter(c.env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tSTATE\tPID\tRESTARTS\tERROR")
	for _, x := range reply.Extensions {
		pid := "-"
		if x.PID != 0 {
			pid = fmt.Sprint(x.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", termtext.VisibleLine(x.Name), termtext.VisibleLine(x.Version), termtext.VisibleLine(x.State), pid, x.Restarts, cell(x.Error))
	}
	return tw.Flush()
}

// target is the dir add and remove work in: the user's, or the project's
// with --project.
func (c *extCmd) target(project bool) (string, error) {
	p, u, err := c.dirs()
	if err != nil {
		return "", err
	}
	if project {
		return p, nil
	}
	if u == "" {
		return "", errors.New("this system has no user config dir: set ORRERY_EXT_DIR, or add the extension to the project with --project")
	}
	return u, nil
}

func (c *extCmd) add(args []string) error {
	fset := newFlagSet(c.env, "ext add", "ext add PATH [--project]\n\nLinks the extension directory PATH (holding orrery.toml) into the user's extensions dir, or the project's with --project; keep PATH where it is.")
	project := fset.Bool("project", false, "add it to the project's .orrery/extensions instead of the user's dir")
	pos, err := parseInterspersed(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &usageError{msg: "ext add needs one PATH: the extension's directory, which holds orrery.toml"}
	}
	src, err := filepath.Abs(pos[0])
	if err != nil {
		return fmt.Errorf("resolve %s: %w", pos[0], err)
	}
	m, err := ext.LoadManifest(src)
	if err != nil {
		return err
	}
	dir, err := c.target(*project)
	if err != nil {
		return err
	}
	dst := filepath.Join(dir, m.Extension.Name)
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("an extension named %s is already in %s: remove it first with orrery ext remove %s", m.Extension.Name, dir, m.Extension.Name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Symlink(src, dst); err != nil {
		return fmt.Errorf("add %s: %w", m.Extension.Name, err)
	}
	fmt.Fprintf(c.env.stdout, "added %s %s (%s) as %s; a kernel started from now on loads it\n", termtext.VisibleLine(m.Extension.Name), termtext.VisibleLine(m.Extension.Version), termtext.VisibleLine(m.Extension.Runtime), termtext.VisibleLine(dst))
	return nil
}

func (c *extCmd) remove(args []string) error {
	fset := newFlagSet(c.env, "ext remove", "ext remove NAME [--project]\n\nRemoves what orrery ext add linked. A directory that is not a link is left alone: delete it yourself.")
	project := fset.Bool("project", false, "remove it from the project's .orrery/extensions instead of the user's dir")
	pos, err := parseInterspersed(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &usageError{msg: "ext remove needs one NAME: see the names with orrery ext list"}
	}
	dir, err := c.target(*project)
	if err != nil {
		return err
	}
	path, err := findInstalled(dir, pos[0])
	if err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("remove %s: %w", pos[0], err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return fmt.Errorf("%s is a directory, not a link orrery ext add made: delete it yourself if you mean to (rm -r %s)", path, path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove %s: %w", pos[0], err)
	}
	fmt.Fprintf(c.env.stdout, "removed %s (%s); a kernel started from now on no longer loads it\n", termtext.VisibleLine(pos[0]), termtext.VisibleLine(path))
	return nil
}

// findInstalled returns the entry of dir that holds extension name: the
// entry of that name, or one whose manifest names it.
func findInstalled(dir, name string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read extensions in %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.Name() == name {
			return p, nil
		}
		if m, err := ext.LoadManifest(p); err == nil {
			if m.Extension.Name == name {
				return p, nil
			}
			names = append(names, m.Extension.Name)
		}
	}
	sort.Strings(names)
	have := "it holds none"
	if len(names) > 0 {
		have = "it holds " + strings.Join(names, ", ")
	}
	return "", fmt.Errorf("no extension %s in %s (%s): see them all with orrery ext list", name, dir, have)
}

func (c *extCmd) restart(ctx context.Context, args []string) error {
	fset := newFlagSet(c.env, "ext restart", "ext restart NAME --session ID [--connect URL]\n\nStops the extension in that session of a running kernel, if it runs, and starts it again with a fresh restart count.")
	session := fset.String("session", "", "the session whose extension to restart (required; list them with orrery sessions)")
	var conn connectFlags
	conn.register(fset)
	pos, err := parseInterspersed(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &usageError{msg: "ext restart needs one NAME: see the running ones with orrery ext list --session ID"}
	}
	if *session == "" {
		return &usageError{msg: "ext restart needs --session ID: an extension runs once per session (list them with orrery sessions)"}
	}
	cl, err := conn.dial(ctx, c.env)
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := cl.Do(ctx, &protocol.ExtRestart{Envelope: protocol.Envelope{T: "ext.restart"}, Session: *session, Name: pos[0]}); err != nil {
		return conn.sessionError(ctx, c.env, cl, *session, err)
	}
	fmt.Fprintf(c.env.stdout, "restarted %s in session %s\n", pos[0], *session)
	return nil
}

func (c *extCmd) logs(args []string) error {
	fset := newFlagSet(c.env, "ext logs", "ext logs NAME [--data DIR]\n\nPrints what the extension wrote on stderr (and its actions' output), kept in DATA/ext-logs/NAME.log.")
	var common commonFlags
	common.register(fset, false)
	pos, err := parseInterspersed(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &usageError{msg: "ext logs needs one NAME: see the names with orrery ext list"}
	}
	cfg, err := common.load(c.env)
	if err != nil {
		return err
	}
	path := ext.LogPath(extLogDir(cfg), pos[0])
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no logs for %s in %s: it has not run with this data dir yet (or pass the kernel's --data)", pos[0], extLogDir(cfg))
	}
	if err != nil {
		return fmt.Errorf("read the logs of %s: %w", pos[0], err)
	}
	defer f.Close()
	// The log is what the extension wrote: shown visibly, so that its
	// escape sequences (colours too) print as text; the file holds them.
	w := termtext.NewWriter(c.env.stdout)
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("print %s: %w", path, err)
	}
	return w.Flush()
}
