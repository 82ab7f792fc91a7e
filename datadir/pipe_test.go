package datadir_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/datadir"
)

// TestPipePath: a data dir whose socket path fits has its pipe inside it;
// a deeper one has it in a private directory of the user's, at a name
// its path decides (so holder and clients agree with no file to trust),
// and a directory there that is not private is refused, naming the fix.
func TestPipePath(t *testing.T) {
	base, err := os.MkdirTemp("", "pb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	datadir.SetPipeBase(t, base)
	private := filepath.Join(base, fmt.Sprintf("orrery-%d", os.Getuid()))

	short := filepath.Join(base, "d")
	if got := pipePath(t, short); got != filepath.Join(short, datadir.PipeFile) {
		t.Errorf("PipePath(%q) = %q, want the socket inside the data dir", short, got)
	}

	deep := filepath.Join(base, strings.Repeat("x", 60), strings.Repeat("y", 60))
	got := pipePath(t, deep)
	if filepath.Dir(got) != private || !strings.HasSuffix(got, ".sock") || len(got) > 103 {
		t.Errorf("PipePath(deep) = %q, want a short socket in %s", got, private)
	}
	if again := pipePath(t, deep); again != got {
		t.Errorf("PipePath(deep) = %q, then %q: want one place", got, again)
	}
	if other := pipePath(t, deep+"z"); other == got {
		t.Errorf("two deep data dirs share the pipe %q", got)
	}
	if fi, err := os.Stat(private); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the pipes' directory = %v, %v; want it made 0700", fi, err)
	}

	for _, tc := range []struct {
		name  string
		spoil func()
		want  string
	}{
		{"open to others", func() { os.Chmod(private, 0o755) }, "others may enter it"},
		{"a link", func() {
			os.Remove(private)
			os.Symlink(t.TempDir(), private)
		}, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.RemoveAll(private)
			os.Mkdir(private, 0o700)
			tc.spoil()
			t.Cleanup(func() { os.RemoveAll(private) })
			_, err := datadir.PipePath(deep)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "shorter path") {
				t.Errorf("PipePath with its directory %s = %v, want an error saying %q and the way out", tc.name, err, tc.want)
			}
		})
	}
}
