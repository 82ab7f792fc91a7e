package bench_test

import (
	"os"
	"testing"
)

func osMkdirTemp() (string, error) { return os.MkdirTemp("", "orrery-bench-replay-") }

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range []string{replayDir, openDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}
