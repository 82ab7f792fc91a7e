package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/internal/natstest"
)

// testFailover: two nodes share a log in a three-server NATS cluster (R3).
// The node that owns a session is killed mid-run; the other node, whose
// client watches the session, waits out the dead node's lease, takes the
// session, and closes the interrupted run with exactly one RUN_ERROR
// interrupted, which its client sees; every frame a client saw is kept,
// and the next turn runs there.
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
	// A client of node b watches the session as node a dies.
	watched := make(chan []seen, 1)
	go func() {
		watched <- b.events(sess, 0, func(f seen) bool { return f.typ != "RUN_ERROR" })
	}()
	waitHead(t, b, sess, uint64(len(before)))
	a.kill()
	killed := time.Now()
	writeScript(t, scriptPath, map[string]any{"text": []string{"fresh ", "answer"}})
	onB := <-watched
	t.Logf("node b's client saw the dead node's run closed %v after the kill (lease TTL 2s)", time.Since(killed).Round(10*time.Millisecond))
	if last := decode(t, onB[len(onB)-1].data); last.Code != "interrupted" {
		t.Fatalf("node b's client saw the run end with %s %q, want RUN_ERROR interrupted", last.Type, last.Code)
	}
	log := b.read(sess)
	for i, f := range onB {
		if f.seq != uint64(i+1) || !bytes.Equal(f.data, log.Frames[i]) {
			t.Fatalf("node b's client got frame %d = seq %d %s, want the log's", i, f.seq, f.data)
		}
	}
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

