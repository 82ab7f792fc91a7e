// Package sqlite implements store.Log on an embedded SQLite database
// (modernc.org/sqlite, pure Go) in WAL mode.
//
// Durability: commits use synchronous=NORMAL, so a committed frame survives
// a crash of the Orrery process (it is in the WAL file, written before the
// commit returns). An operating-system crash or power loss may lose the most
// recent commits, never corrupt the database; those frames may then be
// written again under the same seq by the restarted kernel, which no client
// can tell from the first attempt because nothing after the lost commits
// survives either.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/getorrery/orrery/store"

	sqlitedrv "modernc.org/sqlite" // also registers the "sqlite" driver
)

// Interface guards.
var (
	_ store.Log          = (*Log)(nil)
	_ store.Checkpointer = (*Log)(nil)
)

const schema = `
CREATE TABLE IF NOT EXISTS sessions (
	sid       INTEGER PRIMARY KEY,
	id        TEXT NOT NULL UNIQUE,
	title     TEXT NOT NULL DEFAULT '',
	model     TEXT NOT NULL DEFAULT '',
	cwd       TEXT NOT NULL DEFAULT '',
	created   INTEGER NOT NULL,
	head      INTEGER NOT NULL DEFAULT 0,
	open_run  TEXT NOT NULL DEFAULT '',
	micro_usd INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS frames (
	sid  INTEGER NOT NULL,
	seq  INTEGER NOT NULL,
	type TEXT NOT NULL,
	run  TEXT NOT NULL DEFAULT '',
	data BLOB NOT NULL,
	PRIMARY KEY (sid, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints (
	sid  INTEGER PRIMARY KEY,
	head INTEGER NOT NULL,
	data BLOB NOT NULL
);
`

// Log is a store.Log in one SQLite file. Create it with Open.
type Log struct {
	path   string
	writer *sql.DB // one connection: SQLite has one writer
	reader *sql.DB

	appends  chan *appendReq
	onCommit func(store.Commit) // set before the first append (OnCommit)
	done     chan struct{}      // closed by Close
	stopped  chan struct{}      // closed when writeLoop returns

	// Statements of the writer goroutine, prepared once on the writer's
	// single connection.
	insertStmt, updateStmt, checkpointStmt, updateInfoStmt *sql.Stmt
	insertManyStmt                                         *sql.Stmt // insertRows frames (insert.go)
	insertArgs                                             []any     // the writer's, reused by each commit's inserter
	wg                                                     sync.WaitGroup

	wal      *walCheckpointer // copies the WAL into the database
	walBytes uint64           // bytes committed since the writer last asked it to; owned by the writer goroutine

	// full is, after a commit failed on a full disk, how many bytes the
	// disk must have free before the writer tries SQLite again (SQLite
	// itself would often take a small append, into the space the failed
	// commit took in the WAL, and fail again at the next large one); 0
	// otherwise. Owned by the writer goroutine.
	full uint64

	mu sync.Mutex // guards sessions
	// sessions caches sid and head per session id. Heads change only on the
	// writer goroutine, under mu.
	sessions map[string]*sessionRow

	closeOnce sync.Once
}

type sessionRow struct {
	sid  int64
	head uint64
}

type appendReq struct {
	batches []store.Batch
	// op, when set, is a write to make in the commit after every batch of
	// it (a checkpoint, a session's title): own is the request's outcome,
	// fatal an error that fails the transaction. size is its bytes.
	op   func(tx *sql.Tx) (own, fatal error)
	size int
	errc chan error
}

