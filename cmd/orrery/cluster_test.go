package main_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/getorrery/orrery/internal/natstest"
)

// testFailover: two nodes share a log in a three-server NATS cluster (R3).
// The node that owns a session is killed mid-run; the other node, asked
// for the session, waits out the dead node's lease, takes it, closes the
// interrupted run with exactly one RUN_ERROR interrupted, keeps every
// frame a client saw, and runs the next turn.
func testFailover(t *testing.T, bin string) {
	srvs := natstest.Cluster(t, 3)
	urls := natstest.URLs(srvs...)
	cfgPath := filepath.Join(t.TempDir(), "orrery.toml")
	if err := os.WriteFile(cfgPath, []byte("[nats]\nlease_ttl = \"2s\"\nreplicas = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := environ(t)
	scriptPath := filepath.Join(t.TempDir(), "script.json")
	chunks := make([]string, 200)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("chunk%d ", i)
	}
	model := writeScript(t, scriptPath, map[string]any{"text": chunks, "delay_ms": 50})
	node := func() *server {
		return serve(t, bin, env, "--data", t.TempDir(), "--model", model, "--config", cfgPath, "--store", "jetstream", "--nats", urls)
	}
	a, b := node(), node()

	var created struct{ Session string }
	a.control(map[string]any{"t": "session.new", "id": "1"}, &created)
	sess := created.Session
	var sent struct {
		RunID string `json:"runId"`
	}
	a.control(map[string]any{"t": "run.send", "id": "2", "session": sess, "input": map[string]any{"text": "write a lot"}}, &sent)
	texts := 0
	before := a.events(sess, 0, func(f seen) bool {
		if f.typ == "TEXT_MESSAGE_CONTENT" {
			texts++
		}
		return texts < 5
	})
	a.kill()
	killed := time.Now()

	writeScript(t, scriptPath, map[string]any{"text": []string{"fresh ", "answer"}})
	log := b.read(sess)
	t.Logf("node b closed the dead node's run %v after the kill; %d frames seen before it, %d logged", time.Since(killed).Round(10*time.Millisecond), len(before), len(log.Frames))
	for i, f := range before {
		if f.seq != uint64(i+1) || f.seq > uint64(len(log.Frames)) || !bytes.Equal(log.Frames[f.seq-1], f.data) {
			t.Fatalf("frame seq %d seen on node a before the kill = %s, want it in the log unchanged", f.seq, f.data)
		}
	}
	started := -1
	var terminals []frameHead
	for i, d := range log.Frames {
		f := decode(t, d)
		if f.Metadata.Orrery.Seq != uint64(i+1) {
			t.Fatalf("logged frame %d has seq %d (gap or duplicate)", i, f.Metadata.Orrery.Seq)
		}
		if f.Type == "RUN_STARTED" && f.RunID == sent.RunID {
			started = i
		}
		if started >= 0 && (f.Type == "RUN_ERROR" || f.Type == "RUN_FINISHED") {
			terminals = append(terminals, f)
		}
	}
	last := decode(t, log.Frames[len(log.Frames)-1])
	if started < 0 || len(terminals) != 1 || last.Type != "RUN_ERROR" || last.Code != "interrupted" {
		t.Fatalf("run %s (started at %d) ends with %+v, want exactly one RUN_ERROR interrupted, last", sent.RunID, started, terminals)
	}

	var again struct {
		RunID string `json:"runId"`
	}
	b.control(map[string]any{"t": "run.send", "id": "3", "session": sess, "input": map[string]any{"text": "again"}}, &again)
	after := b.events(sess, log.Head, func(f seen) bool { return f.typ != "RUN_FINISHED" && f.typ != "RUN_ERROR" })
	if len(after) == 0 || after[0].seq != log.Head+1 {
		t.Fatalf("the next run's first frame on node b = %+v, want seq %d", after, log.Head+1)
	}
	if f := decode(t, after[len(after)-1].data); f.Type != "RUN_FINISHED" || f.RunID != again.RunID {
		t.Errorf("the next run ended with %s of run %s, want RUN_FINISHED of %s", f.Type, f.RunID, again.RunID)
	}
}
