package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/getorrery/orrery"
	"github.com/getorrery/orrery/agent/models"
	"github.com/getorrery/orrery/config"
	"github.com/getorrery/orrery/datadir"
	"github.com/getorrery/orrery/internal/prose"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/store"
	"github.com/getorrery/orrery/store/sqlite"
	"github.com/getorrery/orrery/termtext"
)

// exitDamaged is orrery db check's answer for a damaged log.
const exitDamaged = 4

// dbCmd is `orrery db check|repair|backup`: the session log's upkeep.
type dbCmd struct {
	env    *env
	common commonFlags
	json   bool
	force  bool
	file   string
}

func (c *dbCmd) Synopsis() string { return "check, repair or back up the session log" }

const dbUsage = `db check [--json] [--file DB]     check every page and frame; exit code 4 when damaged
       orrery db repair [--json] [--file DB]    cut damaged sessions back to what is intact (stop the server first)
       orrery db backup PATH [--force] [--json] copy the log to PATH, even while a server runs
         [--data DIR] [--config FILE]`

func (c *dbCmd) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "db needs a subcommand: check, repair or backup PATH (run \"orrery db --help\")"}
	}
	sub, rest := args[0], args[1:]
	fs := newFlagSet(c.env, "db "+sub, dbUsage)
	c.common.register(fs, false)
	fs.BoolVar(&c.json, "json", false, "print the report as JSON on stdout (progress stays on stderr)")
	var dest string
	switch sub {
	case "check", "repair":
		fs.StringVar(&c.file, "file", "", "the database file to "+sub+", such as a backup (default DATA/orrery.db)")
	case "backup":
		fs.BoolVar(&c.force, "force", false, "replace PATH when it exists")
		if len(rest) > 0 && rest[0] != "" && rest[0][0] != '-' {
			dest, rest = rest[0], rest[1:]
		}
	case "-h", "--help", "help":
		fs.Usage()
		return nil
	default:
		if strings.HasPrefix(sub, "-") {
			return subcommandFirst("db", sub, "check|repair|backup PATH")
		}
		return &usageError{msg: fmt.Sprintf("unknown db subcommand %q: use check, repair or backup PATH", sub)}
	}
	if err := parse(fs, rest); err != nil {
		return err
	}
	path := c.file
	if path == "" {
		cfg, err := c.common.load(c.env)
		if err != nil {
			return err
		}
		path = cfg.DBPath()
	}
	switch sub {
	case "check":
		return c.check(ctx, path)
	case "repair":
		if c.file == "" {
			// The data dir's own log: hold the dir for the whole repair and
			// the closing of its runs, so no kernel starts in between.
			lock, err := datadir.Acquire(filepath.Dir(path), datadir.Owner{Command: "orrery db repair", Version: orrery.Version})
			var held *datadir.HeldError
			if errors.As(err, &held) {
				return &exitCodeError{code: exitError, err: fmt.Errorf("%v: a repair needs the log to itself; stop that process first, then run orrery db repair again", held)}
			}
			if err != nil {
				return err
			}
			defer lock.Close()
		}
		return c.repair(ctx, path)
	default:
		if dest == "" {
			return &usageError{msg: "db backup needs the PATH to copy the log to: orrery db backup PATH"}
		}
		return c.backup(ctx, path, dest)
	}
}

// checkFrame is what every logged frame must be: an AG-UI event.
func checkFrame(data []byte) error {
	_, err := protocol.DecodeEvent(data)
	return err
}

// progress prints what a long check, repair or backup is doing on stderr:
// once the work is known to be large (about 100 MB), a line when a stage
// starts, and every quarter of a long one. A small log is done before
// anyone would read them.
type progress struct {
	w     io.Writer
	large bool
	stage string
	step  int64
}

// largeWork is where work starts to take seconds, by unit.
var largeWork = map[string]int64{"pages": 25000, "bytes": 100e6, "frames": 500000}

func (p *progress) report(pr store.Progress) {
	if n, ok := largeWork[pr.Unit]; ok && pr.Total >= n {
		p.large = true
	}
	if !p.large {
		return
	}
	if pr.Stage != p.stage {
		p.stage, p.step = pr.Stage, 0
		if pr.Total > 0 {
			fmt.Fprintf(p.w, "orrery: %s (%s %s)…\n", pr.Stage, amount(pr.Total, pr.Unit), pr.Unit)
		} else {
			fmt.Fprintf(p.w, "orrery: %s…\n", pr.Stage)
		}
		return
	}
	if pr.Total < 50000 || pr.Done >= pr.Total {
		return
	}
	if step := pr.Done * 4 / pr.Total; step > p.step {
		p.step = step
		fmt.Fprintf(p.w, "orrery: %s: %d%% (%s of %s %s)\n", pr.Stage, step*25, amount(pr.Done, pr.Unit), amount(pr.Total, pr.Unit), pr.Unit)
	}
}

// amount writes n in the unit's way: bytes as MB, counts grouped.
func amount(n int64, unit string) string {
	if unit == "bytes" {
		return fmt.Sprintf("%.1f MB of", float64(n)/1e6)
	}
	if unit == "pages" {
		return fmt.Sprintf("%.1f MB in", float64(n)*4096/1e6) + " " + prose.Group(int(n))
	}
	return prose.Group(int(n))
}

