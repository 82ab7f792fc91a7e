package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/getorrery/orrery/store"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrInUse means another connection, most likely a running kernel, has the
// database open, so it cannot be repaired now.
var ErrInUse = errors.New("the database is in use")

// RepairFile repairs the database at path, as orrery db repair does. It
// takes the file for itself (SQLite's exclusive locking: it fails with
// ErrInUse while a kernel or any other connection has it open, and holds
// every other one off until it is done), checks it in full, and when
// anything is damaged:
//
//   - copies the file, unchanged, to path.damaged-TIME (RepairReport.Kept);
//   - builds a new database from what is intact: every session's frames
//     1..Intact (all of them for an undamaged session), its record with
//     head = Intact and open_run set to the run those frames leave in
//     flight (which the caller closes), and a record rebuilt from the
//     frames for frames whose record is lost; the other tables are copied
//     as they are;
//   - writes it over path through SQLite (its backup API), so the file is
//     never half-replaced, and checks it again (RepairReport.After).
//
// A file SQLite cannot open as a database cannot be repaired: restore it
// from a backup.
func RepairFile(ctx context.Context, path string, opts store.RepairOptions) (store.RepairReport, error) {
	var rep store.RepairReport
	// SQLite's exclusive lock on the file keeps any other opener out for
	// the repair; orrery db repair also holds the data dir's lock
	// (package datadir), so no kernel even starts meanwhile.
	db, err := openExisting(path, "EXCLUSIVE")
	if err != nil {
		return rep, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return rep, repairOpenError(path, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		return rep, repairOpenError(path, err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return rep, fmt.Errorf("repair %s: %w", path, err)
	}
	checkOpts := store.CheckOptions{Full: true, Frame: opts.Frame, Progress: opts.Progress}
	if rep.Before, err = check(ctx, conn, path, checkOpts); err != nil {
		return rep, fmt.Errorf("repair %s: %w", path, err)
	}
	if rep.Before.Unreadable != "" {
		return rep, fmt.Errorf("repair %s: %w: %s, so there is nothing a repair can read: restore it from a backup", path, store.ErrDamaged, rep.Before.Unreadable)
	}
	if rep.Before.OK() {
		rep.After = rep.Before
		rep.Frames = rep.Before.Frames
		return rep, nil
	}
	r := &repairer{conn: conn, path: path, opts: opts, rep: &rep}
	if err := r.keep(ctx); err != nil {
		return rep, fmt.Errorf("repair %s: keep the damaged file: %w", path, err)
	}
	tmp := path + ".repair"
	if err := r.build(ctx, tmp); err != nil {
		removeDB(tmp)
		return rep, fmt.Errorf("repair %s: %w", path, err)
	}
	if err := r.restore(ctx, tmp); err != nil {
		removeDB(tmp)
		return rep, fmt.Errorf("repair %s: write the repaired database: %w (the damaged file is kept at %s)", path, err, rep.Kept)
	}
	removeDB(tmp)
	rep.Repaired = true
	if rep.After, err = check(ctx, conn, path, checkOpts); err != nil {
		return rep, fmt.Errorf("repair %s: check the repaired database: %w", path, err)
	}
	rep.Frames = rep.After.Frames
	return rep, nil
}

func repairOpenError(path string, err error) error {
	var se *sqlitedriver.Error
	if errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED) {
		return fmt.Errorf("repair %s: %w by another process (a running orrery serve?): stop it, then repair", path, ErrInUse)
	}
	if isDamage(err) {
		return fmt.Errorf("repair %s: %w: %v, so there is nothing a repair can read: restore it from a backup", path, store.ErrDamaged, err)
	}
	return fmt.Errorf("repair %s: %w", path, err)
}

// removeDB removes a database file and SQLite's files beside it.
func removeDB(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		os.Remove(p)
	}
}

type repairer struct {
	conn *sql.Conn // holds the damaged database exclusively
	path string
	opts store.RepairOptions
	rep  *store.RepairReport
}

func (r *repairer) progress(stage string, done, total int64, unit string) {
	if r.opts.Progress != nil {
		r.opts.Progress(store.Progress{Stage: stage, Done: done, Total: total, Unit: unit})
	}
}

