//go:build !unix

package main

import "os"

var stopSignal = os.Kill
