package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/getorrery/orrery/store"
)

// fuzzDeadline bounds one fuzz input: the server must have answered or
// closed by then.
const fuzzDeadline = 5 * time.Second

// fuzzSeeds are messages every fuzzer starts from: good requests, bad
// ones, and the edges of the framing.
var fuzzSeeds = []string{
	`{"t":"hello","id":"h","client":"fuzz","draws":["thread","tools"]}`,
	`{"t":"hello","id":"h","draws":["thread"]}`,
	`{"t":"hello","id":"h","token":"orr_abc_def"}`,
	`{"t":"session.list","id":"1"}`,
	`{"t":"session.read","id":"1","session":"nope","since":3,"limit":2}`,
	`{"t":"session.attach","id":"1","session":"nope","since":0,"coalesce":true}`,
	`{"t":"session.attach","id":"1"}`,
	`{"t":"session.detach","id":"1","session":"nope"}`,
	`{"t":"run.send","id":"1","session":"nope","input":{"text":"hi"},"target":"steer"}`,
	`{"t":"run.cancel","id":"1","session":"nope","runId":"r"}`,
	`{"t":"session.new","id":"1","model":"nosuch"}`,
	`{"t":"nope","id":"1"}`,
	`{"t":5,"id":[1]}`,
	`{"t":"session.list","id":"1"`,
	`[1,2,3]`,
	`"x"`,
	`null`,
	``,
	"\n\n\n",
	"{\"t\":\"session.list\",\"id\":\"a\"}\n{\"t\":\"session.list\",\"id\":\"b\"}\r\n",
	"\xff\xfe\x00{",
	`{"t":"session.list","id":"\u0000\ud800"}`,
}

// fuzzNoNewSessions is a store.Log that refuses to create sessions, so that a
// fuzzer's session.new cannot make every later input slower (a growing
// session.list) and each input stays cheap.
type fuzzNoNewSessions struct{ store.Log }

func (fuzzNoNewSessions) CreateSession(context.Context, store.Session) error {
	return errors.New("this fuzz rig makes no sessions")
}

// newFuzzRig starts the rig one fuzzing process shares across inputs.
func newFuzzRig(f *testing.F) *txRig {
	return newTxRig(f, txRigOptions{wrapStore: func(l store.Log) store.Log { return fuzzNoNewSessions{l} }})
}

// fuzzCheckOutput checks one JSON message the server sent to a fuzz input: a
// reply (t "reply", reqId, ok, and value or error) or a frame (with
// metadata.orrery.seq, and no t).
func fuzzCheckOutput(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("server sent %q: not a JSON object: %v", raw, err)
	}
	switch m["t"] {
	case "reply":
		_, idOK := m["reqId"].(string)
		ok, okOK := m["ok"].(bool)
		msg, _ := m["error"].(string)
		_, hasValue := m["value"]
		if !idOK || !okOK || (ok && !hasValue) || (!ok && msg == "") {
			t.Fatalf("server sent reply %s, want reqId, ok, and a value or an error", raw)
		}
		if _, has := m["seq"]; has {
			t.Fatalf("server sent reply %s with a seq", raw)
		}
	case "close":
		// A pipe's last line; the caller checks it is the last.
	case nil:
		meta, _ := m["metadata"].(map[string]any)
		orr, _ := meta["orrery"].(map[string]any)
		if _, ok := orr["seq"].(float64); !ok {
			t.Fatalf("server sent frame %s without metadata.orrery.seq", raw)
		}
	default:
		t.Fatalf("server sent %s, want a reply or a frame", raw)
	}
	return m
}

