package sqlite_test

import (
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
)

// benchFrame appends to buf the Data of a typical streamed frame, about 150
// bytes: a TEXT_MESSAGE_CONTENT delta carrying its seq.
func benchFrame(buf []byte, seq uint64) []byte {
	buf = append(buf, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_01JC4Q9ZK3M8","delta":"Sure, here is the next part of the answer ","metadata":{"orrery":{"seq":`...)
	buf = strconv.AppendUint(buf, seq, 10)
	return append(buf, "}}}"...)
}

// rawDB opens path with database/sql on the same driver and pragmas as
// sqlite.Open, for baselines, and checks that the pragmas took.
func rawDB(b *testing.B, path string) *sql.DB {
	b.Helper()
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(NORMAL)", "busy_timeout(10000)", "temp_store(MEMORY)", "cache_size(-16000)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		b.Fatalf("sql.Open(%q) = %v", path, err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	var mode string
	var syncMode int
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		b.Fatalf("PRAGMA journal_mode = %q, %v, want wal", mode, err)
	}
	if err := db.QueryRow(`PRAGMA synchronous`).Scan(&syncMode); err != nil || syncMode != 1 {
		b.Fatalf("PRAGMA synchronous = %d, %v, want 1 (NORMAL)", syncMode, err)
	}
	return db
}

// openBench opens a Log in a fresh directory with the given sessions.
func openBench(b *testing.B, ids []string) (*sqlite.Log, string) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "orrery.db")
	l, err := sqlite.Open(path)
	if err != nil {
		b.Fatalf("Open(%q) = %v", path, err)
	}
	b.Cleanup(func() { l.Close() })
	for _, id := range ids {
		if err := l.CreateSession(b.Context(), store.Session{ID: id}); err != nil {
			b.Fatalf("CreateSession(%q) = %v", id, err)
		}
	}
	return l, path
}

func sessionIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%02d", i)
	}
	return ids
}

const benchWriters = 16

// BenchmarkAppend measures group-commit throughput: 16 writers, one session
// each, append b.N frames between them, batch frames per Append call. With
// batch=1 only the group commit batches them.
func BenchmarkAppend(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d/batch=%d", benchWriters, batch), func(b *testing.B) {
			benchmarkAppend(b, batch)
		})
	}
}

func benchmarkAppend(b *testing.B, batch int) {
	ids := sessionIDs(benchWriters)
	l, _ := openBench(b, ids)
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w, id := range ids {
		n := uint64(b.N / benchWriters)
		if w < b.N%benchWriters {
			n++
		}
		wg.Go(func() {
			// Append returns only after the frames are written, so the
			// buffers are reused from one call to the next.
			bufs := make([][]byte, batch)
			fs := make([]store.Frame, batch)
			for seq := uint64(1); seq <= n; {
				k := min(uint64(batch), n-seq+1)
				for j := range k {
					bufs[j] = benchFrame(bufs[j][:0], seq+j)
					fs[j] = store.Frame{Seq: seq + j, Type: "TEXT_MESSAGE_CONTENT", Run: "run-1", Data: bufs[j]}
				}
				if err := l.Append(ctx, store.Batch{Session: id, Frames: fs[:k]}); err != nil {
					b.Errorf("Append(%s[%d..%d]) = %v", id, seq, seq+k-1, err)
					return
				}
				seq += k
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendBaseline inserts as many rows as BenchmarkAppend with raw
// database/sql on the same schema, driver and pragmas, one writer, one
// transaction per 1000 rows: the best case for the group commit.
func BenchmarkAppendBaseline(b *testing.B) {
	ids := sessionIDs(benchWriters)
	l, path := openBench(b, ids) // for the schema and sessions
	if err := l.Close(); err != nil {
		b.Fatalf("Close() = %v", err)
	}
	db := rawDB(b, path)
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		tx, err := db.Begin()
		if err != nil {
			b.Fatalf("Begin() = %v", err)
		}
		ins, err := tx.Prepare(`INSERT INTO frames (sid, seq, type, run, data) VALUES (?, ?, ?, ?, ?)`)
		if err != nil {
			b.Fatalf("Prepare() = %v", err)
		}
		for end := min(i+1000, b.N); i < end; i++ {
			sid, seq := int64(1+i%benchWriters), uint64(1+i/benchWriters)
			buf = benchFrame(buf[:0], seq)
			if _, err := ins.Exec(sid, seq, "TEXT_MESSAGE_CONTENT", "run-1", buf); err != nil {
				b.Fatalf("Exec() = %v", err)
			}
		}
		ins.Close()
		if err := tx.Commit(); err != nil {
			b.Fatalf("Commit() = %v", err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

const replayFrames = 100_000

// replayFixture writes a database holding one session, "replay", of
// replayFrames frames and returns its path.
func replayFixture(b *testing.B) string {
	b.Helper()
	l, path := openBench(b, []string{"replay"})
	fs := make([]store.Frame, 1000)
	for seq := uint64(1); seq <= replayFrames; seq += uint64(len(fs)) {
		for j := range fs {
			s := seq + uint64(j)
			fs[j] = store.Frame{Seq: s, Type: "TEXT_MESSAGE_CONTENT", Run: "run-1", Data: benchFrame(nil, s)}
		}
		if err := l.Append(b.Context(), store.Batch{Session: "replay", Frames: fs}); err != nil {
			b.Fatalf("Append() = %v", err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatalf("Close() = %v", err)
	}
	return path
}

// BenchmarkReplay measures a full replay of a 100,000-frame session with
// Scan from since=0; one op is one replay.
func BenchmarkReplay(b *testing.B) {
	path := replayFixture(b)
	l, err := sqlite.Open(path)
	if err != nil {
		b.Fatalf("Open(%q) = %v", path, err)
	}
	defer l.Close()
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		n, size := 0, 0
		err := l.Scan(ctx, "replay", 0, func(f store.Frame) error {
			n++
			size += len(f.Data)
			return nil
		})
		if err != nil || n != replayFrames {
			b.Fatalf("Scan() = %v after %d frames, want nil after %d", err, n, replayFrames)
		}
		b.SetBytes(int64(size))
	}
	b.ReportMetric(float64(b.N)*replayFrames/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkReplayBaseline reads the rows BenchmarkReplay replays with a raw
// SELECT through database/sql on the same driver and pragmas.
func BenchmarkReplayBaseline(b *testing.B) {
	db := rawDB(b, replayFixture(b))
	b.ReportAllocs()
	for b.Loop() {
		rows, err := db.Query(`SELECT data FROM frames`)
		if err != nil {
			b.Fatalf("Query() = %v", err)
		}
		n, size := 0, 0
		var data sql.RawBytes
		for rows.Next() {
			if err := rows.Scan(&data); err != nil {
				b.Fatalf("Scan() = %v", err)
			}
			n++
			size += len(data)
		}
		if err := rows.Err(); err != nil || n != replayFrames {
			b.Fatalf("rows = %v after %d frames, want nil after %d", err, n, replayFrames)
		}
		rows.Close()
		b.SetBytes(int64(size))
	}
	b.ReportMetric(float64(b.N)*replayFrames/b.Elapsed().Seconds(), "frames/s")
}
