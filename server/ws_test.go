package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// msgConn is one side of the message protocol, over WS or a pipe.
type msgConn interface {
	send(t *testing.T, v any)
	// next returns the next JSON object received.
	next(t *testing.T) map[string]any
}

type wsConn struct {
	c       *websocket.Conn
	pending [][]byte
}

func (w *wsConn) send(t *testing.T, v any) {
	t.Helper()
	data, _ := json.Marshal(v)
	if err := w.c.Write(context.Background(), websocket.MessageText, data); err != nil {
		t.Fatal(err)
	}
}

func (w *wsConn) next(t *testing.T) map[string]any {
	t.Helper()
	for len(w.pending) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, data, err := w.c.Read(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		w.pending = bytes.Split(data, []byte("\n"))
	}
	var m map[string]any
	if err := json.Unmarshal(w.pending[0], &m); err != nil {
		t.Fatalf("message %s: %v", w.pending[0], err)
	}
	w.pending = w.pending[1:]
	return m
}

type pipeConn struct {
	nc net.Conn
	br *bufio.Reader
}

func (p *pipeConn) send(t *testing.T, v any) {
	t.Helper()
	data, _ := json.Marshal(v)
	if _, err := p.nc.Write(append(data, '\n')); err != nil {
		t.Fatal(err)
	}
}

func (p *pipeConn) next(t *testing.T) map[string]any {
	t.Helper()
	p.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := p.br.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("line %s: %v", line, err)
	}
	return m
}

func TestConnProtocol(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(kernel.Config{Store: st, Models: models.Resolve, DefaultModel: "offline", Tools: tool.Builtins(), DebugActor: true})
	if err := k.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Kernel: k})
	hs := httptest.NewServer(srv)
	sock := filepath.Join(dir, "p.sock")
	go srv.ServePipe(context.Background(), sock)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Close(ctx)
		hs.Close()
		k.Close(ctx)
		st.Close()
	})
	dialers := map[string]func(t *testing.T) msgConn{
		"ws": func(t *testing.T) msgConn {
			c, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(hs.URL, "http")+"/ws", nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.CloseNow() })
			return &wsConn{c: c}
		},
		"pipe": func(t *testing.T) msgConn {
			var nc net.Conn
			var err error
			for i := 0; i < 50; i++ {
				if nc, err = net.Dial("unix", sock); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { nc.Close() })
			return &pipeConn{nc: nc, br: bufio.NewReader(nc)}
		},
	}
	for name, dial := range dialers {
		t.Run(name, func(t *testing.T) {
			c := dial(t)
			c.send(t, map[string]any{"t": "hello", "id": "h", "client": "test", "draws": []string{"thread", "tools"}})
			if r := c.next(t); r["t"] != "reply" || r["reqId"] != "h" || r["ok"] != true {
				t.Fatalf("hello reply = %v", r)
			}
			c.send(t, map[string]any{"t": "session.new", "id": "n"})
			r := c.next(t)
			sess := r["value"].(map[string]any)["session"].(string)
			c.send(t, map[string]any{"t": "session.attach", "id": "a", "session": sess, "since": 0})
			if r := c.next(t); r["reqId"] != "a" || r["ok"] != true {
				t.Fatalf("attach reply = %v", r)
			}
			c.send(t, map[string]any{"t": "run.send", "id": "s", "session": sess, "input": map[string]any{"text": "echo hi"}})
			var seqs []float64
			sawReply := false
			for {
				m := c.next(t)
				if m["t"] == "reply" {
					if m["reqId"] == "s" && m["ok"] == true {
						sawReply = true
					}
					if _, has := m["metadata"]; has {
						t.Errorf("a reply carries metadata: %v", m)
					}
					continue
				}
				meta := m["metadata"].(map[string]any)["orrery"].(map[string]any)
				if meta["session"] != sess {
					t.Fatalf("frame %v lacks metadata.orrery.session %s", m, sess)
				}
				seqs = append(seqs, meta["seq"].(float64))
				if m["type"] == "RUN_FINISHED" {
					break
				}
			}
			if !sawReply {
				t.Error("no reply to run.send")
			}
			for i, s := range seqs {
				if s != float64(i+1) {
					t.Fatalf("seqs = %v, want 1..n", seqs)
				}
			}
			c.send(t, map[string]any{"t": "nope", "id": "x"})
			if r := c.next(t); r["ok"] != false || !strings.Contains(r["error"].(string), "not a request") {
				t.Errorf("unknown t reply = %v", r)
			}
			c.send(t, map[string]any{"t": "hello", "id": "h2"})
			if r := c.next(t); r["ok"] != false || !strings.Contains(r["error"].(string), "first message") {
				t.Errorf("second hello reply = %v", r)
			}
		})
	}
}
