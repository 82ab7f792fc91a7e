package jetstream_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/cluster/embed"
	"github.com/getorrery/orrery/internal/natstest"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/jetstream"
	"github.com/getorrery/orrery/store/storetest"
	"github.com/nats-io/nats.go"
)

// prefixFor gives each directory the suite opens a log in its own stream
// and buckets on the shared servers, so that reopening the directory
// reopens the log.
func prefixFor(dir string) string {
	h := fnv.New64a()
	h.Write([]byte(dir))
	return fmt.Sprintf("t%x", h.Sum64())
}

func runSuite(t *testing.T, srvs []*embed.Server, replicas int) {
	storetest.Run(t, func(t *testing.T, dir string) store.Log {
		nc, err := nats.Connect(natstest.URLs(srvs...))
		if err != nil {
			t.Fatal(err)
		}
		l, err := jetstream.Open(t.Context(), nc, jetstream.Config{Prefix: prefixFor(dir), Replicas: replicas, CloseConn: true, Timeout: time.Minute})
		if err != nil {
			nc.Close()
			t.Fatal(err)
		}
		return l
	})
}

func TestLog(t *testing.T) {
	t.Parallel()
	runSuite(t, []*embed.Server{natstest.Server(t)}, 1)
}

func TestLogReplicated(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-server cluster")
	}
	t.Parallel()
	runSuite(t, natstest.Cluster(t, 3), 3)
}

func open(t *testing.T, nc *nats.Conn, prefix string) *jetstream.Log {
	t.Helper()
	l, err := jetstream.Open(t.Context(), nc, jetstream.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func textFrame(seq uint64, who string) store.Frame {
	return store.Frame{Seq: seq, Type: "TEXT_MESSAGE_CONTENT", Run: "r", Data: fmt.Appendf(nil, `{"delta":%q,"seq":%d}`, who, seq)}
}

func textFrames(from, n uint64, who string) []store.Frame {
	var fs []store.Frame
	for seq := from; seq < from+n; seq++ {
		fs = append(fs, textFrame(seq, who))
	}
	return fs
}

// Two kernels that both think they own a session race to write it: the
// stream takes one writer's batch whole and refuses the other's, at any
// seq, so the log is never a mix of the two.
func TestSecondWriterIsFenced(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv)
	a, b := open(t, nc, "fence"), open(t, natstest.Connect(t, srv), "fence")
	ctx := t.Context()
	if err := a.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, store.Batch{Session: "s", Frames: textFrames(1, 3, "a")}); err != nil {
		t.Fatal(err)
	}
	// b learns the head (3), then a writes on: b's idea of the head is stale.
	if err := b.Append(ctx, store.Batch{Session: "s", Frames: textFrames(1, 1, "b")}); !errors.Is(err, store.ErrSeqConflict) {
		t.Fatalf("b.Append(seq 1) = %v, want %v", err, store.ErrSeqConflict)
	}
	if err := a.Append(ctx, store.Batch{Session: "s", Frames: textFrames(4, 2, "a")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx, store.Batch{Session: "s", Frames: textFrames(4, 3, "b")}); !errors.Is(err, store.ErrSeqConflict) {
		t.Fatalf("b.Append(seq 4..6) after a wrote 4..5 = %v, want %v", err, store.ErrSeqConflict)
	}

	// Now both race for seq 6, many times over: exactly one wins each.
	for seq := uint64(6); seq < 26; seq += 2 {
		errs := make(chan error, 2)
		for _, w := range []struct {
			l   *jetstream.Log
			who string
		}{{a, "a"}, {b, "b"}} {
			go func() {
				err := w.l.Append(ctx, store.Batch{Session: "s", Frames: textFrames(seq, 2, w.who)})
				if errors.Is(err, store.ErrSeqConflict) {
					// The loser reloads the head and is behind by two.
					err = w.l.Append(ctx, store.Batch{Session: "s", Frames: textFrames(seq, 2, w.who)})
					if !errors.Is(err, store.ErrSeqConflict) {
						errs <- fmt.Errorf("%s: a second try at the taken seq %d = %v, want a conflict", w.who, seq, err)
						return
					}
					errs <- store.ErrSeqConflict
					return
				}
				errs <- err
			}()
		}
		e1, e2 := <-errs, <-errs
		wins := 0
		for _, err := range []error{e1, e2} {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, store.ErrSeqConflict):
				t.Fatal(err)
			}
		}
		if wins != 1 {
			t.Fatalf("seq %d: %d writers won (errors %v, %v), want exactly 1", seq, wins, e1, e2)
		}
	}
	fs, err := open(t, natstest.Connect(t, srv), "fence").Read(ctx, "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 25 {
		t.Fatalf("the log holds %d frames, want 25", len(fs))
	}
	for i, f := range fs {
		if f.Seq != uint64(i+1) {
			t.Fatalf("frame %d has seq %d", i, f.Seq)
		}
	}
	for i := 5; i+1 < len(fs); i += 2 {
		if w1, w2 := bytes.Split(fs[i].Data, []byte(","))[0], bytes.Split(fs[i+1].Data, []byte(","))[0]; !bytes.Equal(w1, w2) {
			t.Fatalf("seqs %d and %d were written by different writers (%s, %s): a batch was merged", fs[i].Seq, fs[i+1].Seq, w1, w2)
		}
	}
}