func (c *dbCmd) progress() *progress { return &progress{w: c.env.stderr} }

// checkReport is the JSON of orrery db check.
type checkReport struct {
	OK bool `json:"ok"`
	store.Report
}

func (c *dbCmd) check(ctx context.Context, path string) error {
	start := time.Now()
	rep, err := sqlite.CheckFile(ctx, path, store.CheckOptions{Full: true, Frame: checkFrame, Progress: c.progress().report})
	if err != nil {
		return err
	}
	if c.json {
		if err := json.NewEncoder(c.env.stdout).Encode(checkReport{OK: rep.OK(), Report: rep}); err != nil {
			return err
		}
	} else {
		printReport(c.env.stdout, rep, time.Since(start))
	}
	if rep.OK() {
		return nil
	}
	return &exitCodeError{code: exitDamaged, err: errors.New(damageAdvice(path, rep))}
}

// damageAdvice is the sentence orrery db check ends with on a damaged log.
func damageAdvice(path string, rep store.Report) string {
	if rep.Unreadable != "" {
		return fmt.Sprintf("%s cannot be opened as a database (%s): nothing in it can be read; restore it from a backup", path, rep.Unreadable)
	}
	return fmt.Sprintf("the session log %s is damaged: stop the server, then restore a backup, or run `orrery db repair` to keep what is intact (it keeps the damaged file beside it)", path)
}

func printReport(w io.Writer, rep store.Report, took time.Duration) {
	if rep.Unreadable != "" {
		fmt.Fprintf(w, "%s is damaged: %s\n", rep.Path, rep.Unreadable)
		return
	}
	state := "whole"
	if !rep.OK() {
		state = "damaged"
	}
	fmt.Fprintf(w, "%s is %s: %s sessions, %s frames, checked in %s\n", rep.Path, state, prose.Group(rep.Sessions), prose.Group(int(rep.Frames)), took.Round(time.Millisecond))
	for _, d := range rep.Damaged {
		fmt.Fprintf(w, "session %s: damaged after seq %d: %s\n", termtext.VisibleLine(d.Session), d.Intact, termtext.VisibleLine(d.Why))
		if from, to := d.Lost(); to > 0 {
			fmt.Fprintf(w, "  a repair keeps seqs 1-%d and loses seqs %d-%d\n", d.Intact, from, to)
		} else {
			fmt.Fprintf(w, "  a repair keeps all %d frames and corrects the head its record says\n", d.Intact)
		}
		if d.OpenRun != "" {
			fmt.Fprintf(w, "  its record shows run %s in flight: a repair closes the run the kept frames leave open with RUN_ERROR interrupted\n", termtext.VisibleLine(d.OpenRun))
		}
	}
	for _, u := range rep.Unrecorded {
		name := "an unnamed session"
		if u.Session != "" {
			name = "session " + termtext.VisibleLine(u.Session)
		}
		fmt.Fprintf(w, "%s frames of %s have no session record: a repair rebuilds it from them (its title, model, cwd and cost are lost)\n", prose.Group(int(u.Frames)), name)
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "problem in %s: %s\n", p.Where, termtext.VisibleLine(p.Text))
	}
}

func (c *dbCmd) repair(ctx context.Context, path string) error {
	rep, err := sqlite.RepairFile(ctx, path, store.RepairOptions{Frame: checkFrame, Progress: c.progress().report})
	if err != nil {
		return err
	}
	closed, err := closeRepairedRuns(ctx, path, rep)
	if err != nil {
		return fmt.Errorf("the log is repaired, but its open runs are not closed (the next orrery serve closes them): %w", err)
	}
	if c.json {
		return json.NewEncoder(c.env.stdout).Encode(struct {
			store.RepairReport
			Closed []closedRun `json:"closed,omitempty"`
		}{rep, closed})
	}
	w := c.env.stdout
	if !rep.Repaired {
		fmt.Fprintf(w, "%s is whole: nothing to repair\n", path)
		return nil
	}
	fmt.Fprintf(w, "repaired %s; the damaged file is kept, unchanged, at %s\n", path, rep.Kept)
	for _, s := range rep.Sessions {
		id := termtext.VisibleLine(s.Session)
		switch {
		case s.LostTo > 0 && s.Head > 0:
			fmt.Fprintf(w, "session %s: kept seqs 1-%d; lost seqs %d-%d", id, s.Head, s.LostFrom, s.LostTo)
		case s.LostTo > 0:
			fmt.Fprintf(w, "session %s: kept nothing; lost seqs %d-%d", id, s.LostFrom, s.LostTo)
		case s.Note != "":
			fmt.Fprintf(w, "session %s: kept all %d frames", id, s.Head)
		default:
			fmt.Fprintf(w, "session %s: kept all %d frames; its head is corrected", id, s.Head)
		}
		if s.Readable > 0 {
			fmt.Fprintf(w, " (%s of them still read after the damage: they are in the kept file)", prose.Group(int(s.Readable)))
		}
		fmt.Fprintln(w)
		if s.Note != "" {
			fmt.Fprintf(w, "  %s\n", s.Note)
		}
	}
	frames := rep.Frames
	for _, r := range closed {
		frames += int64(r.Seq - r.Head)
		fmt.Fprintf(w, "session %s: its run %s was left in flight: closed with RUN_ERROR interrupted at seq %d\n", termtext.VisibleLine(r.Session), termtext.VisibleLine(r.Run), r.Seq)
	}
	if rep.Before.RecordsDamaged() {
		fmt.Fprintln(w, "the session records and their index are rebuilt")
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, termtext.VisibleLine(n))
	}
	fmt.Fprintf(w, "the repaired log passes the check: %s sessions, %s frames\n", prose.Group(rep.After.Sessions), prose.Group(int(frames)))
	return nil
}