// Open opens (creating when missing) the log at path and starts its writer.
// A directory it makes for path is private (0700), and a database file it
// makes is 0600 whatever the umask, as are the -wal and -shm files SQLite
// makes beside it; an existing file keeps its mode.
func Open(path string) (*Log, error) {
	if err := makePrivate(path); err != nil {
		return nil, err
	}
	l := &Log{
		path:     path,
		appends:  make(chan *appendReq, 1024),
		done:     make(chan struct{}),
		stopped:  make(chan struct{}),
		sessions: make(map[string]*sessionRow),
	}
	var err error
	if l.writer, err = openDB(path, 1, "wal_autocheckpoint(0)"); err != nil {
		l.Close()
		return nil, err
	}
	if _, err := l.writer.Exec(schema); err != nil {
		l.Close()
		return nil, fmt.Errorf("create schema in %s: %w", path, damaged(err))
	}
	if l.reader, err = openDB(path, max(4, runtime.GOMAXPROCS(0))); err != nil {
		l.Close()
		return nil, err
	}
	if l.wal, err = startWALCheckpointer(path); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.loadSessions(); err != nil {
		l.Close()
		return nil, fmt.Errorf("open %s: %w", path, damaged(err))
	}
	if l.insertStmt, err = l.writer.Prepare(`INSERT INTO frames (sid, seq, type, run, data) VALUES (?, ?, ?, ?, ?)`); err != nil {
		l.Close()
		return nil, fmt.Errorf("prepare append: %w", err)
	}
	if l.insertManyStmt, err = l.writer.Prepare(insertManySQL()); err != nil {
		l.Close()
		return nil, fmt.Errorf("prepare append: %w", err)
	}
	l.insertArgs = make([]any, 0, 5*insertRows)
	if l.updateStmt, err = l.writer.Prepare(`UPDATE sessions SET head = ?, micro_usd = micro_usd + ?,
		open_run = CASE WHEN ? THEN ? ELSE open_run END WHERE sid = ?`); err != nil {
		l.Close()
		return nil, fmt.Errorf("prepare append: %w", err)
	}
	if l.checkpointStmt, err = l.writer.Prepare(`INSERT INTO checkpoints (sid, head, data)
		SELECT sid, ?, ? FROM sessions WHERE sid = ? AND head >= ?
		ON CONFLICT (sid) DO UPDATE SET head = excluded.head, data = excluded.data`); err != nil {
		l.Close()
		return nil, fmt.Errorf("prepare checkpoint: %w", err)
	}
	if l.updateInfoStmt, err = l.writer.Prepare(`UPDATE sessions SET title = ?, model = ? WHERE id = ?`); err != nil {
		l.Close()
		return nil, fmt.Errorf("prepare session update: %w", err)
	}
	l.wg.Add(1)
	go l.writeLoop()
	return l, nil
}

// makePrivate makes path's directory (0700) and an empty database file
// (0600) when they are missing, with those modes whatever the umask. SQLite
// itself would make the file 0644 less the umask; it gives the -wal and
// -shm files it makes the database file's mode, so they are 0600 too.
func makePrivate(path string) error {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create data dir: %w", err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("create data dir: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	err = f.Chmod(0o600)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

func openDB(path string, conns int, pragmas ...string) (*sql.DB, error) {
	q := url.Values{}
	for _, p := range append([]string{"journal_mode(WAL)", "synchronous(NORMAL)", "busy_timeout(10000)", "temp_store(MEMORY)", "cache_size(-16000)"}, pragmas...) {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, openFailure(path, err))
	}
	return db, nil
}

func (l *Log) loadSessions() error {
	rows, err := l.writer.Query(`SELECT sid, id, head FROM sessions`)
	if err != nil {
		return fmt.Errorf("load sessions: %w", err)
	}
	defer rows.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	for rows.Next() {
		var r sessionRow
		var id string
		if err := rows.Scan(&r.sid, &id, &r.head); err != nil {
			return fmt.Errorf("load sessions: %w", err)
		}
		l.sessions[id] = &r
	}
	return rows.Err()
}

// Path returns the database file's path.
func (l *Log) Path() string { return l.path }

// Close stops the writer, after it has committed what was queued, and closes
// the database.
func (l *Log) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		l.wg.Wait()
		if l.wal != nil {
			err = l.wal.close()
		}
		for _, db := range []*sql.DB{l.reader, l.writer} {
			if db != nil {
				err = errors.Join(err, db.Close())
			}
		}
	})
	return err
}

