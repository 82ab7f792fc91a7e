package fanout

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Subscribers says how a subscriber attaches to a system: enough to dial it
// from this process or from the subscriber program (bench/fanout/subscribers),
// which the harness runs as a separate process so that the server's CPU is
// measured apart from its clients'.
type Subscribers struct {
	Transport string // "sse" (GET URL) or "ws" (dial URL)
	URL       string
	// Hello is sent once a WebSocket is connected (an attach or connect
	// request), if set.
	Hello []byte
	// Ready, if set, is a substring of the line that ends the handshake
	// (the reply to Hello, or an SSE line); the lines up to it are not
	// counted. ReadyOK, if set, must also be in that line, or the attach
	// failed.
	Ready, ReadyOK string
	// Pong, if set, is sent back for each WebSocket message that is exactly
	// "{}" (centrifuge's ping).
	Pong []byte
	// Subprotocols are offered in the WebSocket handshake.
	Subprotocols []string
}

// Dialer returns the function that attaches one subscriber.
func (s Subscribers) Dialer() func(ctx context.Context, i int) (Conn, error) {
	ready := func(line []byte) (bool, error) {
		if !bytes.Contains(line, []byte(s.Ready)) {
			return false, nil
		}
		if s.ReadyOK != "" && !bytes.Contains(line, []byte(s.ReadyOK)) {
			return false, fmt.Errorf("attach refused: %s", bytes.TrimSpace(line))
		}
		return true, nil
	}
	if s.Transport == "ws" {
		o := WSOptions{Hello: s.Hello, Pong: s.Pong, Subprotocols: s.Subprotocols}
		if s.Ready != "" {
			o.Ready = ready
		}
		return func(ctx context.Context, _ int) (Conn, error) { return DialWS(ctx, s.URL, o) }
	}
	client := NewHTTPClient()
	var sseReady func([]byte) (bool, error)
	if s.Ready != "" {
		sseReady = ready
	}
	return func(ctx context.Context, _ int) (Conn, error) { return DialSSE(ctx, client, s.URL, sseReady) }
}

func (s Subscribers) args(n int) []string {
	a := []string{"-n", fmt.Sprint(n), "-transport", s.Transport, "-url", s.URL}
	if s.Hello != nil {
		a = append(a, "-hello", string(s.Hello))
	}
	if s.Ready != "" {
		a = append(a, "-ready", s.Ready)
	}
	if s.ReadyOK != "" {
		a = append(a, "-ready-ok", s.ReadyOK)
	}
	if s.Pong != nil {
		a = append(a, "-pong", string(s.Pong))
	}
	if len(s.Subprotocols) > 0 {
		a = append(a, "-subprotocols", strings.Join(s.Subprotocols, ","))
	}
	return a
}

// SubscriberMain is the subscriber program: it attaches -n subscribers as
// its flags say, prints "ready" on stdout, then obeys one command a line on
// stdin: "begin" opens the measured window, "end" closes it, "count"
// prints how many frames have been received so far (all subscribers), and
// "stop" (or the end of stdin) closes every connection and prints the
// window's Summary as one JSON line.
func SubscriberMain(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("fanout-subscribers", flag.ContinueOnError)
	var s Subscribers
	var hello, pong, subprotocols string
	n := fs.Int("n", 1000, "subscribers to attach")
	fs.StringVar(&s.Transport, "transport", "sse", "sse or ws")
	fs.StringVar(&s.URL, "url", "", "the stream's URL (http:// for SSE, ws:// for WebSocket)")
	fs.StringVar(&hello, "hello", "", "message to send once a WebSocket connects")
	fs.StringVar(&s.Ready, "ready", "", "substring of the line that ends the handshake")
	fs.StringVar(&s.ReadyOK, "ready-ok", "", "substring the ready line must also hold")
	fs.StringVar(&pong, "pong", "", "answer to a WebSocket message that is exactly {}")
	fs.StringVar(&subprotocols, "subprotocols", "", "comma-separated WebSocket subprotocols")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.URL == "" || (s.Transport != "sse" && s.Transport != "ws") {
		return errors.New("give -url and -transport sse or ws")
	}
	if hello != "" {
		s.Hello = []byte(hello)
	}
	if pong != "" {
		s.Pong = []byte(pong)
	}
	if subprotocols != "" {
		s.Subprotocols = strings.Split(subprotocols, ",")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := attach(ctx, *n, s.Dialer())
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "ready")
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		switch cmd := strings.TrimSpace(sc.Text()); cmd {
		case "begin":
			c.t.begin()
		case "end":
			c.t.end()
		case "count":
			frames, _ := c.t.totals()
			fmt.Fprintln(stdout, frames)
		case "stop":
			return report(c, stdout)
		default:
			return fmt.Errorf("unknown command %q: send begin, end, count or stop", cmd)
		}
	}
	return report(c, stdout)
}