// keep copies the damaged file aside, after folding its WAL into it.
func (r *repairer) keep(ctx context.Context) error {
	// The checkpoint copies pages without reading them, so damage does not
	// stop it; if it fails all the same, the WAL is kept beside the copy.
	_, cerr := r.conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	kept := r.path + ".damaged-" + time.Now().UTC().Format("20060102T150405Z")
	r.progress("keeping the damaged file", 0, 0, "")
	if err := copyFile(r.path, kept); err != nil {
		return err
	}
	if fi, err := os.Stat(r.path + "-wal"); cerr != nil && err == nil && fi.Size() > 0 {
		if err := copyFile(r.path+"-wal", kept+"-wal"); err != nil {
			return err
		}
	}
	r.rep.Kept = kept
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(to)
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		os.Remove(to)
		return err
	}
	return out.Close()
}

// kept is one session as the repaired database holds it.
type kept struct {
	rec      fullRecord
	upTo     uint64 // its frames 1..upTo are copied
	repaired *store.Repaired
}

// fullRecord is a session record with every column.
type fullRecord struct {
	sid                   int64
	id, title, model, cwd string
	created, microUSD     int64
	openRun               string
}

// build writes the intact part of the damaged database into a new one at
// tmp. It reads everything it needs first and only then writes: a read
// that meets a damaged page inside the write transaction fails every
// write after it.
func (r *repairer) build(ctx context.Context, tmp string) error {
	plan, err := r.plan(ctx)
	if err != nil {
		return err
	}
	removeDB(tmp)
	tables, err := r.createLike(ctx, tmp)
	if err != nil {
		return fmt.Errorf("create the repaired database: %w", err)
	}
	if _, err := r.conn.ExecContext(ctx, `ATTACH DATABASE ? AS fresh`, tmp); err != nil {
		return fmt.Errorf("create the repaired database: %w", err)
	}
	defer r.conn.ExecContext(context.WithoutCancel(ctx), `DETACH DATABASE fresh`)
	// The new file is a scratch copy until the restore, which writes the
	// damaged file durably.
	if _, err := r.conn.ExecContext(ctx, `PRAGMA fresh.synchronous = OFF`); err != nil {
		return err
	}
	if err := r.write(ctx, plan); err != nil {
		return err
	}
	for _, t := range tables {
		q := quoteIdent(t)
		if _, err := r.conn.ExecContext(ctx, `INSERT INTO fresh.`+q+` SELECT * FROM main.`+q); err != nil {
			if !isDamage(err) {
				return fmt.Errorf("copy table %s: %w", t, err)
			}
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("table %s does not read (%v): it is empty in the repaired database", t, err))
		}
	}
	return nil
}

