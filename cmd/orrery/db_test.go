package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent/provider/script"
	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/internal/damagetest"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/server"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
)

// The damage tests' data dir: four sessions of a few hundred frames each.
// ses_c has a frame larger than a page (it spills onto overflow pages) and
// its run is in flight, as a server that died mid-run leaves it.
var dbSessions = []string{"ses_a", "ses_b", "ses_c", "ses_d"}

const dbChunks = 250

// chunks are a session's streamed text: markers the tests find in the
// file ("ses_b-0150 ").
func chunks(id string) []string {
	out := make([]string, dbChunks)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d ", id, i)
	}
	if id == "ses_c" {
		out[120] = strings.Repeat("ses_c is larger than a page; ", 500)
	}
	return out
}

// dbCLI runs orrery with args in-process and returns its exit code and
// output.
func dbCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr lockedBuffer
	e := &env{stdout: &stdout, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
	code := run(context.Background(), e, args)
	return code, stdout.String(), stderr.String()
}

// noConfig is an empty config file, so no user config is read.
func noConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "none.toml")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// live is a kernel on a data dir (opened as orrery serve opens it) behind
// a real listener.
type live struct {
	t   *testing.T
	url string
	k   *embedded
	c   *client.Client
	srv *server.Server
	hs  *httptest.Server
}

// openLive opens dir's kernel as orrery serve does, on model, and waits
// for its background check of the store to end.
func openLive(t *testing.T, dir, model string) (*live, error) {
	t.Helper()
	var stderr lockedBuffer
	e := &env{stdout: io.Discard, stderr: &stderr, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}
	common := commonFlags{configPath: noConfig(t), data: dir, model: model}
	cfg, err := common.load(e)
	if err != nil {
		t.Fatal(err)
	}
	k, err := openKernel(context.Background(), e, cfg, slog.New(slog.NewTextHandler(&stderr, nil)), false)
	if err != nil {
		return nil, err
	}
	<-k.kernel.StoreChecked()
	l := &live{t: t, k: k}
	l.srv = server.New(server.Config{Kernel: k.kernel})
	l.hs = httptest.NewServer(l.srv)
	l.url = l.hs.URL
	if l.c, err = client.Dial(context.Background(), l.url, client.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.close)
	return l, nil
}

func (l *live) close() {
	if l.hs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l.c.Close()
	l.srv.Close(ctx)
	l.hs.Close()
	l.k.Close(ctx)
	l.hs = nil
}

