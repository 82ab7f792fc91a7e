//go:build !unix

package bench_test

import "time"

// cpuTime is 0 where the process's CPU time is not read: the cores figure
// then reads 0.
func cpuTime() time.Duration { return 0 }
