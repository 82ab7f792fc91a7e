package main

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime"

	"github.com/getorrery/orrery/config"
)

// warnOpenModes logs a warning for the data dir, and for each file in it
// that holds what a session said or the node tokens (the database, its -wal
// and -shm, tokens.json), when its mode gives its group or other users any
// access, naming the fix. Orrery makes them private itself; a loose mode
// comes from an older version, a copy, or a hand, and is left as it is.
// Windows has no such modes, and is not checked.
func warnOpenModes(log *slog.Logger, cfg config.Config) {
	if runtime.GOOS == "windows" {
		return
	}
	db := cfg.DBPath()
	check := func(what, path string, private fs.FileMode) {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm()&0o077 == 0 {
			return
		}
		log.Warn(what+" can be read or changed by other users of this machine",
			"path", path, "mode", fmt.Sprintf("%04o", st.Mode().Perm()),
			"fix", fmt.Sprintf("chmod %o %s", private, quoteWord(path)))
	}
	check("the data dir", cfg.Store.Data, 0o700)
	check("the session log", db, 0o600)
	check("the session log's WAL", db+"-wal", 0o600)
	check("the session log's shared memory", db+"-shm", 0o600)
	check("the node tokens", tokensPath(cfg), 0o600)
}
