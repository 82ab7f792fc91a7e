package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/datadir"
	"github.com/getorrery/orrery/server"
)

// One kernel holds a data dir (docs/ARCHITECTURE.md, "Data dir
// ownership"). openKernel takes the dir's lock; the process that holds it
// serves the dir's pipe, DATA/orrery.sock, and every other orrery command
// on the dir is a client of that process over the pipe.

const (
	// holderWait bounds how long a command waits on a held data dir for
	// its holder to answer on its pipe (it may be starting) or to let go
	// of the dir (it may be stopping).
	holderWait = 15 * time.Second
	// holderPoll is how often it looks again meanwhile.
	holderPoll = 25 * time.Millisecond
)

// joined is a command's way into its data dir: the kernel it started,
// holding the dir, or a client of the process that holds it.
type joined struct {
	k     *embedded      // the kernel this process holds the dir with, or nil
	cl    *client.Client // a client of the holder, or nil
	owner datadir.Owner  // the holder, with cl
}

// errWait, from an admit function, means: do not join this holder, wait
// for the data dir instead.
var errWait = errors.New("wait for the data dir")

// embedOrJoin calls open, which starts a kernel on cfg's data dir
// (openKernel), and returns that kernel. When another process holds the
// dir, it dials the holder's pipe with copts instead and returns the
// client. A holder that is starting (its pipe not up yet) or stopping (its
// pipe gone, its lock not yet) is waited for, up to holderWait, looking
// again every holderPoll: whichever comes first, the pipe or the lock,
// wins.
//
// admit, when not nil, judges a holder that serves its pipe before it is
// dialled: nil joins it, errWait waits for the dir (for as long as admit
// says so, until ctx ends), any other error is returned.
func embedOrJoin(ctx context.Context, cfg config.Config, copts client.Options, open func() (*embedded, error), admit func(datadir.Owner) error) (joined, error) {
	deadline := time.Now().Add(holderWait)
	for {
		k, err := open()
		var held *datadir.HeldError
		if !errors.As(err, &held) {
			return joined{k: k}, err
		}
		var dialErr error
		if o := held.Owner; o != nil && o.Pipe != "" && admit != nil {
			switch err := admit(*o); {
			case errors.Is(err, errWait):
				deadline = time.Now().Add(holderWait)
				select {
				case <-ctx.Done():
					return joined{}, ctx.Err()
				case <-time.After(8 * holderPoll):
				}
				continue
			case err != nil:
				return joined{}, err
			}
		}
		if o := held.Owner; o != nil && o.Pipe != "" {
			// The holder says it serves its pipe: it is at the data dir's
			// own place, whatever the file says (it describes, it grants
			// nothing).
			path, err := datadir.PipePath(cfg.Store.Data)
			if err != nil {
				return joined{}, fmt.Errorf("%s holds the data dir %s: %w", o, cfg.Store.Data, err)
			}
			cl, err := client.Dial(ctx, "pipe:"+path, copts)
			if err == nil {
				return joined{cl: cl, owner: *o}, nil
			}
			var re *client.RequestError
			var ce *client.CloseError
			if errors.As(err, &re) || errors.As(err, &ce) {
				// It answered, and said no: asking again will not help.
				return joined{}, fmt.Errorf("%s holds the data dir %s and refused this command on its pipe %s: %w", o, cfg.Store.Data, o.Pipe, err)
			}
			dialErr = err
		}
		if time.Now().After(deadline) {
			return joined{}, silentHolder(held, dialErr)
		}
		select {
		case <-ctx.Done():
			return joined{}, ctx.Err()
		case <-time.After(holderPoll):
		}
	}
}

// openOwn calls open (openKernel) for a command that must hold the data
// dir itself (serve, node, acp, a crew). A holder that serves no pipe yet is
// starting, or only reading (orrery sessions), and is waited for, up to
// holderWait: it lets go, or says where it serves. A holder that serves a
// pipe is a *datadir.HeldError at once.
func openOwn(ctx context.Context, open func() (*embedded, error)) (*embedded, error) {
	deadline := time.Now().Add(holderWait)
	for {
		k, err := open()
		var held *datadir.HeldError
		if !errors.As(err, &held) || held.Owner != nil && held.Owner.Pipe != "" || time.Now().After(deadline) {
			return k, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(holderPoll):
		}
	}
}