// CreateSession implements store.Log.
func (l *Log) CreateSession(ctx context.Context, s store.Session) error {
	if s.Created.IsZero() {
		s.Created = time.Now()
	}
	l.mu.Lock()
	_, exists := l.sessions[s.ID]
	l.mu.Unlock()
	if exists {
		return fmt.Errorf("create session %s: %w", s.ID, store.ErrSessionExists)
	}
	// Two creates of one id can both pass the check above; the loser of the
	// insert inserts nothing.
	res, err := l.writer.ExecContext(ctx,
		`INSERT INTO sessions (id, title, model, cwd, created) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		s.ID, s.Title, s.Model, s.Cwd, s.Created.UnixMilli())
	if err != nil {
		return fmt.Errorf("create session %s: %w", s.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create session %s: %w", s.ID, err)
	} else if n == 0 {
		return fmt.Errorf("create session %s: %w", s.ID, store.ErrSessionExists)
	}
	sid, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("create session %s: %w", s.ID, err)
	}
	l.mu.Lock()
	l.sessions[s.ID] = &sessionRow{sid: sid}
	l.mu.Unlock()
	return nil
}

// UpdateSession implements store.Log.
// The update goes in the writer's next commit, with the appends queued
// beside it.
func (l *Log) UpdateSession(ctx context.Context, s store.Session) error {
	return l.write(ctx, len(s.Title)+len(s.Model), func(tx *sql.Tx) (error, error) {
		res, err := tx.Stmt(l.updateInfoStmt).Exec(s.Title, s.Model, s.ID)
		if err != nil {
			return nil, fmt.Errorf("update session %s: %w", s.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("update session %s: %w", s.ID, store.ErrUnknownSession), nil
		}
		return nil, nil
	})
}

const sessionColumns = `id, title, model, cwd, created, head, open_run, micro_usd`

func scanSession(sc interface{ Scan(...any) error }) (store.Session, error) {
	var s store.Session
	var created int64
	err := sc.Scan(&s.ID, &s.Title, &s.Model, &s.Cwd, &created, &s.Head, &s.OpenRun, &s.MicroUSD)
	s.Created = time.UnixMilli(created)
	return s, err
}

// Session implements store.Log.
func (l *Log) Session(ctx context.Context, id string) (store.Session, error) {
	row := l.reader.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id)
	s, err := scanSession(row)
	if errors.Is(err, sql.ErrNoRows) {
		return s, fmt.Errorf("read session %s: %w", id, store.ErrUnknownSession)
	}
	if err != nil {
		return s, fmt.Errorf("read session %s: %w", id, damaged(err))
	}
	return s, nil
}

// Sessions implements store.Log.
func (l *Log) Sessions(ctx context.Context) ([]store.Session, error) {
	rows, err := l.reader.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions ORDER BY created DESC, sid DESC`)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", damaged(err))
	}
	defer rows.Close()
	out := []store.Session{}
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", damaged(err))
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", damaged(err))
	}
	return out, nil
}

func (l *Log) sid(id string) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.sessions[id]
	if !ok {
		return 0, fmt.Errorf("session %s: %w", id, store.ErrUnknownSession)
	}
	return r.sid, nil
}

// Read implements store.Log.
func (l *Log) Read(ctx context.Context, session string, since uint64, limit int) ([]store.Frame, error) {
	var out []store.Frame
	err := l.scan(ctx, session, since, limit, func(f store.Frame) error {
		f.Data = append([]byte(nil), f.Data...)
		out = append(out, f)
		return nil
	})
	if out == nil && err == nil {
		out = []store.Frame{}
	}
	return out, err
}

// Scan implements store.Log.
func (l *Log) Scan(ctx context.Context, session string, since uint64, fn func(store.Frame) error) error {
	return l.scan(ctx, session, since, 0, fn)
}

func (l *Log) scan(ctx context.Context, session string, since uint64, limit int, fn func(store.Frame) error) error {
	sid, err := l.sid(session)
	if err != nil {
		return err
	}
	if limit <= 0 {
		limit = -1
	}
	rows, err := l.reader.QueryContext(ctx,
		`SELECT seq, type, run, data FROM frames WHERE sid = ? AND seq > ? ORDER BY seq LIMIT ?`, sid, since, limit)
	if err != nil {
		return fmt.Errorf("read session %s: %w", session, damaged(err))
	}
	defer rows.Close()
	var data sql.RawBytes
	for rows.Next() {
		var f store.Frame
		if err := rows.Scan(&f.Seq, &f.Type, &f.Run, &data); err != nil {
			return fmt.Errorf("read session %s: %w", session, err)
		}
		f.Data = data
		if err := fn(f); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read session %s: %w", session, damaged(err))
	}
	return nil
}