// testAnyNode: three nodes share a log in a three-server NATS cluster. A
// session made on one is read on the others; a prompt sent to a node that
// does not own the session is forwarded to the one that does, and clients
// streaming the session from the other two nodes see the turn, every
// frame once, in order, the bytes the owner logged.
func testAnyNode(t *testing.T, bin string) {
	srvs := natstest.Cluster(t, 3)
	cfgPath := filepath.Join(t.TempDir(), "orrery.toml")
	if err := os.WriteFile(cfgPath, []byte("[nats]\nreplicas = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := environ(t)
	model := writeScript(t, filepath.Join(t.TempDir(), "script.json"),
		map[string]any{"text": []string{"one ", "two ", "three"}},
		map[string]any{"text": []string{"four ", "five ", "six"}, "delay_ms": 20})
	nodes := make([]*server, 3)
	for i := range nodes {
		nodes[i] = serve(t, bin, env, "--data", t.TempDir(), "--model", model, "--config", cfgPath, "--store", "jetstream", "--nats", srvs[i].ClientURL())
	}
	a, b, c := nodes[0], nodes[1], nodes[2]

	// A client of node b's session list (/api/live) sees the session node
	// a makes, and its run start and end, as they happen.
	liveCtx, liveCancel := context.WithTimeout(context.Background(), waitLimit)
	defer liveCancel()
	liveReq, _ := http.NewRequestWithContext(liveCtx, http.MethodGet, b.url+"/api/live", nil)
	liveResp, err := http.DefaultClient.Do(liveReq)
	if err != nil {
		t.Fatal(err)
	}
	defer liveResp.Body.Close()
	liveEvents := bufio.NewScanner(liveResp.Body)
	nextLive := func() (kind, session string) {
		t.Helper()
		for liveEvents.Scan() {
			if data, ok := strings.CutPrefix(liveEvents.Text(), "data: "); ok {
				var e struct {
					Type    string
					Session struct{ ID string }
				}
				if err := json.Unmarshal([]byte(data), &e); err != nil {
					t.Fatalf("/api/live event %s: %v", data, err)
				}
				return e.Type, e.Session.ID
			}
		}
		t.Fatalf("node b's /api/live ended: %v", liveEvents.Err())
		return "", ""
	}
	if kind, _ := nextLive(); kind != "snapshot" {
		t.Fatalf("node b's /api/live begins with %q, want snapshot", kind)
	}

	var created struct{ Session string }
	a.control(map[string]any{"t": "session.new", "id": "1"}, &created)
	sess := created.Session
	a.control(map[string]any{"t": "run.send", "id": "2", "session": sess, "input": map[string]any{"text": "first"}}, nil)
	first := a.events(sess, 0, func(f seen) bool { return f.typ != "RUN_FINISHED" })
	var kinds []string
	for len(kinds) == 0 || kinds[len(kinds)-1] != "ended" {
		kind, id := nextLive()
		if id == sess {
			kinds = append(kinds, kind)
		}
	}
	if !slices.Contains(kinds, "created") || !slices.Contains(kinds, "running") {
		t.Errorf("node b's /api/live told of session %s made and run on node a: %v, want created, running … ended", sess, kinds)
	}
	liveCancel()
	if got := b.read(sess); len(got.Frames) != len(first) {
		t.Fatalf("node b reads %d frames of the session, node a streamed %d", len(got.Frames), len(first))
	}

	// Clients on b and c stream from the head; the prompt goes to c,
	// which a owns the session for.
	head := uint64(len(first))
	streams := make(chan []seen, 2)
	for _, n := range []*server{b, c} {
		go func() {
			streams <- n.events(sess, head, func(f seen) bool { return f.typ != "RUN_FINISHED" })
		}()
	}
	var sent struct {
		RunID string `json:"runId"`
	}
	deadline := time.Now().Add(waitLimit)
	for c.read(sess).Head < head && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	c.control(map[string]any{"t": "run.send", "id": "3", "session": sess, "input": map[string]any{"text": "second"}}, &sent)
	if sent.RunID == "" {
		t.Fatal("run.send on node c gave no runId")
	}
	got := [][]seen{<-streams, <-streams}
	log := a.read(sess)
	for _, got := range got {
		if len(got) == 0 || got[0].seq != head+1 {
			t.Fatalf("a follower's stream starts with %+v, want seq %d", got, head+1)
		}
		for i, f := range got {
			if f.seq != head+uint64(i)+1 || f.seq > uint64(len(log.Frames)) || !bytes.Equal(f.data, log.Frames[f.seq-1]) {
				t.Fatalf("a follower's frame %d = seq %d %s, want the owner's seq %d", i, f.seq, f.data, head+uint64(i)+1)
			}
		}
		if last := decode(t, got[len(got)-1].data); last.Type != "RUN_FINISHED" || last.RunID != sent.RunID {
			t.Fatalf("a follower's stream ends with %s of %s, want RUN_FINISHED of %s", last.Type, last.RunID, sent.RunID)
		}
	}

	// orrery node status names the three nodes and where each serves,
	// that node a owns the session, and a healthy R3 stream; with one of
	// the NATS servers gone it says which replica is missing, exiting 1.
	statusArgs := []string{"node", "status", "--json", "--config", cfgPath, "--store", "jetstream", "--nats", srvs[0].ClientURL()}
	var st struct {
		Healthy bool
		Status  struct {
			Nodes []struct {
				Addr     string
				Sessions int
			}
			Leases []struct {
				Session string
				Node    struct{ Addr string }
			}
			Streams []struct {
				Name     string
				Replicas int
				Problem  string
			}
		}
	}
	r := orrery(t, bin, env, statusArgs...)
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
		t.Fatalf("node status: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	serves := map[string]int{}
	for _, n := range st.Status.Nodes {
		serves[n.Addr] = n.Sessions
	}
	if len(serves) != 3 || serves[a.url] != 1 || serves[b.url] != 0 || serves[c.url] != 0 {
		t.Errorf("node status nodes = %+v, want %s owning 1 session, %s and %s none", st.Status.Nodes, a.url, b.url, c.url)
	}
	if len(st.Status.Leases) != 1 || st.Status.Leases[0].Session != sess || st.Status.Leases[0].Node.Addr != a.url {
		t.Errorf("node status leases = %+v, want session %s owned by %s", st.Status.Leases, sess, a.url)
	}
	if !st.Healthy || len(st.Status.Streams) == 0 || st.Status.Streams[0].Name != "ORRERY" || st.Status.Streams[0].Replicas != 3 {
		t.Errorf("node status streams = %+v (healthy %v), want a healthy ORRERY of 3 replicas first", st.Status.Streams, st.Healthy)
	}
	srvs[2].Stop()
	deadline = time.Now().Add(waitLimit)
	for {
		r = orrery(t, bin, env, statusArgs...)
		if r.code == 1 && strings.Contains(r.stderr, "not healthy") && (strings.Contains(r.stderr, "offline") || strings.Contains(r.stderr, "not current")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node status with a NATS server stopped: exit %d, %s %s; want exit 1 naming the offline replica", r.code, r.stdout, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// testConsentElsewhere: a client on a node that does not own the session
// draws consent. The owner's agent asks about a tool call; the question
// reaches that client through its node's follower, its answer goes back
// to the owner, the call runs, and a second answer is refused: the first
// wins across the cluster.
func testConsentElsewhere(t *testing.T, bin string) {
	srvs := natstest.Cluster(t, 3)
	work := t.TempDir()
	env := environ(t)
	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	model := writeScript(t, filepath.Join(t.TempDir(), "script.json"),
		m("text", []string{"ready"}),
		m("tool_calls", []map[string]any{m("name", "write_file", "args", m("path", "notes.md", "content", "hello"))}),
		m("text", []string{"written"}))
	a := serveIn(t, bin, env, work, "--data", t.TempDir(), "--model", model, "--store", "jetstream", "--nats", srvs[0].ClientURL())
	b := serveIn(t, bin, env, work, "--data", t.TempDir(), "--model", model, "--store", "jetstream", "--nats", srvs[1].ClientURL())

	var created struct{ Session string }
	a.control(map[string]any{"t": "session.new", "id": "1"}, &created)
	sess := created.Session
	a.control(map[string]any{"t": "run.send", "id": "2", "session": sess, "input": map[string]any{"text": "hi"}}, nil)
	first := a.events(sess, 0, func(f seen) bool { return f.typ != "RUN_FINISHED" })

	// A client of node b that draws consent watches from the head.
	const draws = "client=web&draws=thread,tools,consent"
	type asked struct {
		request string
		frames  []seen
	}
	questions := make(chan asked, 1)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/events?session=%s&since=%d&%s", b.url, sess, len(first), draws), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events on node b = %v %v", resp, err)
	}
	defer resp.Body.Close()
	go func() {
		var got []seen
		request := ""
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				questions <- asked{request, got}
				return
			}
			data, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "data: ")
			if !ok {
				continue
			}
			f := decode(t, []byte(data))
			got = append(got, seen{seq: f.Metadata.Orrery.Seq, typ: f.Type, data: []byte(data)})
			var c struct {
				Name  string `json:"name"`
				Value struct {
					Request string `json:"request"`
				} `json:"value"`
			}
			json.Unmarshal([]byte(data), &c)
			if c.Name == "orrery.consent.requested" {
				request = c.Value.Request
			}
			if f.Type == "RUN_FINISHED" || f.Type == "RUN_ERROR" {
				questions <- asked{request, got}
				return
			}
			if request != "" && c.Name == "orrery.consent.requested" {
				questions <- asked{request, nil}
			}
		}
	}()
	// The prompt goes to node b too, which forwards it to a.
	b.control(map[string]any{"t": "run.send", "id": "3", "session": sess, "input": map[string]any{"text": "write notes"}}, nil)
	q := <-questions
	if q.request == "" {
		t.Fatalf("node b's client saw no consent question; its stream: %d frames, last %s", len(q.frames), lastType(q.frames))
	}
	answer := func(n *server) (int, string) {
		body, _ := json.Marshal(map[string]any{"t": "consent.answer", "id": "c", "session": sess, "request": q.request, "option": "allow_once"})
		resp, err := http.Post(n.url+"/control?"+draws, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	if code, body := answer(b); code != http.StatusOK {
		t.Fatalf("consent.answer on node b = %d %s, want 200", code, body)
	}
	if code, body := answer(a); code == http.StatusOK {
		t.Errorf("a second consent.answer, on node a = %d %s, want a refusal: the first answer won", code, body)
	}
	end := <-questions
	if last := lastType(end.frames); last != "RUN_FINISHED" {
		t.Fatalf("the run ended with %s on node b's stream, want RUN_FINISHED", last)
	}
	if data, err := os.ReadFile(filepath.Join(work, "notes.md")); err != nil || string(data) != "hello" {
		t.Errorf("notes.md = %q, %v; want the allowed call to have written hello", data, err)
	}
}

func lastType(fs []seen) string {
	if len(fs) == 0 {
		return "nothing"
	}
	return fs[len(fs)-1].typ
}

// testKillOwnerTenTimes: three nodes; ten times over, the node that owns
// a session is killed mid-run while a client of another node watches.
// Each time the watcher's node takes the session over and its client sees
// exactly one RUN_ERROR interrupted; the killed node comes back on its
// data dir. At the end the log's seqs run 1..head with no seq reused,
// every run has one start and one end, and a last run started from any
// node finishes.
func testKillOwnerTenTimes(t *testing.T, bin string) {
	srvs := natstest.Cluster(t, 3)
	cfgPath := filepath.Join(t.TempDir(), "orrery.toml")
	if err := os.WriteFile(cfgPath, []byte("[nats]\nlease_ttl = \"1s\"\nreplicas = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := environ(t)
	chunks := make([]string, 100)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("c%d ", i)
	}
	turns := make([]map[string]any, 40)
	for i := range turns {
		turns[i] = map[string]any{"text": chunks, "delay_ms": 30}
	}
	model := writeScript(t, filepath.Join(t.TempDir(), "script.json"), turns...)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	start := func(i int) *server {
		return serve(t, bin, env, "--data", dirs[i], "--model", model, "--config", cfgPath, "--store", "jetstream", "--nats", srvs[i].ClientURL())
	}
	nodes := []*server{start(0), start(1), start(2)}
	var created struct{ Session string }
	nodes[0].control(map[string]any{"t": "session.new", "id": "new"}, &created)
	sess := created.Session
	owner := 0 // the node a run is sent to first writes the session
	const kills = 10
	for k := range kills {
		watcher := (owner + 1 + k%2) % 3
		head := nodes[watcher].read(sess).Head
		watched := make(chan []seen, 1)
		started := make(chan struct{})
		go func() {
			texts := 0
			watched <- nodes[watcher].events(sess, head, func(f seen) bool {
				if f.typ == "TEXT_MESSAGE_CONTENT" {
					if texts++; texts == 3 {
						close(started)
					}
				}
				return f.typ != "RUN_ERROR" && f.typ != "RUN_FINISHED"
			})
		}()
		nodes[owner].control(map[string]any{"t": "run.send", "id": fmt.Sprint("r", k), "session": sess, "input": map[string]any{"text": "go"}}, nil)
		select {
		case <-started:
		case <-time.After(waitLimit):
			t.Fatalf("kill %d: node %d's client saw the run on node %d start no text", k, watcher, owner)
		}
		nodes[owner].kill()
		got := <-watched
		if last := decode(t, got[len(got)-1].data); last.Type != "RUN_ERROR" || last.Code != "interrupted" {
			t.Fatalf("kill %d: the watcher's stream ends with %s %q, want RUN_ERROR interrupted", k, last.Type, last.Code)
		}
		nodes[owner] = start(owner)
		owner = watcher
	}

	// A last run, sent to a node that does not own the session, finishes.
	other := (owner + 1) % 3
	head := nodes[other].read(sess).Head
	var sent struct {
		RunID string `json:"runId"`
	}
	done := make(chan []seen, 1)
	go func() {
		done <- nodes[other].events(sess, head, func(f seen) bool { return f.typ != "RUN_ERROR" && f.typ != "RUN_FINISHED" })
	}()
	nodes[other].control(map[string]any{"t": "run.send", "id": "last", "session": sess, "input": map[string]any{"text": "go"}}, &sent)
	final := <-done
	if last := decode(t, final[len(final)-1].data); last.Type != "RUN_FINISHED" || last.RunID != sent.RunID {
		t.Fatalf("the last run, sent to node %d, ended with %s of %s; want RUN_FINISHED of %s", other, last.Type, last.RunID, sent.RunID)
	}
	// Read where the last run was seen to end: a follower's view of the
	// log may be a moment behind its owner's.
	log := nodes[other].read(sess)
	starts, ends, interrupted := 0, 0, 0
	for i, d := range log.Frames {
		f := decode(t, d)
		if f.Metadata.Orrery.Seq != uint64(i+1) {
			t.Fatalf("logged frame %d has seq %d: a seq was reused or skipped", i, f.Metadata.Orrery.Seq)
		}
		switch f.Type {
		case "RUN_STARTED":
			starts++
		case "RUN_FINISHED", "RUN_ERROR":
			ends++
			if f.Code == "interrupted" {
				interrupted++
			}
		}
	}
	if starts != kills+1 || ends != kills+1 || interrupted != kills {
		t.Errorf("the log has %d runs started, %d ended, %d interrupted; want %d, %d, %d", starts, ends, interrupted, kills+1, kills+1, kills)
	}
}

// testPartition: the node that owns a session mid-run is cut off from NATS
// (the one server it knows stops; the other two go on). It can no longer
// renew its lease, so it stops writing; a node that follows the session
// takes it over once the lease runs out and closes the run with one
// RUN_ERROR interrupted. Every frame a client saw is in the log, and the
// log's seqs run 1..head.
func testPartition(t *testing.T, bin string) {
	srvs := natstest.Cluster(t, 3)
	cfgPath := filepath.Join(t.TempDir(), "orrery.toml")
	if err := os.WriteFile(cfgPath, []byte("[nats]\nlease_ttl = \"2s\"\nreplicas = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := environ(t)
	chunks := make([]string, 300)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("c%d ", i)
	}
	model := writeScript(t, filepath.Join(t.TempDir(), "script.json"), map[string]any{"text": chunks, "delay_ms": 20})
	a := serve(t, bin, env, "--data", t.TempDir(), "--model", model, "--config", cfgPath, "--store", "jetstream", "--nats", srvs[0].ClientURL())
	b := serve(t, bin, env, "--data", t.TempDir(), "--model", model, "--config", cfgPath, "--store", "jetstream", "--nats", srvs[1].ClientURL())

	var created struct{ Session string }
	a.control(map[string]any{"t": "session.new", "id": "1"}, &created)
	sess := created.Session
	watched := make(chan []seen, 1)
	started := make(chan struct{})
	go func() {
		texts := 0
		watched <- b.events(sess, 0, func(f seen) bool {
			if f.typ == "TEXT_MESSAGE_CONTENT" {
				if texts++; texts == 5 {
					close(started)
				}
			}
			return f.typ != "RUN_ERROR" && f.typ != "RUN_FINISHED"
		})
	}()
	a.control(map[string]any{"t": "run.send", "id": "2", "session": sess, "input": map[string]any{"text": "go"}}, nil)
	<-started
	srvs[0].Stop() // node a's only server: a is cut off
	got := <-watched
	if last := decode(t, got[len(got)-1].data); last.Type != "RUN_ERROR" || last.Code != "interrupted" {
		t.Fatalf("node b's client saw the run end with %s %q, want RUN_ERROR interrupted", last.Type, last.Code)
	}
	log := b.read(sess)
	for i, f := range got {
		if f.seq != uint64(i+1) || f.seq > uint64(len(log.Frames)) || !bytes.Equal(f.data, log.Frames[f.seq-1]) {
			t.Fatalf("frame %d seen on node b = seq %d %s, want it in the log unchanged", i, f.seq, f.data)
		}
	}
	terminals := 0
	for i, d := range log.Frames {
		f := decode(t, d)
		if f.Metadata.Orrery.Seq != uint64(i+1) {
			t.Fatalf("logged frame %d has seq %d", i, f.Metadata.Orrery.Seq)
		}
		if f.Type == "RUN_ERROR" || f.Type == "RUN_FINISHED" {
			terminals++
		}
	}
	if terminals != 1 || uint64(len(log.Frames)) != log.Head {
		t.Errorf("the log has %d run ends and %d frames at head %d; want one end, and frames 1..head", terminals, len(log.Frames), log.Head)
	}
}

// testTokensAcrossNodes: the nodes of a cluster admit the cluster's
// tokens. The first node to start gives a new cluster the tokens of its
// data dir; a token made with orrery node token create --nats admits on
// every node; a revoke with the same flags refuses it everywhere and ends
// the stream it opened on another node. Requests carry X-Forwarded-For, so
// a loopback connection counts as a stranger's, as behind a proxy.
func testTokensAcrossNodes(t *testing.T, bin string) {
	srvs := natstest.Cluster(t, 3)
	urls := natstest.URLs(srvs...)
	cfgPath := filepath.Join(t.TempDir(), "orrery.toml")
	if err := os.WriteFile(cfgPath, []byte("[nats]\nreplicas = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := environ(t)
	dataA := t.TempDir()
	var first, second struct{ Token, ID string }
	r := orrery(t, bin, env, "node", "token", "create", "--name", "first", "--json", "--data", dataA)
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &first) != nil {
		t.Fatalf("token create --data: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	a := serve(t, bin, env, "--data", dataA, "--config", cfgPath, "--store", "jetstream", "--nats", srvs[0].ClientURL())
	b := serve(t, bin, env, "--data", t.TempDir(), "--config", cfgPath, "--store", "jetstream", "--nats", srvs[1].ClientURL())

	remote := func(s *server, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.url+"/control", strings.NewReader(`{"t":"session.list","id":"1"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := remote(b, ""); code != http.StatusUnauthorized {
		t.Fatalf("node b, no token: %d, want 401", code)
	}
	if code := remote(b, first.Token); code != http.StatusOK {
		t.Fatalf("node b with the token of node a's data dir: %d, want 200 (the cluster takes the first node's tokens)", code)
	}

	cluster := []string{"--config", cfgPath, "--store", "jetstream", "--nats", urls}
	r = orrery(t, bin, env, append([]string{"node", "token", "create", "--name", "second", "--json"}, cluster...)...)
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &second) != nil {
		t.Fatalf("token create --nats: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	for name, s := range map[string]*server{"a": a, "b": b} {
		if code := remote(s, second.Token); code != http.StatusOK {
			t.Errorf("node %s with the token made by the CLI in NATS: %d, want 200", name, code)
		}
	}
	r = orrery(t, bin, env, append([]string{"node", "token", "list", "--json"}, cluster...)...)
	if r.code != 0 || !strings.Contains(r.stdout, first.ID) || !strings.Contains(r.stdout, second.ID) || strings.Contains(r.stdout, first.Token) {
		t.Errorf("token list --nats: exit %d %s; want both ids and no secret", r.code, r.stdout)
	}

	// A stream node b serves to the first token ends when it is revoked.
	var created struct{ Session string }
	a.control(map[string]any{"t": "session.new", "id": "1"}, &created)
	req, _ := http.NewRequest(http.MethodGet, b.url+"/events?session="+created.Session, nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	req.Header.Set("Authorization", "Bearer "+first.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events on node b with the first token: %d, want 200", resp.StatusCode)
	}
	ended := make(chan string, 1)
	go func() {
		body, _ := io.ReadAll(resp.Body)
		ended <- string(body)
	}()
	r = orrery(t, bin, env, append([]string{"node", "token", "revoke", "first"}, cluster...)...)
	if r.code != 0 {
		t.Fatalf("token revoke --nats: exit %d %s", r.code, r.stderr)
	}
	select {
	case <-ended:
	case <-time.After(waitLimit):
		t.Fatal("node b's stream of the revoked token did not end")
	}
	for name, s := range map[string]*server{"a": a, "b": b} {
		if code := remote(s, first.Token); code != http.StatusUnauthorized {
			t.Errorf("node %s with the revoked token: %d, want 401", name, code)
		}
		if code := remote(s, second.Token); code != http.StatusOK {
			t.Errorf("node %s with the token not revoked: %d, want 200", name, code)
		}
	}
}

// testIdleMoves: a session its owner has unloaded after a quiet spell
// ([kernel] idle_unload) holds no lease, so the next node asked to run it
// takes it and runs the turn itself, the log going on from the same head.
func testIdleMoves(t *testing.T, bin string) {
	srvs := natstest.Cluster(t, 3)
	cfgPath := filepath.Join(t.TempDir(), "orrery.toml")
	if err := os.WriteFile(cfgPath, []byte("[kernel]\nidle_unload = \"1s\"\n\n[nats]\nreplicas = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := environ(t)
	model := writeScript(t, filepath.Join(t.TempDir(), "script.json"),
		map[string]any{"text": []string{"on ", "a"}}, map[string]any{"text": []string{"on ", "b"}})
	node := func(i int) *server {
		return serve(t, bin, env, "--data", t.TempDir(), "--model", model, "--config", cfgPath, "--store", "jetstream", "--nats", srvs[i].ClientURL())
	}
	a, b := node(0), node(1)
	leases := func() map[string]string {
		t.Helper()
		r := orrery(t, bin, env, "node", "status", "--json", "--config", cfgPath, "--store", "jetstream", "--nats", srvs[2].ClientURL())
		var st struct {
			Status struct {
				Leases []struct {
					Session string
					Node    struct{ Addr string }
				}
			}
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
			t.Fatalf("node status: exit %d %s %s", r.code, r.stdout, r.stderr)
		}
		out := map[string]string{}
		for _, l := range st.Status.Leases {
			out[l.Session] = l.Node.Addr
		}
		return out
	}

	// A write to a session that does not exist is refused, and leaves no
	// lease behind (one would be renewed for ever).
	bogus := "../../x\x1b[2J;rm -rf /"
	body, _ := json.Marshal(map[string]any{"t": "run.send", "id": "0", "session": bogus, "input": map[string]any{"text": "x"}})
	resp, err := http.Post(b.url+"/control", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("run.send to an unknown session: %d, want 404", resp.StatusCode)
	}
	if owner, ok := leases()[bogus]; ok {
		t.Errorf("run.send to an unknown session left a lease held by %s", owner)
	}

	var created struct{ Session string }
	a.control(map[string]any{"t": "session.new", "id": "1"}, &created)
	sess := created.Session
	a.control(map[string]any{"t": "run.send", "id": "2", "session": sess, "input": map[string]any{"text": "first"}}, nil)
	first := a.events(sess, 0, func(f seen) bool { return f.typ != "RUN_FINISHED" })
	if owner := leases()[sess]; owner != a.url {
		t.Fatalf("after a run on node a the session's lease is %q's, want %s", owner, a.url)
	}
	deadline := time.Now().Add(waitLimit)
	for leases()[sess] != "" {
		if time.Now().After(deadline) {
			t.Fatalf("node a still holds the lease of session %s, quiet past idle_unload", sess)
		}
		time.Sleep(250 * time.Millisecond)
	}

	var sent struct {
		RunID string `json:"runId"`
	}
	b.control(map[string]any{"t": "run.send", "id": "3", "session": sess, "input": map[string]any{"text": "second"}}, &sent)
	second := b.events(sess, uint64(len(first)), func(f seen) bool { return f.typ != "RUN_FINISHED" })
	if len(second) == 0 || second[0].seq != uint64(len(first))+1 {
		t.Fatalf("the second run's frames on node b = %+v, want them from seq %d", second, len(first)+1)
	}
	if owner := leases()[sess]; owner != b.url {
		t.Errorf("after the second run the session's lease is %q's, want node b's %s: the turn ran on the node asked", owner, b.url)
	}
	if got := a.read(sess); got.Head != uint64(len(first)+len(second)) {
		t.Errorf("node a reads head %d, want %d: both runs in one log", got.Head, len(first)+len(second))
	}
}

// testEmbeddedCluster: three orrery node processes, each running its own
// NATS server (--nats-embed) routed to the other two with a shared secret
// (--nats-cluster-secret), are a cluster with
// nothing else: the first node's token admits on the others, a session
// made on one streams on another, and when the node that runs a turn is
// killed (its NATS server with it) a client of another node sees the run
// closed with RUN_ERROR interrupted, and the next turn runs on the third.
func testEmbeddedCluster(t *testing.T, bin string) {
	env := environ(t)
	cfgPath := filepath.Join(t.TempDir(), "orrery.toml")
	if err := os.WriteFile(cfgPath, []byte("[nats]\nlease_ttl = \"2s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	scriptPath := filepath.Join(t.TempDir(), "script.json")
	chunks := make([]string, 200)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("chunk%d ", i)
	}
	model := writeScript(t, scriptPath, map[string]any{"text": chunks, "delay_ms": 50})
	ports := natstest.FreePorts(t, 3)
	routes := make([]string, 3)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	data := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	secret := filepath.Join(t.TempDir(), "cluster.secret")
	if err := os.WriteFile(secret, []byte("c2VjcmV0IHNoYXJlZCBieSB0aGUgdGhyZWU=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var token struct{ Token string }
	r := orrery(t, bin, env, "node", "token", "create", "--name", "ops", "--json", "--data", data[0])
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &token) != nil {
		t.Fatalf("token create: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	nodes := make([]*server, 3)
	waits := make([]func(), 3)
	for i := range nodes {
		nodes[i], waits[i] = startOrrery(t, bin, env, "", "node", "--listen", "127.0.0.1:0", "--data", data[i], "--model", model,
			"--config", cfgPath, "--store", "jetstream", "--replicas", "3",
			"--nats-embed", filepath.Join(data[i], "nats"), "--nats-name", fmt.Sprintf("n%d", i), "--nats-cluster", "orrery",
			"--nats-cluster-listen", fmt.Sprintf("127.0.0.1:%d", ports[i]), "--nats-routes", strings.Join(routes, ","),
			"--nats-cluster-secret", secret)
	}
	for _, wait := range waits {
		wait()
	}
	a, b, c := nodes[0], nodes[1], nodes[2]

	req, _ := http.NewRequest(http.MethodPost, c.url+"/control", strings.NewReader(`{"t":"session.list","id":"1"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	req.Header.Set("Authorization", "Bearer "+token.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("node c, a stranger with the token made in node a's data dir: %d, want 200", resp.StatusCode)
	}

	var created struct{ Session string }
	a.control(map[string]any{"t": "session.new", "id": "1"}, &created)
	sess := created.Session
	a.control(map[string]any{"t": "run.send", "id": "2", "session": sess, "input": map[string]any{"text": "write a lot"}}, nil)
	watched := make(chan []seen, 1)
	go func() {
		watched <- b.events(sess, 0, func(f seen) bool { return f.typ != "RUN_ERROR" })
	}()
	texts := 0
	a.events(sess, 0, func(f seen) bool {
		if f.typ == "TEXT_MESSAGE_CONTENT" {
			texts++
		}
		return texts < 5
	})
	waitHead(t, b, sess, 5)
	a.kill()
	writeScript(t, scriptPath, map[string]any{"text": []string{"after"}})
	var onB []seen
	select {
	case onB = <-watched:
	case <-time.After(2 * waitLimit):
		t.Fatal("node b's client did not see the run end after node a was killed")
	}
	if last := decode(t, onB[len(onB)-1].data); last.Code != "interrupted" {
		t.Fatalf("node b's client saw the run end with %s %q, want RUN_ERROR interrupted", last.Type, last.Code)
	}
	head := c.read(sess).Head
	var again struct {
		RunID string `json:"runId"`
	}
	c.control(map[string]any{"t": "run.send", "id": "3", "session": sess, "input": map[string]any{"text": "again"}}, &again)
	after := c.events(sess, head, func(f seen) bool { return f.typ != "RUN_FINISHED" && f.typ != "RUN_ERROR" })
	if f := decode(t, after[len(after)-1].data); f.Type != "RUN_FINISHED" || f.RunID != again.RunID || after[0].seq != head+1 {
		t.Errorf("the next run on node c: first seq %d, ended with %s of %s; want seq %d and RUN_FINISHED of %s", after[0].seq, f.Type, f.RunID, head+1, again.RunID)
	}
}

// waitHead waits until node s reads session sess to at least head.
func waitHead(t *testing.T, s *server, sess string, head uint64) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for s.read(sess).Head < head {
		if time.Now().After(deadline) {
			t.Fatalf("node %s does not read session %s to seq %d", s.url, sess, head)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testExtOnOwner: a session's extension processes run on the node that
// owns the session only. A follower on another node starts none (it would
// write the session); when the owner dies and that node takes the session
// to run the next turn, it starts them there.
func testExtOnOwner(t *testing.T, bin string) {
	srvs := natstest.Cluster(t, 3)
	root := t.TempDir()
	env := append(environ(t), "ORRERY_EXT_DIR="+filepath.Join(root, "exts"))
	button, _ := extDirs(t)
	if r := orrery(t, bin, env, "ext", "add", button); r.code != 0 {
		t.Fatalf("ext add: exit %d %s", r.code, r.stderr)
	}
	cfgPath := filepath.Join(t.TempDir(), "orrery.toml")
	if err := os.WriteFile(cfgPath, []byte("[nats]\nlease_ttl = \"2s\"\nreplicas = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	model := writeScript(t, filepath.Join(t.TempDir(), "script.json"),
		map[string]any{"text": []string{"one"}}, map[string]any{"text": []string{"two"}})
	node := func(i int) *server {
		return serve(t, bin, env, "--data", t.TempDir(), "--model", model, "--config", cfgPath, "--store", "jetstream", "--nats", srvs[i].ClientURL())
	}
	a, b := node(0), node(1)
	state := func(s *server, session string) string {
		var r struct {
			Extensions []struct{ Name, State string }
		}
		s.control(map[string]any{"t": "ext.list", "id": "l", "session": session}, &r)
		for _, x := range r.Extensions {
			if x.Name == "button" {
				return x.State
			}
		}
		return ""
	}
	waitState := func(s *server, session, want string) {
		t.Helper()
		for deadline := time.Now().Add(waitLimit); state(s, session) != want; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("button on %s is %q, want %q", s.url, state(s, session), want)
			}
		}
	}

	var created struct{ Session string }
	a.control(map[string]any{"t": "session.new", "id": "1"}, &created)
	sess := created.Session
	a.control(map[string]any{"t": "run.send", "id": "2", "session": sess, "input": map[string]any{"text": "hi"}}, nil)
	first := a.events(sess, 0, func(f seen) bool { return f.typ != "RUN_FINISHED" })
	waitState(a, sess, "running")
	waitHead(t, b, sess, uint64(len(first)))
	if got := state(b, sess); got != "" {
		t.Errorf("node b, which follows the session, has its extension %q; want none started there", got)
	}

	a.kill()
	b.control(map[string]any{"t": "run.send", "id": "3", "session": sess, "input": map[string]any{"text": "again"}}, nil)
	b.events(sess, uint64(len(first)), func(f seen) bool { return f.typ != "RUN_FINISHED" && f.typ != "RUN_ERROR" })
	waitState(b, sess, "running")
}
