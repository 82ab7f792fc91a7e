package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/getorrery/orrery/store"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var _ store.Checker = (*Log)(nil)

// maxProblems bounds the integrity check's findings kept in a Report:
// SQLite's quick_check stops at 100 too.
const maxProblems = 100

// isDamage reports whether err is SQLite saying that the file is damaged
// (SQLITE_CORRUPT) or is not a database (SQLITE_NOTADB).
func isDamage(err error) bool {
	if errors.Is(err, store.ErrDamaged) {
		return true
	}
	var se *sqlitedriver.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// damaged marks err with store.ErrDamaged when it is SQLite finding the
// file damaged, and returns every other error as it is.
func damaged(err error) error {
	if err == nil || errors.Is(err, store.ErrDamaged) || !isDamage(err) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrDamaged, err)
}

// Check implements store.Checker: it reads, in one transaction of its own,
// so it sees one state of the log while the kernel goes on appending.
func (l *Log) Check(ctx context.Context, opts store.CheckOptions) (store.Report, error) {
	conn, err := l.reader.Conn(ctx)
	if err != nil {
		return store.Report{}, fmt.Errorf("check %s: %w", l.path, err)
	}
	defer conn.Close()
	return check(ctx, conn, l.path, opts)
}

// CheckFile checks the database at path, as orrery db check does. It only
// reads, so it may run while a kernel is using the file. A file SQLite
// cannot open as a database is damage, reported in Report.Unreadable; an
// error means the file could not be checked at all (it is missing, or
// cannot be read).
func CheckFile(ctx context.Context, path string, opts store.CheckOptions) (store.Report, error) {
	db, err := openExisting(path, "")
	if err != nil {
		return store.Report{}, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		if isDamage(err) {
			return store.Report{Path: path, Full: opts.Full, Unreadable: err.Error()}, nil
		}
		return store.Report{}, fmt.Errorf("check %s: %w", path, err)
	}
	defer conn.Close()
	return check(ctx, conn, path, opts)
}

// openExisting opens the database at path without creating it, one
// connection, with locking as the extra _pragma value says ("" for the
// normal shared locking).
func openExisting(path, locking string) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("there is no database at %s: name the data dir with --data, or ORRERY_DATA", path)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	q := url.Values{}
	q.Set("mode", "rw") // never create
	pragmas := []string{"busy_timeout(10000)", "temp_store(MEMORY)", "cache_size(-16000)"}
	if locking != "" {
		pragmas = []string{"locking_mode(" + locking + ")", "busy_timeout(0)", "temp_store(MEMORY)", "cache_size(-16000)"}
	}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	return db, nil
}

// record is one session's record as the check reads it.
type record struct {
	sid     int64
	id      string
	head    uint64
	openRun string
}

// extent is what the frames of one session span.
type extent struct {
	count    int64 // -1 when not counted
	min, max uint64
}

type checker struct {
	conn *sql.Conn
	opts store.CheckOptions
	rep  store.Report
	// trees maps a b-tree's root page to the table it belongs to.
	trees map[int64]string
	// indexes maps an index's name to its table.
	indexes map[string]string
}