// Append implements store.Log. Concurrent calls share one commit.
func (l *Log) Append(ctx context.Context, batches ...store.Batch) error {
	return l.send(ctx, &appendReq{batches: batches, errc: make(chan error, 1)})
}

// send queues req for the writer and waits for its outcome.
func (l *Log) send(ctx context.Context, req *appendReq) error {
	select {
	case l.appends <- req:
	case <-l.done:
		return store.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued the append is committed even if ctx ends: the caller must
	// learn whether it landed, so wait for the answer. A Close racing the
	// send above may stop the writer before it takes req: then nothing of
	// req was written.
	select {
	case err := <-req.errc:
		return err
	case <-l.stopped:
		select {
		case err := <-req.errc: // answered just before the writer stopped
			return err
		default:
			return store.ErrClosed
		}
	}
}

// writeLoop is the single writer. It takes every append queued while the
// previous commit was in flight and commits them together.
func (l *Log) writeLoop() {
	defer l.wg.Done()
	defer close(l.stopped)
	var pending []*appendReq
	answered := 0 // requests the previous commit answered
	gather := time.NewTimer(time.Hour)
	gather.Stop()
	for {
		select {
		case req := <-l.appends:
			pending = append(pending[:0], req)
		case <-l.done:
			// Commit what is still queued, then stop.
			for {
				select {
				case req := <-l.appends:
					l.commit([]*appendReq{req})
				default:
					return
				}
			}
		}
		l.drain(&pending)
		l.gather(&pending, answered, gather)
		answered = len(pending)
		l.commit(pending)
	}
}

// gather waits a little for more appends when fewer are queued than the
// previous commit answered: the writers it answered are likely to come
// back at once, and they then share this commit (16 writers of one frame
// each do, rather than commit one at a time). It waits on the appends
// channel and a timer, never by yielding: a goroutine woken by a send or
// a timer runs next on its processor, while one that yields waits at the
// back of the global run queue, behind every runnable goroutine — with
// hundreds of sessions streaming, that kept the writer from running for
// half a second at a time while their loops made frames it could not
// commit.
func (l *Log) gather(pending *[]*appendReq, answered int, t *time.Timer) {
	if len(*pending) >= answered || len(*pending) >= maxPending {
		return
	}
	t.Reset(gatherWait)
	defer t.Stop()
	for len(*pending) < answered && len(*pending) < maxPending {
		select {
		case req := <-l.appends:
			*pending = append(*pending, req)
			l.drain(pending)
		case <-t.C:
			return
		case <-l.done:
			return
		}
	}
}

// gatherWait is the longest the writer waits for the writers it answered
// to come back before it commits what it has.
const gatherWait = 200 * time.Microsecond

// drain adds to pending what is queued, up to maxPending in all.
func (l *Log) drain(pending *[]*appendReq) {
	for len(*pending) < maxPending {
		select {
		case req := <-l.appends:
			*pending = append(*pending, req)
		default:
			return
		}
	}
}

// maxPending is the most appends one commit takes.
const maxPending = 4096

// OnCommit implements store.CommitObserver.
func (l *Log) OnCommit(f func(store.Commit)) { l.onCommit = f }

func (l *Log) commit(reqs []*appendReq) {
	var start time.Time
	if l.onCommit != nil {
		start = time.Now()
	}
	var errs []error
	if err := l.room(); err != nil {
		errs = make([]error, len(reqs))
		for i := range errs {
			errs[i] = err
		}
	} else {
		errs = l.commitAll(reqs)
	}
	for i, r := range reqs {
		if errors.Is(errs[i], syscall.ENOSPC) && l.full == 0 {
			l.full = minFree + 2*size(reqs)
		}
		r.errc <- errs[i]
	}
	l.walWritten(size(reqs))
	if l.onCommit != nil {
		c := store.Commit{Appends: len(reqs), Took: time.Since(start)}
		for _, err := range errs {
			if err != nil && c.Err == nil {
				c.Err = err
			}
		}
		for _, r := range reqs {
			for _, b := range r.batches {
				c.Frames += len(b.Frames)
			}
		}
		l.onCommit(c)
	}
}

// minFree is the least free space the writer waits for after a full disk.
const minFree = 1 << 20

// size is how many bytes of frames reqs hold.
func size(reqs []*appendReq) uint64 {
	var n uint64
	for _, r := range reqs {
		for _, b := range r.batches {
			for _, f := range b.Frames {
				n += uint64(len(f.Data))
			}
		}
		n += uint64(r.size)
	}
	return n
}

// room refuses an append, without trying SQLite, while the disk that
// filled up has not got back the room l.full asks for.
func (l *Log) room() error {
	if l.full == 0 {
		return nil
	}
	free, ok := freeSpace(filepath.Dir(l.path))
	if !ok || free >= l.full {
		l.full = 0
		return nil
	}
	return fmt.Errorf("append: %w", &ioError{fmt.Errorf("the disk is still full (%d bytes free where the log is, %d needed)", free, l.full), syscall.ENOSPC})
}

// commitAll commits reqs in as few transactions as it can and returns each
// request's own outcome, so that one session's failure never fails another
// session's append. All go in one transaction. When a batch fails to write
// (a row another writer holds, say), its request gets the error and the
// other batches are committed again without it. When the transaction fails
// as a whole (the disk filled as it committed), each request is committed
// again in a transaction of its own. Neither costs anything while nothing
// fails.
func (l *Log) commitAll(reqs []*appendReq) []error {
	var failed map[batchRef]error // batches left out, with their errors
	careful := false
	for {
		errs, culprit, err := l.commitTx(reqs, failed, careful)
		switch {
		case culprit.batch == retryCareful && !careful:
			careful = true
			continue
		case err == nil:
			for ref, ferr := range failed {
				errs[ref.req] = errors.Join(errs[ref.req], ferr)
			}
			return errs
		case culprit.req >= 0:
			if failed == nil {
				failed = make(map[batchRef]error)
			}
			failed[culprit] = err
			continue
		case len(reqs) == 1:
			for _, ferr := range failed {
				err = errors.Join(err, ferr)
			}
			return []error{err}
		}
		errs = make([]error, len(reqs))
		for i, r := range reqs {
			errs[i] = l.commitAll([]*appendReq{r})[0]
		}
		return errs
	}
}

// batchRef names batch j of request req.
type batchRef struct{ req, batch int }

// retryCareful, as a culprit's batch, says that a write of many frames at
// once failed: the transaction is tried again a frame at a time, which
// names the batch that fails.
const retryCareful = -2

// commitTx writes every batch of reqs but those in skip in one transaction
// and returns each request's own error (a seq conflict skips only that
// batch). When writing a batch fails, nothing is committed and culprit
// names the batch; when the transaction fails otherwise, culprit.req is -1.
func (l *Log) commitTx(reqs []*appendReq, skip map[batchRef]error, careful bool) (errs []error, culprit batchRef, err error) {
	culprit = batchRef{-1, -1}
	errs = make([]error, len(reqs))
	heads := make(map[*sessionRow]uint64)
	var conflicts []*sessionRow // sessions whose cached head a batch disagreed with
	l.mu.Lock()
	rows := make([][]*sessionRow, len(reqs))
	for i, r := range reqs {
		rows[i] = make([]*sessionRow, len(r.batches))
		for j, b := range r.batches {
			if _, ok := skip[batchRef{i, j}]; ok {
				continue
			}
			row, ok := l.sessions[b.Session]
			if !ok {
				errs[i] = errors.Join(errs[i], fmt.Errorf("append to session %s: %w", b.Session, store.ErrUnknownSession))
				continue
			}
			rows[i][j] = row
			if _, seen := heads[row]; !seen {
				heads[row] = row.head
			}
		}
	}
	l.mu.Unlock()
	defer func() {
		// A failure may come from a stale cached head (another process
		// wrote to the file): read the heads again from what is stored.
		if err != nil && culprit.req >= 0 && culprit.batch >= 0 {
			conflicts = append(conflicts, rows[culprit.req][culprit.batch])
		}
		l.refreshHeads(conflicts)
	}()

	tx, err := l.writer.Begin()
	if err != nil {
		l.abandon()
		return nil, culprit, fmt.Errorf("append: begin: %w", classify(err))
	}
	defer tx.Rollback()
	ins := l.newInserter(tx, careful)
	defer ins.close()
	upd := tx.Stmt(l.updateStmt)
	defer upd.Close()

	for i, r := range reqs {
		for j, b := range r.batches {
			row := rows[i][j]
			if row == nil || len(b.Frames) == 0 && b.CostDelta == 0 {
				continue
			}
			head := heads[row]
			if cerr := checkSeqs(b, head); cerr != nil {
				errs[i] = errors.Join(errs[i], cerr)
				conflicts = append(conflicts, row)
				continue
			}
			runChanged, openRun := false, ""
			for _, f := range b.Frames {
				data := f.Data
				if data == nil {
					// A nil []byte binds as NULL, which data's NOT NULL
					// would reject, failing every batch of the commit.
					data = []byte{}
				}
				if err := ins.add(row.sid, f.Seq, f.Type, f.Run, data); err != nil {
					if careful {
						return nil, batchRef{i, j}, fmt.Errorf("append to session %s seq %d: %w", b.Session, f.Seq, classify(err))
					}
					return nil, batchRef{-1, retryCareful}, classify(err)
				}
				switch f.Type {
				case "RUN_STARTED":
					runChanged, openRun = true, f.Run
				case "RUN_FINISHED", "RUN_ERROR":
					runChanged, openRun = true, ""
				}
			}
			if n := len(b.Frames); n > 0 {
				head = b.Frames[n-1].Seq
			}
			if _, err := upd.Exec(head, b.CostDelta, runChanged, openRun, row.sid); err != nil {
				return nil, batchRef{i, j}, fmt.Errorf("append to session %s: %w", b.Session, classify(err))
			}
			heads[row] = head
		}
	}
	if err := ins.flush(); err != nil {
		return nil, batchRef{-1, retryCareful}, classify(err)
	}
	// The other writes go after every frame of the commit, so that a
	// checkpoint taken right after frames that share its commit finds them
	// logged.
	for i, r := range reqs {
		if r.op == nil {
			continue
		}
		if _, ok := skip[batchRef{i, -1}]; ok {
			continue
		}
		own, fatal := r.op(tx)
		if fatal != nil {
			return nil, batchRef{i, -1}, classify(fatal)
		}
		errs[i] = errors.Join(errs[i], own)
	}
	if err := tx.Commit(); err != nil {
		l.abandon()
		return nil, culprit, fmt.Errorf("append: commit: %w", classify(err))
	}
	l.mu.Lock()
	for row, h := range heads {
		row.head = h
	}
	l.mu.Unlock()
	return errs, culprit, nil
}

// openFailure is why the database at path did not open: a full disk when
// there is next to no room where it is (SQLite, to open a log in WAL
// mode, must make and size its -shm and -wal files, and says only "disk
// I/O error"), damage when SQLite says so, err as it is otherwise.
func openFailure(path string, err error) error {
	if free, ok := freeSpace(filepath.Dir(path)); ok && free < minFree {
		return &ioError{fmt.Errorf("%w (the disk is full: %d bytes free where the log is)", err, free), syscall.ENOSPC}
	}
	return damaged(err)
}

// abandon makes sure the writer's connection is not left inside a
// transaction after a failed begin or commit: on a full disk or an I/O
// error SQLite may keep the transaction open, and every later BEGIN would
// then fail even once the disk has room again.
func (l *Log) abandon() {
	_, _ = l.writer.Exec(`ROLLBACK`) // "no transaction is active" is the usual answer
}

// refreshHeads reads the heads of rows again from the frames stored. Runs
// on the writer goroutine.
func (l *Log) refreshHeads(rows []*sessionRow) {
	for _, row := range rows {
		var head uint64
		if err := l.writer.QueryRow(`SELECT COALESCE(MAX(seq), 0) FROM frames WHERE sid = ?`, row.sid).Scan(&head); err != nil {
			continue // the cache stays as it was; the next failure tries again
		}
		l.mu.Lock()
		row.head = head
		l.mu.Unlock()
	}
}

// SQLite's primary result codes that name what went wrong on the disk.
const (
	codePerm     = 3
	codeReadOnly = 8
	codeIOErr    = 10
	codeFull     = 13
	codeCantOpen = 14
)

// ioError is an SQLite error that also wraps the system error it stands
// for, so that a caller tells a full disk (syscall.ENOSPC) or a database
// it may not write (syscall.EROFS, syscall.EACCES) from other failures
// with errors.Is, without knowing SQLite.
type ioError struct {
	err   error
	errno syscall.Errno
}

func (e *ioError) Error() string   { return e.err.Error() }
func (e *ioError) Unwrap() []error { return []error{e.err, e.errno} }

// classify wraps err in an ioError when SQLite says the disk is full,
// read-only, not permitted or failing.
func classify(err error) error {
	var se *sqlitedrv.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case codeFull:
		return &ioError{err, syscall.ENOSPC}
	case codeReadOnly:
		return &ioError{err, syscall.EROFS}
	case codePerm, codeCantOpen:
		return &ioError{err, syscall.EACCES}
	case codeIOErr:
		return &ioError{err, syscall.EIO}
	}
	return err
}