// A log opened afresh knows nothing of where frames are in the stream: a
// read from any seq of a long log, interleaved with another session's,
// finds its start by searching, and returns exactly the frames after it.
func TestReadFromAnySeq(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	w := open(t, natstest.Connect(t, srv), "search")
	ctx := t.Context()
	for _, id := range []string{"s", "noise"} {
		if err := w.CreateSession(ctx, store.Session{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	var seq, noise uint64 = 1, 1
	for k := 0; seq <= 1500; k++ {
		n := uint64(1 + k%9)
		if err := w.Append(ctx, store.Batch{Session: "s", Frames: textFrames(seq, n, "s")},
			store.Batch{Session: "noise", Frames: textFrames(noise, uint64(k%4), "noise")}); err != nil {
			t.Fatal(err)
		}
		seq += n
		noise += uint64(k % 4)
	}
	head := seq - 1
	r := open(t, natstest.Connect(t, srv), "search")
	for _, since := range []uint64{0, 1, 2, 7, 100, 777, 1000, head - 1, head, head + 5} {
		got, err := r.Read(ctx, "s", since, 20)
		if err != nil {
			t.Fatalf("Read(since %d) = %v", since, err)
		}
		want := min(20, head-min(since, head))
		if uint64(len(got)) != want {
			t.Fatalf("Read(since %d, 20) = %d frames, want %d", since, len(got), want)
		}
		for i, f := range got {
			if f.Seq != since+uint64(i)+1 || !bytes.Equal(f.Data, textFrame(f.Seq, "s").Data) {
				t.Fatalf("Read(since %d)[%d] = seq %d %s", since, i, f.Seq, f.Data)
			}
		}
	}
}

// One batch larger than an atomic publish may be is written in pieces, in
// order; a frame larger than the server takes is refused, saying so, and
// the session goes on.
func TestLargeBatchesAndFrames(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	l := open(t, natstest.Connect(t, srv), "large")
	ctx := t.Context()
	if err := l.CreateSession(ctx, store.Session{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, store.Batch{Session: "s", Frames: textFrames(1, 2500, "s"), CostDelta: 7}); err != nil {
		t.Fatal(err)
	}
	big := store.Frame{Seq: 2501, Type: "CUSTOM", Data: bytes.Repeat([]byte("x"), 9<<20)}
	err := l.Append(ctx, store.Batch{Session: "s", Frames: []store.Frame{big}})
	if err == nil || !strings.Contains(err.Error(), "max_payload") {
		t.Fatalf("Append(a 9 MiB frame) = %v, want an error naming max_payload", err)
	}
	if err := l.Append(ctx, store.Batch{Session: "s", Frames: textFrames(2501, 1, "s")}); err != nil {
		t.Fatal(err)
	}
	ss, err := l.Session(ctx, "s")
	if err != nil || ss.Head != 2501 || ss.MicroUSD != 7 {
		t.Fatalf("Session = %+v, %v; want head 2501, 7 µ$", ss, err)
	}
	n := uint64(0)
	if err := l.Scan(ctx, "s", 0, func(f store.Frame) error {
		n++
		if f.Seq != n {
			return fmt.Errorf("frame %d has seq %d", n, f.Seq)
		}
		return nil
	}); err != nil || n != 2501 {
		t.Fatalf("Scan = %d frames, %v; want 2501", n, err)
	}
}
