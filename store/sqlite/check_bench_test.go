package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
)

// checkBenchDB builds the log BenchmarkCheck reads in a temporary dir:
// ORRERY_BENCH_FRAMES frames (default 100,000) over 100 sessions.
func checkBenchDB(b *testing.B) (string, int) {
	b.Helper()
	n := 100_000
	if v := os.Getenv("ORRERY_BENCH_FRAMES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("ORRERY_BENCH_FRAMES=%q: %v", v, err)
		}
	}
	n = n / 100 * 100 // whole rounds over the 100 sessions
	path := filepath.Join(b.TempDir(), "orrery.db")
	if err := buildCheckBench(path, n); err != nil {
		b.Fatal(err)
	}
	return path, n
}

// buildCheckBench writes n frames over 100 sessions with raw inserts (the
// schema is sqlite.Open's), interleaved in rounds of 100 per session as a
// busy kernel's group commits are, and checkpoints the WAL into the file.
func buildCheckBench(path string, n int) error {
	const sessions = 100
	l, err := sqlite.Open(path)
	if err != nil {
		return err
	}
	per := n / sessions
	for i := range sessions {
		if err := l.CreateSession(context.Background(), store.Session{ID: fmt.Sprintf("s%03d", i)}); err != nil {
			return err
		}
	}
	l.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	seq := make([]uint64, sessions+1)
	var buf []byte
	for done := 0; done < per*sessions; {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		ins, err := tx.Prepare(`INSERT INTO frames (sid, seq, type, run, data) VALUES (?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		for sid := 1; sid <= sessions; sid++ {
			for k := 0; k < 100 && seq[sid] < uint64(per); k++ {
				seq[sid]++
				buf = benchFrame(buf[:0], seq[sid])
				if _, err := ins.Exec(sid, seq[sid], "TEXT_MESSAGE_CONTENT", "run-1", buf); err != nil {
					return err
				}
				done++
			}
		}
		ins.Close()
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	if _, err := db.Exec(`UPDATE sessions SET head = ?`, per); err != nil {
		return err
	}
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

// BenchmarkCheck measures what finding damage costs, against opening the
// log with no check at all (Open, the baseline): what Kernel.Open waits
// for (OpenQuick: open, then the quick check of the session records and
// each session's first and last frame), the full check the kernel then
// runs in the background (Full: SQLite's quick_check of every page, then
// every session's frames counted in one GROUP BY), the same with every
// frame decoded as an AG-UI event (FullDecode: what orrery db check runs),
// and quick_check alone. The file is in the page cache (a warm start).
//
//	ORRERY_BENCH_FRAMES=1000000 go test -run=XXX -bench=Check -benchtime=3x ./store/sqlite
func BenchmarkCheck(b *testing.B) {
	path, n := checkBenchDB(b)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	report := func(b *testing.B) {
		b.ReportMetric(float64(fi.Size())/1e6, "MB")
		b.ReportMetric(float64(n), "frames")
	}
	b.Run("Open", func(b *testing.B) {
		for b.Loop() {
			l, err := sqlite.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			l.Close()
		}
		report(b)
	})
	b.Run("OpenQuick", func(b *testing.B) {
		for b.Loop() {
			l, err := sqlite.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			rep, err := l.Check(ctx, store.CheckOptions{})
			if err != nil || !rep.OK() {
				b.Fatalf("Check(quick) = %+v, %v", rep, err)
			}
			l.Close()
		}
		report(b)
	})
	for _, tc := range []struct {
		name  string
		frame func([]byte) error
	}{
		{"Full", nil},
		{"FullDecode", func(data []byte) error { _, err := protocol.DecodeEvent(data); return err }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l, err := sqlite.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			for b.Loop() {
				rep, err := l.Check(ctx, store.CheckOptions{Full: true, Frame: tc.frame})
				if err != nil || !rep.OK() || rep.Frames != int64(n) {
					b.Fatalf("Check(full) = %+v, %v", rep, err)
				}
			}
			report(b)
		})
	}
	b.Run("QuickCheckPragma", func(b *testing.B) {
		db := rawDB(b, path)
		for b.Loop() {
			var ok string
			if err := db.QueryRow(`PRAGMA quick_check`).Scan(&ok); err != nil || ok != "ok" {
				b.Fatalf("quick_check = %q, %v", ok, err)
			}
		}
		report(b)
	})
}
