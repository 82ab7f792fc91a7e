package client_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/client"
	"github.com/getorrery/orrery/protocol"
)

// fixturesDir holds the conformance fixtures (go run ./protocol/fixtures/gen).
var fixturesDir = filepath.Join("..", "protocol", "fixtures")

type fixture struct {
	name     string
	frames   [][]byte
	expected struct {
		Messages json.RawMessage `json:"messages"`
		State    json.RawMessage `json:"state"`
	}
}

func loadFixtures(t *testing.T) []fixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixturesDir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures in %s = %v (%v), want some: run go run ./protocol/fixtures/gen", fixturesDir, files, err)
	}
	var out []fixture
	for _, file := range files {
		fx := fixture{name: strings.TrimSuffix(filepath.Base(file), ".jsonl")}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fx.frames = bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
		exp, err := os.ReadFile(filepath.Join(fixturesDir, fx.name+".expected.json"))
		if err != nil {
			t.Fatalf("fixture %s has no expected file: %v", fx.name, err)
		}
		if err := json.Unmarshal(exp, &fx.expected); err != nil {
			t.Fatalf("%s.expected.json: %v", fx.name, err)
		}
		out = append(out, fx)
	}
	return out
}

// checkExpected compares what st holds with the fixture's expected file.
func checkExpected(t *testing.T, fx fixture, st *client.State) {
	t.Helper()
	msgs, err := json.Marshal(st.Messages())
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(msgs, fx.expected.Messages) {
		t.Errorf("%s: Messages() = %s\nwant %s", fx.name, msgs, fx.expected.Messages)
	}
	if !jsonEqual(st.Shared(), fx.expected.State) {
		t.Errorf("%s: Shared() = %s\nwant %s", fx.name, st.Shared(), fx.expected.State)
	}
}

// TestFixtures replays every fixture through State and compares the
// messages and state with the fixture's expected result.
func TestFixtures(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			st := client.NewState()
			var last uint64
			for i, line := range fx.frames {
				seq, err := metaOf(line)
				if err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
				if seq > 0 {
					last = seq
				}
				if err := st.Apply(client.Frame{Seq: seq, Data: line}); err != nil {
					t.Fatalf("Apply(line %d) = %v", i+1, err)
				}
			}
			if st.Seq() != last {
				t.Errorf("Seq() = %d, want %d", st.Seq(), last)
			}
			checkExpected(t, fx, st)
		})
	}
}

// metaOf returns a frame's metadata.orrery.seq.
func metaOf(line []byte) (uint64, error) {
	var f struct {
		Metadata struct {
			Orrery protocol.OrreryMeta `json:"orrery"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(line, &f); err != nil {
		return 0, err
	}
	return f.Metadata.Orrery.Seq, nil
}
