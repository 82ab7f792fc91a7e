package script_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/provider/script"
)

func write(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"no turns", `{"turns":[]}`, "no turns"},
		{"unknown field", `{"turns":[{"txt":["a"]}]}`, "unknown field"},
		{"not json", `turns`, "want {\"turns\""},
		{"unnamed call", `{"turns":[{"tool_calls":[{"args":{}}]}]}`, "tool_calls[0] has no name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := script.Load(write(t, tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := script.Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("Load(missing) = nil, want an error")
	}
}

func TestTurnsInOrder(t *testing.T) {
	m, err := script.Load(write(t, `{"turns":[
		{"reasoning":"think","text":["a","b"],"usage":{"inputTokens":3,"outputTokens":2}},
		{"tool_calls":[{"name":"echo","args":{"text":"x"}}]},
		{"text":["c"],"error":"boom"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	emit := func(d agent.Delta) error {
		got = append(got, d.Text+"/"+d.ToolName)
		return nil
	}
	u, err := m.Stream(context.Background(), agent.Request{}, emit)
	if err != nil || u.InputTokens != 3 || u.OutputTokens != 2 {
		t.Fatalf("turn 1: usage %+v, err %v", u, err)
	}
	if _, err := m.Stream(context.Background(), agent.Request{}, emit); err != nil {
		t.Fatal(err)
	}
	_, err = m.Stream(context.Background(), agent.Request{}, emit)
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Message != "boom" {
		t.Fatalf("turn 3 error = %v, want boom", err)
	}
	if want := `think/ a/ b/ /echo {"text":"x"}/ c/`; strings.Join(got, " ") != want {
		t.Errorf("deltas = %s, want %s", strings.Join(got, " "), want)
	}
	if _, err := m.Stream(context.Background(), agent.Request{}, emit); err == nil || !strings.Contains(err.Error(), "add more turns") {
		t.Errorf("past the last turn: %v, want an error saying to add turns", err)
	}
}
