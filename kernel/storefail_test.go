package kernel_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/internal/testdisk"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
)

// withModel makes m the kernel's model for the spec "flood".
func withModel(m *testdisk.Flood) option {
	return func(c *kernel.Config) { c.Models = m.Models(models.Resolve) }
}

// takeUntil reads sub until a frame satisfies stop and returns every frame
// read, their data copied.
func takeUntil(t *testing.T, sub *kernel.Subscription, stop func(kernel.Frame) bool) []kernel.Frame {
	t.Helper()
	var out []kernel.Frame
	guard := time.After(60 * time.Second) // only against a hang
	for {
		for _, f := range sub.Take(nil) {
			f.Data = bytes.Clone(f.Data)
			out = append(out, f)
			if stop(f) {
				return out
			}
		}
		select {
		case <-sub.Ready():
		case <-sub.Done():
			if len(sub.Take(nil)) == 0 {
				t.Fatalf("subscription ended (%v) after %d frames", sub.Err(), len(out))
			}
		case <-guard:
			t.Fatalf("no frame ended the wait; got %d frames, the last %v", len(out), lastOf(out))
		}
	}
}

func terminalOf(runID string) func(kernel.Frame) bool {
	return func(f kernel.Frame) bool { return f.Run == runID && protocol.EventType(f.Type).Terminal() }
}

func decode(t *testing.T, f kernel.Frame) protocol.Event {
	t.Helper()
	ev, err := protocol.DecodeEvent(f.Data)
	if err != nil {
		t.Fatalf("frame %d %s does not decode: %v", f.Seq, f.Data, err)
	}
	if got := ev.Header().Seq(); got != f.Seq {
		t.Fatalf("frame %d carries metadata.orrery.seq %d", f.Seq, got)
	}
	return ev
}

// checkStoreFailed checks what a subscriber saw of run runID whose store
// failed: its logged frames in order, then, with seq 0, the closers of
// what it left open and one RUN_ERROR store_failed naming the fix.
func checkStoreFailed(t *testing.T, frames []kernel.Frame, runID, hint string) {
	t.Helper()
	open := map[string]bool{}
	var last uint64
	terminals := 0
	for i, f := range frames {
		ev := decode(t, f)
		if f.Seq > 0 {
			if last != 0 && f.Seq != last+1 {
				t.Errorf("seq %d after seq %d, want consecutive seqs", f.Seq, last)
			}
			last = f.Seq
		}
		if run := ev.Header().Orrery().Run; f.Seq == 0 && run != runID {
			t.Errorf("seq-0 %s names run %q, want %s: a client needs it to know whose end it is", f.Type, run, runID)
		} else if f.Seq != 0 && run != "" {
			t.Errorf("logged %s (seq %d) names run %q, want none: only seq-0 frames carry it", f.Type, f.Seq, run)
		}
		switch e := ev.(type) {
		case *protocol.TextMessageStart:
			open[e.MessageID] = true
		case *protocol.TextMessageEnd:
			if f.Seq != 0 {
				t.Errorf("TEXT_MESSAGE_END seq %d, want 0: the run never got to end its message", f.Seq)
			}
			delete(open, e.MessageID)
		case *protocol.RunError:
			terminals++
			if i != len(frames)-1 || f.Run != runID {
				t.Errorf("RUN_ERROR of run %q at %d of %d frames, want run %s's last frame", f.Run, i, len(frames), runID)
			}
			if f.Seq != 0 || e.Code != kernel.CodeStoreFailed {
				t.Errorf("RUN_ERROR seq %d code %q, want seq 0 code %q", f.Seq, e.Code, kernel.CodeStoreFailed)
			}
			if !strings.Contains(e.Message, hint) || !strings.Contains(e.Message, "send the prompt again") {
				t.Errorf("RUN_ERROR message %q, want it to say %q and to send the prompt again", e.Message, hint)
			}
		case *protocol.RunFinished:
			terminals++
		}
	}
	if terminals != 1 {
		t.Errorf("%d terminal events, want exactly 1", terminals)
	}
	if len(open) > 0 {
		t.Errorf("text messages %v left open before the RUN_ERROR", open)
	}
	if last == 0 {
		t.Errorf("no logged frame of the run reached the subscriber, want its RUN_STARTED and text before the failure")
	}
}

