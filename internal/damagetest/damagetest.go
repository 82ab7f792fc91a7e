// Package damagetest damages SQLite files the way a failing disk does, for
// the tests of damage detection and repair: 4 KiB of garbage over a page
// the test picks by what it holds.
package damagetest

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"os"
	"testing"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// PageSize is the page size of Orrery's databases (SQLite's default).
const PageSize = 4096

// Garbage is 4 KiB of bytes that look random and are the same in every run.
func Garbage() []byte {
	var out []byte
	sum := sha256.Sum256([]byte("orrery damage"))
	for len(out) < PageSize {
		out = append(out, sum[:]...)
		sum = sha256.Sum256(sum[:])
	}
	return out[:PageSize]
}

// Overwrite writes Garbage over the 4 KiB of path at off. The database
// must be closed (its WAL folded in), or SQLite's cache and WAL may hide
// the damage.
func Overwrite(t testing.TB, path string, off int64) {
	t.Helper()
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		t.Fatalf("%s-wal has %d bytes: close the database before damaging it, or the WAL hides the damage", path, fi.Size())
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(Garbage(), off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// PageOf returns the offset of the page that holds the first copy of
// marker in path.
func PageOf(t testing.TB, path, marker string) int64 {
	t.Helper()
	return find(t, path, marker, bytes.Index)
}

// LastPageOf returns the offset of the page that holds the last copy of
// marker: for a frame larger than a page, one of its overflow pages.
func LastPageOf(t testing.TB, path, marker string) int64 {
	t.Helper()
	return find(t, path, marker, bytes.LastIndex)
}

func find(t testing.TB, path, marker string, index func(s, sep []byte) int) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := index(data, []byte(marker))
	if i < 0 {
		t.Fatalf("%s does not hold %q", path, marker)
	}
	return int64(i) / PageSize * PageSize
}

// RootPage returns the offset of the root page of the table or index name.
func RootPage(t testing.TB, path, name string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var root int64
	if err := db.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = ?`, name).Scan(&root); err != nil {
		t.Fatalf("root page of %s in %s: %v", name, path, err)
	}
	return (root - 1) * PageSize
}

// Edit runs SQL on the closed database at path, as a person with the
// sqlite3 shell might.
func Edit(t testing.TB, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