// control posts one request to POST /control and returns the status and
// body.
func (l *live) control(req map[string]any) (int, string) {
	l.t.Helper()
	body, _ := json.Marshal(req)
	resp, err := http.Post(l.url+"/control", "application/json", bytes.NewReader(body))
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// prompt sends text to session and waits for the run's terminal frame,
// which it returns with the frames seen.
func (l *live) prompt(session, text string) []client.Frame {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	page, err := l.c.Read(ctx, session, 0, 1)
	if err != nil {
		l.t.Fatalf("session.read %s = %v", session, err)
	}
	s, err := l.c.Attach(ctx, session, &page.Head)
	if err != nil {
		l.t.Fatal(err)
	}
	defer s.Close()
	if _, err := l.c.Send(ctx, session, protocol.RunInput{Text: text}); err != nil {
		l.t.Fatalf("run.send %s = %v", session, err)
	}
	var out []client.Frame
	for {
		f, err := s.Next(ctx)
		if err != nil {
			l.t.Fatalf("session %s: %v after %d frames", session, err, len(out))
		}
		out = append(out, f)
		if f.Type.Terminal() {
			return out
		}
	}
}

// pristineDir is the damage tests' data dir, built once: its bytes.
var pristineDir struct {
	once sync.Once
	db   []byte
	err  error
}

// buildDBDir runs the sessions on a kernel, and while ses_c's run is
// still in flight takes orrery db backup of the log: that copy, with the
// run open, is the tests' data dir.
func buildDBDir(t *testing.T) []byte {
	t.Helper()
	pristineDir.once.Do(func() {
		dir, err := os.MkdirTemp("", "orrery-db-")
		if err != nil {
			pristineDir.err = err
			return
		}
		defer os.RemoveAll(dir)
		var turns []script.Turn
		for _, id := range []string{"ses_a", "ses_b", "ses_d", "ses_c"} {
			turns = append(turns, script.Turn{Text: chunks(id), Hang: id == "ses_c"})
		}
		model := writeScript(t, dir, turns...)
		l, err := openLive(t, filepath.Join(dir, "data"), model)
		if err != nil {
			pristineDir.err = err
			return
		}
		for _, id := range []string{"ses_a", "ses_b", "ses_d", "ses_c"} {
			if _, err := l.k.kernel.CreateSession(context.Background(), kernel.SessionOptions{ID: id}); err != nil {
				pristineDir.err = err
				return
			}
			if id != "ses_c" {
				l.prompt(id, "go")
			}
		}
		// ses_c: wait for its last chunk, then back the log up mid-run.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := l.c.Attach(ctx, "ses_c", new(uint64))
		if err != nil {
			pristineDir.err = err
			return
		}
		if _, err := l.c.Send(ctx, "ses_c", protocol.RunInput{Text: "go"}); err != nil {
			pristineDir.err = err
			return
		}
		last := fmt.Sprintf("ses_c-%04d ", dbChunks-1)
		for {
			f, err := s.Next(ctx)
			if err != nil {
				pristineDir.err = err
				return
			}
			if bytes.Contains(f.Data, []byte(last)) {
				break
			}
		}
		s.Close()
		copyPath := filepath.Join(dir, "copy", "orrery.db")
		os.MkdirAll(filepath.Dir(copyPath), 0o700)
		if code, _, stderr := dbCLI(t, "db", "backup", copyPath, "--data", filepath.Join(dir, "data"), "--config", noConfig(t)); code != 0 {
			pristineDir.err = fmt.Errorf("orrery db backup = %d: %s", code, stderr)
			return
		}
		l.close()
		pristineDir.db, pristineDir.err = os.ReadFile(copyPath)
	})
	if pristineDir.err != nil {
		t.Fatal(pristineDir.err)
	}
	return pristineDir.db
}

// dbDir returns a fresh copy of the damage tests' data dir and its
// database's path.
func dbDir(t *testing.T) (dir, db string) {
	t.Helper()
	data := buildDBDir(t)
	dir = filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db = filepath.Join(dir, "orrery.db")
	if err := os.WriteFile(db, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, db
}

// framesOf reads a session's frames from a database file.
func framesOf(t *testing.T, db, id string) (store.Session, []store.Frame) {
	t.Helper()
	st, err := sqlite.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	info, err := st.Session(context.Background(), id)
	if err != nil {
		t.Fatalf("Session(%s) = %v", id, err)
	}
	frames, err := st.Read(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return info, frames
}

// TestDBDamage overwrites 4 KiB of the log at several places and checks,
// for each, everything a person meets: orrery db check names the damage;
// the server refuses to start with a sentence naming the fix when the
// session records are hit, or else serves every undamaged session end to
// end and refuses the damaged ones by name, never truncated; orrery db
// repair then keeps every intact frame, says what is lost, and leaves a
// log that passes the check and serves every session.
func TestDBDamage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a log of a thousand frames per case")
	}
	cases := []struct {
		name string
		off  func(t *testing.T, db string) int64
		// refused: the server must refuse to start (the session records
		// or the header are hit).
		refused bool
		damaged []string // at least these
	}{
		{"FramesLeaf", func(t *testing.T, db string) int64 { return damagetest.PageOf(t, db, "ses_b-0150 ") }, false, []string{"ses_b"}},
		{"FramesUnaligned", func(t *testing.T, db string) int64 {
			return damagetest.PageOf(t, db, "ses_d-0100 ") + damagetest.PageSize/2 + 123
		}, false, []string{"ses_d"}},
		{"FrameOverflow", func(t *testing.T, db string) int64 {
			return damagetest.LastPageOf(t, db, "ses_c is larger than a page")
		}, false, []string{"ses_c"}},
		{"SessionsTable", func(t *testing.T, db string) int64 { return damagetest.RootPage(t, db, "sessions") }, true, nil},
		{"SessionsIndex", func(t *testing.T, db string) int64 { return damagetest.RootPage(t, db, "sqlite_autoindex_sessions_1") }, true, nil},
		{"Header", func(t *testing.T, db string) int64 { return 0 }, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, db := dbDir(t)
			pristine := filepath.Join(t.TempDir(), "pristine.db")
			if err := os.WriteFile(pristine, buildDBDir(t), 0o600); err != nil {
				t.Fatal(err)
			}
			damagetest.Overwrite(t, db, tc.off(t, db))
			cfgFile := noConfig(t)

			// orrery db check names the damage, exit code 4.
			code, stdout, stderr := dbCLI(t, "db", "check", "--json", "--data", dir, "--config", cfgFile)
			var rep checkReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("orrery db check --json printed %q (stderr %q): %v", stdout, stderr, err)
			}
			if code != exitDamaged || rep.OK || !strings.Contains(stderr, "orrery db repair") && !strings.Contains(stderr, "backup") {
				t.Fatalf("orrery db check = %d, ok %v, stderr %q; want %d naming the fix", code, rep.OK, stderr, exitDamaged)
			}
			damaged := map[string]store.Damage{}
			for _, d := range rep.Damaged {
				damaged[d.Session] = d
			}
			for _, id := range tc.damaged {
				if _, ok := damaged[id]; !ok {
					t.Errorf("orrery db check names %v damaged, want %s among them", rep.Damaged, id)
				}
			}
			_, text, _ := dbCLI(t, "db", "check", "--data", dir, "--config", cfgFile)
			for id, d := range damaged {
				if want := fmt.Sprintf("session %s: damaged after seq %d", id, d.Intact); !strings.Contains(text, want) {
					t.Errorf("orrery db check printed %q, want %q", text, want)
				}
			}

			l, err := openLive(t, dir, "offline")
			switch {
			case tc.refused:
				if err == nil {
					t.Fatalf("the kernel opened on a log whose session records are damaged, want it refused")
				}
				for _, want := range []string{db, "damaged", "orrery db check", "backup", "orrery db repair"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the kernel's refusal %q does not name %q", err, want)
					}
				}
			case err != nil:
				t.Fatalf("the kernel refused to open: %v, want it serving the undamaged sessions", err)
			default:
				checkServing(t, l, damaged, db)
				l.close()
			}

			// orrery db repair keeps what is intact and says what is lost.
			code, stdout, stderr = dbCLI(t, "db", "repair", "--data", dir, "--config", cfgFile)
			if tc.name == "Header" {
				if code == 0 || !strings.Contains(stderr, "restore it from a backup") {
					t.Errorf("orrery db repair on a file that is not a database = %d, stderr %q; want a refusal naming the backup", code, stderr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("orrery db repair = %d, stderr %q", code, stderr)
			}
			t.Logf("orrery db repair:\n%s", stdout)
			for id, d := range damaged {
				from, to := d.Lost()
				want := fmt.Sprintf("session %s: kept seqs 1-%d; lost seqs %d-%d", id, d.Intact, from, to)
				if d.Intact == 0 {
					want = fmt.Sprintf("session %s: kept nothing; lost seqs %d-%d", id, from, to)
				}
				if !strings.Contains(stdout, want) {
					t.Errorf("orrery db repair printed %q, want %q", stdout, want)
				}
			}
			if !strings.Contains(stdout, "passes the check") || !strings.Contains(stdout, "kept, unchanged, at") {
				t.Errorf("orrery db repair printed %q, want the check passed and the damaged file kept", stdout)
			}
			if code, out, stderr := dbCLI(t, "db", "check", "--data", dir, "--config", cfgFile); code != 0 {
				t.Errorf("orrery db check after repair = %d, %q %q; want 0", code, out, stderr)
			}

			// Every intact frame is kept, byte for byte, and every session
			// is served again.
			for _, id := range dbSessions {
				want := ^uint64(0)
				if d, ok := damaged[id]; ok {
					want = d.Intact
				}
				_, orig := framesOf(t, pristine, id)
				info, got := framesOf(t, db, id)
				n := min(uint64(len(orig)), want)
				if uint64(len(got)) < n {
					t.Fatalf("session %s after repair has %d frames, want its %d intact ones", id, len(got), n)
				}
				for i := range n {
					if !bytes.Equal(got[i].Data, orig[i].Data) {
						t.Fatalf("session %s seq %d after repair = %.80s, want %.80s", id, i+1, got[i].Data, orig[i].Data)
					}
				}
				if info.OpenRun != "" {
					t.Errorf("session %s after repair has run %s open, want it closed", id, info.OpenRun)
				}
			}
			l, err = openLive(t, dir, "offline")
			if err != nil {
				t.Fatalf("the kernel after repair = %v", err)
			}
			for _, id := range dbSessions {
				if fs := l.prompt(id, "hello"); fs[len(fs)-1].Type != protocol.TypeRunFinished {
					t.Errorf("session %s after repair: run ended with %s, want RUN_FINISHED", id, fs[len(fs)-1].Type)
				}
			}
		})
	}
}

