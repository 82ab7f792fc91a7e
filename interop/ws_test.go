package interop_test

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestWebSocketOneObjectPerMessage drives /ws with the `ws` package, the
// way most clients are written: JSON.parse on each message. The run streams
// 300 deltas at once, which the server writes together; each still comes
// as a message of its own, one JSON object, unless the client's hello asked
// for batches, when several share a message.
func TestWebSocketOneObjectPerMessage(t *testing.T) {
	chunks := make([]string, 300)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("word%d ", i)
	}
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			data := t.TempDir()
			url, _ := serveKernel(t, data, scriptModel(t, data, map[string]any{"text": chunks}))
			args := []string{"ws.mjs", "--url", url}
			if batch {
				args = append(args, "--batch")
			}
			out := nodeScript(t, args...)
			var res struct {
				Messages, Objects, Multi int
				Seqs                     []uint64
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("ws.mjs printed %q: %v", out, err)
			}
			for i := 1; i < len(res.Seqs); i++ {
				if res.Seqs[i] != res.Seqs[i-1]+1 {
					t.Fatalf("seqs %v…: not one after another", res.Seqs[:i+1])
				}
			}
			if len(res.Seqs) < len(chunks) {
				t.Errorf("got %d frames, want at least the %d deltas", len(res.Seqs), len(chunks))
			}
			switch {
			case !batch && (res.Multi != 0 || res.Messages != res.Objects):
				t.Errorf("without batch: %d messages held %d objects (%d held several); want one object a message", res.Messages, res.Objects, res.Multi)
			case batch && res.Multi == 0:
				t.Errorf("with batch: none of %d messages held several of the %d objects; want the burst batched", res.Messages, res.Objects)
			}
		})
	}
}