// silentHolder is why a command gave up on a held data dir whose holder
// never answered.
func silentHolder(held *datadir.HeldError, dialErr error) error {
	o := held.Owner
	switch {
	case o == nil:
		return fmt.Errorf("the data dir %s has been locked for %v by a process that does not say who it is (%s names nobody alive): find it with fuser %s, stop it, or pass another --data",
			held.Dir, holderWait, datadir.OwnerFile, quoteWord(held.Dir+"/"+datadir.LockFile))
	case o.Pipe == "":
		return fmt.Errorf("%s: it serves no pipe for other commands, and kept the dir for %v; wait for it to end, stop it (kill %d), or pass another --data", held.Error(), holderWait, o.PID)
	default:
		return fmt.Errorf("%s, whose pipe %s has not answered for %v (%v): it may be stuck; stop it (kill %d), or pass another --data", held.Error(), o.Pipe, holderWait, dialErr, o.PID)
	}
}

// heldRefusal is why a command that must hold the data dir itself (serve,
// node, acp) does not start: it names the holder, where to reach it, and
// the choices. It exits 1.
func heldRefusal(held *datadir.HeldError, what string) error {
	var b strings.Builder
	b.WriteString(held.Error())
	target := ""
	if o := held.Owner; o != nil {
		if o.Listen != "" {
			fmt.Fprintf(&b, ", listening on %s", o.Listen)
			target = o.Listen
		}
		if o.Pipe != "" {
			fmt.Fprintf(&b, ", pipe %s", o.Pipe)
			if target == "" {
				target = "pipe:" + o.Pipe
			}
		}
	}
	fmt.Fprintf(&b, ": one kernel at a time keeps a data dir's log, and %s would be a second. ", what)
	if target != "" {
		fmt.Fprintf(&b, "Use that one: orrery --connect %s, orrery watch SESSION --connect %s (orrery run, orrery sessions, orrery watch and orrery on --data %s are its clients by themselves); or ",
			quoteWord(target), quoteWord(target), quoteWord(held.Dir))
	} else {
		b.WriteString("Wait for it to end, or ")
	}
	b.WriteString("give this one another --data.")
	return &exitCodeError{code: exitError, err: errors.New(b.String())}
}

// holderPipe is the pipe a holder serves its kernel on for the other
// orrery commands on its data dir: DATA/orrery.sock, made 0600 by
// server.ListenPipe. It counts the connections open on it, so that a
// holder whose own work is done can wait for its clients.
type holderPipe struct {
	path string
	ln   *countingListener
	stop context.CancelFunc
	done chan struct{} // closed when serving the pipe returned
	err  error         // what it returned, once done is closed
}

// serveHolderPipe serves srv on dir's pipe until Close, or until srv is
// closed.
func serveHolderPipe(srv *server.Server, dir string) (*holderPipe, error) {
	path, err := datadir.PipePath(dir)
	if err != nil {
		return nil, fmt.Errorf("serve the data dir's pipe, for the other orrery commands on it: %w", err)
	}
	ln, err := server.ListenPipe(path)
	if err != nil {
		return nil, fmt.Errorf("serve the data dir's pipe, for the other orrery commands on it: %w", err)
	}
	cl := &countingListener{Listener: ln, changed: make(chan struct{}, 1)}
	ctx, stop := context.WithCancel(context.Background())
	p := &holderPipe{path: path, ln: cl, stop: stop, done: make(chan struct{})}
	go func() {
		p.err = srv.ServePipeListener(ctx, cl)
		close(p.done)
	}()
	return p, nil
}

// open returns how many connections are open on the pipe.
func (p *holderPipe) open() int64 { return p.ln.open.Load() }