// closedRun is an open run of a repaired session that orrery db repair
// closed.
type closedRun struct {
	Session string `json:"session"`
	Run     string `json:"run"`
	// Seq is the seq of its RUN_ERROR; Head was the head the repair left.
	Seq  uint64 `json:"seq"`
	Head uint64 `json:"-"`
}

// closeRepairedRuns closes the runs a repaired log shows in flight (those
// a cut left open, and those of a server that died), with the closers of
// what each left open and one RUN_ERROR interrupted, as a kernel's Open
// does after a crash.
func closeRepairedRuns(ctx context.Context, path string, rep store.RepairReport) ([]closedRun, error) {
	if !rep.Repaired {
		return nil, nil
	}
	// The caller holds the data dir (when path is its log), so no server
	// starts between the repair and this.
	st, err := sqlite.Open(path)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	infos, err := st.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	var open []store.Session
	for _, info := range infos {
		if info.OpenRun != "" {
			open = append(open, info)
		}
	}
	if len(open) == 0 {
		return nil, nil
	}
	cut := map[string]bool{}
	for _, s := range rep.Sessions {
		cut[s.Session] = s.OpenRun != "" && s.LostTo > 0
	}
	k := kernel.New(kernel.Config{
		Store: st, Models: models.Resolve, DefaultModel: "offline", StoreCheck: kernel.CheckQuick,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Interrupted: func(session string) string {
			if cut[session] {
				return "this run's log was damaged after here and orrery db repair cut it back; its output up to here is kept: send the prompt again to retry"
			}
			return "" // the kernel's own
		},
	})
	if err := k.Open(ctx); err != nil {
		return nil, err
	}
	if err := k.Close(ctx); err != nil {
		return nil, err
	}
	var out []closedRun
	for _, s := range open {
		info, err := st.Session(ctx, s.ID)
		if err != nil {
			return out, err
		}
		out = append(out, closedRun{Session: s.ID, Run: s.OpenRun, Seq: info.Head, Head: s.Head})
	}
	return out, nil
}

func (c *dbCmd) backup(ctx context.Context, path, dest string) error {
	if abs, err := filepath.Abs(dest); err == nil {
		dest = abs
	}
	p := c.progress()
	if err := sqlite.BackupFile(ctx, path, dest, sqlite.BackupOptions{Force: c.force, Progress: p.report}); err != nil {
		return err
	}
	// The copy is checked the way a kernel opening it would: cheaply.
	rep, err := sqlite.CheckFile(ctx, dest, store.CheckOptions{})
	if err != nil {
		return fmt.Errorf("check the backup %s: %w", dest, err)
	}
	var size int64
	if fi, err := os.Stat(dest); err == nil {
		size = fi.Size()
	}
	if c.json {
		if err := json.NewEncoder(c.env.stdout).Encode(struct {
			Path  string      `json:"path"`
			Bytes int64       `json:"bytes"`
			Check checkReport `json:"check"`
		}{dest, size, checkReport{OK: rep.OK(), Report: rep}}); err != nil {
			return err
		}
	} else if rep.OK() {
		fmt.Fprintf(c.env.stdout, "backed up %s to %s (%.1f MB, %s sessions); check it in full with: orrery db check --file %s\n",
			path, dest, float64(size)/1e6, prose.Group(rep.Sessions), quoteWord(dest))
	}
	if !rep.OK() {
		return &exitCodeError{code: exitDamaged, err: fmt.Errorf("the backup %s does not pass the check: %s", dest, strings.TrimSpace(damageAdvice(dest, rep)))}
	}
	return nil
}

// storeOpenError is the error of a data dir whose log does not open,
// naming the fix when the log is damaged.
func storeOpenError(cfg config.Config, err error) error {
	if cfg.Store.Kind == "jetstream" {
		return err
	}
	if errors.Is(err, store.ErrDamaged) {
		return fmt.Errorf("the session log %s is damaged (%w): run `orrery db check` to see what is lost, then restore it from a backup or run `orrery db repair`", cfg.DBPath(), err)
	}
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("open the data dir %s: %w: free disk space there, then run the command again (or choose another data dir with --data or ORRERY_DATA)", cfg.Store.Data, err)
	}
	return fmt.Errorf("open the data dir %s: %w (choose another with --data or ORRERY_DATA)", cfg.Store.Data, err)
}