// write copies the planned sessions and their intact frames in one
// transaction.
func (r *repairer) write(ctx context.Context, plan []kept) error {
	if _, err := r.conn.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	defer r.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	for i, k := range plan {
		if err := r.copyFrames(ctx, k.rec.sid, k.upTo); err != nil {
			return fmt.Errorf("copy the frames of session %s: %w", k.rec.id, err)
		}
		if _, err := r.conn.ExecContext(ctx, `INSERT INTO fresh.sessions (sid, id, title, model, cwd, created, head, open_run, micro_usd)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			k.rec.sid, k.rec.id, k.rec.title, k.rec.model, k.rec.cwd, k.rec.created, k.upTo, k.rec.openRun, k.rec.microUSD); err != nil {
			return fmt.Errorf("copy the record of session %s: %w", k.rec.id, err)
		}
		r.progress("copying sessions", int64(i+1), int64(len(plan)), "sessions")
	}
	_, err := r.conn.ExecContext(ctx, "COMMIT")
	return err
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// createLike makes the database at tmp with the damaged one's schema (ours
// when the damaged one's does not name a table) and returns the tables
// besides sessions and frames, to copy as they are.
func (r *repairer) createLike(ctx context.Context, tmp string) ([]string, error) {
	rows, err := r.conn.QueryContext(ctx, `SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid`)
	if err != nil {
		return nil, err
	}
	var stmts, tables []string
	for rows.Next() {
		var typ, name, text string
		if err := rows.Scan(&typ, &name, &text); err != nil {
			rows.Close()
			return nil, err
		}
		stmts = append(stmts, text)
		if typ == "table" && name != "sessions" && name != "frames" {
			tables = append(tables, name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// A rollback journal, not a WAL: the restore keeps the damaged file's
	// own WAL mode.
	db, err := sql.Open("sqlite", "file:"+tmp+"?_pragma=journal_mode(DELETE)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return nil, err
		}
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return nil, err
	}
	return tables, nil
}

// plan decides, reading only, what of each session the repaired database
// keeps: a session the check found whole, all of it; a damaged one, its
// frames up to Intact; frames whose record is lost, their intact prefix
// under a record rebuilt from them.
func (r *repairer) plan(ctx context.Context) ([]kept, error) {
	damage := map[string]store.Damage{}
	for _, d := range r.rep.Before.Damaged {
		damage[d.Session] = d
	}
	recs, err := r.records(ctx)
	if err != nil {
		return nil, err
	}
	var plan []kept
	ids := map[string]bool{}
	for _, rec := range recs {
		ids[rec.id] = true
		k := kept{rec: rec}
		var head uint64
		if err := r.conn.QueryRowContext(ctx, `SELECT head FROM main.sessions WHERE sid = ?`, rec.sid).Scan(&head); err != nil {
			return nil, fmt.Errorf("read the record of session %s: %w", rec.id, err)
		}
		k.upTo = head
		if d, hurt := damage[rec.id]; hurt {
			k.upTo = d.Intact
			from, to := d.Lost()
			k.repaired = &store.Repaired{Session: rec.id, Head: k.upTo, LostFrom: from, LostTo: to, Readable: r.readableAfter(ctx, rec.sid, k.upTo)}
		}
		if k.rec.openRun, err = r.openRun(ctx, rec.sid, k.upTo); err != nil {
			return nil, fmt.Errorf("find the open run of session %s: %w", rec.id, err)
		}
		if k.repaired != nil {
			k.repaired.OpenRun = k.rec.openRun
			r.rep.Sessions = append(r.rep.Sessions, *k.repaired)
		}
		plan = append(plan, k)
	}
	for _, u := range r.rep.Before.Unrecorded {
		upTo, err := r.intactPrefix(ctx, u.Key)
		if err != nil {
			return nil, err
		}
		id := u.Session
		if id == "" || ids[id] {
			id = fmt.Sprintf("recovered-%d", u.Key)
		}
		if upTo == 0 {
			r.rep.Sessions = append(r.rep.Sessions, store.Repaired{Session: id, LostFrom: 1, LostTo: u.Last,
				Note: "its record is lost and none of its frames read: nothing of it is kept"})
			continue
		}
		ids[id] = true
		k := kept{rec: fullRecord{sid: u.Key, id: id, created: r.firstTimestamp(ctx, u.Key)}, upTo: upTo}
		if k.rec.openRun, err = r.openRun(ctx, u.Key, upTo); err != nil {
			return nil, fmt.Errorf("find the open run of %s: %w", id, err)
		}
		rp := store.Repaired{Session: id, Head: upTo, OpenRun: k.rec.openRun,
			Note: "its record was lost and is rebuilt from its frames: its title, model, cwd and cost are lost"}
		if upTo < u.Last {
			rp.LostFrom, rp.LostTo = upTo+1, u.Last
			rp.Readable = r.readableAfter(ctx, u.Key, upTo)
		}
		r.rep.Sessions = append(r.rep.Sessions, rp)
		plan = append(plan, k)
	}
	return plan, nil
}

// records are the session records that read, in sid order; the damaged
// table's rows past a bad page are missing (their frames are unrecorded).
func (r *repairer) records(ctx context.Context) ([]fullRecord, error) {
	rows, err := r.conn.QueryContext(ctx, `SELECT sid, id, title, model, cwd, created, micro_usd FROM main.sessions ORDER BY sid`)
	if err != nil {
		if isDamage(err) {
			return nil, nil
		}
		return nil, err
	}
	defer rows.Close()
	var out []fullRecord
	for rows.Next() {
		var rec fullRecord
		if err := rows.Scan(&rec.sid, &rec.id, &rec.title, &rec.model, &rec.cwd, &rec.created, &rec.microUSD); err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil && !isDamage(err) {
		return nil, err
	}
	return out, nil
}

func (r *repairer) copyFrames(ctx context.Context, sid int64, upTo uint64) error {
	if upTo == 0 {
		return nil
	}
	// The LIMIT stops the scan at upTo without stepping onto the next
	// frame, which may be on the damaged page.
	_, err := r.conn.ExecContext(ctx, `INSERT INTO fresh.frames (sid, seq, type, run, data)
		SELECT sid, seq, type, run, data FROM main.frames WHERE sid = ? AND seq <= ? ORDER BY seq LIMIT ?`, sid, upTo, upTo)
	return err
}

// openRun is the run the frames 1..upTo of sid leave in flight, or "". It
// reads them forwards with a LIMIT, so never past upTo (a seek to upTo
// would look at the frame after it).
func (r *repairer) openRun(ctx context.Context, sid int64, upTo uint64) (string, error) {
	if upTo == 0 {
		return "", nil
	}
	rows, err := r.conn.QueryContext(ctx, `SELECT type, run FROM main.frames WHERE sid = ? AND seq <= ? ORDER BY seq LIMIT ?`, sid, upTo, upTo)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	open := ""
	for rows.Next() {
		var typ, run string
		if err := rows.Scan(&typ, &run); err != nil {
			return "", err
		}
		switch typ {
		case "RUN_STARTED":
			open = run
		case "RUN_FINISHED", "RUN_ERROR":
			open = ""
		}
	}
	return open, rows.Err()
}

// readableAfter counts the frames of sid after upTo that still read, up
// to the first that does not.
func (r *repairer) readableAfter(ctx context.Context, sid int64, upTo uint64) int64 {
	rows, err := r.conn.QueryContext(ctx, `SELECT seq FROM main.frames WHERE sid = ? AND seq > ? ORDER BY seq`, sid, upTo)
	if err != nil {
		return 0
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		n++
	}
	return n
}

// intactPrefix is the last seq up to which the frames of sid are all there
// in order and, with RepairOptions.Frame, valid.
func (r *repairer) intactPrefix(ctx context.Context, sid int64) (uint64, error) {
	rows, err := r.conn.QueryContext(ctx, `SELECT seq, data FROM main.frames WHERE sid = ? ORDER BY seq`, sid)
	if err != nil {
		if isDamage(err) {
			return 0, nil
		}
		return 0, err
	}
	defer rows.Close()
	var last uint64
	var data sql.RawBytes
	for rows.Next() {
		var seq uint64
		if err := rows.Scan(&seq, &data); err != nil {
			return last, err
		}
		if seq != last+1 || r.opts.Frame != nil && r.opts.Frame(data) != nil {
			break
		}
		last = seq
	}
	if err := rows.Err(); err != nil && !isDamage(err) {
		return last, err
	}
	return last, nil
}

// firstTimestamp is the timestamp (Unix milliseconds) of the first frame
// of sid, or now.
func (r *repairer) firstTimestamp(ctx context.Context, sid int64) int64 {
	var data []byte
	if err := r.conn.QueryRowContext(ctx, `SELECT data FROM main.frames WHERE sid = ? ORDER BY seq LIMIT 1`, sid).Scan(&data); err == nil {
		var f struct {
			Timestamp int64 `json:"timestamp"`
		}
		if json.Unmarshal(data, &f) == nil && f.Timestamp > 0 {
			return f.Timestamp
		}
	}
	return time.Now().UnixMilli()
}

// restore writes the database at tmp over the damaged one, page by page,
// through the exclusive connection.
func (r *repairer) restore(ctx context.Context, tmp string) error {
	return r.conn.Raw(func(dc any) error {
		rs, ok := dc.(interface {
			NewRestore(string) (*sqlitedriver.Backup, error)
		})
		if !ok {
			return errors.New("the SQLite driver cannot restore a backup")
		}
		b, err := rs.NewRestore("file:" + tmp)
		if err != nil {
			return err
		}
		for {
			if err := ctx.Err(); err != nil {
				b.Finish()
				return err
			}
			more, err := b.Step(1024)
			if err != nil {
				b.Finish()
				return err
			}
			total := int64(b.PageCount())
			r.progress("writing the repaired database", total-int64(b.Remaining()), total, "pages")
			if !more {
				break
			}
		}
		return b.Finish()
	})
}
