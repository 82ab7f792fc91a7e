package sqlite

import (
	"database/sql"
	"os"
)

// The writer's connection never checkpoints the WAL itself (SQLite's
// autocheckpoint would copy the WAL into the database inside the commit
// that crossed 1,000 pages, fsyncs included, holding up every append of
// the next commit meanwhile). A goroutine of its own does it on its own
// connection, beside the writer, once every walEvery bytes of frames
// committed: a PASSIVE checkpoint, which never waits for the writer or a
// reader. BenchmarkIngest took in 10–25% more frames per second so.
//
// A checkpoint beside a writer that never pauses may never catch up with
// it, and SQLite starts the WAL over only once one has: so the writer
// itself checkpoints, between two commits, when the WAL file has grown
// past walMax.
var (
	walEvery uint64 = 1 << 20
	walMax   int64  = 64 << 20
)

// walCheckpointer copies the WAL into the database when the writer asks.
type walCheckpointer struct {
	db   *sql.DB
	wake chan struct{}
	done chan struct{}
}

func startWALCheckpointer(path string) (*walCheckpointer, error) {
	db, err := openDB(path, 1)
	if err != nil {
		return nil, err
	}
	c := &walCheckpointer{db: db, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.run()
	return c, nil
}

func (c *walCheckpointer) run() {
	defer close(c.done)
	for range c.wake {
		// A failed checkpoint loses nothing: the frames stay in the WAL,
		// and the next one copies them.
		_, _ = c.db.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
	}
}

// poke asks for a checkpoint, without waiting.
func (c *walCheckpointer) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// close stops the goroutine and closes its connection.
func (c *walCheckpointer) close() error {
	close(c.wake)
	<-c.done
	return c.db.Close()
}

// walWritten is called by the writer after a commit of n bytes: it asks
// for a checkpoint every walEvery bytes, and checkpoints on the writer's
// own connection when the WAL has outgrown walMax.
func (l *Log) walWritten(n uint64) {
	if l.wal == nil {
		return
	}
	l.walBytes += n
	if l.walBytes < walEvery {
		return
	}
	l.walBytes = 0
	l.wal.poke()
	if st, err := os.Stat(l.path + "-wal"); err == nil && st.Size() > walMax {
		_, _ = l.writer.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
	}
}