// checkLog checks session id's log: seqs 1, 2, 3 … each carried in its
// frame, each run started once ended once, and every frame seen with a seq
// (by any client) is byte for byte the logged frame of that seq. It returns
// the logged frames.
func checkLog(t *testing.T, st store.Log, id string, seen ...[]kernel.Frame) []store.Frame {
	t.Helper()
	frames, err := st.Read(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	open := ""
	for i, f := range frames {
		if f.Seq != uint64(i+1) {
			t.Fatalf("log frame %d has seq %d, want %d", i, f.Seq, i+1)
		}
		decode(t, f)
		switch f.Type {
		case string(protocol.TypeRunStarted):
			if open != "" {
				t.Errorf("seq %d starts run %s while run %s is open, want every run ended before the next", f.Seq, f.Run, open)
			}
			open = f.Run
		case string(protocol.TypeRunFinished), string(protocol.TypeRunError):
			if f.Run != open {
				t.Errorf("seq %d ends run %q, want the open run %q", f.Seq, f.Run, open)
			}
			open = ""
		}
	}
	for _, fs := range seen {
		for _, f := range fs {
			if f.Seq == 0 {
				continue
			}
			if f.Seq > uint64(len(frames)) {
				t.Errorf("a client saw seq %d, beyond the log's head %d", f.Seq, len(frames))
				continue
			}
			if !bytes.Equal(f.Data, frames[f.Seq-1].Data) {
				t.Errorf("a client saw seq %d as %s, the log holds %s: a seq was reused", f.Seq, f.Data, frames[f.Seq-1].Data)
			}
		}
	}
	return frames
}

func runningOf(t *testing.T, k *kernel.Kernel, id string) bool {
	t.Helper()
	list, err := k.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == id {
			return s.Running
		}
	}
	t.Fatalf("session %s is not listed", id)
	return false
}

// failRun subscribes to s from its head and sends a prompt to m (a flood); once the
// answer's first text is logged it calls breakDisk and lets the answer
// flood the store. It returns what the subscriber saw up to the run's end.
func failRun(t *testing.T, s *kernel.Session, m *testdisk.Flood, breakDisk func()) ([]kernel.Frame, string) {
	t.Helper()
	head := s.Head()
	sub, err := s.Subscribe(context.Background(), &head)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	res, err := s.Send(context.Background(), kernel.SendInput{Text: "flood"})
	if err != nil {
		t.Fatalf("Send() = %v, want nil", err)
	}
	got := takeUntil(t, sub, func(f kernel.Frame) bool { return f.Type == string(protocol.TypeTextMessageContent) })
	breakDisk()
	m.Release()
	return append(got, takeUntil(t, sub, terminalOf(res.RunID))...), res.RunID
}

// TestStoreFullDisk fills the disk under a session's log during a run: the
// run ends for its subscriber with seq-0 closers and RUN_ERROR store_failed,
// the session is not running and refuses writes, naming the fix, while it
// still serves reads; once there is room again the next prompt logs the
// failed run's end and runs, with no seq reused.
func TestStoreFullDisk(t *testing.T) { run(t, testStoreFullDisk) }

