package bench_test

import (
	"os"
	"testing"
)

func osMkdirTemp() (string, error) { return os.MkdirTemp("", "orrery-bench-replay-") }

func TestMain(m *testing.M) {
	code := m.Run()
	if replayDir != "" {
		os.RemoveAll(replayDir)
	}
	os.Exit(code)
}
