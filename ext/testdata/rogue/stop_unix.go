//go:build unix

package main

import "syscall"

// stopSignal freezes the process, as a hang would.
var stopSignal = syscall.SIGSTOP