func checkSeqs(b store.Batch, head uint64) error {
	for k, f := range b.Frames {
		if want := head + 1 + uint64(k); f.Seq != want {
			return fmt.Errorf("append to session %s: frame seq %d, want %d: %w", b.Session, f.Seq, want, store.ErrSeqConflict)
		}
	}
	return nil
}

// SaveCheckpoint implements store.Checkpointer. The checkpoint replaces
// the session's row in the writer's next commit, shared with the appends
// queued beside it (see write); it lands only while the session's logged
// head is at least c.Head.
func (l *Log) SaveCheckpoint(ctx context.Context, session string, c store.Checkpoint) error {
	sid, err := l.sid(session)
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	data := c.Data
	if data == nil {
		data = []byte{}
	}
	return l.write(ctx, len(data), func(tx *sql.Tx) (error, error) {
		res, err := tx.Stmt(l.checkpointStmt).Exec(c.Head, data, sid, c.Head)
		if err != nil {
			return nil, fmt.Errorf("save checkpoint of session %s: %w", session, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, fmt.Errorf("save checkpoint of session %s: %w", session, err)
		} else if n == 0 {
			return fmt.Errorf("save checkpoint of session %s at seq %d: %w", session, c.Head, store.ErrCheckpointAhead), nil
		}
		return nil, nil
	})
}

// write has the writer make op in its next commit, shared with the appends
// queued beside it: a transaction of its own would be one more WAL commit,
// and would hold the writer's one connection from the appends meanwhile.
func (l *Log) write(ctx context.Context, size int, op func(tx *sql.Tx) (own, fatal error)) error {
	return l.send(ctx, &appendReq{op: op, size: size, errc: make(chan error, 1)})
}

// LoadCheckpoint implements store.Checkpointer.
func (l *Log) LoadCheckpoint(ctx context.Context, session string) (store.Checkpoint, error) {
	var c store.Checkpoint
	sid, err := l.sid(session)
	if err != nil {
		return c, fmt.Errorf("load checkpoint: %w", err)
	}
	err = l.reader.QueryRowContext(ctx, `SELECT head, data FROM checkpoints WHERE sid = ?`, sid).Scan(&c.Head, &c.Data)
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("load checkpoint of session %s: %w", session, store.ErrNoCheckpoint)
	}
	if err != nil {
		return c, fmt.Errorf("load checkpoint of session %s: %w", session, err)
	}
	return c, nil
}
