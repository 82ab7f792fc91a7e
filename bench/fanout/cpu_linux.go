package fanout

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// machineCPU returns the CPU time every process on the machine has used
// (the busy columns of /proc/stat), so a run can tell how much of the
// machine others took during its window.
func machineCPU() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0
	}
	// user nice system idle iowait irq softirq steal, in clock ticks (100/s).
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, _ := strconv.ParseUint(string(f[i]), 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
