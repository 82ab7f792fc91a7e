package sqlite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/getorrery/orrery/store"
)

// BackupOptions adjust BackupFile.
type BackupOptions struct {
	// Force replaces a file already at the destination.
	Force bool
	// Progress, when set, is told how many bytes of the copy are written
	// (Total is the source's size), a few times a second.
	Progress func(store.Progress)
	// Every is how often Progress is called; 0 means 250 ms.
	Every time.Duration
}

// BackupFile copies the database at path to dest, as orrery db backup
// does. The copy is SQLite's VACUUM INTO: one read transaction, so it holds
// one consistent state of the log even while a kernel goes on appending
// (which it does not slow down beyond sharing the disk), compacted, and
// complete in itself (no WAL beside it). It is written to a temporary file
// beside dest, made 0600, synced and only then moved to dest, so dest is
// never a partial copy. An existing dest is refused unless opts.Force.
func BackupFile(ctx context.Context, path, dest string, opts BackupOptions) error {
	if !opts.Force {
		if _, err := os.Lstat(dest); err == nil {
			return fmt.Errorf("back up to %s: %w: pass --force to replace it, or name a new file", dest, fs.ErrExist)
		}
	}
	db, err := openExisting(path, "")
	if err != nil {
		return err
	}
	defer db.Close()
	var pages, pageSize int64
	if err := db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		return fmt.Errorf("back up %s: %w", path, damaged(err))
	}
	if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return fmt.Errorf("back up %s: %w", path, damaged(err))
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := filepath.Join(filepath.Dir(dest), "."+filepath.Base(dest)+".partial-"+hex.EncodeToString(suffix[:]))
	// VACUUM INTO writes into an empty file: made here, so it is private.
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("back up to %s: %w", dest, err)
	}
	f.Close()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		watchSize(tmp, pages*pageSize, opts, done)
	}()
	_, err = db.ExecContext(ctx, `VACUUM INTO ?`, tmp)
	close(done)
	<-stopped
	if err != nil {
		os.Remove(tmp)
		if isDamage(err) {
			return fmt.Errorf("back up %s: %w: %v: run `orrery db check` to see where, then restore an older backup or run `orrery db repair`", path, store.ErrDamaged, err)
		}
		return fmt.Errorf("back up %s: %w", path, err)
	}
	if err := syncFile(tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("back up to %s: %w", dest, err)
	}
	if opts.Force {
		err = os.Rename(tmp, dest)
	} else {
		// A link fails when dest appeared meanwhile, which a rename would
		// silently replace; where the file system has no links, check and
		// rename.
		if err = os.Link(tmp, dest); err == nil {
			os.Remove(tmp)
		} else if !errors.Is(err, fs.ErrExist) {
			if _, serr := os.Lstat(dest); serr == nil {
				err = fs.ErrExist
			} else {
				err = os.Rename(tmp, dest)
			}
		}
	}
	if err != nil {
		os.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("back up to %s: %w: pass --force to replace it, or name a new file", dest, fs.ErrExist)
		}
		return fmt.Errorf("back up to %s: %w", dest, err)
	}
	if opts.Progress != nil {
		size := pages * pageSize
		if fi, err := os.Stat(dest); err == nil {
			size = fi.Size()
		}
		opts.Progress(store.Progress{Stage: "copying", Done: size, Total: size, Unit: "bytes"})
	}
	return syncDir(filepath.Dir(dest))
}

// watchSize reports the size of the copy growing until done is closed.
func watchSize(path string, total int64, opts BackupOptions, done <-chan struct{}) {
	if opts.Progress == nil {
		return
	}
	every := opts.Every
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if fi, err := os.Stat(path); err == nil {
				opts.Progress(store.Progress{Stage: "copying", Done: fi.Size(), Total: total, Unit: "bytes"})
			}
		}
	}
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	_ = d.Sync() // not every file system syncs a directory
	return nil
}
