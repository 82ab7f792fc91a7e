package sqlite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/getorrery/orrery/internal/damagetest"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
)

// damageSessions are the sessions of the damage tests' database, each with
// damageFrames frames; "ses_c" has a large frame every 50 seqs, which
// spills onto overflow pages, and its last run is left open.
var damageSessions = []string{"ses_a", "ses_b", "ses_c", "ses_d"}

const damageFrames = 300

// damageFrame is the data of one frame: valid JSON that names its session
// and seq as a marker the tests find in the file ("ses_b:0200;").
func damageFrame(id string, seq uint64) store.Frame {
	typ, run := "TEXT_MESSAGE_CONTENT", "run_1"
	pad := strings.Repeat("padding ", 8)
	if id == "ses_c" && seq%50 == 0 {
		pad = strings.Repeat(fmt.Sprintf("%s:%04d overflows, ", id, seq), 400)
	}
	data := fmt.Sprintf(`{"type":%q,"messageId":"m","delta":"%s:%04d; %s","metadata":{"orrery":{"seq":%d}}}`, typ, id, seq, pad, seq)
	switch seq {
	case 1:
		typ = "RUN_STARTED"
		data = fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":"run_1","timestamp":1764500000000,"metadata":{"orrery":{"seq":1}}}`, id)
	case damageFrames:
		if id != "ses_c" {
			typ = "RUN_FINISHED"
			data = fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":"run_1","metadata":{"orrery":{"seq":%d}}}`, id, seq)
		}
	}
	return store.Frame{Seq: seq, Type: typ, Run: run, Data: []byte(data)}
}

// buildDamageDB makes the damage tests' database at path, interleaving the
// sessions' appends as a kernel does, and closes it, which checkpoints the
// WAL into the file: nothing of it hides in a WAL or a cache.
func buildDamageDB(t *testing.T, path string) {
	t.Helper()
	l, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("Open(%q) = %v", path, err)
	}
	ctx := context.Background()
	for _, id := range damageSessions {
		if err := l.CreateSession(ctx, store.Session{ID: id, Title: "title of " + id}); err != nil {
			t.Fatal(err)
		}
	}
	for seq := uint64(1); seq <= damageFrames; seq += 10 {
		var batches []store.Batch
		for _, id := range damageSessions {
			b := store.Batch{Session: id, CostDelta: 1}
			for s := seq; s < seq+10; s++ {
				b.Frames = append(b.Frames, damageFrame(id, s))
			}
			batches = append(batches, b)
		}
		if err := l.Append(ctx, batches...); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		t.Fatalf("%s-wal has %d bytes after Close, want none: the damage would miss them", path, fi.Size())
	}
}

// pristine is a built database the tests copy, built once.
var pristine struct {
	once sync.Once
	data []byte
	err  error
}