func testStoreFullDisk(t *testing.T, mode storeMode) {
	dir := testdisk.Tmpfs(t, 24<<20)
	m := testdisk.NewFlood(true)
	e := mode.openEnv(t, dir, "flood", withModel(m))
	ctx := context.Background()
	s := e.session(t)
	var zero uint64
	watch, err := s.Subscribe(ctx, &zero)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()

	var fill *testdisk.Filler
	failed, runID := failRun(t, s, m, func() {
		fill = testdisk.Fill(t, dir)
		fill.Leave(1 << 20)
	})
	checkStoreFailed(t, failed, runID, "free disk space")
	if got := takeUntil(t, watch, terminalOf(runID)); len(got) != len(failed) {
		t.Errorf("a second subscriber saw %d frames of the failed run, the first %d", len(got), len(failed))
	}

	if runningOf(t, e.k, s.ID()) {
		t.Errorf("Sessions() says session %s is running, want not: its run ended", s.ID())
	}
	_, err = s.Send(ctx, kernel.SendInput{Text: "again"})
	var se *kernel.StoreError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "cannot be written") || !strings.Contains(err.Error(), "free disk space") {
		t.Errorf("Send() while the disk is full = %v, want a *StoreError saying to free disk space", err)
	}
	if err := s.Cancel(ctx, ""); err == nil {
		t.Errorf("Cancel() = nil, want a refusal: no run is in flight")
	}
	// Reads work: the log, and a new subscriber that gets the failed run's
	// end after the log.
	if _, head, err := s.Read(ctx, 0, 0); err != nil || head != s.Head() {
		t.Errorf("Read() = head %d, %v, want the head %d", head, err, s.Head())
	}
	late, err := s.Subscribe(ctx, &zero)
	if err != nil {
		t.Fatalf("Subscribe() while broken = %v, want nil", err)
	}
	var replay []kernel.Frame
	if err := late.Backlog(ctx, func(f kernel.Frame) error {
		f.Data = bytes.Clone(f.Data)
		replay = append(replay, f)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	late.Close()
	if n := len(replay); n < 2 || replay[n-1].Seq != 0 || replay[n-1].Type != string(protocol.TypeRunError) || replay[n-2].Seq != 0 {
		t.Errorf("a subscriber after the failure replays %d frames ending %v, want the log then the seq-0 closers and RUN_ERROR", n, replay[max(0, n-2):])
	}

	fill.Free()
	res, err := s.Send(ctx, kernel.SendInput{Text: "back?"})
	if err != nil {
		t.Fatalf("Send() once the disk has room = %v, want nil", err)
	}
	all := takeUntil(t, watch, terminalOf(res.RunID))
	var notices int
	for _, f := range all {
		if f.Run == runID {
			t.Errorf("after the failure the subscriber got %s of run %s again", f.Type, runID)
		}
		if ev, ok := decode(t, f).(*protocol.Custom); ok && ev.Name == kernel.NoticeEvent && f.Seq > 0 {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d logged notices before the next run, want 1 saying the session can be written again", notices)
	}
	if last := decode(t, all[len(all)-1]); last.EventType() != protocol.TypeRunFinished {
		t.Errorf("the next run ended with %s, want RUN_FINISHED", last.EventType())
	}
	logged := checkLog(t, e.store, s.ID(), failed, all)
	var ends []string
	for _, f := range logged {
		if f.Run == runID && protocol.EventType(f.Type).Terminal() {
			ends = append(ends, f.Type)
		}
	}
	if len(ends) != 1 || ends[0] != string(protocol.TypeRunError) {
		t.Errorf("the log ends the failed run with %v, want one RUN_ERROR", ends)
	}
	info, err := e.store.Session(ctx, s.ID())
	if err != nil || info.OpenRun != "" || info.Head != uint64(len(logged)) {
		t.Errorf("store Session() = %+v, %v, want no open run and head %d", info, err, len(logged))
	}
}

// TestStoreFullDiskRestart restarts the kernel after a full disk left a run
// open in the log: once there is room, the restart closes it with one
// RUN_ERROR interrupted, and the session works.
func TestStoreFullDiskRestart(t *testing.T) { run(t, testStoreFullDiskRestart) }

func testStoreFullDiskRestart(t *testing.T, mode storeMode) {
	dir := testdisk.Tmpfs(t, 24<<20)
	m := testdisk.NewFlood(true)
	e := mode.openEnv(t, dir, "flood", withModel(m))
	ctx := context.Background()
	s := e.session(t)
	var fill *testdisk.Filler
	failed, runID := failRun(t, s, m, func() {
		fill = testdisk.Fill(t, dir)
		fill.Leave(1 << 20)
	})
	checkStoreFailed(t, failed, runID, "free disk space")
	e.close()

	fill.Free()
	e = mode.openEnv(t, dir, script(t, map[string]any{"text": []string{"back"}}))
	logged := checkLog(t, e.store, s.ID(), failed)
	last := logged[len(logged)-1]
	if rerr, ok := decode(t, last).(*protocol.RunError); !ok || last.Run != runID || rerr.Code != "interrupted" {
		t.Errorf("the log's last frame after a restart with room is %s, want run %s's RUN_ERROR interrupted", last.Data, runID)
	}
	s3, err := e.k.Session(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if evs, _ := send(t, s3, kernel.SendInput{Text: "back?"}); evs[len(evs)-1].EventType() != protocol.TypeRunFinished {
		t.Errorf("a run after the restart ended with %s, want RUN_FINISHED", evs[len(evs)-1].EventType())
	}
	checkLog(t, e.store, s.ID(), failed)
}

// TestStoreReadOnly makes the disk under a session's log read-only during a
// run, as an ext4 file system does after a disk error: the run ends with
// seq-0 closers and RUN_ERROR store_failed, writes are refused and reads
// served, also after a restart on the read-only disk; after the disk is
// checked and mounted again, a restart closes the run as interrupted and
// the session works.
func TestStoreReadOnly(t *testing.T) { run(t, testStoreReadOnly) }

func testStoreReadOnly(t *testing.T, mode storeMode) {
	disk := testdisk.NewExt4(t, 64<<20)
	m := testdisk.NewFlood(true)
	e := mode.openEnv(t, disk.Dir, "flood", withModel(m))
	ctx := context.Background()
	s := e.session(t)
	failed, runID := failRun(t, s, m, disk.Fail)
	checkStoreFailed(t, failed, runID, "")
	if runningOf(t, e.k, s.ID()) {
		t.Errorf("Sessions() says running after the store failed, want not")
	}
	_, err := s.Send(ctx, kernel.SendInput{Text: "again"})
	if !errors.As(err, new(*kernel.StoreError)) || !strings.Contains(err.Error(), "cannot be written") {
		t.Errorf("Send() on a read-only disk = %v, want a *StoreError", err)
	}
	if _, _, err := s.Read(ctx, 0, 0); err != nil {
		t.Errorf("Read() on a read-only disk = %v, want nil", err)
	}
	e.close()

	// Restarted on the disk still read-only, the kernel opens; the run it
	// cannot close in the log is not running, and a subscriber gets its
	// end with seq 0 after the log.
	e = mode.openEnv(t, disk.Dir, "flood", withModel(testdisk.NewFlood(true)))
	if runningOf(t, e.k, s.ID()) {
		t.Errorf("Sessions() after a restart on a read-only disk says running, want not")
	}
	s2, err := e.k.Session(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	var zero uint64
	sub, err := s2.Subscribe(ctx, &zero)
	if err != nil {
		t.Fatal(err)
	}
	var replay []kernel.Frame
	if err := sub.Backlog(ctx, func(f kernel.Frame) error {
		f.Data = bytes.Clone(f.Data)
		replay = append(replay, f)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sub.Close()
	checkLog(t, e.store, s.ID(), failed, replay)
	if n := len(replay); n < 2 || replay[n-1].Seq != 0 || replay[n-1].Run != runID || replay[n-2].Seq != 0 {
		t.Fatalf("a subscriber after the restart replays %d frames (last %s), want the log then run %s's seq-0 closers and end", n, lastOf(replay), runID)
	}
	if rerr, ok := decode(t, replay[len(replay)-1]).(*protocol.RunError); !ok || rerr.Code != "interrupted" {
		t.Errorf("the seq-0 end of the run after a restart is %s, want RUN_ERROR interrupted", replay[len(replay)-1].Data)
	}
	if _, err := s2.Send(ctx, kernel.SendInput{Text: "again"}); !errors.As(err, new(*kernel.StoreError)) {
		t.Errorf("Send() on a read-only disk after a restart = %v, want a *StoreError", err)
	}
	e.close()
	disk.Repair()

	e = mode.openEnv(t, disk.Dir, script(t, map[string]any{"text": []string{"back"}}))
	logged := checkLog(t, e.store, s.ID(), failed)
	last := logged[len(logged)-1]
	if rerr, ok := decode(t, last).(*protocol.RunError); !ok || last.Run != runID || rerr.Code != "interrupted" {
		t.Errorf("the log's last frame after the repair is %s, want run %s's RUN_ERROR interrupted", last.Data, runID)
	}
	s3, err := e.k.Session(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if evs, _ := send(t, s3, kernel.SendInput{Text: "back?"}); evs[len(evs)-1].EventType() != protocol.TypeRunFinished {
		t.Errorf("a run after the repair ended with %s, want RUN_FINISHED", evs[len(evs)-1].EventType())
	}
}

// TestStoreFailureSparesOtherSessions has another writer take the next seq
// of one session's log behind the kernel's back while two sessions run: the
// one whose append fails ends its run with store_failed, the other's run is
// untouched, and the failed session works again from the log as it stands.
func TestStoreFailureSparesOtherSessions(t *testing.T) { run(t, testStoreFailureSparesOtherSessions) }

func testStoreFailureSparesOtherSessions(t *testing.T, mode storeMode) {
	dir := t.TempDir()
	turns := make([]map[string]any, 0, 8)
	for range 8 {
		turns = append(turns, map[string]any{"text": []string{"a", "b", "c"}})
	}
	e := mode.openEnv(t, dir, script(t, turns...))
	ctx := context.Background()
	a, b := e.session(t), e.session(t)
	for _, s := range []*kernel.Session{a, b} {
		send(t, s, kernel.SendInput{Text: "warm up"})
	}
	other, err := mode.open(dir)
	if err != nil {
		t.Fatal(err)
	}
	foreignSeq := a.Head() + 1
	foreign := fmt.Sprintf(`{"type":"CUSTOM","name":"test.other","value":{},"metadata":{"orrery":{"seq":%d}}}`, foreignSeq)
	if err := other.Append(ctx, store.Batch{Session: a.ID(), Frames: []store.Frame{{Seq: foreignSeq, Type: "CUSTOM", Data: []byte(foreign)}}}); err != nil {
		t.Fatalf("the other writer's Append() = %v", err)
	}
	other.Close()

	subs := map[*kernel.Session]*kernel.Subscription{}
	runs := map[*kernel.Session]string{}
	for _, s := range []*kernel.Session{a, b} {
		head := s.Head()
		sub, err := s.Subscribe(ctx, &head)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		subs[s] = sub
	}
	for _, s := range []*kernel.Session{a, b} {
		res, err := s.Send(ctx, kernel.SendInput{Text: "go"})
		if s == a && errors.As(err, new(*kernel.StoreError)) {
			continue // a's run was refused: the store failed before it started
		}
		if err != nil {
			t.Fatalf("Send() = %v", err)
		}
		runs[s] = res.RunID
	}
	var gotA []kernel.Frame
	if runs[a] != "" {
		// The run started, then its frames failed: it ends with seq 0.
		gotA = takeUntil(t, subs[a], terminalOf(runs[a]))
		if rerr, ok := decode(t, gotA[len(gotA)-1]).(*protocol.RunError); !ok || rerr.Code != kernel.CodeStoreFailed || gotA[len(gotA)-1].Seq != 0 {
			t.Errorf("session a's run ended with %s, want RUN_ERROR store_failed with seq 0", gotA[len(gotA)-1].Data)
		}
	} else {
		// The refusal ended nothing: a's subscriber hears of the failure.
		gotA = takeUntil(t, subs[a], func(f kernel.Frame) bool { return f.Seq == 0 })
		if c, ok := decode(t, gotA[len(gotA)-1]).(*protocol.Custom); !ok || c.Name != kernel.NoticeEvent {
			t.Errorf("session a's subscriber got %s after a refused send, want a seq-0 notice", gotA[len(gotA)-1].Data)
		}
	}
	gotB := takeUntil(t, subs[b], terminalOf(runs[b]))
	if end := decode(t, gotB[len(gotB)-1]); end.EventType() != protocol.TypeRunFinished || gotB[len(gotB)-1].Seq == 0 {
		t.Errorf("session b's run ended with %s, want a logged RUN_FINISHED", gotB[len(gotB)-1].Data)
	}
	checkLog(t, e.store, b.ID(), gotB)

	// a goes on after the other writer's frame.
	if evs, _ := send(t, a, kernel.SendInput{Text: "again"}); evs[len(evs)-1].EventType() != protocol.TypeRunFinished {
		t.Errorf("session a's next run ended with %+v, want RUN_FINISHED", evs[len(evs)-1])
	}
	logged := checkLog(t, e.store, a.ID(), gotA)
	if f := logged[foreignSeq-1]; !bytes.Equal(f.Data, []byte(foreign)) {
		t.Errorf("session a's seq %d is %s, want the other writer's frame", foreignSeq, f.Data)
	}
}

func lastOf(fs []kernel.Frame) string {
	if len(fs) == 0 {
		return "none"
	}
	f := fs[len(fs)-1]
	return fmt.Sprintf("seq %d run %q %s", f.Seq, f.Run, f.Data)
}
