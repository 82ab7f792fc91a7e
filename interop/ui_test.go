package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/ui"
)

// TestUIEveryKind places a surface of every kind (every golden input of
// ui/testdata), replaces, moves and hides some, and has ui.mjs rebuild the
// state from GET /events with fast-json-patch: it must equal the kernel's.
func TestUIEveryKind(t *testing.T) {
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	node := requireNode(t, dir)
	url, k := startKernelWith(t)
	ctx := context.Background()
	s, err := k.CreateSession(ctx, kernel.SessionOptions{ID: "every-kind"})
	if err != nil {
		t.Fatal(err)
	}
	inputs, err := filepath.Glob(filepath.Join("..", "ui", "testdata", "*", "*.json"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no ui golden inputs: %v", err)
	}
	kinds := map[string]bool{}
	placements := ui.DefaultPlacements()
	var want []string
	for i, path := range inputs {
		surface, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		id := filepath.Base(filepath.Dir(path)) + "-" + strings.TrimSuffix(filepath.Base(path), ".json")
		in := kernel.ShowInput{ID: id, Placement: string(placements[i%len(placements)]), Title: id, Surface: surface}
		if err := s.Show(ctx, ui.OwnerAgent, in); err != nil {
			t.Fatalf("Show(%s) = %v", path, err)
		}
		kinds[filepath.Base(filepath.Dir(path))] = true
		want = append(want, ui.NodeID(ui.OwnerAgent, id))
	}
	if len(kinds) != len(ui.Kinds()) {
		t.Errorf("placed %d kinds, want all %d", len(kinds), len(ui.Kinds()))
	}
	// Every op: replace a surface in place, move one, hide one.
	ext, _ := ui.ExtOwner("ci")
	text := func(v string) json.RawMessage { return json.RawMessage(`{"kind":{"t":"text","value":"` + v + `"}}`) }
	for _, step := range []func() error{
		func() error {
			return s.Show(ctx, ext, kernel.ShowInput{ID: "build", Placement: "pane.right", Surface: text("running")})
		},
		func() error {
			return s.Show(ctx, ext, kernel.ShowInput{ID: "build", Placement: "pane.right", Surface: text("passed")})
		},
		func() error { return s.Move(ctx, ui.OwnerConfig, "placed:ext:ci:build", "band") },
		func() error { return s.HideNode(ctx, ui.OwnerConfig, want[0]) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	want = append(want[1:], "placed:ext:ci:build")
	slices.Sort(want)
	var head uint64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if head = info.Head; s.Head() == head {
			break
		}
	}

	cctx, cancel := context.WithTimeout(ctx, nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, node, "ui.mjs", "--url", url, "--session", "every-kind", "--head", strconv.FormatUint(head, 10))
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node ui.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	var res struct {
		OK     bool
		Frames int
		Nodes  []string
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("ui.mjs printed %q: %v", stdout.Bytes(), err)
	}
	if !res.OK || uint64(res.Frames) != head {
		t.Errorf("ui.mjs = ok %v after %d frames, want ok after %d", res.OK, res.Frames, head)
	}
	if !slices.Equal(res.Nodes, want) {
		t.Errorf("nodes rebuilt with fast-json-patch = %v, want %v", res.Nodes, want)
	}
}