// checkServing checks a kernel on a damaged log: each damaged session is
// refused by name over POST /control, /events and session.list names it;
// every other session runs end to end.
func checkServing(t *testing.T, l *live, damaged map[string]store.Damage, db string) {
	t.Helper()
	for id, d := range damaged {
		want := fmt.Sprintf("session %s's log is damaged after seq %d: restore it from a backup or run `orrery db repair`", id, d.Intact)
		for _, req := range []map[string]any{
			{"t": "session.read", "id": "1", "session": id, "since": 0},
			{"t": "run.send", "id": "2", "session": id, "input": map[string]any{"text": "hello"}},
		} {
			status, body := l.control(req)
			var eb protocol.ErrorBody
			json.Unmarshal([]byte(body), &eb)
			if status != http.StatusConflict || eb.Error != want {
				t.Errorf("POST /control %s on %s = %d %s, want 409 %q", req["t"], id, status, body, want)
			}
		}
		resp, err := http.Get(l.url + "/events?session=" + id + "&since=0")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "damaged after seq") {
			t.Errorf("GET /events of %s = %d %s, want 409 naming the damage", id, resp.StatusCode, body)
		}
		// Over a connection too: no attach, no frames.
		if _, err := l.c.Attach(context.Background(), id, new(uint64)); err == nil || !strings.Contains(err.Error(), "damaged after seq") {
			t.Errorf("attach %s = %v, want the refusal", id, err)
		}
	}
	list, err := l.c.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		_, hurt := damaged[s.ID]
		if hurt != (s.Damaged != "") {
			t.Errorf("session.list: %s damaged %q, want it named exactly when damaged", s.ID, s.Damaged)
		}
	}
	for _, id := range dbSessions {
		if _, hurt := damaged[id]; hurt {
			continue
		}
		fs := l.prompt(id, "hello")
		if last := fs[len(fs)-1]; last.Type != protocol.TypeRunFinished {
			t.Errorf("undamaged session %s: run ended with %s, want RUN_FINISHED", id, last.Type)
		}
	}
	// orrery db repair refuses while the server holds the log.
	code, _, stderr := dbCLI(t, "db", "repair", "--file", db)
	if code == 0 || !strings.Contains(stderr, "in use") || !strings.Contains(stderr, "stop it") {
		t.Errorf("orrery db repair with the server running = %d, stderr %q; want a refusal naming the fix", code, stderr)
	}
	// On the data dir itself it is the dir's lock that refuses it, naming
	// the holder.
	code, _, stderr = dbCLI(t, "db", "repair", "--data", filepath.Dir(db))
	if code == 0 || !strings.Contains(stderr, "in use by") || !strings.Contains(stderr, "stop that process") {
		t.Errorf("orrery db repair --data with the server running = %d, stderr %q; want the holder named and the fix", code, stderr)
	}
}

