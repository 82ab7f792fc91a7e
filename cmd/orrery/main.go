// Command orrery is the Orrery agent kernel: one binary that hosts AI-agent
// sessions and serves them to any number of clients.
//
//	orrery            the terminal UI on the data dir's kernel (--connect URL to attach)
//	orrery serve      run the kernel on 127.0.0.1:7411
//	orrery run -p …   run one prompt in the data dir's kernel
//	orrery sessions   list sessions
//	orrery watch ID   follow a session on a running kernel
//	orrery db check   check the session log for damage (repair, backup PATH)
//
// One process at a time holds a data dir and runs its kernel (package
// datadir); the others on the dir are its clients over DATA/orrery.sock.
//
// Run "orrery help" or "orrery COMMAND --help" for more.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/getorrery/orrery/termtext"
)

// Exit codes.
const (
	exitOK        = 0
	exitError     = 1 // the command failed
	exitUsage     = 2 // the command line was wrong
	exitRunFailed = 3 // orrery run: the run ended with RUN_ERROR
	// exitDamaged (4, db.go): orrery db check found the log damaged.
	exitCancelled = 130
)

// command is one subcommand.
type command interface {
	// Synopsis is the one-line summary shown by orrery help.
	Synopsis() string
	// Run runs the command with its arguments (after the command's name).
	Run(ctx context.Context, args []string) error
}

// usageError is a command-line mistake: it exits with exitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// exitError carries a specific exit code.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	getenv         func(string) string
	// stopTracing flushes the spans still batched; nil until
	// startTracing started tracing.
	stopTracing func()
}

func commands(e *env) map[string]command {
	return map[string]command{
		"serve":    &serveCmd{env: e},
		"node":     &serveCmd{env: e, node: true},
		"run":      &runCmd{env: e},
		"sessions": &sessionsCmd{env: e},
		"version":  &versionCmd{env: e},
		"config":   &configCmd{env: e},
		"watch":    &watchCmd{env: e},
		"acp":      &acpCmd{env: e},
		"ext":      &extCmd{env: e},
		"db":       &dbCmd{env: e},
	}
}

func main() {
	e := &env{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, getenv: os.Getenv}
	ctx, sig, stop := notifyContext()
	code := run(ctx, e, os.Args[1:])
	stop()
	os.Exit(exitAfter(code, sig()))
}

// notifyContext returns a context that SIGINT and SIGTERM end, and which of
// them ended it (nil while none has).
func notifyContext() (context.Context, func() os.Signal, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	var got atomic.Value
	go func() {
		if s, ok := <-ch; ok {
			got.Store(s)
			cancel()
		}
	}()
	return ctx, func() os.Signal {
			s, _ := got.Load().(os.Signal)
			return s
		}, func() {
			signal.Stop(ch)
			cancel()
		}
}

// exitAfter is the exit code of a command that returned code after sig
// (nil: none came). One that Ctrl-C (SIGINT) stopped exits 130, as a shell
// expects of an interrupted command, unless it failed otherwise; SIGTERM,
// how a service manager stops a server, leaves a clean stop at 0.
func exitAfter(code int, sig os.Signal) int {
	if code == exitOK && sig == os.Interrupt {
		return exitCancelled
	}
	return code
}

func run(ctx context.Context, e *env, args []string) int {
	defer func() {
		if e.stopTracing != nil {
			e.stopTracing()
		}
	}()
	cmds := commands(e)
	if isTUIArgs(args) {
		return finish(e, (&tuiCmd{env: e}).Run(ctx, args))
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			if c, ok := cmds[args[1]]; ok {
				return finish(e, c.Run(ctx, []string{"--help"}))
			}
		}
		printUsage(e.stdout, cmds)
		return exitOK
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "orrery: unknown command %q: run \"orrery help\" to list the commands\n", args[0])
		return exitUsage
	}
	return finish(e, c.Run(ctx, args[1:]))
}

func finish(e *env, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	// An error may quote what a session, a server or an extension said:
	// it is shown visibly, as all such text is.
	var ue *usageError
	var ce *exitCodeError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "orrery: %s\n", termtext.Visible(err.Error()))
		return exitUsage
	case errors.As(err, &ce):
		if ce.err != nil && ce.err.Error() != "" {
			fmt.Fprintf(e.stderr, "orrery: %s\n", termtext.Visible(ce.err.Error()))
		}
		return ce.code
	default:
		fmt.Fprintf(e.stderr, "orrery: %s\n", termtext.Visible(err.Error()))
		return exitError
	}
}

func printUsage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "Orrery is an agent kernel: it hosts AI-agent sessions and serves them to any number of clients.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: orrery COMMAND [flags]")
	fmt.Fprintln(w, "       orrery [--connect URL|pipe:NAME] [--token T] [--resume [SESSION]]   the terminal UI")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, cmds[n].Synopsis())
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run \"orrery COMMAND --help\" for a command's flags.")
}

// newFlagSet returns a flag set whose errors and help go to e.stderr and
// which reports mistakes as usage errors.
func newFlagSet(e *env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet("orrery "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: orrery %s\n\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, which must be flags alone, turning mistakes into
// usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q: run \"%s --help\"", fs.Arg(0), strings.TrimSpace(fs.Name()))}
	}
	return nil
}

// subcommandFirst is the usage error for a flag written where cmd wants
// its subcommand; forms are the subcommands as a line takes them.
func subcommandFirst(cmd, flag, forms string) error {
	return &usageError{msg: fmt.Sprintf("%s needs its subcommand before %s: orrery %s %s [flags] (orrery %s --help)", cmd, flag, cmd, forms, cmd)}
}

// parseFlags parses the flags of args up to the first positional one. A
// mistake is answered by the flag package's line naming it and one line
// saying where the usage is (exit 2); the whole usage is for --help.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if !asksHelp(args) {
		full := fs.Usage
		fs.Usage = func() { fmt.Fprintf(fs.Output(), "Run \"%s --help\" for its usage.\n", strings.TrimSpace(fs.Name())) }
		defer func() { fs.Usage = full }()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitCodeError{code: exitUsage, err: errors.New("")}
	}
	return nil
}

// asksHelp reports whether args hold -h, -help or --help before any "--".
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "--h":
			return true
		}
	}
	return false
}