func copyOfDamageDB(t *testing.T) string {
	t.Helper()
	pristine.once.Do(func() {
		dir, err := os.MkdirTemp("", "orrery-damage-")
		if err != nil {
			pristine.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "orrery.db")
		buildDamageDB(t, path)
		pristine.data, pristine.err = os.ReadFile(path)
	})
	if pristine.err != nil {
		t.Fatal(pristine.err)
	}
	path := filepath.Join(t.TempDir(), "orrery.db")
	if err := os.WriteFile(path, pristine.data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// frameJSON is the Frame check the tests pass: valid JSON.
func frameJSON(data []byte) error {
	if !json.Valid(data) {
		return errors.New("not JSON")
	}
	return nil
}

func damagedNames(r store.Report) []string {
	var out []string
	for _, d := range r.Damaged {
		out = append(out, d.Session)
	}
	return out
}

func TestCheckWhole(t *testing.T) {
	path := copyOfDamageDB(t)
	for _, full := range []bool{false, true} {
		rep, err := sqlite.CheckFile(t.Context(), path, store.CheckOptions{Full: full, Frame: frameJSON})
		if err != nil {
			t.Fatalf("CheckFile(full %v) = %v, want nil", full, err)
		}
		if !rep.OK() || rep.Sessions != len(damageSessions) {
			t.Errorf("CheckFile(full %v) = %+v, want OK with %d sessions", full, rep, len(damageSessions))
		}
		if want := int64(0); !full && rep.Frames != want {
			t.Errorf("CheckFile(quick).Frames = %d, want %d (it does not count)", rep.Frames, want)
		}
		if want := int64(len(damageSessions) * damageFrames); full && rep.Frames != want {
			t.Errorf("CheckFile(full).Frames = %d, want %d", rep.Frames, want)
		}
	}
	rep, err := sqlite.RepairFile(t.Context(), path, store.RepairOptions{Frame: frameJSON})
	if err != nil || rep.Repaired || rep.Kept != "" {
		t.Errorf("RepairFile(whole) = %+v, %v, want nothing repaired and nothing kept", rep, err)
	}
}

func TestCheckMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orrery.db")
	_, err := sqlite.CheckFile(t.Context(), path, store.CheckOptions{})
	if err == nil || !strings.Contains(err.Error(), "no database at") {
		t.Errorf("CheckFile(missing) = %v, want an error naming the missing database", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CheckFile(missing) made %s: %v", path, err)
	}
}

// damageCase is one place of the file overwritten with 4 KiB of garbage.
type damageCase struct {
	name string
	off  func(t *testing.T, path string) int64
	// damaged are the sessions a full check must name (at least).
	damaged []string
	// where are the places the integrity check must find problems.
	where []string
	// unreadable: SQLite cannot open the file at all.
	unreadable bool
	// records: the session records are damaged, so a kernel must refuse
	// to start (sqlite.Open may fail outright).
	records bool
}

func damageCases() []damageCase {
	return []damageCase{
		{name: "FramesLeaf", off: func(t *testing.T, p string) int64 { return damagetest.PageOf(t, p, "ses_b:0150;") },
			damaged: []string{"ses_b"}, where: []string{store.WhereFrames}},
		{name: "FramesUnaligned", off: func(t *testing.T, p string) int64 {
			return damagetest.PageOf(t, p, "ses_d:0100;") + damagetest.PageSize/2 + 123
		},
			damaged: []string{"ses_d"}, where: []string{store.WhereFrames}},
		{name: "FrameOverflow", off: func(t *testing.T, p string) int64 { return damagetest.LastPageOf(t, p, "ses_c:0150 overflows") },
			damaged: []string{"ses_c"}},
		{name: "FramesRoot", off: func(t *testing.T, p string) int64 { return damagetest.RootPage(t, p, "frames") },
			damaged: damageSessions, where: []string{store.WhereFrames}},
		{name: "SessionsTable", off: func(t *testing.T, p string) int64 { return damagetest.RootPage(t, p, "sessions") },
			where: []string{store.WhereSessions}, records: true},
		{name: "SessionsIndex", off: func(t *testing.T, p string) int64 { return damagetest.RootPage(t, p, "sqlite_autoindex_sessions_1") },
			where: []string{store.WhereSessions}, records: true},
		{name: "Header", off: func(t *testing.T, p string) int64 { return 0 }, unreadable: true, records: true},
	}
}

func TestDamage(t *testing.T) {
	for _, tc := range damageCases() {
		t.Run(tc.name, func(t *testing.T) {
			path := copyOfDamageDB(t)
			damagetest.Overwrite(t, path, tc.off(t, path))
			rep, err := sqlite.CheckFile(t.Context(), path, store.CheckOptions{Full: true, Frame: frameJSON})
			if err != nil {
				t.Fatalf("CheckFile() = %v, want a report", err)
			}
			t.Logf("report: %+v", rep)
			if rep.OK() {
				t.Fatalf("CheckFile() = OK, want the damage found")
			}
			if tc.unreadable {
				if rep.Unreadable == "" {
					t.Errorf("CheckFile().Unreadable = %q, want why SQLite cannot open it", rep.Unreadable)
				}
				if _, err := sqlite.Open(path); !errors.Is(err, store.ErrDamaged) {
					t.Errorf("Open() = %v, want %v", err, store.ErrDamaged)
				}
				if _, err := sqlite.RepairFile(t.Context(), path, store.RepairOptions{Frame: frameJSON}); !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "restore it from a backup") {
					t.Errorf("RepairFile() = %v, want a refusal naming the backup", err)
				}
				return
			}
			if got := rep.RecordsDamaged(); got != tc.records {
				t.Errorf("RecordsDamaged() = %v, want %v (problems %+v)", got, tc.records, rep.Problems)
			}
			for _, w := range tc.where {
				found := false
				for _, p := range rep.Problems {
					found = found || p.Where == w
				}
				if !found {
					t.Errorf("CheckFile().Problems = %+v, want one in %s", rep.Problems, w)
				}
			}
			names := damagedNames(rep)
			for _, want := range tc.damaged {
				if !contains(names, want) {
					t.Errorf("CheckFile().Damaged = %v, want %s among them", names, want)
				}
			}
			for _, d := range rep.Damaged {
				if d.Why == "" || d.Intact >= d.Head {
					t.Errorf("damage %+v: want a reason and Intact below Head", d)
				}
			}
			if !tc.records {
				// The quick check an opening kernel runs costs no scan, and
				// must not fail: the sessions' records are whole.
				l, err := sqlite.Open(path)
				if err != nil {
					t.Fatalf("Open() = %v, want the damaged frames left to the checks", err)
				}
				quick, err := l.Check(t.Context(), store.CheckOptions{})
				l.Close()
				if err != nil || quick.RecordsDamaged() {
					t.Errorf("Log.Check(quick) = %+v, %v, want the records whole", quick, err)
				}
			}
			checkRepair(t, path, rep)
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkRepair repairs path and checks the result: it passes a full check,
// every session the check found whole keeps all its frames byte for byte,
// a damaged one keeps its frames 1..Intact, and the report names each loss.
func checkRepair(t *testing.T, path string, before store.Report) {
	t.Helper()
	var stages []string
	rep, err := sqlite.RepairFile(t.Context(), path, store.RepairOptions{Frame: frameJSON, Progress: func(p store.Progress) {
		if len(stages) == 0 || stages[len(stages)-1] != p.Stage {
			stages = append(stages, p.Stage)
		}
	}})
	if err != nil {
		t.Fatalf("RepairFile() = %v, want nil", err)
	}
	t.Logf("repair: %+v (stages %q)", rep, stages)
	if !rep.Repaired || !rep.After.OK() {
		t.Fatalf("RepairFile() = repaired %v, after %+v, want a repaired log that passes the check", rep.Repaired, rep.After)
	}
	if fi, err := os.Stat(rep.Kept); err != nil || fi.Size() == 0 {
		t.Errorf("RepairFile().Kept = %q: %v, want the damaged file kept", rep.Kept, err)
	}
	if !contains(stages, "writing the repaired database") {
		t.Errorf("RepairFile() progress stages = %q, want the writing reported", stages)
	}
	again, err := sqlite.CheckFile(t.Context(), path, store.CheckOptions{Full: true, Frame: frameJSON})
	if err != nil || !again.OK() {
		t.Fatalf("CheckFile() after repair = %+v, %v, want OK", again, err)
	}
	l, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("Open() after repair = %v", err)
	}
	defer l.Close()
	intact := map[string]uint64{}
	for _, id := range damageSessions {
		intact[id] = damageFrames
	}
	for _, d := range before.Damaged {
		intact[d.Session] = d.Intact
	}
	repaired := map[string]store.Repaired{}
	for _, r := range rep.Sessions {
		repaired[r.Session] = r
	}
	for _, id := range damageSessions {
		s, err := l.Session(t.Context(), id)
		if err != nil {
			if before.RecordsDamaged() {
				continue // a lost record whose frames did not name it
			}
			t.Fatalf("Session(%q) after repair = %v", id, err)
		}
		want := intact[id]
		if r, ok := repaired[id]; ok && r.Note != "" {
			want = r.Head
		}
		if s.Head != want {
			t.Errorf("Session(%q).Head after repair = %d, want %d", id, s.Head, want)
		}
		frames, err := l.Read(t.Context(), id, 0, 0)
		if err != nil {
			t.Fatalf("Read(%q) after repair = %v", id, err)
		}
		if uint64(len(frames)) != s.Head {
			t.Errorf("Read(%q) after repair = %d frames, want %d", id, len(frames), s.Head)
		}
		for i, f := range frames {
			if w := damageFrame(id, uint64(i+1)); f.Seq != w.Seq || !bytes.Equal(f.Data, w.Data) {
				t.Fatalf("Read(%q)[%d] after repair = seq %d %.60s, want seq %d %.60s", id, i, f.Seq, f.Data, w.Seq, w.Data)
			}
		}
		if s.Head < damageFrames {
			r, ok := repaired[id]
			if !ok || r.LostFrom != s.Head+1 || r.LostTo != damageFrames {
				t.Errorf("RepairFile().Sessions[%s] = %+v, want seqs %d to %d named as lost", id, r, s.Head+1, damageFrames)
			}
		}
		if id == "ses_c" && s.Head > 1 && s.OpenRun != "run_1" {
			t.Errorf("Session(%q).OpenRun after repair = %q, want run_1 left for the kernel to close", id, s.OpenRun)
		}
		if !before.RecordsDamaged() && s.Title != "title of "+id {
			t.Errorf("Session(%q).Title after repair = %q, want it kept", id, s.Title)
		}
	}
}

func TestCheckSQLEdits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stmts  []string
		quick  bool // the quick check sees it too
		intact uint64
		why    string
	}{
		{"MiddleFrameDeleted", []string{`DELETE FROM frames WHERE sid = 2 AND seq = 120`}, false, 119, "seq 120 is missing"},
		{"HeadBeyondLastFrame", []string{`UPDATE sessions SET head = 980 WHERE sid = 2`}, true, 300, "the log ends at seq 300, but its record says head 980"},
		{"LastFramesDeleted", []string{`DELETE FROM frames WHERE sid = 2 AND seq > 250`}, true, 250, "the log ends at seq 250, but its record says head 300"},
		{"FrameNotJSON", []string{`UPDATE frames SET data = CAST('{"type":' AS BLOB) WHERE sid = 2 AND seq = 77`}, false, 76, "seq 77 is not a valid frame (not JSON)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := copyOfDamageDB(t)
			damagetest.Edit(t, path, tc.stmts...)
			for _, full := range []bool{false, true} {
				rep, err := sqlite.CheckFile(t.Context(), path, store.CheckOptions{Full: full, Frame: frameJSON})
				if err != nil {
					t.Fatal(err)
				}
				if !full && !tc.quick {
					if !rep.OK() {
						t.Errorf("CheckFile(quick) = %+v, want OK: it reads no frame but the first and last", rep)
					}
					continue
				}
				if len(rep.Damaged) != 1 || rep.Damaged[0].Session != "ses_b" || rep.Damaged[0].Intact != tc.intact || rep.Damaged[0].Why != tc.why {
					t.Errorf("CheckFile(full %v).Damaged = %+v, want ses_b intact to %d: %q", full, rep.Damaged, tc.intact, tc.why)
				}
				if len(rep.Problems) != 0 {
					t.Errorf("CheckFile(full %v).Problems = %+v, want none: the pages are whole", full, rep.Problems)
				}
			}
			checkRepair(t, path, mustCheck(t, path))
		})
	}
}

func mustCheck(t *testing.T, path string) store.Report {
	t.Helper()
	rep, err := sqlite.CheckFile(t.Context(), path, store.CheckOptions{Full: true, Frame: frameJSON})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestRepairRefusedWhileOpen: a repair never runs under a kernel's feet.
func TestRepairRefusedWhileOpen(t *testing.T) {
	path := copyOfDamageDB(t)
	damagetest.Edit(t, path, `UPDATE sessions SET head = 980 WHERE sid = 2`)
	l, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.RepairFile(t.Context(), path, store.RepairOptions{})
	if !errors.Is(err, sqlite.ErrInUse) || !strings.Contains(err.Error(), "stop it") {
		t.Errorf("RepairFile() with the log open = %v, want %v naming the fix", err, sqlite.ErrInUse)
	}
	l.Close()
	if _, err := sqlite.RepairFile(t.Context(), path, store.RepairOptions{}); err != nil {
		t.Errorf("RepairFile() after Close = %v, want nil", err)
	}
}

// TestBackupWhileAppending copies the log while a writer keeps appending:
// every copy passes the full check, which means each session's head equals
// its last frame and every seq below it is there.
func TestBackupWhileAppending(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "orrery.db")
	l, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := t.Context()
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		if err := l.CreateSession(ctx, store.Session{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	appended := make(chan uint64, 1)
	go func() {
		seq := uint64(0)
		defer func() { appended <- seq }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			seq++
			var bs []store.Batch
			for _, id := range ids {
				bs = append(bs, store.Batch{Session: id, Frames: []store.Frame{damageFrame(id, seq)}})
			}
			if err := l.Append(ctx, bs...); err != nil {
				t.Errorf("Append() = %v", err)
				return
			}
		}
	}()
	var heads []int64
	for i := range 4 {
		dest := filepath.Join(dir, fmt.Sprintf("backup-%d.db", i))
		var last store.Progress
		if err := sqlite.BackupFile(ctx, path, dest, sqlite.BackupOptions{Progress: func(p store.Progress) { last = p }}); err != nil {
			t.Fatalf("BackupFile() = %v, want nil", err)
		}
		if last.Done == 0 || last.Done != last.Total {
			t.Errorf("BackupFile() last progress = %+v, want the whole size", last)
		}
		rep, err := sqlite.CheckFile(ctx, dest, store.CheckOptions{Full: true, Frame: frameJSON})
		if err != nil || !rep.OK() || rep.Sessions != len(ids) {
			t.Fatalf("CheckFile(backup %d) = %+v, %v, want OK", i, rep, err)
		}
		if fi, err := os.Stat(dest); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("backup %d: mode %v, %v, want 0600", i, fi.Mode(), err)
		}
		heads = append(heads, rep.Frames)
	}
	close(stop)
	total := <-appended
	t.Logf("frames in each backup: %v; appended %d per session", heads, total)

	dest := filepath.Join(dir, "backup-0.db")
	err = sqlite.BackupFile(ctx, path, dest, sqlite.BackupOptions{})
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "--force") {
		t.Errorf("BackupFile(existing) = %v, want %v naming --force", err, fs.ErrExist)
	}
	if err := sqlite.BackupFile(ctx, path, dest, sqlite.BackupOptions{Force: true}); err != nil {
		t.Errorf("BackupFile(existing, Force) = %v, want nil", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".partial-") {
			t.Errorf("BackupFile() left %s behind", e.Name())
		}
	}
}
