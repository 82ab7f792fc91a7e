package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/ui"
)

// stateKeysUntilNotice reads c until an orrery.notice with text and
// returns the keys of the orrery.state.changed frames before it.
func stateKeysUntilNotice(t *testing.T, c msgConn, text string) []string {
	t.Helper()
	var keys []string
	for {
		m := c.next(t)
		if m["type"] != "CUSTOM" {
			continue
		}
		v, _ := m["value"].(map[string]any)
		switch m["name"] {
		case kernel.StateChangedEvent:
			keys = append(keys, fmt.Sprint(v["key"]))
		case kernel.NoticeEvent:
			if v["text"] == text {
				return keys
			}
		}
	}
}

// reply reads c until the reply to id.
func reply(t *testing.T, c msgConn, id string) map[string]any {
	t.Helper()
	for {
		if m := c.next(t); m["t"] == "reply" && m["reqId"] == id {
			return m
		}
	}
}

func TestStateWatch(t *testing.T) {
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
	ctx := context.Background()
	sess, err := k.CreateSession(ctx, kernel.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ci, _ := ui.ExtOwner("ci")
	if err := sess.SetState(ctx, ci, "failed", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	dial := map[string]func(t *testing.T) msgConn{
		"ws": func(t *testing.T) msgConn {
			c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/ws", nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.CloseNow() })
			return &wsConn{c: c}
		},
		"pipe": func(t *testing.T) msgConn {
			var nc net.Conn
			var err error
			for range 50 {
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
	for _, name := range []string{"ws", "pipe"} {
		t.Run(name, func(t *testing.T) {
			plain, watcher := dial[name](t), dial[name](t)
			for _, c := range []msgConn{plain, watcher} {
				c.send(t, map[string]any{"t": "hello", "id": "h"})
				reply(t, c, "h")
			}
			watcher.send(t, map[string]any{"t": "state.watch", "id": "w1", "session": sess.ID(), "keys": []string{"ext:ci/failed", "ext:ci/nothing"}})
			r := reply(t, watcher, "w1")
			now, _, _ := sess.State(ctx, ci, "failed")
			if values, _ := r["value"].(map[string]any)["values"].(map[string]any); r["ok"] != true || fmt.Sprint(values) != "map[ext:ci/failed:"+string(now)+"]" {
				t.Fatalf("state.watch = %v, want ok with the current value of ext:ci/failed only", r)
			}
			for _, c := range []msgConn{plain, watcher} {
				c.send(t, map[string]any{"t": "session.attach", "id": "a", "session": sess.ID(), "since": 0})
				reply(t, c, "a")
			}
			if err := sess.SetState(ctx, ci, "other", json.RawMessage(`"x"`)); err != nil {
				t.Fatal(err)
			}
			if err := sess.SetState(ctx, ci, "failed", json.RawMessage(`2`)); err != nil {
				t.Fatal(err)
			}
			mark := "mark " + name
			if err := sess.Notify(ctx, "", "info", mark); err != nil {
				t.Fatal(err)
			}
			// The backlog from seq 0 and the live frames are filtered alike.
			got := stateKeysUntilNotice(t, watcher, mark)
			var want []string
			logged, _, _ := sess.Read(ctx, 0, 1000)
			for _, f := range logged {
				if strings.Contains(string(f.Data), `"key":"ext:ci/failed"`) {
					want = append(want, "ext:ci/failed")
				}
			}
			if len(want) < 2 || !slices.Equal(got, want) {
				t.Errorf("watcher got state changes of %v, want every change of ext:ci/failed, logged and live: %v", got, want)
			}
			if got := stateKeysUntilNotice(t, plain, mark); len(got) != 0 {
				t.Errorf("a connection that watches nothing got state changes of %v, want none", got)
			}

			// Watching an owner's every key; the choice applies at once.
			watcher.send(t, map[string]any{"t": "state.watch", "id": "w2", "session": sess.ID(), "keys": []string{"ext:ci/*"}})
			reply(t, watcher, "w2")
			if err := sess.SetState(ctx, ci, "other", json.RawMessage(`"y"`)); err != nil {
				t.Fatal(err)
			}
			if err := sess.Notify(ctx, "", "info", mark+" 2"); err != nil {
				t.Fatal(err)
			}
			if got := stateKeysUntilNotice(t, watcher, mark+" 2"); !slices.Equal(got, []string{"ext:ci/other"}) {
				t.Errorf("watcher of ext:ci/* got %v, want ext:ci/other", got)
			}

			watcher.send(t, map[string]any{"t": "state.watch", "id": "w3", "session": sess.ID(), "keys": []string{"failed"}})
			if r := reply(t, watcher, "w3"); r["ok"] != false || !strings.Contains(fmt.Sprint(r["error"]), "<owner>/<key>") {
				t.Errorf("state.watch of a bare key = %v, want a refusal naming the form", r)
			}
		})
	}

	// Every change stays in the log.
	frames, _, err := sess.Read(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	changes := 0
	for _, f := range frames {
		if strings.Contains(string(f.Data), kernel.StateChangedEvent) {
			changes++
		}
	}
	if changes != 7 {
		t.Errorf("the log holds %d state changes, want all 7", changes)
	}

	// Over SSE the keys are a query parameter.
	sse := func(query string) (int, string) {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/events?session="+sess.ID()+"&since=0"+query, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body) // ends when ctx does
		return resp.StatusCode, string(body)
	}
	if _, body := sse(""); strings.Contains(body, kernel.StateChangedEvent) || !strings.Contains(body, "mark ws") {
		t.Errorf("GET /events without watch passed state changes, or not the rest:\n%s", body)
	}
	if _, body := sse("&watch=ext:ci/other"); strings.Count(body, kernel.StateChangedEvent) != 4 || strings.Contains(body, `"key":"ext:ci/failed"`) {
		t.Errorf("GET /events?watch=ext:ci/other = %d state changes, want the 4 of ext:ci/other:\n%s", strings.Count(body, kernel.StateChangedEvent), body)
	}
	if code, body := sse("&watch=nobody/x"); code != http.StatusBadRequest || !strings.Contains(body, "nobody") {
		t.Errorf("GET /events?watch=nobody/x = %d %s, want 400 naming the owner", code, body)
	}
	resp, err := http.Post(hs.URL+"/control", "application/json", strings.NewReader(`{"t":"state.watch","id":"q","session":"`+sess.ID()+`","keys":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "watch=") {
		t.Errorf("POST /control state.watch = %d %s, want 400 naming GET /events?watch=", resp.StatusCode, body)
	}
}
