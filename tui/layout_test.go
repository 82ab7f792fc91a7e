package tui_test

import (
	"testing"

	"github.com/getorrery/orrery/tui"
)

func TestComputeLayout(t *testing.T) {
	for _, c := range []struct {
		name        string
		w           int
		left, right bool
		want        tui.Layout
	}{
		{"wide, both panes", 160, true, true, tui.Layout{Left: 40, Thread: 80, Right: 40}},
		{"80 columns keeps both: the thread is exactly 40", 80, true, true, tui.Layout{Left: 20, Thread: 40, Right: 20}},
		{"79 columns: panes of 19 leave the thread 41", 79, true, true, tui.Layout{Left: 19, Thread: 41, Right: 19}},
		{"76 columns: the thread would be 38; the right pane folds first", 76, true, true, tui.Layout{Left: 19, Thread: 57, FoldRight: true}},
		{"71 columns: a pane would be 17, under 18: both fold", 71, true, true, tui.Layout{Thread: 71, FoldLeft: true, FoldRight: true}},
		{"60 columns: a pane of 15 folds", 60, false, true, tui.Layout{Thread: 60, FoldRight: true}},
		{"no panes", 50, false, false, tui.Layout{Thread: 50}},
		{"right only at 72", 72, false, true, tui.Layout{Thread: 54, Right: 18}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := tui.ComputeLayout(c.w, c.left, c.right)
			if got != c.want {
				t.Errorf("ComputeLayout(%d, %v, %v) = %+v, want %+v", c.w, c.left, c.right, got, c.want)
			}
		})
	}
}