// TestDBSQLEdits: a gap and a head beyond the last frame, made with SQL,
// are found and named, by orrery db check and by the kernel.
func TestDBSQLEdits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a log of a thousand frames")
	}
	for _, tc := range []struct {
		name   string
		stmt   string
		intact uint64
		why    string
	}{
		{"Gap", `DELETE FROM frames WHERE seq = 100 AND sid = (SELECT sid FROM sessions WHERE id = 'ses_b')`, 99, "seq 100 is missing"},
		{"HeadBeyond", `UPDATE sessions SET head = head + 470 WHERE id = 'ses_b'`, 0, "but its record says head"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, db := dbDir(t)
			info, _ := framesOf(t, db, "ses_b")
			damagetest.Edit(t, db, tc.stmt)
			intact := tc.intact
			if intact == 0 {
				intact = info.Head
			}
			cfgFile := noConfig(t)
			code, stdout, _ := dbCLI(t, "db", "check", "--data", dir, "--config", cfgFile)
			if want := fmt.Sprintf("session ses_b: damaged after seq %d: ", intact); code != exitDamaged || !strings.Contains(stdout, want) || !strings.Contains(stdout, tc.why) {
				t.Errorf("orrery db check = %d, %q; want %d, %q and %q", code, stdout, exitDamaged, want, tc.why)
			}
			l, err := openLive(t, dir, "offline")
			if err != nil {
				t.Fatal(err)
			}
			status, body := l.control(map[string]any{"t": "session.read", "id": "1", "session": "ses_b", "since": 0})
			if want := fmt.Sprintf("session ses_b's log is damaged after seq %d", intact); status != http.StatusConflict || !strings.Contains(body, want) {
				t.Errorf("session.read ses_b = %d %s, want 409 %q", status, body, want)
			}
		})
	}
}

