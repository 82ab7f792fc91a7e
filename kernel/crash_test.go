package kernel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/store"
)

// endless streams large deltas until its run is cancelled.
type endless struct{}

func (endless) Name() string  { return "endless" }
func (endless) Model() string { return "endless" }
func (endless) Stream(ctx context.Context, _ agent.Request, emit func(agent.Delta) error) (agent.Usage, error) {
	chunk := strings.Repeat("lorem ipsum ", 170)
	for ctx.Err() == nil {
		if err := emit(agent.Delta{Kind: agent.DeltaText, Text: chunk}); err != nil {
			return agent.Usage{}, err
		}
	}
	return agent.Usage{}, ctx.Err()
}

const (
	crashChild = "ORRERY_TEST_CHECKPOINT_CHILD"
	crashStore = "ORRERY_TEST_CHECKPOINT_STORE"
)

// crashChildMain is the child of TestKillDuringCheckpoint: a kernel on dir
// streaming one endless run into session "s" with a checkpoint every few
// frames, until it is killed. It prints "ready" once it has checkpointed.
func crashChildMain(t *testing.T, dir string) {
	ctx := context.Background()
	st, err := modeNamed(t, os.Getenv(crashStore)).open(dir)
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	k := kernel.New(kernel.Config{
		Store:           st,
		Models:          func(string) (agent.Provider, error) { return endless{}, nil },
		DefaultModel:    "endless",
		CheckpointEvery: 4,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := k.Open(ctx); err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	s, err := k.Session(ctx, "s")
	if errors.Is(err, store.ErrUnknownSession) {
		s, err = k.CreateSession(ctx, kernel.SessionOptions{ID: "s"})
	}
	if err == nil {
		// A large state value makes every checkpoint a large write.
		err = s.SetState(ctx, "ext:crash", "big", json.RawMessage(`"`+strings.Repeat("x", 256<<10)+`"`))
	}
	if err == nil {
		_, err = s.Send(ctx, kernel.SendInput{Text: "go on"})
	}
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	start := s.Head()
	for s.Head() < start+64 {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("ready")
	select {}
}

// TestKillDuringCheckpoint kills (SIGKILL) a kernel that checkpoints as
// fast as it can, several times over: each reopened kernel loads from a
// checkpoint that is whole, or rebuilds, and what it holds equals a
// rebuild of the same log from seq 0.
func TestKillDuringCheckpoint(t *testing.T) {
	run(t, func(t *testing.T, mode storeMode) {
		if dir := os.Getenv(crashChild); dir != "" {
			crashChildMain(t, dir)
			return
		}
		if testing.Short() {
			t.Skip("starts and kills child processes")
		}
		dir := t.TempDir()
		ctx := context.Background()
		used := 0
		for round := range 4 {
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillDuringCheckpoint$/^"+mode.name+"$")
			cmd.Env = append(os.Environ(), crashChild+"="+dir, crashStore+"="+mode.name)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || line != "ready\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("round %d: child said %q, %v; want ready", round, line, err)
			}
			// Anywhere in the next few checkpoints.
			time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()

			st, err := mode.open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if cp, ok := st.(store.Checkpointer); ok {
				if c, err := cp.LoadCheckpoint(ctx, "s"); err == nil && c.Head > 0 {
					used++
				}
			}
			st.Close()

			// The kernel that reads checkpoints recovers the open run …
			a := mode.openEnv(t, dir, "offline")
			sa, err := a.k.Session(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			got, gotHead := whole(t, sa), sa.Head()
			info, err := sa.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.OpenRun != "" || sa.Running() {
				t.Errorf("round %d: after the restart the run is still open (%q)", round, info.OpenRun)
			}
			a.close()
			// … and one that reads none rebuilds the same log from seq 0.
			b := mode.openEnv(t, dir, "offline", func(c *kernel.Config) { c.CheckpointEvery = -1 })
			sb, err := b.k.Session(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			want, wantHead := whole(t, sb), sb.Head()
			b.close()
			if gotHead != wantHead || got != want {
				t.Fatalf("round %d: from the checkpoint: head %d\n%.600s\nrebuilt: head %d\n%.600s", round, gotHead, got, wantHead, want)
			}
		}
		t.Logf("%d of 4 restarts found a checkpoint", used)
	})
}