// waitIdle waits until no connection is open on the pipe, or ctx ends.
func (p *holderPipe) waitIdle(ctx context.Context) error {
	for p.ln.open.Load() > 0 {
		select {
		case <-p.ln.changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Done is closed when the pipe stopped accepting connections: after
// Close, after the server closed, or when accepting failed (Close returns
// the error).
func (p *holderPipe) Done() <-chan struct{} { return p.done }

// Close stops accepting connections (the socket file goes) and returns
// what serving the pipe returned. Connections already open stay until the
// server closes them.
func (p *holderPipe) Close() error {
	p.stop()
	<-p.done
	return p.err
}

// countingListener counts the connections it accepted that are still open.
type countingListener struct {
	net.Listener
	open    atomic.Int64
	changed chan struct{} // signalled (buffer 1) when a connection closes
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		select {
		case c.l.changed <- struct{}{}:
		default:
		}
	})
	return err
}

// holding is this process holding its data dir with a kernel that serves
// no HTTP (orrery run, the terminal UI, orrery acp): the kernel, and the
// server of the dir's pipe.
type holding struct {
	k    *embedded
	srv  *server.Server
	pipe *holderPipe
	log  *slog.Logger
}

// hold serves k on its data dir's pipe and says so in the owner file,
// naming command as the holder.
func hold(e *env, cfg config.Config, configPath string, k *embedded, command string, log *slog.Logger) (*holding, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("find the current directory, the default workspace root: %w", err)
	}
	sc, err := withBoundary(server.Config{
		Kernel: k.kernel, Hub: k.hub, Extensions: k.extensions(), Logger: log,
		FlushInterval: flushInterval(cfg.Server.FlushInterval.Duration),
		SaveConfig:    saveConfig(e, configPath),
	}, cfg, cwd, log)
	if err != nil {
		return nil, err
	}
	srv := server.New(sc)
	pipe, err := serveHolderPipe(srv, cfg.Store.Data)
	if err != nil {
		return nil, err
	}
	if err := k.lock.Update(func(o *datadir.Owner) { o.Command, o.Pipe, o.Roots = command, pipe.path, sc.Roots }); err != nil {
		log.Warn("say who holds the data dir", "err", err)
	}
	return &holding{k: k, srv: srv, pipe: pipe, log: log}, nil
}

// Close ends the holding. With linger, while other commands are connected
// to the pipe it says so on stderr and waits for them to leave, until ctx
// ends (a second Ctrl-C); then it stops the pipe and its server, and the
// kernel, letting go of the data dir.
func (h *holding) Close(ctx context.Context, linger bool, stderr io.Writer) error {
	if linger && ctx.Err() == nil {
		if n := h.pipe.open(); n > 0 {
			fmt.Fprintf(stderr, "orrery: %d other orrery %s using this process's kernel, which keeps the log of %s: waiting for %s to finish (Ctrl-C stops now and cuts %s off)\n",
				n, plural(n, "command is", "commands are"), h.k.lock.Dir(), plural(n, "it", "them"), plural(n, "it", "them"))
		}
		_ = h.pipe.waitIdle(ctx)
	}
	perr := h.pipe.Close()
	if linger {
		// One may have come in as the pipe closed.
		_ = h.pipe.waitIdle(ctx)
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.srv.Close(closeCtx); err != nil {
		h.log.Warn("close streams", "err", err)
	}
	return errors.Join(perr, h.k.Close(closeCtx))
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// saveConfig writes one key of the config file the command reads: the
// --config file, else $ORRERY_CONFIG, else the user's default.
func saveConfig(e *env, configPath string) func(key, value string) error {
	return func(key, value string) error {
		path := configPath
		if path == "" {
			path = e.getenv("ORRERY_CONFIG")
		}
		if path == "" {
			path = config.DefaultFile()
		}
		return config.Set(path, key, value)
	}
}

// dialDataDir returns a client of the process that holds dir, over its
// pipe, or nil when dir's owner file describes no holder serving one, or
// the pipe does not answer. It takes no lock: a command that only
// watches never holds the dir.
func dialDataDir(ctx context.Context, dir string, copts client.Options) *client.Client {
	o, err := datadir.ReadOwner(dir)
	if err != nil || o == nil || o.Pipe == "" {
		return nil
	}
	path, err := datadir.PipePath(dir)
	if err != nil {
		return nil
	}
	cl, err := client.Dial(ctx, "pipe:"+path, copts)
	if err != nil {
		return nil
	}
	return cl
}