func check(ctx context.Context, conn *sql.Conn, path string, opts store.CheckOptions) (store.Report, error) {
	c := &checker{conn: conn, opts: opts, rep: store.Report{Path: path, Full: opts.Full}}
	// One read transaction: every query below sees the same state.
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return c.rep, fmt.Errorf("check %s: %w", path, err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	if err := c.readSchema(ctx); err != nil {
		if isDamage(err) {
			c.rep.Unreadable = err.Error()
			return c.rep, nil
		}
		return c.rep, fmt.Errorf("check %s: %w", path, err)
	}
	if err := c.integrity(ctx); err != nil {
		return c.rep, fmt.Errorf("check %s: %w", path, err)
	}
	recs, err := c.records(ctx)
	if err != nil {
		return c.rep, fmt.Errorf("check %s: %w", path, err)
	}
	c.rep.Sessions = len(recs)
	if err := c.sessions(ctx, recs); err != nil {
		return c.rep, fmt.Errorf("check %s: %w", path, err)
	}
	if opts.Frame != nil && opts.Full {
		if err := c.frames(ctx, recs); err != nil {
			return c.rep, fmt.Errorf("check %s: %w", path, err)
		}
	}
	return c.rep, nil
}

func (c *checker) progress(stage string, done, total int64, unit string) {
	if c.opts.Progress != nil {
		c.opts.Progress(store.Progress{Stage: stage, Done: done, Total: total, Unit: unit})
	}
}

func (c *checker) problem(where, text string) {
	if len(c.rep.Problems) < maxProblems {
		c.rep.Problems = append(c.rep.Problems, store.Problem{Where: where, Text: text})
	}
}

// readSchema learns which table each b-tree belongs to, so that the
// integrity check's findings can be placed.
func (c *checker) readSchema(ctx context.Context) error {
	rows, err := c.conn.QueryContext(ctx, `SELECT type, name, tbl_name, rootpage FROM sqlite_schema`)
	if err != nil {
		return err
	}
	defer rows.Close()
	c.trees, c.indexes = map[int64]string{}, map[string]string{}
	for rows.Next() {
		var typ, name, table string
		var root sql.NullInt64
		if err := rows.Scan(&typ, &name, &table, &root); err != nil {
			return err
		}
		c.trees[root.Int64] = table
		if typ == "index" {
			c.indexes[name] = table
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if c.trees[0] != "" {
		delete(c.trees, 0)
	}
	for _, t := range []string{"sessions", "frames"} {
		if !c.hasTable(t) {
			return fmt.Errorf("%w: the database has no %s table: it is not an Orrery log", store.ErrDamaged, t)
		}
	}
	return nil
}

func (c *checker) hasTable(name string) bool {
	for _, t := range c.trees {
		if t == name {
			return true
		}
	}
	return false
}

var (
	treeLine  = regexp.MustCompile(`^Tree (\d+) page`)
	indexLine = regexp.MustCompile(`index (\S+)$`)
)

// where places one line of the integrity check.
func (c *checker) where(line string) string {
	table := ""
	if m := treeLine.FindStringSubmatch(line); m != nil {
		root, _ := strconv.ParseInt(m[1], 10, 64)
		table = c.trees[root]
	} else if m := indexLine.FindStringSubmatch(line); m != nil {
		table = c.indexes[m[1]]
	}
	switch table {
	case "":
		return store.WhereFile
	case "sessions":
		return store.WhereSessions
	case "frames":
		return store.WhereFrames
	}
	return table
}

// integrity runs SQLite's quick_check: of the whole file in a full check,
// of the session records only otherwise (a few pages).
func (c *checker) integrity(ctx context.Context) error {
	query := `PRAGMA quick_check(sessions)`
	if c.opts.Full {
		query = `PRAGMA quick_check`
		var pages int64
		if err := c.conn.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil && !isDamage(err) {
			return err
		}
		c.progress("checking pages", 0, pages, "pages")
		defer c.progress("checking pages", pages, pages, "pages")
	}
	rows, err := c.conn.QueryContext(ctx, query)
	if err != nil {
		if isDamage(err) {
			c.problem(store.WhereFile, err.Error())
			return nil
		}
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var out string
		if err := rows.Scan(&out); err != nil {
			return err
		}
		for line := range strings.SplitSeq(out, "\n") {
			if line == "ok" || line == "" || strings.HasPrefix(line, "*** in database") {
				continue
			}
			c.problem(c.where(line), line)
		}
	}
	// quick_check may end in SQLITE_CORRUPT after its findings.
	if err := rows.Err(); err != nil && !isDamage(err) {
		return err
	}
	return nil
}

// records reads every session record it can. When their table does not
// read to its end, the integrity check has said so, and the sessions
// after the damage are missing here (their frames are then unrecorded).
func (c *checker) records(ctx context.Context) ([]record, error) {
	rows, err := c.conn.QueryContext(ctx, `SELECT sid, id, head, open_run FROM sessions ORDER BY sid`)
	if err != nil {
		if isDamage(err) {
			c.noteRecords(err)
			return nil, nil
		}
		return nil, err
	}
	defer rows.Close()
	var out []record
	for rows.Next() {
		var r record
		if err := rows.Scan(&r.sid, &r.id, &r.head, &r.openRun); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		if !isDamage(err) {
			return nil, err
		}
		c.noteRecords(err)
	}
	return out, nil
}

// noteRecords notes that the session records do not all read, unless the
// integrity check already placed damage there.
func (c *checker) noteRecords(err error) {
	for _, p := range c.rep.Problems {
		if p.Where == store.WhereSessions {
			return
		}
	}
	c.problem(store.WhereSessions, "the session records do not all read: "+err.Error())
}

// sessions compares each session's record with its frames: in a full
// check their count, first and last seq in one pass over the frames; in a
// quick one each session's first and last seq (two index seeks each).
// Sessions that do not match are located (locate) to find where the damage
// starts.
func (c *checker) sessions(ctx context.Context, recs []record) error {
	var ext map[int64]extent
	var err error
	if c.opts.Full {
		c.progress("counting frames", 0, 0, "frames")
		ext, err = c.countAll(ctx)
	} else {
		ext, err = c.seekAll(ctx)
	}
	if err != nil && !isDamage(err) {
		return err
	}
	// When the one query hits a damaged page, ask each session alone.
	each := err != nil
	if each {
		ext, c.rep.Frames = nil, 0
	}
	known := make(map[int64]bool, len(recs))
	for _, r := range recs {
		known[r.sid] = true
		var e extent
		if each {
			var err error
			if e, _, err = c.extentOf(ctx, r.sid); err != nil {
				if !isDamage(err) {
					return err
				}
				if err := c.locate(ctx, r); err != nil {
					return err
				}
				continue
			}
		} else {
			e = ext[r.sid]
		}
		whole := e.max == r.head && (r.head == 0 || e.min == 1) && (e.count < 0 || e.count == int64(r.head))
		if !whole {
			if err := c.locate(ctx, r); err != nil {
				return err
			}
		}
	}
	return c.unrecorded(ctx, known, ext)
}

// countAll counts every session's frames in one pass: SELECT … GROUP BY.
func (c *checker) countAll(ctx context.Context) (map[int64]extent, error) {
	rows, err := c.conn.QueryContext(ctx, `SELECT sid, count(*), min(seq), max(seq) FROM frames GROUP BY sid`)
	if err != nil {
		return map[int64]extent{}, err
	}
	defer rows.Close()
	out := map[int64]extent{}
	for rows.Next() {
		var sid int64
		var e extent
		if err := rows.Scan(&sid, &e.count, &e.min, &e.max); err != nil {
			return out, err
		}
		out[sid] = e
		c.rep.Frames += e.count
	}
	return out, rows.Err()
}

// seekAll finds every session's first and last seq in one query whose
// subqueries each seek the frames' primary key: its cost grows with the
// number of sessions, not of frames.
func (c *checker) seekAll(ctx context.Context) (map[int64]extent, error) {
	rows, err := c.conn.QueryContext(ctx, `SELECT s.sid,
		(SELECT min(seq) FROM frames f WHERE f.sid = s.sid),
		(SELECT max(seq) FROM frames f WHERE f.sid = s.sid)
		FROM sessions s`)
	if err != nil {
		return map[int64]extent{}, err
	}
	defer rows.Close()
	out := map[int64]extent{}
	for rows.Next() {
		var sid int64
		var lo, hi sql.NullInt64
		if err := rows.Scan(&sid, &lo, &hi); err != nil {
			return out, err
		}
		if hi.Valid {
			out[sid] = extent{count: -1, min: uint64(lo.Int64), max: uint64(hi.Int64)}
		}
	}
	return out, rows.Err()
}

// extentOf is countAll or seekAll for one session.
func (c *checker) extentOf(ctx context.Context, sid int64) (extent, bool, error) {
	var lo, hi sql.NullInt64
	e := extent{count: -1}
	var err error
	if c.opts.Full {
		err = c.conn.QueryRowContext(ctx, `SELECT count(*), min(seq), max(seq) FROM frames WHERE sid = ?`, sid).Scan(&e.count, &lo, &hi)
	} else {
		err = c.conn.QueryRowContext(ctx, `SELECT min(seq), max(seq) FROM frames WHERE sid = ?`, sid).Scan(&lo, &hi)
	}
	if err != nil {
		return e, false, err
	}
	if !hi.Valid {
		return extent{}, false, nil
	}
	e.min, e.max = uint64(lo.Int64), uint64(hi.Int64)
	if e.count > 0 {
		c.rep.Frames += e.count
	}
	return e, true, nil
}

// locate reads one session's seqs in order to find where its log stops
// being whole, and records the damage.
func (c *checker) locate(ctx context.Context, r record) error {
	d := store.Damage{Session: r.id, Head: r.head, OpenRun: r.openRun}
	rows, err := c.conn.QueryContext(ctx, `SELECT seq FROM frames WHERE sid = ? ORDER BY seq`, r.sid)
	if err != nil {
		if !isDamage(err) {
			return err
		}
		d.Why = fmt.Sprintf("seq 1 does not read (%v)", err)
		d.Last = c.lastReadable(ctx, r.sid)
		c.addDamage(d)
		return nil
	}
	defer rows.Close()
	whole := true
	for rows.Next() {
		var seq uint64
		if err := rows.Scan(&seq); err != nil {
			return err
		}
		if whole && seq == d.Intact+1 {
			d.Intact = seq
		} else if whole {
			whole = false
			switch {
			case seq <= d.Intact:
				d.Why = fmt.Sprintf("seq %d comes again after seq %d", seq, d.Intact)
			case seq == d.Intact+2:
				d.Why = fmt.Sprintf("seq %d is missing", d.Intact+1)
			default:
				d.Why = fmt.Sprintf("seqs %d to %d are missing", d.Intact+1, seq-1)
			}
		}
		d.Last = max(d.Last, seq)
	}
	if err := rows.Err(); err != nil {
		if !isDamage(err) {
			return err
		}
		if whole {
			d.Why = fmt.Sprintf("seq %d does not read (%v)", d.Intact+1, err)
		}
		whole = false
		d.Last = max(d.Last, c.lastReadable(ctx, r.sid))
	}
	if whole {
		switch {
		case d.Intact == r.head:
			return nil // the quick check's min and max disagreed, the frames do not
		case d.Intact == 0:
			d.Why = fmt.Sprintf("its record says head %d, but the log has no frames", r.head)
		case d.Intact < r.head:
			d.Why = fmt.Sprintf("the log ends at seq %d, but its record says head %d", d.Intact, r.head)
		default:
			d.Why = fmt.Sprintf("its record says head %d, but the log goes on to seq %d", r.head, d.Intact)
		}
	}
	c.addDamage(d)
	return nil
}

// lastReadable is the highest seq of sid an index seek still reaches, or 0.
func (c *checker) lastReadable(ctx context.Context, sid int64) uint64 {
	var hi sql.NullInt64
	if err := c.conn.QueryRowContext(ctx, `SELECT max(seq) FROM frames WHERE sid = ?`, sid).Scan(&hi); err != nil {
		return 0
	}
	return uint64(hi.Int64)
}

// addDamage records d, or lowers the damage already recorded for its
// session.
func (c *checker) addDamage(d store.Damage) {
	for i, old := range c.rep.Damaged {
		if old.Session == d.Session {
			if d.Intact < old.Intact {
				d.Last = max(d.Last, old.Last)
				c.rep.Damaged[i] = d
			}
			return
		}
	}
	c.rep.Damaged = append(c.rep.Damaged, d)
}

// unrecorded lists the frames of sessions that have no record: from ext
// when the full count read, else by seeking from one session key to the
// next.
func (c *checker) unrecorded(ctx context.Context, known map[int64]bool, ext map[int64]extent) error {
	if ext == nil {
		ext = map[int64]extent{}
		sid := int64(-1 << 63)
		for {
			var next sql.NullInt64
			err := c.conn.QueryRowContext(ctx, `SELECT min(sid) FROM frames WHERE sid > ?`, sid).Scan(&next)
			if err != nil {
				if isDamage(err) {
					break
				}
				return err
			}
			if !next.Valid {
				break
			}
			sid = next.Int64
			if !known[sid] {
				e, _, err := c.extentOf(ctx, sid)
				if err != nil && !isDamage(err) {
					return err
				}
				ext[sid] = e
			}
		}
	}
	for sid, e := range ext {
		if known[sid] {
			continue
		}
		u := store.Unrecorded{Key: sid, Frames: e.count, Last: e.max, Session: c.threadOf(ctx, sid)}
		if u.Frames < 0 {
			u.Frames = 0
		}
		c.rep.Unrecorded = append(c.rep.Unrecorded, u)
	}
	sortUnrecorded(c.rep.Unrecorded)
	return nil
}

func sortUnrecorded(us []store.Unrecorded) {
	for i := 1; i < len(us); i++ {
		for j := i; j > 0 && us[j].Key < us[j-1].Key; j-- {
			us[j], us[j-1] = us[j-1], us[j]
		}
	}
}

// threadOf is the session id the first RUN_STARTED of sid names as its
// threadId, or "".
func (c *checker) threadOf(ctx context.Context, sid int64) string {
	var data []byte
	if err := c.conn.QueryRowContext(ctx, `SELECT data FROM frames WHERE sid = ? AND type = 'RUN_STARTED' ORDER BY seq LIMIT 1`, sid).Scan(&data); err != nil {
		return ""
	}
	var rs struct {
		ThreadID string `json:"threadId"`
	}
	if json.Unmarshal(data, &rs) != nil {
		return ""
	}
	return rs.ThreadID
}

// frames passes every frame up to the damage of its session to
// CheckOptions.Frame, and cuts a session back to before the first frame it
// refuses.
func (c *checker) frames(ctx context.Context, recs []record) error {
	limit := map[string]uint64{}
	var total int64
	for _, r := range recs {
		limit[r.id] = r.head
	}
	for _, d := range c.rep.Damaged {
		limit[d.Session] = d.Intact
	}
	for _, r := range recs {
		total += int64(limit[r.id])
	}
	var done int64
	c.progress("reading frames", 0, total, "frames")
	for _, r := range recs {
		err := c.framesOf(ctx, r, limit[r.id], func() {
			done++
			if done%10000 == 0 {
				c.progress("reading frames", done, total, "frames")
			}
		})
		if err != nil {
			return err
		}
	}
	c.progress("reading frames", done, total, "frames")
	return nil
}

// framesOf passes one session's frames up to upTo to CheckOptions.Frame.
func (c *checker) framesOf(ctx context.Context, r record, upTo uint64, tick func()) error {
	if upTo == 0 {
		return nil
	}
	rows, err := c.conn.QueryContext(ctx, `SELECT seq, data FROM frames WHERE sid = ? AND seq <= ? ORDER BY seq LIMIT ?`, r.sid, upTo, upTo)
	if err != nil {
		if isDamage(err) {
			c.addDamage(store.Damage{Session: r.id, Head: r.head, OpenRun: r.openRun, Last: upTo, Why: fmt.Sprintf("seq 1 does not read (%v)", err)})
			return nil
		}
		return err
	}
	defer rows.Close()
	var last uint64
	var data sql.RawBytes
	for rows.Next() {
		var seq uint64
		if err := rows.Scan(&seq, &data); err != nil {
			return err
		}
		if ferr := c.opts.Frame(data); ferr != nil {
			c.addDamage(store.Damage{Session: r.id, Intact: seq - 1, Head: r.head, OpenRun: r.openRun, Last: max(upTo, r.head),
				Why: fmt.Sprintf("seq %d is not a valid frame (%v)", seq, ferr)})
			return nil
		}
		last = seq
		tick()
	}
	if err := rows.Err(); err != nil {
		if !isDamage(err) {
			return err
		}
		c.addDamage(store.Damage{Session: r.id, Intact: last, Head: r.head, OpenRun: r.openRun, Last: upTo,
			Why: fmt.Sprintf("seq %d does not read (%v)", last+1, err)})
	}
	return nil
}