// FuzzPipeLines writes arbitrary bytes to a real pipe connection, then
// half-closes it. The server must not panic, must write only JSON lines
// (replies, frames, a last close line), and must end the connection
// within fuzzDeadline.
func FuzzPipeLines(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
		f.Add([]byte(s + "\n" + `{"t":"session.list","id":"end"}` + "\n"))
	}
	f.Add([]byte(strings.Repeat("x", txMaxMessage+10) + "\n{\"t\":\"session.list\",\"id\":\"after\"}\n"))
	f.Add([]byte(`{"t":"session.list","id":"no newline"}`))
	r := newFuzzRig(f)

	f.Fuzz(func(t *testing.T, data []byte) {
		nc, err := net.Dial("unix", r.sock)
		if err != nil {
			t.Fatalf("dial pipe: %v", err)
		}
		defer nc.Close()
		deadline := time.Now().Add(fuzzDeadline)
		nc.SetDeadline(deadline)
		// Write while reading, so that a large input cannot deadlock
		// against the server's replies.
		werr := make(chan error, 1)
		go func() {
			_, err := nc.Write(data)
			if err == nil {
				err = nc.(*net.UnixConn).CloseWrite()
			}
			werr <- err
		}()
		br := bufio.NewReader(nc)
		closed := false
		for {
			line, err := br.ReadBytes('\n')
			if errors.Is(err, io.EOF) && len(line) == 0 {
				break
			}
			// A server that ends a connection for a reason (after its
			// close line) with input still unread resets it.
			if closed && len(line) == 0 && errors.Is(err, syscall.ECONNRESET) {
				break
			}
			if err != nil {
				t.Fatalf("read after %d input bytes: %q, %v; want lines until the server closes (within %v)", len(data), line, err, fuzzDeadline)
			}
			if closed {
				t.Fatalf("server sent %q after its close line", line)
			}
			if m := fuzzCheckOutput(t, line); m["t"] == "close" {
				closed = true
			}
		}
		if err := <-werr; err != nil && !closed {
			t.Fatalf("write %d bytes: %v (and the server sent no close line)", len(data), err)
		}
	})
}

// FuzzWSMessage sends one arbitrary WebSocket message, text or binary,
// from loopback or (simulated) off loopback, then a session.list. The
// server must not panic, must send only JSON objects, and must answer the
// session.list or close with a known code within fuzzDeadline.
func FuzzWSMessage(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), false, false)
	}
	f.Add([]byte(fuzzSeeds[0]), false, true)
	f.Add([]byte(`{"t":"session.list","id":"1"}`), true, false)
	f.Add([]byte(`{"t":"session.list","id":"1"}`), false, true)
	f.Add([]byte(strings.Repeat("y", txMaxMessage+1)), false, false)
	r := newFuzzRig(f)
	knownCodes := map[websocket.StatusCode]bool{
		websocket.StatusNormalClosure: true, websocket.StatusMessageTooBig: true, 4001: true, 4003: true,
	}

	f.Fuzz(func(t *testing.T, data []byte, binary, remote bool) {
		ctx, cancel := context.WithTimeout(context.Background(), fuzzDeadline)
		defer cancel()
		base := r.local
		if remote {
			base = r.remote
		}
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base.URL, "http")+"/ws", nil)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.CloseNow()
		c.SetReadLimit(4 << 20)
		typ := websocket.MessageText
		if binary {
			typ = websocket.MessageBinary
		}
		if err := c.Write(ctx, typ, data); err != nil {
			t.Fatalf("write %d bytes: %v", len(data), err)
		}
		// The sentinel may fail to go out if the server already closed.
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"t":"session.list","id":"__sentinel"}`))
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				var ce websocket.CloseError
				if errors.As(err, &ce) && knownCodes[ce.Code] {
					if !utf8.ValidString(ce.Reason) {
						t.Fatalf("close %d reason %q is not UTF-8 (RFC 6455 §5.5.1: browsers fail the connection)", ce.Code, ce.Reason)
					}
					return
				}
				t.Fatalf("after a %d-byte message (binary %v, remote %v): %v; want the sentinel's reply or a close with a known code",
					len(data), binary, remote, err)
			}
			for _, part := range bytes.Split(msg, []byte("\n")) {
				if m := fuzzCheckOutput(t, part); m["t"] == "reply" && m["reqId"] == "__sentinel" {
					return
				}
			}
		}
	})
}
