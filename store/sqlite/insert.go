package sqlite

import (
	"database/sql"
	"strings"
)

// insertRows is how many frames one INSERT writes. A statement per frame
// spends most of the writer's time in database/sql and the driver rather
// than in SQLite: with 32 rows a statement, BenchmarkIngest's writer
// takes about half the CPU per frame it did.
const insertRows = 32

// inserter writes a commit's frames into the frames table insertRows at a
// time, through a statement Open prepares on the writer's connection (it
// cannot be prepared during a commit: the writer has one connection, and
// the transaction holds it). Careful, it writes each frame on its own, so
// that a failure names the frame's batch.
type inserter struct {
	l       *Log
	tx      *sql.Tx
	careful bool
	args    []any
	// The transaction's copies of the statements, once used.
	one, many *sql.Stmt
}

func (l *Log) newInserter(tx *sql.Tx, careful bool) *inserter {
	return &inserter{l: l, tx: tx, careful: careful, args: l.insertArgs[:0]}
}

// add writes a frame, or holds it for the next statement.
func (w *inserter) add(sid int64, seq uint64, typ, run string, data []byte) error {
	w.args = append(w.args, sid, seq, typ, run, data)
	if w.careful || len(w.args) == cap(w.args) {
		return w.flush()
	}
	return nil
}

// flush writes the frames held: insertRows in one statement, fewer one
// by one.
func (w *inserter) flush() error {
	n := len(w.args) / 5
	if n == 0 {
		return nil
	}
	defer func() {
		clear(w.args)
		w.args = w.args[:0]
	}()
	if n == insertRows {
		_, err := w.stmt(&w.many, w.l.insertManyStmt).Exec(w.args...)
		return err
	}
	one := w.stmt(&w.one, w.l.insertStmt)
	for i := 0; i < len(w.args); i += 5 {
		if _, err := one.Exec(w.args[i : i+5]...); err != nil {
			return err
		}
	}
	return nil
}

// stmt returns the transaction's copy of st, made the first time in *p.
func (w *inserter) stmt(p **sql.Stmt, st *sql.Stmt) *sql.Stmt {
	if *p == nil {
		*p = w.tx.Stmt(st)
	}
	return *p
}

// close releases the transaction's statements.
func (w *inserter) close() {
	for _, st := range []*sql.Stmt{w.one, w.many} {
		if st != nil {
			st.Close()
		}
	}
}

// insertManySQL inserts insertRows frames.
func insertManySQL() string {
	var q strings.Builder
	q.WriteString(`INSERT INTO frames (sid, seq, type, run, data) VALUES `)
	for i := range insertRows {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?)")
	}
	return q.String()
}
