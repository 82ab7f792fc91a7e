package kernel_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/tool"
)

// damagedDir makes a data dir (SQLite: the damage is made with SQL) with sessions "head", "gap", "garbled" and
// "whole", two offline runs each, then damages the first three with SQL:
// a head beyond the last frame and a frame deleted from the middle (each
// with an open run the kernel must leave alone: the quick check sees the
// first, only the load the second), a frame that is not JSON.
func damagedDir(t *testing.T) (dir string, heads map[string]uint64) {
	t.Helper()
	dir = t.TempDir()
	e := modeNamed(t, "sqlite").openEnv(t, dir, "offline")
	heads = map[string]uint64{}
	for _, id := range []string{"head", "gap", "garbled", "whole"} {
		s, err := e.k.CreateSession(context.Background(), kernel.SessionOptions{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		send(t, s, kernel.SendInput{Text: "echo one"})
		send(t, s, kernel.SendInput{Text: "hello"})
		heads[id] = s.Head()
	}
	e.close()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`UPDATE sessions SET head = head + 40, open_run = 'run_lost' WHERE id = 'head'`,
		`DELETE FROM frames WHERE seq = 5 AND sid = (SELECT sid FROM sessions WHERE id = 'gap')`,
		`UPDATE sessions SET open_run = 'run_gap' WHERE id = 'gap'`,
		`UPDATE frames SET data = CAST('{"type":"TEXT_MESSAGE_CONT' AS BLOB) WHERE seq = 7 AND sid = (SELECT sid FROM sessions WHERE id = 'garbled')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return dir, heads
}

func TestDamagedSessionsAreRefused(t *testing.T) {
	for _, mode := range []struct {
		name  string
		check kernel.StoreCheck
	}{{"Quick", kernel.CheckQuick}, {"Full", kernel.CheckFull}, {"Background", kernel.CheckBackground}} {
		t.Run(mode.name, func(t *testing.T) {
			dir, heads := damagedDir(t)
			e := modeNamed(t, "sqlite").openEnv(t, dir, "offline", func(c *kernel.Config) { c.StoreCheck = mode.check })
			<-e.k.StoreChecked()
			ctx := context.Background()
			want := map[string]uint64{"head": heads["head"], "gap": 4, "garbled": 6}
			for id, after := range want {
				if s, err := e.k.Session(ctx, id); err == nil {
					// Loaded from its checkpoint, which does not read the
					// log before it: reading the log finds the damage.
					_, _, err := s.Read(ctx, 0, 0)
					var d *kernel.DamagedError
					if !errors.As(err, &d) || d.Session != id || d.After != after {
						t.Fatalf("Session(%q).Read(0) = %v, want a *DamagedError after seq %d", id, err, after)
					}
				}
				// Twice: once found, the refusal is remembered.
				for range 2 {
					_, err := e.k.Session(ctx, id)
					var d *kernel.DamagedError
					if !errors.As(err, &d) || d.Session != id || d.After != after {
						t.Fatalf("Session(%q) = %v, want a *DamagedError after seq %d", id, err, after)
					}
					wantMsg := fmt.Sprintf("session %s's log is damaged after seq %d: restore it from a backup or run `orrery db repair`", id, after)
					if err.Error() != wantMsg {
						t.Errorf("Session(%q) = %q, want %q", id, err, wantMsg)
					}
					if !errors.Is(err, store.ErrDamaged) {
						t.Errorf("errors.Is(Session(%q), store.ErrDamaged) = false, want true", id)
					}
				}
			}
			// The head's open run is the repair's to close, not the kernel's.
			if info, err := e.store.Session(ctx, "head"); err != nil || info.OpenRun != "run_lost" || info.Head != heads["head"]+40 {
				t.Errorf("store.Session(head) = %+v, %v, want it untouched", info, err)
			}
			// A hole before the session's checkpoint is found by the full
			// check, or else when the log is read: without the full check
			// first, the recover step loads the session from its checkpoint
			// and closes its open run before anything reads the hole.
			if info, err := e.store.Session(ctx, "gap"); mode.check == kernel.CheckFull && (err != nil || info.OpenRun != "run_gap" || info.Head != heads["gap"]) {
				t.Errorf("store.Session(gap) = %+v, %v, want it untouched", info, err)
			}
			list, err := e.k.Sessions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, sum := range list {
				_, hurt := want[sum.ID]
				if hurt != (sum.Damaged != "") || hurt && !strings.Contains(sum.Damaged, "orrery db repair") {
					t.Errorf("Sessions() lists %s with damaged %q, want it named exactly when damaged", sum.ID, sum.Damaged)
				}
			}
			// The whole session works end to end.
			s, err := e.k.Session(ctx, "whole")
			if err != nil {
				t.Fatalf("Session(whole) = %v", err)
			}
			evs, _ := send(t, s, kernel.SendInput{Text: "hello again"})
			if last := evs[len(evs)-1]; last.EventType() != protocol.TypeRunFinished || evs[0].Header().Seq() != heads["whole"]+1 {
				t.Errorf("the whole session's run = %v from seq %d, want RUN_FINISHED from seq %d", types(evs), evs[0].Header().Seq(), heads["whole"]+1)
			}
		})
	}
}

// checker is a store whose Check says what the test wants.
type checker struct {
	*sqlite.Log
	mu      sync.Mutex
	reports map[bool]store.Report // by CheckOptions.Full
	block   chan struct{}         // when set, the full check waits for it or ctx
	started chan struct{}
}

func (c *checker) Check(ctx context.Context, opts store.CheckOptions) (store.Report, error) {
	if opts.Full && c.block != nil {
		close(c.started)
		select {
		case <-c.block:
		case <-ctx.Done():
			return store.Report{}, ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reports[opts.Full], nil
}

func openChecker(t *testing.T, c *checker, mode kernel.StoreCheck) (*kernel.Kernel, error) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "orrery.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c.Log = st
	if err := st.CreateSession(context.Background(), store.Session{ID: "later"}); err != nil {
		t.Fatal(err)
	}
	k := kernel.New(kernel.Config{Store: c, Models: models.Resolve, DefaultModel: "offline", Tools: tool.Builtins(), DebugActor: true, StoreCheck: mode})
	err = k.Open(context.Background())
	t.Cleanup(func() { k.Close(context.Background()) })
	return k, err
}

func TestDamagedRecordsRefuseTheStart(t *testing.T) {
	for _, rep := range []store.Report{
		{Path: "/data/orrery.db", Problems: []store.Problem{{Where: store.WhereSessions, Text: "Tree 2 page 2: btreeInitPage() returns error code 11"}}},
		{Path: "/data/orrery.db", Unreadable: "file is not a database (26)"},
	} {
		_, err := openChecker(t, &checker{reports: map[bool]store.Report{false: rep}}, kernel.CheckQuick)
		var sd *kernel.StoreDamagedError
		if !errors.As(err, &sd) || !errors.Is(err, store.ErrDamaged) {
			t.Fatalf("Open() = %v, want a *StoreDamagedError", err)
		}
		for _, want := range []string{"/data/orrery.db", "orrery db check", "backup", "orrery db repair"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open() = %q, want it to name %q", err, want)
			}
		}
	}
	// Damage elsewhere than the records leaves the kernel starting.
	k, err := openChecker(t, &checker{reports: map[bool]store.Report{false: {Problems: []store.Problem{{Where: store.WhereFile, Text: "Page 9: never used"}}}}}, kernel.CheckQuick)
	if err != nil {
		t.Fatalf("Open() with damage outside the records = %v, want nil", err)
	}
	if _, err := k.Session(context.Background(), "later"); err != nil {
		t.Errorf("Session(later) = %v, want it served", err)
	}
}

// TestBackgroundCheck: what the full check finds after Open refuses the
// session from then on, and Close stops a check still running.
func TestBackgroundCheck(t *testing.T) {
	c := &checker{
		reports: map[bool]store.Report{true: {Damaged: []store.Damage{{Session: "later", Intact: 0, Head: 9, Why: "seq 1 does not read"}}}},
		block:   make(chan struct{}), started: make(chan struct{}),
	}
	k, err := openChecker(t, c, kernel.CheckBackground)
	if err != nil {
		t.Fatal(err)
	}
	<-c.started
	close(c.block)
	<-k.StoreChecked()
	if _, err := k.Session(context.Background(), "later"); !errors.As(err, new(*kernel.DamagedError)) {
		t.Errorf("Session(later) after the full check = %v, want a *DamagedError", err)
	}

	c = &checker{block: make(chan struct{}), started: make(chan struct{})}
	k, err = openChecker(t, c, kernel.CheckBackground)
	if err != nil {
		t.Fatal(err)
	}
	<-c.started
	if err := k.Close(context.Background()); err != nil {
		t.Errorf("Close() = %v", err)
	}
	select {
	case <-k.StoreChecked():
	default:
		t.Errorf("Close() returned with the full check still running")
	}
}
