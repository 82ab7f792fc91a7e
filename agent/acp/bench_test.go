package acp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/getorrery/orrery/agent/acp"
	"github.com/getorrery/orrery/protocol"
)

// updateLines is 1,000 session/update lines of 64-byte text chunks, as an
// agent streams an answer.
var updateLines = func() []byte {
	var b bytes.Buffer
	for range 1000 {
		b.WriteString(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","messageId":"msg_1","content":{"type":"text","text":"` + strings.Repeat("x", 64) + `"}}}}` + "\n")
	}
	return b.Bytes()
}()

// BenchmarkConnReadUpdates is the JSON-RPC layer reading and dispatching
// updates; compare with BenchmarkBaselineReadLines, the same lines only
// split.
func BenchmarkConnReadUpdates(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(updateLines)))
	for b.Loop() {
		n := 0
		c := acp.NewConn(io.Discard, func(m *acp.Message) { n++ }, nil)
		_ = c.Serve(bytes.NewReader(updateLines))
		if n != 1000 {
			b.Fatalf("handled %d updates, want 1000", n)
		}
	}
}

// BenchmarkBaselineReadLines splits the same lines and does nothing else.
func BenchmarkBaselineReadLines(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(updateLines)))
	for b.Loop() {
		br := bufio.NewReaderSize(bytes.NewReader(updateLines), 64<<10)
		n := 0
		for {
			if _, err := br.ReadBytes('\n'); err != nil {
				break
			}
			n++
		}
		if n != 1000 {
			b.Fatalf("read %d lines", n)
		}
	}
}

// BenchmarkProjectText projects a built-in agent's text frame into an ACP
// update (what the ori face and orrery acp do per frame); compare with
// BenchmarkBaselineEncodeFrame, encoding the frame itself.
func BenchmarkProjectText(b *testing.B) {
	b.ReportAllocs()
	ev := &protocol.TextMessageContent{MessageID: "msg_1", Delta: strings.Repeat("x", 64)}
	var p acp.Projector
	for b.Loop() {
		if len(p.Updates(ev)) != 1 {
			b.Fatal("no update")
		}
	}
}

// BenchmarkBaselineEncodeFrame encodes the same frame as JSON.
func BenchmarkBaselineEncodeFrame(b *testing.B) {
	b.ReportAllocs()
	ev := &protocol.TextMessageContent{MessageID: "msg_1", Delta: strings.Repeat("x", 64)}
	for b.Loop() {
		if _, err := json.Marshal(protocol.Stamp(ev)); err != nil {
			b.Fatal(err)
		}
	}
}
