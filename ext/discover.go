package ext

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// ProjectDir is where a project's extensions live: <root>/.orrery/extensions.
func ProjectDir(root string) string { return filepath.Join(root, ".orrery", "extensions") }

// UserDir is where the user's extensions live: orrery/extensions in the
// user's config dir, or "" when there is none.
func UserDir() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "orrery", "extensions")
}

// Discover reads every extension directory (one holding orrery.toml) under
// dirs, in order; an extension of the same name in an earlier dir wins, so
// pass the project's dir before the user's. A missing dir is skipped. Each
// manifest that is refused is returned as an error naming its file, and
// the others still load.
func Discover(dirs ...string) ([]*Manifest, []error) {
	byName := map[string]*Manifest{}
	var errs []error
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("read extensions in %s: %w", dir, err))
			}
			continue
		}
		for _, e := range entries {
			sub := filepath.Join(dir, e.Name())
			if st, err := os.Stat(sub); err != nil || !st.IsDir() {
				continue
			}
			if _, err := os.Stat(filepath.Join(sub, ManifestFile)); err != nil {
				continue
			}
			m, err := LoadManifest(sub)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if _, ok := byName[m.Extension.Name]; !ok {
				byName[m.Extension.Name] = m
			}
		}
	}
	out := make([]*Manifest, 0, len(byName))
	for _, m := range byName {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Extension.Name < out[j].Extension.Name })
	return out, errs
}
