package acp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/acp"
)

func TestDecodeMessage(t *testing.T) {
	tests := []struct {
		line    string
		wantErr string
		kind    string
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{}}`, "", "request"},
		{`{"jsonrpc":"2.0","id":"abc","method":"x"}`, "", "request"},
		{`{"jsonrpc":"2.0","method":"session/update","params":{}}`, "", "notification"},
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, "", "response"},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`, "", "error"},
		{`not json`, "a line must be one JSON object", ""},
		{`[{"jsonrpc":"2.0"}]`, "a line must be one JSON object", ""},
		{`{"jsonrpc":"1.0","id":1,"method":"x"}`, "jsonrpc is", ""},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"x"}`, "is not a number or a string", ""},
		{`{"jsonrpc":"2.0"}`, "neither a method nor an id", ""},
		{`{"jsonrpc":"2.0","id":1,"method":`, "not a JSON-RPC message", ""},
	}
	for _, tt := range tests {
		m, err := acp.DecodeMessage([]byte(tt.line))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("DecodeMessage(%s) = %v, want error %q", tt.line, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("DecodeMessage(%s) = %v", tt.line, err)
			continue
		}
		var kind string
		switch {
		case m.IsRequest():
			kind = "request"
		case m.IsNotification():
			kind = "notification"
		case m.IsResponse():
			kind = "response"
		case m.Error != nil:
			kind = "error"
		}
		if kind != tt.kind {
			t.Errorf("DecodeMessage(%s) is a %s, want %s", tt.line, kind, tt.kind)
		}
	}
}

// peer is the far end of a Conn: what the Conn writes arrives on out, and
// lines written to in reach the Conn.
type peer struct {
	out *bufio.Reader
	in  io.WriteCloser
}

func newPair(t *testing.T, h acp.Handler) (*acp.Conn, *peer) {
	t.Helper()
	toConn, fromPeer := io.Pipe()
	toPeer, fromConn := io.Pipe()
	c := acp.NewConn(fromConn, h, nil)
	go c.Serve(toConn)
	t.Cleanup(func() { fromPeer.Close(); fromConn.Close() })
	return c, &peer{out: bufio.NewReader(toPeer), in: fromPeer}
}

func (p *peer) read(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return m
}

func (p *peer) write(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// TestConnKeepsIDsAndSkipsBadLines: a string id is echoed byte for byte, a
// line that is not JSON and a reply to an unknown id are skipped, a line
// over 64 KiB arrives whole, and the connection goes on.
func TestConnKeepsIDsAndSkipsBadLines(t *testing.T) {
	got := make(chan *acp.Message, 4)
	var c *acp.Conn
	c, p := newPair(t, func(m *acp.Message) {
		if m.IsRequest() {
			_ = c.Reply(m.ID, map[string]int{"n": len(m.Params)})
		}
		got <- m
	})
	p.write(t, `this is not json`)
	p.write(t, `{"jsonrpc":"2.0","id":99,"result":{}}`)
	p.write(t, `{"jsonrpc":"2.0","id":"req-\u00e9 1","method":"ping","params":{}}`)
	reply := p.read(t)
	if string(reply["id"]) != `"req-\u00e9 1"` {
		t.Errorf("reply id = %s, want the request's id byte for byte", reply["id"])
	}
	big := `{"jsonrpc":"2.0","method":"session/update","params":{"text":"` + strings.Repeat("x", 200<<10) + `"}}`
	p.write(t, big)
	select {
	case m := <-got:
		if m.Method != "ping" {
			t.Fatalf("first handled message = %s", m.Method)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no request handled")
	}
	select {
	case m := <-got:
		if len(m.Params) < 200<<10 {
			t.Errorf("a %d-byte line arrived as %d bytes of params", len(big), len(m.Params))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long line never arrived")
	}

	// A call gets its own response, whatever its id looks like.
	res := make(chan json.RawMessage, 1)
	go func() {
		r, err := c.Call(context.Background(), "initialize", map[string]int{"protocolVersion": 1})
		if err != nil {
			t.Error(err)
		}
		res <- r
	}()
	call := p.read(t)
	p.write(t, `{"jsonrpc":"2.0","id":`+string(call["id"])+`,"result":{"protocolVersion":1}}`)
	if r := <-res; !bytes.Contains(r, []byte(`"protocolVersion":1`)) {
		t.Errorf("Call() = %s", r)
	}
	// An error answer is a *RPCError.
	go func() {
		_, err := c.Call(context.Background(), "session/new", nil)
		var re *acp.RPCError
		if !asRPC(err, &re) || re.Code != acp.CodeAuthRequired {
			t.Errorf("Call() error = %v, want code -32000", err)
		}
		res <- nil
	}()
	call = p.read(t)
	p.write(t, `{"jsonrpc":"2.0","id":`+string(call["id"])+`,"error":{"code":-32000,"message":"Authentication required"}}`)
	<-res
}

func asRPC(err error, target **acp.RPCError) bool {
	re, ok := err.(*acp.RPCError)
	if ok {
		*target = re
	}
	return ok
}

// TestConnEndFailsCalls: a call waiting when the peer's output ends fails.
func TestConnEndFailsCalls(t *testing.T) {
	c, p := newPair(t, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "session/prompt", nil)
		errc <- err
	}()
	p.read(t)
	p.in.Close()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "output ended") {
			t.Errorf("Call() = %v, want the connection's end", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call still waits after the connection ended")
	}
	<-c.Done()
}

func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
		`{"jsonrpc":"2.0","id":"x","result":null}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
		`[]`, `{}`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := acp.DecodeMessage(line)
		if err != nil {
			return
		}
		// A decoded message is one of the kinds, and encodes again.
		if !m.IsRequest() && !m.IsNotification() && !m.IsResponse() && m.Error == nil {
			t.Fatalf("DecodeMessage(%q) is no kind of message", line)
		}
		if _, err := json.Marshal(m); err != nil {
			t.Fatalf("re-encode %q: %v", line, err)
		}
	})
}