// TestDBBackupWhileServing backs the log up while the server appends to
// it: each copy passes the full check, so each session's head is its last
// frame and no seq is missing.
func TestDBBackupWhileServing(t *testing.T) {
	dir := t.TempDir()
	many := make([]string, 400)
	for i := range many {
		many[i] = fmt.Sprintf("word%d ", i)
	}
	model := writeScript(t, dir, script.Turn{Text: many, DelayMS: 1}, script.Turn{Text: many, DelayMS: 1})
	data := filepath.Join(dir, "data")
	l, err := openLive(t, data, model)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"one", "two"} {
		if _, err := l.k.kernel.CreateSession(context.Background(), kernel.SessionOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"one", "two"} {
		if _, err := l.c.Send(context.Background(), id, protocol.RunInput{Text: "write a lot"}); err != nil {
			t.Fatal(err)
		}
	}
	cfgFile := noConfig(t)
	for i := 0; ; i++ {
		dest := filepath.Join(dir, fmt.Sprintf("backup-%d.db", i))
		code, stdout, stderr := dbCLI(t, "db", "backup", dest, "--data", data, "--config", cfgFile)
		if code != 0 || !strings.Contains(stdout, "backed up") {
			t.Fatalf("orrery db backup = %d, %q %q", code, stdout, stderr)
		}
		code, stdout, stderr = dbCLI(t, "db", "check", "--json", "--file", dest)
		var rep checkReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 || !rep.OK {
			t.Fatalf("orrery db check --file %s = %d, %s %s, want 0 and ok", dest, code, stdout, stderr)
		}
		list, err := l.c.Sessions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !list[0].Running && !list[1].Running {
			// A copy over an existing file needs --force.
			code, _, stderr = dbCLI(t, "db", "backup", dest, "--data", data, "--config", cfgFile)
			if code == 0 || !strings.Contains(stderr, "--force") {
				t.Errorf("orrery db backup over %s = %d, %q; want a refusal naming --force", dest, code, stderr)
			}
			if code, _, stderr = dbCLI(t, "db", "backup", dest, "--force", "--data", data, "--config", cfgFile); code != 0 {
				t.Errorf("orrery db backup --force = %d, %q; want 0", code, stderr)
			}
			t.Logf("%d backups while the runs streamed", i+1)
			return
		}
	}
}

func TestDBUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"db"}, exitUsage, "check, repair or backup"},
		{[]string{"db", "explode"}, exitUsage, "explode"},
		{[]string{"db", "backup", "--data", t.TempDir()}, exitUsage, "PATH"},
		{[]string{"db", "check", "--help"}, exitOK, "--file"},
		{[]string{"db", "backup", "--help"}, exitOK, "--force"},
		{[]string{"db", "check", "--file", filepath.Join(t.TempDir(), "none.db")}, exitError, "no database at"},
	} {
		code, stdout, stderr := dbCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
			t.Errorf("orrery %q = %d, %q %q; want %d and %q", tc.args, code, stdout, stderr, tc.code, tc.want)
		}
	}
}