func report(c *crowd, stdout io.Writer) error {
	sum, err := c.close()
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(sum)
}

// remote is a running subscriber program.
type remote struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
}

// startRemote runs the subscriber program with n subscribers attaching as
// s says, and returns once every one is attached.
func startRemote(n int, s Subscribers) (*remote, error) {
	prog, err := subscriberProgram()
	if err != nil {
		return nil, err
	}
	r := &remote{cmd: exec.Command(prog, s.args(n)...)}
	r.cmd.Stderr = &r.stderr
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	r.out = bufio.NewReader(stdout)
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the subscriber program: %w", err)
	}
	line, err := r.out.ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		r.stdin.Close()
		werr := r.cmd.Wait()
		return nil, fmt.Errorf("subscriber program did not attach (%v, %v): %s", err, werr, bytes.TrimSpace(r.stderr.Bytes()))
	}
	return r, nil
}

func (r *remote) send(cmd string) error {
	_, err := io.WriteString(r.stdin, cmd+"\n")
	return err
}

// stop ends the subscribers and returns their summary.
func (r *remote) stop() (Summary, error) {
	var sum Summary
	_ = r.send("stop")
	r.stdin.Close()
	line, rerr := r.out.ReadBytes('\n')
	werr := r.cmd.Wait()
	if err := json.Unmarshal(line, &sum); err != nil {
		return sum, fmt.Errorf("subscriber program's summary (%v, %v, %v): %s", rerr, werr, err, bytes.TrimSpace(r.stderr.Bytes()))
	}
	return sum, nil
}

// kill ends the program at once.
func (r *remote) kill() {
	r.stdin.Close()
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// subscriberProgram returns the path of the subscriber program:
// ORRERY_BENCH_SUBSCRIBERS if set, or else one built once per process with
// go build into the user's cache directory.
func subscriberProgram() (string, error) {
	if p := os.Getenv("ORRERY_BENCH_SUBSCRIBERS"); p != "" {
		return p, nil
	}
	buildOnce.Do(func() {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		dir = filepath.Join(dir, "orrery-bench")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		tmp, err := os.CreateTemp(dir, "fanout-subscribers-*")
		if err != nil {
			buildErr = err
			return
		}
		tmp.Close()
		cmd := exec.Command("go", "build", "-o", tmp.Name(), "github.com/getorrery/orrery/bench/fanout/subscribers")
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp.Name())
			buildErr = fmt.Errorf("build the subscriber program (or set ORRERY_BENCH_SUBSCRIBERS to a built one): %w: %s", err, out)
			return
		}
		buildPath = filepath.Join(dir, "fanout-subscribers")
		buildErr = os.Rename(tmp.Name(), buildPath)
	})
	return buildPath, buildErr
}

// IdleRemote attaches n subscribers from the subscriber program, lets them
// sit idle, and returns the growth of this process's heap and stack in use
// per subscriber: the server's share alone, since the clients live
// elsewhere.
func IdleRemote(n int, s Subscribers) (float64, error) {
	before := InUse()
	r, err := startRemote(n, s)
	if err != nil {
		return 0, err
	}
	time.Sleep(time.Second) // let every writer block
	after := InUse()
	if _, err := r.stop(); err != nil {
		return 0, err
	}
	return (float64(after) - float64(before)) / float64(n), nil
}
