//go:build !linux

package fanout

import "time"

// machineCPU is not measured on this system: the others' share reads 0.
func machineCPU() time.Duration { return 0 }
