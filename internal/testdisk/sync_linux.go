package testdisk

import "syscall"

// syncAll writes every file system's dirty data to its disk.
func syncAll() { syscall.Sync() }
